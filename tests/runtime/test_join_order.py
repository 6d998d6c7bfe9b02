"""Join order re-planned from the measured selectivities (issue 56 item 3, seed 004 §3.4 (c)).

Three streams joined on one key, as seed 004's Fig. 7: y's keys sit low, z's high, and x's keys
move from y's range to z's halfway through. The delta term of x joins y first at compile time;
while x meets y, the measured selectivity of y is high and of z low, so the order switches to z
first, and back when x moves. After every batch — deletions included, and across kills at the
re-plan — the snapshot equals DuckDB's answer, so the switches change no answer; the commit
records show them. (One run does it all: a Spark run of six batches is the slow part.)"""

from __future__ import annotations

import random

import pytest

from streamfold.settings import Settings

from ..streams import Source

pytestmark = [pytest.mark.spark]

X = Source("X", (("k", "INT"), ("v", "INT")), weighted=True)
Y = Source("Y", (("k", "INT"), ("v", "INT")), weighted=True)
Z = Source("Z", (("k", "INT"), ("v", "INT")), weighted=True)

SQL = ("SELECT x.k, count(*) AS n, sum(y.v * 10 + z.v) AS s FROM X x JOIN Y y ON x.k = y.k "
       "JOIN Z z ON x.k = z.k GROUP BY x.k")


def switching(rng: random.Random, batches: int, switch: int) -> list[dict[str, list[tuple]]]:
    """Keys drawn around 3 for y, around 8 for z (sd 2, as seed 004's Gaussians), and for x
    around y's before batch ``switch`` and around z's after; every source deletes a row it
    inserted before now and then."""
    live: dict[str, list[tuple]] = {"X": [], "Y": [], "Z": []}
    out = []
    for b in range(batches):
        batch: dict[str, list[tuple]] = {}
        for name, mean in (("X", 3 if b < switch else 8), ("Y", 3), ("Z", 8)):
            rows = [(round(rng.gauss(mean, 2)), rng.randint(0, 9), 1) for _ in range(6)]
            if live[name] and rng.random() < 0.6:
                gone = live[name].pop(rng.randrange(len(live[name])))
                rows.append((gone[0], gone[1], -1))
            live[name] += [r for r in rows if r[2] == 1]
            batch[name] = rows
        out.append(batch)
    return out


def orders_of(out: str, batches: int) -> list[tuple[list[str], list[str]]]:
    """Per batch, the order Δin_x ran and the next batch's, from the commit records."""
    from streamfold.runtime.checkpoint import OutputDir

    records = [OutputDir(out).read_commit(b)["join_order"]["in_x"] for b in range(batches)]
    return [(e["order"], e["next"]) for e in records]


class _Killed(BaseException):
    """The process dying at this instant (nothing after it runs, no handler catches it)."""


