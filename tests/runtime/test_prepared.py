"""Prepared plans (streamfold/runtime/prepared.py): a warm batch runs plans built once.

The differential suite's streams are short (three batches at most: batch 0, the capture, a
replay), so here streams are long enough for the prepared plans to run batch after batch — with
deletions, batches that bring no rows for a source, and a large batch in the middle that runs the
plain way and hands the states back — and every snapshot and changes file is checked against
DuckDB as in tests/runtime/test_differential.py. Here every history counts as large: batch 1's plans are
captured ahead, after batch 0's commit (gathering batch 0's states into one partition when they
are small), as after a history of shape.AHEAD_MIN_ROWS rows or more.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from collections import Counter
from unittest import mock

import pytest

from streamfold.runtime import shape
from streamfold.settings import env_name
from streamfold.runtime.prepared import Prepared

from ..streams import Source, check_stream
from ..strategies import random_rows, random_stream
from .test_differential import ORACLE_SQL, QUERIES, SUBQUERY_SHAPES, _sources

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Shapes a prepared plan must keep exact: aggregates of every kind (min and max under deletions
# among them), distinct counts, an ordered top-k, a join of two streams, a row-wise filter, a
# correlated subquery, a join with a static table (its small side broadcast, built once), an
# outer join, a NOT EXISTS (a semi join's touched keys hashed, not broadcast) and a global
# aggregate (whose snapshot and changes Spark would merge into one scalar subquery: not in a capture).
SHAPES = {q[0]: q for q in QUERIES + SUBQUERY_SHAPES}
PREPARED = ["groupby-aggregates", "count-distinct", "top-k", "join-groupby-seed", "filter-project",
            "exists-correlated", "stream-static", "left-join", "not-exists-correlated", "global-aggregate"]
# … and over hash-partitioned states (a batch's shuffles run again by every job): the stream
# joins, the static join and the distinct counts.
HASHED = ["join-groupby-seed", "stream-static", "not-exists-correlated", "count-distinct"]

_counter = itertools.count()


@pytest.fixture(autouse=True)
def _every_history_is_large(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shape, "AHEAD_MIN_ROWS", 0)


class _Watch:
    """Counts the batches the prepared plans ran, the captures made ahead of their batch, their
    runs over a sample of the history (discarded), and why a capture was refused."""

    def __init__(self) -> None:
        self.replays = 0
        self.ahead = 0
        self.warmed = 0
        self.refused: Counter[str] = Counter()

    def __enter__(self) -> _Watch:
        run, plan_outputs, captured_ahead = Prepared.run, Prepared.plan_outputs, Prepared.captured_ahead
        run_discarded = Prepared.run_discarded
        watch = self

        def counted_warm_up(prepared: Prepared, frames):  # type: ignore[no-untyped-def]
            watch.warmed += frames is not None
            return run_discarded(prepared, frames)

        def counted_run(prepared: Prepared):  # type: ignore[no-untyped-def]
            watch.replays += 1
            return run(prepared)

        def noted(prepared: Prepared, stacked) -> bool:  # type: ignore[no-untyped-def]
            planned = plan_outputs(prepared, stacked)
            if prepared.refused is not None:
                watch.refused[prepared.refused] += 1
            return planned

        def counted_ahead(prepared: Prepared) -> None:
            watch.ahead += prepared.refused is None
            captured_ahead(prepared)

        self._patches = [mock.patch.object(Prepared, "run", counted_run),
                         mock.patch.object(Prepared, "plan_outputs", noted),
                         mock.patch.object(Prepared, "captured_ahead", counted_ahead),
                         mock.patch.object(Prepared, "run_discarded", counted_warm_up)]
        for p in self._patches:
            p.start()
        return self

    def __exit__(self, *exc: object) -> None:
        for p in self._patches:
            p.stop()


@pytest.mark.parametrize("qid,layout", [(q, "single") for q in PREPARED] + [(q, "hashed") for q in HASHED])
def test_prepared_batches_equal_duckdb_with_deletions(spark, tmp_path_factory, monkeypatch, qid, layout):
    """``single``: the states in one partition (small batches over small states); ``hashed``:
    hash-partitioned on their keys, as large states are. The data is drawn from a seeded
    generator, not Hypothesis: its one example would be its simplest, a row of zeros per batch,
    which a replay that reused the capture batch's rows gets right too."""
    if layout == "hashed":
        monkeypatch.setenv(env_name("one_partition"), "0")
    _, sql, uses, ordered = SHAPES[qid]
    sources = _sources(uses, True)
    rng = random.Random(f"{qid}/{layout}")
    batches = random_stream(rng, sources, batches=7, max_rows=12, min_rows=1)
    tables = {s.name: random_rows(rng, s, max_size=6) for s in sources if s.static}
    tmp = str(tmp_path_factory.mktemp(f"prepared-{qid}-{next(_counter)}"))
    with _Watch() as watch:
        check_stream(spark, tmp, sql, sources, batches, tables, ordered=ordered, oracle_sql=ORACLE_SQL.get(qid))
    # Batch 0 is planned as a whole, and after its commit batch 1's plans are captured ahead (single:
    # gathering batch 0's states into one partition) and run over batch 0's rows, what they
    # compute discarded (WARM_RUNS times): every later batch runs the prepared plans unless the plan
    # was refused.
    assert not watch.refused and watch.ahead == 1 and watch.warmed == shape.WARM_RUNS and watch.replays == len(batches) - 1, \
        (qid, watch.replays, watch.warmed, dict(watch.refused))


