"""A restart reads the states back from the checkpoint's packed changelogs (``lowering/durability.py``):
one batch's delta log alone (a restart before the first compaction), several logs (each key's
latest row, or the logged deltas added up), or a base and the logs after it — each state in one
shuffle onto its own partitions, and every answer after a restart DuckDB's."""

from __future__ import annotations

import os
import random

import pytest

import streamfold
from streamfold.runtime import lowering, runs
from streamfold.runtime.views import Views
from streamfold.settings import env_name

from ..streams import Source, check_restarting
from ..strategies import random_stream

pytestmark = [pytest.mark.spark]

S = Source("S", (("k", "INT"), ("v", "INT"), ("w", "DOUBLE")), weighted=True)

# A join whose inputs are kept as a base and a tail (their logs are deltas, added up on a
# restart), a distinct count (a state keyed on (k, v), partitioned on k), sums and a count.
SQL = ("SELECT a.k, count(DISTINCT b.v) AS d, sum(b.v) AS t, count(*) AS n "
       "FROM S a JOIN S b ON a.v = b.k GROUP BY a.k")


@pytest.mark.parametrize("runs_min_rows,compact_every", [(0, 20), (0, 3), (1_000_000, 20)],
                         ids=["runs-logs-only", "runs-with-bases", "whole-states"])
def test_a_query_stopped_before_every_batch_restarts_exactly(spark, tmp_path, monkeypatch, runs_min_rows,
                                                             compact_every):
    """Stopped and started again before every batch of a weighted stream with deletions: the first
    restart reads one delta log, the later ones several (or, compacting every third batch, a base
    and the logs after it); the snapshot and the changes after every batch are DuckDB's."""
    monkeypatch.setenv(env_name("runs_min_rows"), str(runs_min_rows))
    monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)  # into runs however much of a join input a batch touches
    batches = random_stream(random.Random(f"restore-{runs_min_rows}-{compact_every}"), [S], 7, max_rows=10,
                            min_rows=2)
    check_restarting(spark, str(tmp_path), SQL, S, [b["S"] for b in batches], every=1,
                     compact_every=compact_every)
    bases = os.listdir(tmp_path / "out" / "_checkpoint" / "state")
    assert (compact_every == 3) == any(b.startswith("base") for b in bases), bases


def _exchanges(plan) -> list[str]:
    """The shuffles of a physical plan (their one-line descriptions)."""
    found, stack = [], [plan]
    while stack:
        node = stack.pop()
        if "Exchange" in node.getClass().getSimpleName():
            found.append(node.simpleString(200))
        children = node.children()
        stack += [children.apply(i) for i in range(children.size())]
    return found


def test_each_state_is_read_back_in_one_shuffle_onto_its_partitions(spark, tmp_path, monkeypatch):
    """Over several logs, a state added up per key (a join input) or ranked per key (the distinct
    count's (k, v) rows, partitioned on k alone) is read back with one exchange, hashed on the
    state's partition key: grouping or ranking within those partitions needs no second, and the
    state comes out laid out as a merge reads it (before, the distinct count's rows were shuffled
    on (k, v) to be ranked, then again on k)."""
    monkeypatch.setenv(env_name("runs_min_rows"), "0")
    directory = tmp_path / "S"
    directory.mkdir()
    query = streamfold.start(SQL, {"S": str(directory)}, str(tmp_path / "out"), spark=spark, background=False,
                             partitions=2, schemas={"S": S.schema_sql()})
    try:
        import pyarrow.parquet as pq

        for i, batch in enumerate(random_stream(random.Random("restore-plans"), [S], 3, max_rows=12, min_rows=4)):
            pq.write_table(S.table(batch["S"]), str(directory / f"{i}.parquet"))
            assert query.process_available() is not None
        store, checkpoint = query.engine.store, query.engine.ctx.checkpoint
        session = store.spark  # the run's own session: adaptive execution off, its partitions
        logs = [(b, checkpoint.delta_dir(b)) for b in range(3)]
        views = Views(session, "restore_test")
        try:
            every = views.name(session.sql(lowering.changelogs(logs)), "logs")
            checked = set()
            for name in store.durable():
                table = store.table(name)
                text = (lowering.summed_logs(table, every) if store._summed(name)
                        else lowering.latest(table, every))
                plan = session.sql(text)._jdf.queryExecution().executedPlan()
                keys = table.state.partition_names
                shuffles = _exchanges(plan)
                assert len(shuffles) == 1, (name, shuffles)
                if keys and len(keys) < len(table.keys):
                    checked.add(name)
                part = plan.outputPartitioning()
                if keys:
                    assert part.getClass().getSimpleName() == "HashPartitioning", (name, part.toString())
                    exprs = part.expressions()
                    assert [exprs.apply(i).name() for i in range(exprs.size())] == list(keys), (name, part.toString())
            assert checked, "a state whose partition key is a part of its key"
            assert any(store._summed(n) for n in store.durable()), "a state whose logs are added up"
        finally:
            views.drop()
    finally:
        query.stop()
