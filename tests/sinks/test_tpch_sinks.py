"""TPC-H Q1, Q3 and Q18 delivered to a PostgreSQL table and a Delta table at once: after every
batch (three of insertions, then one deleting 5 % of the orders with their line items) both
tables equal DuckDB's answer on the prefix — a grouped aggregate over decimals, a three-way join
under a top-10, and a top-100 over an IN subquery with HAVING."""

from __future__ import annotations

import uuid

import pytest

from streamfold.bench.tpch import data as tpch_data
from streamfold.bench.tpch import run as tpch

from .oracle import sinks_difference

pytestmark = [pytest.mark.spark]


@pytest.fixture(scope="module")
def tpch_dataset(tmp_path_factory):
    return tpch_data.ensure(str(tmp_path_factory.getbasetemp() / "tpch-data"), sf=0.01, batches=3,
                            log=lambda msg: None)


@pytest.mark.parametrize("name", ["q01", "q03", "q18"])
def test_both_sinks_equal_duckdb_after_every_batch(name, spark, tpch_dataset, tmp_path, postgres):
    table, delta = f"{name}_{uuid.uuid4().hex[:8]}", str(tmp_path / "delta" / name)
    conn = postgres.connect()
    checked = []

    def after(batch: int, expected: list[tuple]) -> None:
        difference = sinks_difference(expected, conn, table, delta)
        assert difference is None, f"{name} batch {batch}: {difference}"
        checked.append(batch)

    record = tpch.run_query(name, tpch_dataset, spark, str(tmp_path), recompute=False, partitions=2,
                            log=lambda msg: None, options={"sinks": [postgres.url(table), f"{delta}:delta"]},
                            after_batch=after)
    conn.close()
    assert record.status == "passes", record.summary()
    assert checked == list(range(tpch_dataset.total_batches))