def test_a_large_batch_runs_the_plain_way_and_the_next_ones_are_prepared_again(spark, tmp_path, monkeypatch):
    """A batch past one task's rows is planned the plain way from the states the prepared plans
    kept, and a later small batch captures the plans again; every answer as DuckDB's."""
    sql = "SELECT a, count(*) AS n, sum(b) AS t, avg(b) AS m FROM R GROUP BY a"
    r = Source("R", (("a", "INT"), ("b", "INT"), ("s", "STRING")), weighted=True)
    rows = [[(i % 5, i, f"s{i % 7}", 1) for i in range(k * 10, k * 10 + 6)] for k in range(12)]
    rows[5] = [(i % 9, i, "big", 1) for i in range(300)] + [(0, 0, "s0", -1)]  # large (bound set below)
    rows[8] = [row[:3] + (-1,) for row in rows[1][:2]]  # deletions only
    monkeypatch.setattr(shape, "ONE_TASK_ROWS", 200)
    with _Watch() as watch:
        run = check_stream(spark, str(tmp_path), sql, [r], [{"R": b} for b in rows])
    assert run.batches == 12
    assert not watch.refused
    # batch 1's plans are captured ahead, 1–4 replay; 5 is large (plain), 6 captures again (gathering
    # the state into one partition), 7–11 replay
    assert watch.replays == 9 and watch.ahead == 1, watch.replays


def test_a_plan_that_keeps_a_value_between_jobs_is_planned_batch_by_batch(spark, tmp_path, monkeypatch):
    """A plan in which something over a batch's rows is computed once per plan — here the scalar
    subquery Spark's MergeSubplans makes of a global aggregate's snapshot and changes when the
    capture does not turn that rule off; a broadcast would be the same (a shuffle is not: it is
    forgotten before each job) — cannot run again with other rows in its slots: the capture is
    refused with its reason, and every batch is planned as before, exactly."""
    monkeypatch.setattr(Prepared, "_CAPTURE_SETTINGS", {"spark.sql.autoBroadcastJoinThreshold": "-1"})
    sql = "SELECT count(*) AS n, sum(b) AS t, min(a) AS lo FROM R"
    r = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
    batches = [{"R": [(i % 4, i, 1) for i in range(k, k + 5)] + ([(k % 4, k, -1)] if k else [])} for k in range(7)]
    with _Watch() as watch:
        check_stream(spark, str(tmp_path), sql, [r], batches)
    assert watch.replays == 0 and watch.ahead == 0
    assert list(watch.refused) == ["the plan Project over a batch's rows"]


