"""A dimension table given as a source — its one file in batch 0, as TPC-H's ``nation`` in
issue 17 — works as well as ``--table``: the same answers, and no work for it in the batches
that bring it nothing (its state is neither merged nor rewritten)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfold
from streamfold.verify import compare, duckdb_answer
from streamfold.ir.rel import DeltaScan, StateScan
from streamfold.runtime.query import Query


pytestmark = pytest.mark.spark

QUERY = """SELECT d.name, count(*) AS n, sum(f.v) AS total
FROM F f JOIN D d ON f.d = d.id JOIN R r ON d.region = r.id
WHERE r.name <> 'west' GROUP BY d.name"""
BATCHES = 5


def _facts(rng: np.random.Generator, b: int, earlier: list[pa.Table]) -> pa.Table:
    rows = pa.table({"d": rng.integers(0, 12, 60), "v": rng.integers(0, 100, 60),
                     "_weight": np.ones(60, dtype=np.int64)})
    if b >= 2:  # and delete some rows of two batches before
        gone = earlier[b - 2].slice(0, 60).take(rng.choice(60, 6, replace=False))
        rows = pa.concat_tables([rows, gone.set_column(2, "_weight", pa.array(-np.ones(6, dtype=np.int64)))])
    return rows


def test_a_dimension_given_as_a_source_answers_as_a_table_does_and_is_not_merged_again(spark, tmp_path):
    rng = np.random.default_rng(3)
    dims = {"D": pa.table({"id": np.arange(12), "name": [f"d{i % 5}" for i in range(12)], "region": np.arange(12) % 3}),
            "R": pa.table({"id": np.arange(3), "name": ["north", "west", "south"]})}
    for name, table in dims.items():
        (tmp_path / name).mkdir()
        pq.write_table(table, tmp_path / name / "000000.parquet")
    facts = {kind: tmp_path / f"F-{kind}" for kind in ("source", "table")}
    for d in facts.values():
        d.mkdir()
    as_source = streamfold.start(QUERY, {"F": str(facts["source"]), **{n: str(tmp_path / n) for n in dims}},
                                 str(tmp_path / "out-source"), spark=spark, background=False,
                                 schemas={"F": "d BIGINT, v BIGINT, _weight BIGINT"})
    as_table = streamfold.start(QUERY, {"F": str(facts["table"])}, str(tmp_path / "out-table"), spark=spark,
                                background=False, tables={n: str(tmp_path / n) for n in dims},
                                schemas={"F": "d BIGINT, v BIGINT, _weight BIGINT"})
    batches: list[pa.Table] = []
    try:
        dimension_states: dict[str, object] = {}
        for b in range(BATCHES):
            batches.append(_facts(rng, b, batches))
            for d in facts.values():
                pq.write_table(batches[-1], d / f"{b:06d}.parquet")
            assert as_source.process_available() is not None and as_table.process_available() is not None
            expected = duckdb_answer(QUERY, {"F": batches, **{n: [t] for n, t in dims.items()}})
            for q in (as_source, as_table):
                check = compare(list(q.snapshot_pandas().itertuples(index=False, name=None)), expected)
                assert check.matches, f"batch {b}: {check.detail}"
            store = as_source.engine.store
            if b == 0:  # the states that read only the dimensions, as batch 0 left them
                dimension_states = {n: store.current[n] for n in store.current
                                    if not _reads_facts(as_source, n)}
                assert dimension_states
            else:
                same = [n for n, df in dimension_states.items() if store.current[n] is df]
                assert same == list(dimension_states), f"batch {b} merged a dimension's state again"
    finally:
        as_source.stop()
        as_table.stop()


def _reads_facts(query: Query, state: str) -> bool:
    """Whether the delta program of ``state`` reads the fact stream's rows, or this batch's version
    of a state that does."""
    steps = {s.state: s for s in query.engine.plan.delta}
    for node in steps[state].program.walk():
        if isinstance(node, DeltaScan) and node.table.lower() == "f":
            return True
        if (isinstance(node, StateScan) and node.version != "old" and node.state != state and node.state in steps
                and _reads_facts(query, node.state)):
            return True
    return False
