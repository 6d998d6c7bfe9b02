"""Long runs: what a batch plans with stays the size of the data, batch after batch (issue 17).

TPC-H Q21 ran out of driver memory by its fourth batch: a state fed by a join, checkpointed
lazily, carried its plan's size estimate (the product of the join's sides) into the next batch,
which multiplied it again; the plans that followed grew until serializing one took the heap.
These tests run that shape — a join's rows kept as a state (the rows an EXISTS filters), read by
the next batch's join, and an aggregate over it — for eight small batches with deletions.
A batch's py4j proxies are freed when it ends, not when Python's collector gets to them: until
then they keep the batch's plans live in the JVM (``streamfold run`` on Q21: 450 MB after batch
0, 988 MB after batch 5).
The full-size runs are ``streamfold bench soak`` (docs/benchmarks.md, "Long runs").
"""

from __future__ import annotations

import gc

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfold
from streamfold.verify import compare, duckdb_answer
from streamfold.bench.soak import executions_after, state_estimates
from streamfold.runtime.query import GarbageCollector


pytestmark = pytest.mark.spark

QUERY = """SELECT s.k, count(*) AS n FROM S s JOIN T t ON s.a = t.a
WHERE EXISTS (SELECT * FROM U u WHERE u.a = s.a AND u.b <> s.b) GROUP BY s.k"""
SOURCES = ("S", "T", "U")
BATCHES = 8
SCHEMA = "k BIGINT, a BIGINT, b BIGINT, _weight BIGINT"


def _batches(seed: int = 7) -> list[dict[str, pa.Table]]:
    """80 rows per source and batch; from batch 2 on, each also deletes 8 of the rows of two batches before."""
    rng = np.random.default_rng(seed)
    out: list[dict[str, pa.Table]] = []
    for b in range(BATCHES):
        batch = {}
        for s in SOURCES:
            cols = {"k": rng.integers(0, 10, 80), "a": rng.integers(0, 40, 80), "b": rng.integers(0, 4, 80)}
            table = pa.table({**cols, "_weight": np.ones(80, dtype=np.int64)})
            if b >= 2:  # rows inserted two batches before (each batch's rows are deleted from once)
                earlier = out[b - 2][s].slice(0, 80)
                gone = earlier.take(rng.choice(80, 8, replace=False))
                table = pa.concat_tables([table, gone.set_column(3, "_weight", pa.array(-np.ones(8, dtype=np.int64)))])
            batch[s] = table
        out.append(batch)
    return out


def _start(spark, tmp_path):
    """The query over empty source directories, run by the caller: (query, {source: directory})."""
    dirs = {s: tmp_path / s for s in SOURCES}
    for d in dirs.values():
        d.mkdir()
    q = streamfold.start(QUERY, {s: str(d) for s, d in dirs.items()}, str(tmp_path / "out"), spark=spark,
                         background=False, schemas={s: SCHEMA for s in SOURCES})
    return q, dirs


def test_states_are_planned_with_their_true_size_and_plans_stay_flat(spark, tmp_path):
    data = _batches()
    q, dirs = _start(spark, tmp_path)
    plan_chars = []
    try:
        _, last, _ = executions_after(spark, -1)
        for b, batch in enumerate(data):
            for s, table in batch.items():
                pq.write_table(table, dirs[s] / f"{b:06d}.parquet")
            assert q.process_available() is not None
            plans, last, complete = executions_after(spark, last)
            assert complete, f"batch {b} ran more Spark executions than Spark keeps"
            plan_chars.append(sum(plans))
            for name, (rows, planned) in state_estimates(q).items():
                width = 8 * (len(q.engine.store.schemas[name].fields) + 2)  # BIGINT columns and the row's header
                assert planned <= 2 * ((rows or 0) + 1) * width, (
                    f"batch {b}: state {name} of {rows} rows is planned as {planned:.3g} bytes")
            prefix = {s: [d[s] for d in data[: b + 1]] for s in SOURCES}
            actual = list(q.snapshot_pandas().itertuples(index=False, name=None))
            check = compare(actual, duckdb_answer(QUERY, prefix))
            assert check.matches, f"batch {b}: {check.detail}"
    finally:
        q.stop()
    reference = plan_chars[3]
    assert all(abs(c - reference) <= 0.1 * reference for c in plan_chars[3:]), plan_chars


def test_a_batch_leaves_no_py4j_proxy_for_pythons_collector(spark, tmp_path):
    data = _batches()
    q, dirs = _start(spark, tmp_path)
    try:
        for s, table in data[0].items():
            pq.write_table(table, dirs[s] / "000000.parquet")
        assert q.process_available() is not None
        gc.set_debug(gc.DEBUG_SAVEALL)  # what the cyclic collector would free is kept in gc.garbage
        try:
            gc.collect()
            left = [type(o).__name__ for o in gc.garbage if type(o).__module__.startswith(("py4j", "pyspark"))]
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
        assert not left, f"{len(left)} proxies (e.g. {sorted(set(left))[:4]}) hold JVM objects until Python collects"
    finally:
        q.stop()


def test_garbage_is_collected_after_batches_that_paid_for_it():
    collector = GarbageCollector(share=0.05)
    assert collector.after_batch(0.01)  # the first batch measures what a collection costs
    collector.collect()
    collector.cost = 0.05  # a collection of 50 ms runs once 1 s of batches has passed since the last
    assert not collector.after_batch(0.5)
    assert collector.after_batch(0.5)
    assert collector.after_batch(0.0)  # deferred (a file was waiting): still due until it runs
    collector.collect()
    collector.cost = 0.05
    assert not collector.after_batch(0.5) and collector.after_batch(2.0)


def test_the_soaks_windowed_workload_is_exact_against_its_oracle(spark, tmp_path):
    """``streamfold bench soak --queries windowed`` at a small size: its DuckDB text (the bound at
    each commit's batch time, a row once per sliding window) agrees with streamfold after every
    batch, deletions and late rows among them. (That the states stay bounded is
    ``test_expiry.py``'s; the soak measures it over a thousand batches.)"""
    from streamfold.bench.soak import run_workload, seed_input

    soak = seed_input("windowed", str(tmp_path / "data"), 6, quick=True)
    record = run_workload(soak, spark, str(tmp_path / "work"), say=lambda m: None, measure_heap=False)
    assert record["status"] == "ok", record.get("error")
    rows = record["batches"]
    assert len(rows) == 6 and all(r["exact"] for r in rows), [r["difference"] for r in rows if not r["exact"]]