def test_a_plan_of_many_states_is_planned_batch_by_batch(spark, tmp_path, monkeypatch):
    """Past PREPARED_MAX_STATES states no capture is tried (one of 32 states left Spark's SQL
    listener minutes behind: see engine.py); the answers are the same."""
    monkeypatch.setattr(shape, "PREPARED_MAX_STATES", 0)
    sql = "SELECT a, sum(b) AS t FROM R GROUP BY a"
    r = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
    batches = [{"R": [(i % 3, i, 1) for i in range(k, k + 4)]} for k in range(5)]
    with _Watch() as watch:
        check_stream(spark, str(tmp_path), sql, [r], batches)
    assert watch.replays == 0 and not watch.refused


def test_a_state_read_in_other_partitions_than_it_is_merged_into_is_refused(spark):
    """The next job's slot of a state reads the blocks its merge kept, partition by partition: a
    capture whose merge has another number of partitions than the state it read would lose rows,
    so it is refused."""
    if not Prepared.available(spark):
        pytest.skip("the JVM helpers are not loaded")
    p = Prepared(spark)
    p.state("s", spark.range(4).selectExpr("id AS k").coalesce(1), lambda merged: merged)
    p.keep("s", spark.range(0, 4, 1, 2).selectExpr("id AS k"))
    assert p.verify([]) == "state s read in 1 partition(s) but merged into 2"


def _captured_plans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text of every physical plan a capture verifies, filled in as the run goes."""
    plans: list[str] = []
    verify = Prepared.verify

    def seen(prepared: Prepared, executed):  # type: ignore[no-untyped-def]
        plans.extend(str(p.treeString()) for p in executed)
        return verify(prepared, executed)

    monkeypatch.setattr(Prepared, "verify", seen)
    return plans


@pytest.mark.parametrize("layout", ["single", "hashed"])
def test_a_small_static_table_is_broadcast_into_the_captured_plans(spark, tmp_path, monkeypatch, layout):
    """A capture broadcasts nothing a batch's rows go into, but a static table's rows never
    change: a small one is broadcast into the joins that read it (built once, true for every later
    job), so a batch's rows meet it without a shuffle. The plans are replayed batch after batch
    and every answer is DuckDB's."""
    if layout == "hashed":
        monkeypatch.setenv(env_name("one_partition"), "0")
    plans = _captured_plans(monkeypatch)
    _, sql, uses, ordered = SHAPES["stream-static"]
    sources = _sources(uses, True)
    rng = random.Random(f"static broadcast {layout}")
    batches = random_stream(rng, sources, batches=7, max_rows=12, min_rows=3)
    tables = {s.name: random_rows(rng, s, max_size=6) for s in sources if s.static}
    with _Watch() as watch:
        check_stream(spark, str(tmp_path), sql, sources, batches, tables, ordered=ordered)
    assert not watch.refused and watch.replays >= 4, (watch.refused, watch.replays)
    assert plans and any("BroadcastHashJoin" in p for p in plans), plans


def test_a_reused_broadcast_of_a_static_table_keeps_the_batches_prepared(spark, tmp_path, monkeypatch):
    """Streams grouped on a key filtered by ``IN`` a static subquery (TPC-DS Q33's three
    channels): the semi join sits above each GROUP BY (``semi_joins_above_aggregates``), so a
    batch's statement meets the subquery's rows twice, the groups' new rows and their old ones;
    Spark broadcasts them once and reuses the exchange. What a reused exchange reads decides, as
    for the exchange itself — static rows here, so the plans are captured and replayed batch after
    batch, every answer DuckDB's."""
    monkeypatch.setenv(env_name("one_partition"), "0")
    plans = _captured_plans(monkeypatch)
    r = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
    s = Source("S", (("c", "INT"), ("d", "INT")), weighted=True)
    d = Source("D", (("k", "INT"), ("g", "INT")), static=True)
    sql = ("SELECT u.g, sum(u.t) AS t FROM (SELECT a AS g, sum(b) AS t FROM R WHERE a IN (SELECT k FROM D WHERE g > 0) "
           "GROUP BY a UNION ALL SELECT c, sum(d) FROM S WHERE c IN (SELECT k FROM D WHERE g > 0) GROUP BY c) u "
           "GROUP BY u.g")
    rng = random.Random("a reused broadcast")
    batches = random_stream(rng, [r, s], batches=7, max_rows=12, min_rows=3)
    tables = {"D": [(k, k % 3) for k in range(-2, 6)]}
    with _Watch() as watch:
        check_stream(spark, str(tmp_path), sql, [r, s, d], batches, tables)
    assert any("ReusedExchange" in p for p in plans), plans
    assert not watch.refused and watch.replays >= 4, (watch.refused, watch.replays)


