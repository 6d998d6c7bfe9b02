"""TPC-H as a coverage yardstick: every query either passes the DuckDB oracle after every batch or
is refused with the coded error this file expects.

SF 0.01 from ``tpchgen-cli``, generated once per session: ``lineitem`` and ``orders`` in three
batches by order key, then a batch deleting 5 % of the orders (and the three largest) with
their line items; Q2, Q11 and Q16 stream ``partsupp`` instead (see streamfold/bench/tpch/data.py).
The checks are those of ``streamfold/bench/tpch/run.py``, which also times the batches.

When a feature lands and a query starts passing, its test fails with "update
EXPECTED_REFUSALS": delete its entry. A query streamfold compiles but answers wrongly fails
with the batch and the first difference.
"""

from __future__ import annotations

import os

import pytest

import streamfold

from streamfold.bench.tpch import data as tpch_data
from streamfold.bench.tpch import run as tpch

# Queries streamfold refuses today, with the code it refuses them with, e.g.
# "q21": "UNSUPPORTED_SUBQUERY". Since subqueries and outer joins landed (039d5ea) it compiles all 22.
EXPECTED_REFUSALS: dict[str, str] = {}

SF = 0.01
BATCHES = 3  # insert batches; the deletion batch follows


@pytest.fixture(scope="session")
def tpch_dataset(tmp_path_factory):
    return tpch_data.ensure(str(tmp_path_factory.getbasetemp() / "tpch-data"), sf=SF, batches=BATCHES,
                            log=lambda msg: None)


@pytest.mark.spark
@pytest.mark.slow
def test_dataset_types(spark, tpch_dataset):
    """Spark reads the generated files with the TPC-H types (DECIMAL(15,2), DATE, …)."""
    tpch_data.check_spark_types(spark, tpch_dataset)
    m = tpch_dataset.manifest
    assert m["deleted_orders"] and m["deleted_lineitems"] > 0
    assert tpch_dataset.total_batches == BATCHES + 1


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("name", tpch.ALL_QUERIES)
def test_tpch_query(name, spark, tpch_dataset, tmp_path):
    lines: list[str] = []
    record = tpch.run_query(name, tpch_dataset, spark, str(tmp_path), recompute=False, partitions=2,
                            log=lines.append)
    expected = EXPECTED_REFUSALS.get(name)
    if record.status == "refused":
        assert expected is not None, (
            f"{name} is refused with [{record.code}] {record.message} but is expected to pass")
        assert record.code == expected, (
            f"{name} is refused with [{record.code}] {record.message}, expected {expected}: "
            f"update EXPECTED_REFUSALS if the change is deliberate")
        assert record.message, "a refusal must say what it refuses"
        return
    assert record.status == "passes", (
        f"{name} {record.status} [{record.code or ''}]: {record.first_difference or record.message}\n"
        + "\n".join(lines))
    assert len(record.batches) == tpch_dataset.total_batches
    assert expected is None, (
        f"{name} now passes every batch (it was refused with {expected}): update EXPECTED_REFUSALS")


@pytest.mark.spark
@pytest.mark.slow
def test_a_replayed_batch_compiles_no_generated_code(spark, tmp_path_factory, tmp_path):
    """Q21's prepared job needs more generated classes than Spark's default code cache holds
    (100): each batch evicted the classes of the one before and compiled them all again, and the
    JIT compiled the new classes again (~100 compilations a batch, a third of a warm batch's CPU
    at SF 1). With room for a run's plans (runtime/session.py) a replayed batch compiles none
    (with ``STREAMFOLD_CODEGEN_CACHE=100``, Spark's default, this fails: 102, 265, 119, 120 a batch)."""
    data = tpch_data.ensure(str(tmp_path_factory.getbasetemp() / "tpch-data"), sf=SF, batches=4, increment=0.01,
                            log=lambda msg: None)  # a history, then batches of 1 % of the orders
    sql = tpch.load_query("q21")
    streams = list(tpch_data.streams_for(tpch.tables_read(sql)))
    statics = sorted(tpch.tables_read(sql) - set(streams))
    dirs = {t: tmp_path / "in" / t for t in streams}
    for d in dirs.values():
        d.mkdir(parents=True)
    q = streamfold.start(sql, {t: str(d) for t, d in dirs.items()}, str(tmp_path / "out"), spark=spark,
                         tables={t: data.table_path(t) for t in statics}, background=False,
                         schemas={t: tpch_data.schema_sql(t, t in streams) for t in streams + statics},
                         strategy="incremental", partitions=2)
    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    compiled = []
    try:
        for b in range(4):
            for t in streams:
                os.link(data.batch_path(t, b), dirs[t] / f"{b:06d}.parquet")
            before = metrics.getCount()
            assert q.process_available() is not None
            compiled.append(metrics.getCount() - before)
        modes = [q.commit(b).get("prepared") for b in range(4)]
    finally:
        q.stop()
    assert modes[-1] == "replay", modes
    assert compiled[-1] == 0, f"compilations per batch {compiled} ({modes})"
