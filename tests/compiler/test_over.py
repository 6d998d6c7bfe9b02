"""OVER at compile time, without Spark: what each call binds to, how a window's input is kept
(partitioned for the touched partitions, or one partition), and every refusal's code and parameters."""

from __future__ import annotations

from decimal import Decimal

import pytest

import streamfold
from streamfold.errors import SqlError, StreamfoldError
from streamfold.ir.window import Frame, FrameKind, Window, WindowCall

SCHEMA = {"t": "g INT, v INT, w STRING, x DOUBLE, _weight BIGINT"}


def _plan(sql: str):
    return streamfold.compile(sql, SCHEMA)


def _calls(sql: str) -> list[WindowCall]:
    plan = _plan(sql)
    programs = [step.program for step in plan.delta if hasattr(step, "program")]
    return list(dict.fromkeys(c for p in programs for n in p.walk() if isinstance(n, Window) for _, c in n.calls))


@pytest.mark.parametrize("sql,fn,frame,sensitive", [
    ("rank() OVER (PARTITION BY g ORDER BY v)", "rank", Frame(FrameKind.ROWS, None, 0), False),
    ("cume_dist() OVER (ORDER BY v)", "cume_dist", Frame(FrameKind.ROWS, None, 0), False),
    ("sum(v) OVER (PARTITION BY g ORDER BY v)", "sum", Frame(FrameKind.RANGE, None, 0), False),
    ("sum(v) OVER (PARTITION BY g)", "sum", Frame(FrameKind.ROWS, None, None), False),
    ("max(v) OVER (ORDER BY v RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING)", "max", Frame(FrameKind.RANGE, -2, 1), False),
    ("avg(v) OVER (ORDER BY v, g ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)", "avg",
     Frame(FrameKind.ROWS, None, None), False),
    ("count(*) OVER (ORDER BY v, g ROWS BETWEEN 3 PRECEDING AND CURRENT ROW)", "count", Frame(FrameKind.ROWS, -3, 0), True),
    ("lag(v, 2, 0) OVER (PARTITION BY g ORDER BY v)", "lag", Frame(FrameKind.ROWS, None, 0), True),
    ("first_value(v) OVER (PARTITION BY g ORDER BY v)", "first_value", Frame(FrameKind.RANGE, None, 0), True),
])
def test_each_call_binds_with_spark_default_frame_and_its_order_sensitivity(sql, fn, frame, sensitive):
    (call,) = _calls(f"SELECT g, v, {sql} AS y FROM t")
    assert (call.fn, call.effective_frame, call.order_sensitive) == (fn, frame, sensitive)


def test_types_follow_spark():
    calls = _calls("SELECT g, v, row_number() OVER (ORDER BY g, v, w) a, percent_rank() OVER (ORDER BY v) b, "
                   "sum(v) OVER (PARTITION BY g) c, avg(v) OVER (PARTITION BY g) d, lead(w) OVER (ORDER BY g, v, w) e FROM t "
                   )
    assert [c.type.sql() for c in calls] == ["INT", "DOUBLE", "BIGINT", "DOUBLE", "STRING"]


TIMED = {"t": "g INT, v INT, d DATE, ts TIMESTAMP, _weight BIGINT"}


@pytest.mark.parametrize("frame,bound,text", [
    ("ORDER BY d RANGE BETWEEN INTERVAL 7 DAYS PRECEDING AND CURRENT ROW", Frame(FrameKind.RANGE, -7, 0, "day"),
     "INTERVAL '7' DAY PRECEDING AND CURRENT ROW"),
    ("ORDER BY d RANGE BETWEEN 7 PRECEDING AND 1 FOLLOWING", Frame(FrameKind.RANGE, -7, 1), "7 PRECEDING"),
    ("ORDER BY d RANGE BETWEEN INTERVAL 1 WEEK PRECEDING AND INTERVAL '2' DAY FOLLOWING",
     Frame(FrameKind.RANGE, -7, 2, "day"), "INTERVAL '7' DAY PRECEDING AND INTERVAL '2' DAY FOLLOWING"),
    ("ORDER BY d DESC RANGE BETWEEN INTERVAL '1-2' YEAR TO MONTH PRECEDING AND CURRENT ROW",
     Frame(FrameKind.RANGE, -14, 0, "month"), "INTERVAL '14' MONTH"),
    ("ORDER BY ts RANGE BETWEEN INTERVAL 90 MINUTES PRECEDING AND INTERVAL 1 MINUTE FOLLOWING",
     Frame(FrameKind.RANGE, -5_400_000_000, 60_000_000, "microsecond"),
     "INTERVAL '90' MINUTE PRECEDING AND INTERVAL '1' MINUTE FOLLOWING"),
    ("ORDER BY ts RANGE BETWEEN INTERVAL '1 02:00:00' DAY TO SECOND PRECEDING AND CURRENT ROW",
     Frame(FrameKind.RANGE, -93_600_000_000, 0, "microsecond"), "INTERVAL '26' HOUR"),
    ("ORDER BY ts RANGE BETWEEN UNBOUNDED PRECEDING AND INTERVAL 1 DAY 2 HOURS FOLLOWING",
     Frame(FrameKind.RANGE, None, 93_600_000_000, "microsecond"), "INTERVAL '26' HOUR FOLLOWING"),
    ("ORDER BY ts RANGE BETWEEN INTERVAL 1 MONTH PRECEDING AND CURRENT ROW", Frame(FrameKind.RANGE, -1, 0, "month"),
     "INTERVAL '1' MONTH"),
    ("ORDER BY v RANGE BETWEEN 0.5 PRECEDING AND 2 FOLLOWING", Frame(FrameKind.RANGE, Decimal("-0.5"), 2),
     "0.5 PRECEDING AND 2 FOLLOWING"),
])
def test_range_frames_over_dates_and_timestamps_move_by_days_months_or_microseconds(frame, bound, text):
    """As Spark takes them: a DATE moves by days (a number or whole-day intervals) or months, a
    TIMESTAMP by any interval; written back as intervals of one unit (Spark needs one type)."""
    plan = streamfold.compile(f"SELECT g, v, d, ts, sum(v) OVER (PARTITION BY g {frame}) AS y FROM t", TIMED)
    calls = [c for s in plan.delta if hasattr(s, "program") for n in s.program.walk() if isinstance(n, Window)
             for _, c in n.calls]
    assert calls[0].frame == bound
    assert text in bound.sql()