def _replayed_plans_of(spark, tmp_path, monkeypatch, shape_name: str, seed: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Run differential shape ``shape_name`` over seven random batches (every answer DuckDB's)
    and return the captured plans' texts, after checking the batches replayed them."""
    plans = _captured_plans(monkeypatch)
    _, sql, uses, ordered = SHAPES[shape_name]
    sources = _sources(uses, True)
    batches = random_stream(random.Random(seed), sources, batches=7, max_rows=30, min_rows=5)
    with _Watch() as watch:
        check_stream(spark, str(tmp_path), sql, sources, batches, ordered=ordered)
    assert not watch.refused and watch.replays >= 4, (watch.refused, watch.replays)
    return plans


def test_rows_meet_their_not_equal_counts_on_the_key_alone(spark, tmp_path, monkeypatch):
    """An EXISTS by equalities and one ``<>`` (TPC-H Q21's, TPC-DS Q94's) adds to each left row
    the counts N(k) and C(k, a) of its key and value (``plan/semi_not_equal.py``). Both sides lie
    hashed on the key; the rows meet the counts on the key alone, so no exchange hashes them again
    on (key, value) in the replayed plans — and every answer is DuckDB's."""
    monkeypatch.setenv(env_name("one_partition"), "0")
    plans = _replayed_plans_of(spark, tmp_path, monkeypatch, "exists-and-not-exists-not-equal", "not equal on the key")
    assert plans and any("pairs" in p for p in plans), plans
    # the value read for C(k, a) is `q.pairs….a`: never a key of an exchange
    assert not any(re.search(r"hashpartitioning\([^)]*q\.pairs[^,)]*\.a#", p) for p in plans), plans


def test_a_chain_of_joins_captured_over_one_partition_has_no_exchange(spark, tmp_path, monkeypatch):
    """Over one partition, each join's output is declared one partition (``COALESCE(1)``):
    Spark reports an inner join of two one-partition inputs as either side's partitioning, and
    the next join of a chain hashed both its inputs into two partitions. The delta terms of a
    three-way join replay without an exchange, and every answer is DuckDB's."""
    plans = _replayed_plans_of(spark, tmp_path, monkeypatch, "self-join-three-way", "a chain in one partition")
    joined = [p for p in plans if p.count("Join") >= 2]
    assert joined and not any("Exchange hashpartitioning" in p for p in joined), joined


def test_a_union_of_changes_keeps_the_states_hash_partitioning(spark, tmp_path, monkeypatch):
    """An INTERSECT of two DISTINCT joins (TPC-DS Q38's shape) adds up the changes of two states,
    each lying hashed on the row, in one union. Read through views, their columns carry the
    views' names and their partitioning does not: without ``java/Unqualified.java`` Spark's union
    reported no partitioning and the aggregate over it shuffled both again. Every answer is
    DuckDB's."""
    monkeypatch.setenv(env_name("one_partition"), "0")
    plans = _captured_plans(monkeypatch)
    sources = _sources("RS", True)
    sql = ("SELECT DISTINCT R.a, R.s FROM R JOIN S ON R.b = S.k INTERSECT "
           "SELECT DISTINCT R.a, R.s FROM R JOIN S ON R.a = S.v")
    batches = random_stream(random.Random("a union of changes"), sources, batches=7, max_rows=30, min_rows=5)
    with _Watch() as watch:
        check_stream(spark, str(tmp_path), sql, sources, batches)
    assert not watch.refused and watch.replays >= 4, (watch.refused, watch.replays)
    intersect = [p for p in plans if "sum(left" in p]  # the INTERSECT's state counts each side's rows
    assert intersect and not any("ENSURE_REQUIREMENTS" in p for p in intersect), intersect


def test_a_stream_read_twice_is_replayed_from_its_files_not_through_a_cache(spark, tmp_path, monkeypatch):
    """A stream the plan reads twice (two aggregates of it, joined: TPC-DS Q39's shape) is read
    through a cache in the capture batch. The scans the replays re-point at each batch's files are
    the plan that cache was built from (``Plans.uncached``), not the cache's builder, which would
    turn every batch's rows into column batches and back without keeping them. Every answer is
    DuckDB's."""
    scans: list[str] = []
    light_read = Prepared.light_read

    def noted(prepared: Prepared, *args, **kwargs):  # type: ignore[no-untyped-def]
        rows = light_read(prepared, *args, **kwargs)
        if rows is not None:
            scans.extend(scan.toDebugString() for scan, _ in prepared._scans.values())
        return rows

    monkeypatch.setattr(Prepared, "light_read", noted)
    r = Source("R", (("a", "INT"), ("c", "INT"), ("v", "INT")), weighted=True)
    sql = ("WITH g AS (SELECT a, c, count(*) AS n, sum(v) AS t FROM R GROUP BY a, c) "
           "SELECT g1.a, g1.n, g1.t, g2.n AS n2, g2.t AS t2 FROM g g1 JOIN g g2 ON g1.a = g2.a "
           "WHERE g1.c = 1 AND g2.c = 2")
    rng = random.Random("a stream read twice")
    batches = [{"R": [(rng.randrange(4), rng.randrange(1, 4), rng.randrange(9), 1) for _ in range(8)]}
               for _ in range(6)]
    batches[4]["R"] += [row[:3] + (-1,) for row in batches[1]["R"][:3]]  # deletions
    with _Watch() as watch:
        check_stream(spark, str(tmp_path), sql, [r], batches)
    assert not watch.refused and watch.replays >= 4, (watch.refused, watch.replays)
    assert scans and all("FileScanRDD" in s for s in scans), scans
    # a cache's builder names its RDD by the plan it caches ("FileScan parquet …")
    assert not any("FileScan parquet" in s for s in scans), scans


def test_a_kept_merge_estimated_past_long_max_stays_in_its_one_partition(spark):
    """A kept merge's frame (``Plans.frame``) carries its template's size estimate, which Spark
    makes the product of a join's sides: past Long.MAX_VALUE, ``maxSinglePartitionBytes`` no
    longer holds, and a join of one-partition frames shuffled both whole into two partitions — a
    window's state meeting a batch's few keys, each batch (TPC-DS Q89). Capped at ``SIZE_CAP``,
    the join stays in the frames' one partition."""
    from pyspark.sql import DataFrame

    from streamfold.runtime.jvm import loaded
    from streamfold.runtime.session import engine_session
    from streamfold.runtime.state import SIZE_CAP

    assert loaded(spark)
    spark = engine_session(spark, 2)  # the session a run plans its batches in
    wide = spark.range(10)
    for i in range(5):  # an estimate of 8 KB ** 5 bytes: past Long.MAX_VALUE
        wide = wide.crossJoin(spark.range(1000).withColumnRenamed("id", f"c{i}"))
    template = wide.selectExpr("id", "c0 AS v").coalesce(1)
    assert _estimate(template) > (1 << 63)
    frame = spark._jvm.streamfold.jvm.Plans.frame(template._jdf.queryExecution().toRdd(), template._jdf, SIZE_CAP)
    a = DataFrame(frame, spark)
    assert _estimate(a) == SIZE_CAP
    keys = a.selectExpr("id AS k").distinct()
    joined = a.join(keys, a["id"] == keys["k"], "left_semi")
    plan = joined._jdf.queryExecution().executedPlan().toString()
    assert "LeftSemi" in plan and "Exchange" not in plan, plan


def test_a_chain_of_joins_over_one_partition_frames_stays_in_their_partition(spark):
    """Each frame is capped, but Spark estimates a join as the product of its sides, so a chain of
    joins over a one-partition frame passes Long.MAX_VALUE and, planned the plain way, the next
    join with a one-partition frame shuffles both into two partitions (TPC-DS Q01's captured plan:
    a state of returns joined with two dimensions, then with a state of averages: three shuffles a
    batch). Planned by ``Plans.executed``, whose shuffles are placed with the estimates capped,
    the join stays where its inputs lie, with the same rows."""
    from pyspark.sql import DataFrame
    from pyspark.sql.functions import broadcast

    from streamfold.runtime.jvm import loaded
    from streamfold.runtime.session import engine_session
    from streamfold.runtime.state import SIZE_CAP

    assert loaded(spark)
    spark = engine_session(spark, 2)
    plans = spark._jvm.streamfold.jvm.Plans

    def frame(name: str, n: int) -> DataFrame:
        template = spark.range(n).selectExpr(f"id AS {name}", f"id % 7 AS {name}_v").coalesce(1)
        return DataFrame(plans.frame(template._jdf.queryExecution().toRdd(), _widened(template)._jdf, SIZE_CAP),
                         spark)

    def chain() -> DataFrame:
        a, b = frame("a", 3000), frame("b", 100)
        d1 = spark.range(1000).selectExpr("id AS d1", "id * 2 AS w1")  # an estimate of 8 KB each
        d2 = spark.range(1000).selectExpr("id AS d2", "id * 3 AS w2")
        enriched = a.join(broadcast(d1), a["a_v"] == d1["d1"]).join(broadcast(d2), a["a_v"] == d2["d2"])
        return enriched.join(b.hint("shuffle_hash"), enriched["a"] == b["b"]).selectExpr("a", "w1 + w2 + b_v AS v")

    plain = chain()
    assert "Exchange hashpartitioning" in plain._jdf.queryExecution().executedPlan().toString()  # what the cap prevents
    capped = chain()
    plan = plans.executed(capped._jdf, SIZE_CAP).toString()
    assert "Exchange hashpartitioning" not in plan and plan.count("Join") == 3, plan
    assert sorted(capped.collect()) == sorted(plain.collect()) and capped.count() == 100


def _widened(df):  # type: ignore[no-untyped-def]
    """``df`` with its rows, estimated past ``SIZE_CAP`` bytes: its frame is capped there."""
    wide = df
    for i in range(4):  # 8 KB ** 4 times the template's own estimate
        wide = wide.crossJoin(df.sparkSession.range(1000).withColumnRenamed("id", f"w{i}")).where(f"w{i} = 0")
    return wide.select(*df.columns).coalesce(1)


def _estimate(df) -> int:  # type: ignore[no-untyped-def]
    """Spark's size estimate of ``df``'s analysed plan, in bytes."""
    return int(str(df._jdf.queryExecution().analyzed().stats().sizeInBytes()))


def test_a_local_run_bounds_its_collected_outputs_by_its_heap(spark, tmp_path):
    """A local run knows its JVM's heap (driver and executors are one JVM), which bounds the
    outputs a batch collects on the driver (``shape.collects``: a sixteenth of it, 128 MB at
    least)."""
    import streamfold
    from streamfold.runtime.session import local_heap

    directory = tmp_path / "S"
    directory.mkdir()
    query = streamfold.start("SELECT k, count(*) AS n FROM S GROUP BY k", {"S": str(directory)},
                             str(tmp_path / "out"), spark=spark, background=False, schemas={"S": "k INT"})
    try:
        assert query.engine.ctx.local and query.engine.ctx.heap == local_heap(spark) > 0
        assert shape.collects(10, 10, query.engine.ctx.heap)
    finally:
        query.stop()


def test_a_hashed_prepared_batch_counts_each_state_once(spark, tmp_path, monkeypatch):
    """Tasks of one job that read the same partition of a kept merge at once (the outputs' tasks,
    the two branches of a delta join) compute it once — the others wait for its block — so each
    commit's state rows are the state's rows: here the aggregate has a row per answer row."""
    monkeypatch.setenv(env_name("one_partition"), "0")
    monkeypatch.setattr(shape, "ONE_TASK_ROWS", 60)  # the outputs read more: in several tasks
    _, sql, uses, ordered = SHAPES["join-groupby-seed"]
    sources = _sources(uses, True)
    batches = random_stream(random.Random("counted once"), sources, batches=8, max_rows=40, min_rows=10)
    with _Watch() as watch:
        check_stream(spark, str(tmp_path), sql, sources, batches, ordered=ordered)
    assert watch.replays >= 4
    commits = sorted((tmp_path / "out" / "commits").glob("*.json"))
    records = [json.loads(p.read_text()) for p in commits]
    assert len(records) == 8
    assert all(r["state_rows"]["agg"] == r["snapshot_rows"] for r in records), \
        [(r["state_rows"]["agg"], r["snapshot_rows"]) for r in records]


def test_a_state_larger_than_the_outputs_keeps_the_batches_prepared(spark, tmp_path, monkeypatch):
    """Whether a batch's merges are lazy (and its plans prepared) is decided by what its outputs
    will hold — the last snapshot, the changes and changelog scaled to the batch — not by the
    states' size: a join input that outgrows ``SMALL_ROWS`` while every batch touches a few of
    its rows stays prepared (it used to fall back to a job per merge, several times slower, from
    join-groupby's 16th increment on). Every answer as DuckDB's."""
    monkeypatch.setattr(shape, "SMALL_ROWS", 90)
    sql = "SELECT x.a, count(*) AS n, sum(y.d) AS t FROM R x JOIN S y ON x.b = y.c GROUP BY x.a"
    r = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
    s = Source("S", (("c", "INT"), ("d", "INT")), weighted=True)
    rng = random.Random("a large state")
    batches = [{"R": [(rng.randrange(3), k * 10 + i, 1) for i in range(10)],
                "S": [(rng.randrange(100), rng.randrange(9), 1) for _ in range(3)]} for k in range(8)]
    batches[6]["R"].append((batches[2]["R"][0][0], batches[2]["R"][0][1], -1))  # a deletion
    with _Watch() as watch:
        run = check_stream(spark, str(tmp_path), sql, [r, s], batches)
    assert run.batches == 8 and not watch.refused
    # the states hold 40+ rows from batch 3 on (past SMALL_ROWS with four rows per input row):
    # every batch after batch 0 is replayed (batch 1's plans captured ahead)
    assert watch.replays == 7, watch.replays


def test_plans_captured_ahead_are_given_up_when_the_next_batch_does_not_fit_them(spark, tmp_path):
    """Batch 1's plans are captured after batch 0's commit; batch 1 here brings no rows for one
    stream, so they are given up as a capture would not have been made (it would merge that
    stream's state every batch), and the first batch with rows from both captures. Every answer
    as DuckDB's."""
    sql = "SELECT x.a, count(*) AS n, sum(y.d) AS t FROM R x JOIN S y ON x.b = y.c GROUP BY x.a"
    r = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
    s = Source("S", (("c", "INT"), ("d", "INT")), weighted=True)
    rng = random.Random("given up")
    batches = [{"R": [(rng.randrange(3), rng.randrange(6), 1) for _ in range(6)],
                "S": [(rng.randrange(6), rng.randrange(9), 1) for _ in range(4)]} for _ in range(6)]
    batches[1]["S"] = []
    batches[4]["R"].append(batches[0]["R"][0][:2] + (-1,))  # a deletion
    with _Watch() as watch:
        check_stream(spark, str(tmp_path), sql, [r, s], batches)
    assert watch.ahead == 1 and not watch.refused
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "out" / "commits").glob("*.json"))]
    assert [r.get("prepared") for r in records] == [None, None, "capture", "replay", "replay", "replay"]


