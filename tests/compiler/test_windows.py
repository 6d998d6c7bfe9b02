"""OVER at compile time, without Spark: what each call binds to, which answer plan a window gets
(the touched partitions, or the whole window), and every refusal's code and parameters."""

from __future__ import annotations

import pytest

import streamfold
from streamfold.errors import SqlError, StreamfoldError
from streamfold.ir.window import Frame, FrameKind, WindowCall
from streamfold.plan.model import ChangeMode

SCHEMA = {"t": "g INT, v INT, w STRING, x DOUBLE, _weight BIGINT"}


def _plan(sql: str):
    return streamfold.compile(sql, SCHEMA)


def _calls(sql: str) -> list[WindowCall]:
    return [e for n in _plan(sql).answer.rows.walk() for _, e in getattr(n, "calls", ())]


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


@pytest.mark.parametrize("sql,mode,key", [
    ("SELECT g, v, rank() OVER (PARTITION BY g ORDER BY v) FROM t", ChangeMode.PARTITION, ("t.g",)),
    ("SELECT g, v, rank() OVER (PARTITION BY g, w ORDER BY v), sum(v) OVER (PARTITION BY w) FROM t",
     ChangeMode.PARTITION, ("t.w",)),
    ("SELECT g, v, rank() OVER (ORDER BY v) FROM t", ChangeMode.GLOBAL, ()),
    ("SELECT g, v, rank() OVER (PARTITION BY g ORDER BY v) r FROM t ORDER BY r LIMIT 3", ChangeMode.GLOBAL, ("t.g",)),
    ("SELECT g, w, count(*), rank() OVER (PARTITION BY g ORDER BY count(*)) FROM t GROUP BY g, w",
     ChangeMode.PARTITION, ("t.g",)),
    ("SELECT g, sum(v), rank() OVER (ORDER BY sum(v) DESC) FROM t GROUP BY g", ChangeMode.GLOBAL, ()),
    ("SELECT * FROM (SELECT g, v, w, row_number() OVER (PARTITION BY g ORDER BY v, w) rn FROM t) s WHERE rn <= 2",
     ChangeMode.PARTITION, ("t.g",)),
])
def test_changes_come_from_the_touched_partitions_when_every_call_shares_one(sql, mode, key):
    answer = _plan(sql).answer
    assert answer.changes == mode
    if mode == ChangeMode.PARTITION:
        assert answer.touched_key == key


def test_ties_matter_only_for_columns_the_query_reads():
    # w is not read: rows tying on (g, v) are equal in what the answer shows
    _plan("SELECT g, v, row_number() OVER (PARTITION BY g ORDER BY v) FROM t")
    # an aggregate's rows differ in their group key: ordering by it makes the order total
    _plan("SELECT g, sum(v), row_number() OVER (ORDER BY sum(v), g) FROM t GROUP BY g")
    with pytest.raises(StreamfoldError) as e:
        _plan("SELECT g, sum(v), row_number() OVER (ORDER BY sum(v)) FROM t GROUP BY g")
    assert e.value.code == "WINDOW_ORDER_NOT_TOTAL" and e.value.params["columns"] == ["g"]


@pytest.mark.parametrize("sql,code", [
    ("SELECT g, w, lag(v) OVER (PARTITION BY g ORDER BY v) FROM t", "WINDOW_ORDER_NOT_TOTAL"),
    ("SELECT g, w, sum(v) OVER (PARTITION BY g ORDER BY v ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t",
     "WINDOW_ORDER_NOT_TOTAL"),
    ("SELECT g, w, ntile(2) OVER (ORDER BY v) FROM t", "WINDOW_ORDER_NOT_TOTAL"),
    ("SELECT g, row_number() OVER (PARTITION BY g) FROM t", "WINDOW_NEEDS_ORDER"),
    ("SELECT g, rank() OVER (ORDER BY v ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t", "WINDOW_FRAME_NOT_ALLOWED"),
    ("SELECT g, sum(v) OVER (ORDER BY w RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) FROM t", "INVALID_WINDOW_FRAME"),
    ("SELECT g, sum(v) OVER w FROM t WINDOW w AS (PARTITION BY g)", "UNSUPPORTED_WINDOW"),
    ("SELECT g, count(DISTINCT v) OVER (PARTITION BY g) FROM t", "UNSUPPORTED_WINDOW"),
    ("SELECT g, first_value(v) IGNORE NULLS OVER (PARTITION BY g ORDER BY v) FROM t", "UNSUPPORTED_WINDOW"),
    ("SELECT g, stddev(v) OVER (PARTITION BY g) FROM t", "UNSUPPORTED_WINDOW"),
    ("SELECT g FROM t GROUP BY g HAVING rank() OVER (ORDER BY g) = 1", "UNSUPPORTED_WINDOW"),
    ("SELECT g, sum(v) OVER (PARTITION BY g) FROM t GROUP BY g", "NOT_AGGREGATED"),
    ("SELECT DISTINCT g, rank() OVER (PARTITION BY g ORDER BY v) FROM t", "UNSUPPORTED_WINDOW"),
    ("SELECT a.g, b.r FROM t a JOIN (SELECT g, rank() OVER (ORDER BY v) r FROM t) b ON a.g = b.g",
     "UNSUPPORTED_WINDOW"),
])
def test_refusals_are_coded(sql, code):
    with pytest.raises(StreamfoldError) as e:
        _plan(sql)
    assert e.value.code == code, str(e.value)
    if isinstance(e.value, SqlError):
        assert e.value.hint