@pytest.mark.parametrize("frame,hint", [
    ("ORDER BY d RANGE BETWEEN INTERVAL 36 HOURS PRECEDING AND CURRENT ROW", "INTERVAL n DAYS"),
    ("ORDER BY ts RANGE BETWEEN 1 PRECEDING AND CURRENT ROW", "INTERVAL 1 HOUR"),
    ("ORDER BY v RANGE BETWEEN INTERVAL 1 DAY PRECEDING AND CURRENT ROW", "as a number"),
    ("ORDER BY ts RANGE BETWEEN INTERVAL 90 MINUTES PRECEDING AND INTERVAL 1 HOUR FOLLOWING", "one unit"),
    ("ORDER BY d RANGE BETWEEN INTERVAL 1 DAY PRECEDING AND 2 FOLLOWING", "one unit"),
    ("ORDER BY d RANGE BETWEEN INTERVAL 1 MONTH 2 DAYS PRECEDING AND CURRENT ROW", "in months"),
    ("ORDER BY d, v RANGE BETWEEN INTERVAL 1 DAY PRECEDING AND CURRENT ROW", "one number, date or timestamp"),
    ("ORDER BY d, v ROWS BETWEEN INTERVAL 1 DAY PRECEDING AND CURRENT ROW", "RANGE BETWEEN INTERVAL"),
    ("ORDER BY d, v, ts ROWS BETWEEN 1.5 PRECEDING AND CURRENT ROW", "a whole number"),
])
def test_range_frames_spark_refuses_are_refused_with_a_hint(frame, hint):
    with pytest.raises(StreamfoldError) as e:
        streamfold.compile(f"SELECT g, v, d, ts, sum(v) OVER (PARTITION BY g {frame}) AS y FROM t", TIMED)
    assert e.value.code in ("INVALID_WINDOW_FRAME", "UNSUPPORTED_WINDOW") and hint in e.value.hint, str(e.value)


@pytest.mark.parametrize("sql,partition", [
    ("SELECT g, v, rank() OVER (PARTITION BY g ORDER BY v) FROM t", ("t.g",)),
    ("SELECT g, v, rank() OVER (PARTITION BY g, w ORDER BY v), sum(v) OVER (PARTITION BY w) FROM t", ("t.w",)),
    # (one partition: running functions key it by a constant, for its summary; the rest by nothing)
    ("SELECT g, v, rank() OVER (ORDER BY v) FROM t", ("_sfx#all",)),
    ("SELECT g, v, percent_rank() OVER (ORDER BY v) FROM t", None),
    ("SELECT g, v, rank() OVER (PARTITION BY g ORDER BY v) r FROM t ORDER BY r LIMIT 3", ("t.g",)),
    ("SELECT g, w, count(*), rank() OVER (PARTITION BY g ORDER BY count(*)) FROM t GROUP BY g, w", ("t.g",)),
    ("SELECT g, sum(v), rank() OVER (ORDER BY sum(v) DESC) FROM t GROUP BY g", ("_sfx#all",)),
    ("SELECT * FROM (SELECT g, v, w, row_number() OVER (PARTITION BY g ORDER BY v, w) rn FROM t) s WHERE rn <= 2",
     ("t.g",)),
    ("SELECT r, count(*) FROM (SELECT g, rank() OVER (PARTITION BY g ORDER BY v) r FROM t) s GROUP BY r", ("t.g",)),
])
def test_the_window_input_is_a_state_partitioned_on_the_partition_by_every_call_shares(sql, partition):
    """A nullable partition column is kept as its NULL-free key (IS NULL, coalesce), on which the
    state is hash-partitioned."""
    plan = _plan(sql)
    (state,) = [s for s in plan.states if s.name.startswith("win")]
    keyed = tuple(k for p in partition for k in ((p + "#null", p + "#value") if p.startswith("t.") else (p,))) \
        if partition else None
    assert state.partition == keyed
    # (the general rule's note, the running functions' of plan/rules_window_suffix.py, or a top-k's
    # of plan/rules_topk_reserve.py)
    touched = ("partitions it touched", "each touched partition", "the touched partitions'") \
        if partition and partition[0].startswith("t.") \
        else ("one partition",)
    assert any(n.startswith("OVER:") and any(t in n for t in touched) for n in plan.notes)