def _batch_1_captures(spark, tmp_path) -> _Watch:  # type: ignore[no-untyped-def]
    """A stream whose batch 1 is the capture (nothing planned ahead, or what was given up)."""
    sql = "SELECT a, count(*) AS n, sum(b) AS t, min(b) AS lo FROM R GROUP BY a"
    r = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
    batches = [{"R": [(i % 3, i * 7 % 11, 1) for i in range(k, k + 5)]
                + ([((k - 1) % 3, (k - 1) * 7 % 11, -1)] if k else [])} for k in range(5)]  # (row i = k - 1 deleted)
    with _Watch() as watch:
        check_stream(spark, str(tmp_path), sql, [r], batches)
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "out" / "commits").glob("*.json"))]
    assert [r.get("prepared") for r in records] == [None, "capture", "replay", "replay", "replay"]
    assert watch.replays == 3
    return watch


@pytest.mark.parametrize("step", ["the capture", "the warm-up"])
def test_a_capture_ahead_that_fails_leaves_the_run_as_it_was(spark, tmp_path, monkeypatch, step):
    """The capture ahead and the warm-up run after batch 0's commit: if either fails, the store
    is put back, nothing is lost, and batch 1 is the capture as before. Every answer as DuckDB's."""
    run_discarded = Prepared.run_discarded

    def fails(self: Prepared, *frames: object) -> None:
        raise RuntimeError(f"{step} ahead fails")

    def warm_up_fails(self: Prepared, frames):  # type: ignore[no-untyped-def]
        return fails(self) if frames is not None else run_discarded(self, frames)

    if step == "the capture":
        monkeypatch.setattr(Prepared, "captured_ahead", fails)
    else:
        monkeypatch.setattr(Prepared, "run_discarded", warm_up_fails)
    _batch_1_captures(spark, tmp_path)


