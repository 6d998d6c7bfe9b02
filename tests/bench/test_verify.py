"""The one verification kit (``streamfold.verify``): its tolerance rule, bag and order checks, the
DuckDB oracle's netting of weighted rows, and the changes check. No Spark needed."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa

from streamfold.verify import (
    OrderSpec, changes_difference, compare, duckdb_answer, net_rows, order_of, same_value,
)


def test_numbers_equal_up_to_1e9_relative_or_a_decimals_last_place():
    assert same_value(0.1 + 0.2, 0.3) and same_value(1.0000000001, 1.0) and same_value(3, 3.0)
    assert not same_value(1.0, 1.0 + 1e-6)
    # Spark rounds avg/quotients of decimals to 6 places; DuckDB answers in DOUBLE
    assert same_value(Decimal("25.575155"), 25.575154611454693)
    assert not same_value(Decimal("25.575157"), 25.575154611454693)
    assert same_value(float("nan"), float("nan")) and not same_value(float("nan"), None)
    assert same_value(None, None) and not same_value(None, 0)


def test_a_midnight_timestamp_is_its_date_and_time_zones_are_dropped():
    assert same_value(dt.date(1995, 1, 1), dt.datetime(1995, 1, 1))
    assert not same_value(dt.date(1995, 1, 1), dt.datetime(1995, 1, 1, 12))
    assert same_value(dt.datetime(2020, 1, 1, 3, tzinfo=dt.timezone.utc), dt.datetime(2020, 1, 1, 3))


def test_answers_compare_as_bags():
    assert compare([(1, 0.1 + 0.2), (2, None)], [(2, None), (1, 0.3)]).matches
    assert not compare([(1, 1.0)], [(1, 1.0), (1, 1.0)]).matches
    check = compare([(1, 1.0)], [(1, 1.0 + 1e-6)])
    assert not check.matches and "not expected" in (check.detail or "")
    # near-equal rows that round to different sort keys still match
    assert compare([(0.1234565,), (2.0,)], [(2.0,), (0.12345649999999,)]).matches


def test_positional_and_order_by_checks():
    assert compare([(1,), (2,)], [(1,), (2,)], positional=True).matches
    assert not compare([(2,), (1,)], [(1,), (2,)], positional=True).matches
    spec = order_of("SELECT k, v FROM t ORDER BY v DESC, k LIMIT 2")
    assert spec == OrderSpec(((1, True, False), (0, False, True)), True)
    expected = [(1, 30), (2, 20)]
    assert not compare([(2, 20), (1, 30)], expected, spec).matches  # out of order
    assert compare([(1, 30), (2, 20)], expected, spec).matches
    assert not compare([(1, 30), (3, 20)], expected, spec).matches  # 3 is not a tie of 2
    tied = order_of("SELECT k, v FROM t ORDER BY v DESC LIMIT 2")
    assert compare([(1, 30), (3, 20)], expected, tied).matches  # 2 and 3 tie on v = 20
    assert order_of("SELECT k AS a, sum(v) AS s FROM t GROUP BY k ORDER BY s, 1").keys == \
        ((1, False, True), (0, False, True))


def test_decimals_of_one_answer_order_exactly():
    """51.82 and 51.84 are equal under the tolerance rule (a last place either way) but not tied
    in an ORDER BY: the rows below are in order (TPC-DS Q93, ``ORDER BY sumsales, ss_customer_sk``)."""
    spec = OrderSpec(((1, False, True), (0, False, True)), True)
    rows = [(767, Decimal("51.82")), (247, Decimal("51.84"))]
    assert compare(rows, rows, order=spec).matches
    assert not compare(rows[::-1], rows, order=spec).matches


def test_the_oracle_nets_weighted_rows():
    t = pa.table({"a": [1, 1, 2], "_weight": [1, 2, 1]})
    d = pa.table({"a": [1, 2], "_weight": [-1, -1]})
    assert sorted(net_rows([t, d]).column("a").to_pylist()) == [1, 1]
    assert duckdb_answer("SELECT a, count(*) FROM T GROUP BY a", {"T": [t, d]}) == [(1, 2)]
    assert duckdb_answer("SELECT count(*) FROM T", {"T": [pa.table({"a": [1, 2]})]}) == [(2,)]


def test_changes_are_the_snapshot_difference():
    before, after = [(1, "a"), (2, "b")], [(1, "a"), (3, "c"), (3, "c")]
    assert changes_difference(before, after, [(2, "b", -1), (3, "c", 2)]) is None
    assert changes_difference(before, after, [(3, "c", 2)]) is not None
    assert changes_difference(before, after, [(2, "b", -1), (3, "c", 2), (1, "a", 0)]) is not None