def test_ties_matter_only_for_columns_the_query_reads():
    # w is not read: rows tying on (g, v) are equal in what the answer shows
    _plan("SELECT g, v, row_number() OVER (PARTITION BY g ORDER BY v) FROM t")
    # a floating-point sum in a total order, or of decimals, adds its rows in one order
    _plan("SELECT g, sum(x) OVER (PARTITION BY g ORDER BY x) FROM t")
    _plan("SELECT g, avg(CAST(x AS DECIMAL(10, 2))) OVER (PARTITION BY g) FROM t")
    # an aggregate's rows differ in their group key: ordering by it makes the order total
    _plan("SELECT g, sum(v), row_number() OVER (ORDER BY sum(v), g) FROM t GROUP BY g")
    with pytest.raises(StreamfoldError) as e:
        _plan("SELECT g, sum(v), row_number() OVER (ORDER BY sum(v)) FROM t GROUP BY g")
    assert e.value.code == "WINDOW_ORDER_NOT_TOTAL" and e.value.params["columns"] == ["g"]


def test_an_inner_joins_equality_covers_the_other_column():
    """``T JOIN U ON t.g = u.k``: a row's ``u.k`` is its ``t.g``, so ordering by ``t.g`` orders by
    both; an outer join's ``u.k`` may be NULL instead, and stays a column to order by."""
    schema = {**SCHEMA, "u": "k INT, name STRING"}
    joined = ("SELECT g, v, k, rn FROM (SELECT t.g, t.v, u.k, row_number() OVER (PARTITION BY t.g ORDER BY t.v) AS rn "
              "FROM t {} u ON t.g = u.k) s WHERE rn <= 2")
    streamfold.compile(joined.format("JOIN"), schema)
    with pytest.raises(StreamfoldError) as e:
        streamfold.compile(joined.format("LEFT JOIN"), schema)
    assert e.value.code == "WINDOW_ORDER_NOT_TOTAL" and e.value.params["columns"] == ["k"]
    with pytest.raises(StreamfoldError) as e:  # u.name is read and equal to nothing ordered
        streamfold.compile(joined.format("JOIN").replace("u.k,", "u.k, u.name,").replace("k, rn FROM", "k, name, rn FROM"),
                           schema)
    assert e.value.code == "WINDOW_ORDER_NOT_TOTAL" and e.value.params["columns"] == ["name"]


@pytest.mark.parametrize("sql,code", [
    ("SELECT g, w, lag(v) OVER (PARTITION BY g ORDER BY v) FROM t", "WINDOW_ORDER_NOT_TOTAL"),
    ("SELECT g, w, sum(v) OVER (PARTITION BY g ORDER BY v ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t",
     "WINDOW_ORDER_NOT_TOTAL"),
    ("SELECT g, w, ntile(2) OVER (ORDER BY v) FROM t", "WINDOW_ORDER_NOT_TOTAL"),
    ("SELECT g, avg(x) OVER (PARTITION BY g) FROM t", "WINDOW_ORDER_NOT_TOTAL"),
    ("SELECT g, row_number() OVER (PARTITION BY g) FROM t", "WINDOW_NEEDS_ORDER"),
    ("SELECT g, rank() OVER (ORDER BY v ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t", "WINDOW_FRAME_NOT_ALLOWED"),
    ("SELECT g, sum(v) OVER (ORDER BY w RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t", "INVALID_WINDOW_FRAME"),
    ("SELECT g, sum(v) OVER (w ORDER BY v) FROM t WINDOW w AS (PARTITION BY g)", "INVALID_WINDOW"),
    ("SELECT g, count(DISTINCT v) OVER (PARTITION BY g) FROM t", "UNSUPPORTED_WINDOW"),
    ("SELECT g, first_value(v) IGNORE NULLS OVER (PARTITION BY g ORDER BY v) FROM t", "UNSUPPORTED_WINDOW"),
    ("SELECT g, stddev(v) OVER (PARTITION BY g) FROM t", "UNSUPPORTED_WINDOW"),
    ("SELECT g FROM t GROUP BY g HAVING rank() OVER (ORDER BY g) = 1", "UNSUPPORTED_WINDOW"),
    ("SELECT g, sum(v) OVER (PARTITION BY g) FROM t GROUP BY g", "NOT_AGGREGATED"),
])
def test_refusals_are_coded(sql, code):
    with pytest.raises(StreamfoldError) as e:
        _plan(sql)
    assert e.value.code == code, str(e.value)
    if isinstance(e.value, SqlError):
        assert e.value.hint