def test_after_a_small_history_batch_1_is_the_capture(spark, tmp_path, monkeypatch):
    """Below shape.AHEAD_MIN_ROWS rows in batch 0 nothing is planned ahead of batch 1 (nor
    warmed): batch 1 captures the plans, as before the capture ahead."""
    monkeypatch.setattr(shape, "AHEAD_MIN_ROWS", 6)  # batch 0: five rows
    watch = _batch_1_captures(spark, tmp_path)
    assert watch.ahead == 0 and watch.warmed == 0


@pytest.mark.parametrize("history_keys,modes", [
    # states past half of one task's rows: captured ahead hash-partitioned, and those plans run
    # every later batch — batch 1, which alone would fit one partition, and the ones past it
    (70, [None, "replay", "replay", "replay", "replay"]),
    # states well within: captured ahead over one partition; once a batch no longer fits one task
    # those plans stop (the batch is planned), the next batch captures hash-partitioned plans
    (20, [None, "replay", None, "capture", "replay"]),
])
def test_plans_captured_ahead_leave_room_for_batch_1(spark, tmp_path, monkeypatch, history_keys, modes):
    """The capture ahead does not know batch 1's rows: over one partition it would refuse a batch
    that pushes the states past one task (batch 1 then planned, batch 2 a capture: stop 48), so
    states past shape.AHEAD_ROOM of it are captured hash-partitioned, which run a batch of any
    size. Every answer as DuckDB's (with deletions)."""
    monkeypatch.setattr(shape, "ONE_TASK_ROWS", 100)
    sql = "SELECT a, count(*) AS n, sum(b) AS t FROM R GROUP BY a"
    r = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
    history = [(k, k % 7, 1) for k in range(history_keys)]
    grow = 40 if history_keys < 50 else 10  # (20 keys: batch 2 takes the state to 80 + 40 rows read)
    batches = [history] + [[(history_keys + 100 * i + j, j, 1) for j in range(grow)] + [(i, i % 7, -1)]
                           for i in range(1, 5)]
    with _Watch() as watch:
        check_stream(spark, str(tmp_path), sql, [r], [{"R": b} for b in batches])
    records = [json.loads(p.read_text()) for p in sorted((tmp_path / "out" / "commits").glob("*.json"))]
    assert [rec.get("prepared") for rec in records] == modes, [rec.get("prepared") for rec in records]
    assert watch.ahead == 1 and not watch.refused
