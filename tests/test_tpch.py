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

import datetime as dt
from decimal import Decimal

import pytest

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
def test_dataset_types(spark, tpch_dataset):
    """Spark reads the generated files with the TPC-H types (DECIMAL(15,2), DATE, …)."""
    tpch_data.check_spark_types(spark, tpch_dataset)
    m = tpch_dataset.manifest
    assert m["deleted_orders"] and m["deleted_lineitems"] > 0
    assert tpch_dataset.total_batches == BATCHES + 1


@pytest.mark.spark
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


# -- the comparison the oracle checks with (no Spark) ------------------------------------------------
def test_compare_decimals_up_to_their_last_place():
    # Spark rounds avg/quotients of decimals to 6 places; DuckDB answers in DOUBLE
    assert tpch.answer_difference([("A", Decimal("25.575155"))], [("A", 25.575154611454693)], None) is None
    assert tpch.answer_difference([("A", Decimal("25.575157"))], [("A", 25.575154611454693)], None) is not None
    assert tpch.answer_difference([("A", 1.0000000001)], [("A", 1.0)], None) is None
    assert tpch.answer_difference([(None,)], [(0,)], None) is not None
    assert tpch.answer_difference([(dt.date(1995, 1, 1),)], [(dt.datetime(1995, 1, 1),)], None) is None


def test_compare_bags_order_and_limit_ties():
    sql = "SELECT k, v FROM t ORDER BY v DESC, k LIMIT 2"
    spec = tpch.order_spec(sql)
    assert spec == tpch.OrderSpec(((1, True, False), (0, False, True)), True)
    expected = [(1, 30), (2, 20)]
    assert tpch.answer_difference([(2, 20), (1, 30)], expected, spec) is not None  # out of order
    assert tpch.answer_difference([(1, 30), (2, 20)], expected, spec) is None
    assert tpch.answer_difference([(1, 30), (3, 20)], expected, spec) is not None  # 3 is not a tie of 2
    tied = tpch.order_spec("SELECT k, v FROM t ORDER BY v DESC LIMIT 2")
    assert tpch.answer_difference([(1, 30), (3, 20)], expected, tied) is None  # 2 and 3 tie on v = 20
    assert tpch.answer_difference([(1, 30), (1, 30)], expected, tpch.order_spec("SELECT k, v FROM t")) is not None
    assert tpch.order_spec("SELECT k AS a, sum(v) AS s FROM t GROUP BY k ORDER BY s, 1").keys == \
        ((1, False, True), (0, False, True))