def test_join_order_switches_with_the_data_killed_across_a_replan_and_stays_exact(spark, tmp_path, monkeypatch):
    """The order of Δx's term moves to z first while x's keys meet y's, and back when they move
    to z's, each batch running the order the one before decided. Killed once while the batch that re-plans is not yet committed — the rerun of that batch,
    from the states and averages of the commit before, records the same decision — and once
    just after such a batch's commit, before its new plan is built: the restarted run takes the
    order the commit decided. Every snapshot equals DuckDB's."""
    import pyarrow.parquet as pq

    import streamfold
    from streamfold.runtime.features.join_order import JoinOrder
    from streamfold.verify import compare, duckdb_answer

    from ..streams import _rows

    sources = {s.name: s for s in (X, Y, Z)}
    dirs = {n: tmp_path / "in" / n for n in sources}
    for d in dirs.values():
        d.mkdir(parents=True)
    out = str(tmp_path / "out")
    settings = Settings.from_environ().replace(join_order_batches=1, join_order_margin=0.2, join_order_smoothing=1.0)

    def start():
        return streamfold.start(SQL, {n: str(d) for n, d in dirs.items()}, out, spark=spark, background=False,
                                partitions=2, settings=settings, schemas={n: s.schema_sql() for n, s in sources.items()})

    observe, committed = JoinOrder.observe, JoinOrder.committed
    killed: dict[str, object] = {}

    def observe_or_die(self, b, batch):
        extra = observe(self, b, batch)
        e = extra["join_order"]["in_x"]
        if "before" not in killed and e["order"] != e["next"]:
            killed["before"] = (batch, extra)
            raise _Killed  # the batch decided a re-plan and is not committed
        return extra

    def committed_or_die(self, b):
        changed = self._next is not None and self._next["in_x"].order != self.terms.get("in_x", self._next["in_x"]).order
        if "before" in killed and "after" not in killed and changed:
            killed["after"] = True
            raise _Killed  # committed, the new plan not built
        return committed(self, b)

    monkeypatch.setattr(JoinOrder, "observe", observe_or_die)
    monkeypatch.setattr(JoinOrder, "committed", committed_or_die)
    prefix = {n: [s.table([])] for n, s in sources.items()}
    q = start()
    try:
        for i, batch in enumerate(switching(random.Random("join-order"), 6, 3)):
            for n, rows in batch.items():
                pq.write_table(sources[n].table(rows), str(dirs[n] / f"{i:04d}.parquet"))
                prefix[n].append(sources[n].table(rows))
            while True:
                try:
                    q.process_available()
                    break
                except _Killed:
                    q.engine.close()
                    q = start()
                    if q.engine.next_batch > i:  # killed after the commit (else the batch runs again)
                        break
            snapshot = _rows(q.snapshot_pandas())
            check = compare(snapshot, duckdb_answer(SQL, prefix))
            assert check.matches, f"batch {i}: {check.detail}"
            assert i < 2 or snapshot, "the join should have rows: the test would prove nothing"
    finally:
        q.stop()
    assert "before" in killed and "after" in killed, f"the run was never killed across a re-plan: {killed}"
    batch, extra = killed["before"]
    assert q.commit(batch)["join_order"] == extra["join_order"], "the rerun decided otherwise"
    orders = orders_of(out, 6)
    ran = [o for o, _ in orders]
    assert ran[0] == ["in_y", "in_z"], "the first batch runs the compile-time order"
    assert ["in_z", "in_y"] in ran[1:4], f"x's keys met y's: the order should have moved to z first: {orders}"
    assert ["in_y", "in_z"] in ran[4:], f"x's keys moved to z's: the order should be back to y first: {orders}"
    for b in range(1, 6):
        assert ran[b] == orders[b - 1][1], f"batch {b} did not run the order batch {b - 1} decided: {orders}"
    e = q.commit(batch)["join_order"]["in_x"]
    assert e["changed_after"] == batch and "selectivities" in e["why"] and e["fanout"]["in_y"] > e["fanout"]["in_z"]


def test_the_helpers_read_a_plans_rows_as_a_walk_from_python_does(spark, monkeypatch):
    """``join_rows`` and ``output_rows`` read the metrics in one call to the JVM's helpers
    (``PlanRows.java``); the walk from Python they replace reads the same numbers."""
    from streamfold.runtime import stats, views
    from streamfold.runtime.jvm import helper_class

    assert helper_class(spark, "PlanRows") is not None
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")  # (an adaptive plan hides its joins until it ends)
    try:
        a = spark.createDataFrame([(i % 7, i) for i in range(60)], "k INT, v INT")
        b = spark.createDataFrame([(i % 5, i) for i in range(20)], "k INT, w INT")
        c = spark.createDataFrame([(i, f"c{i}") for i in range(3)], "k INT, s STRING")
        df = a.join(b, "k").join(c, "k").groupBy("k").count()
        df.collect()
        joins, rows = stats.join_rows(df), views.output_rows(df)
        monkeypatch.setattr(stats, "helper_class", lambda *_: None)
        monkeypatch.setattr(views, "helper_class", lambda *_: None)
        assert joins is not None and len(joins) == 2 and rows == 3
        assert stats.join_rows(df) == joins and views.output_rows(df) == rows
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
