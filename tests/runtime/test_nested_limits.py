"""``ORDER BY … LIMIT`` inside a subquery, a CTE or a derived table (``passes.nested_limits``): a
filter on each row's number in that order, maintained by the top-k rules; and a scalar subquery
``(SELECT v … ORDER BY … LIMIT 1)``, the first row per correlation key (``passes.first_row``). For random data with
NULLs and ties, deletions and random batch splits, every snapshot and every changes file equals
DuckDB's answer on the prefix; an ORDER BY that leaves ties, or none, is refused."""

from __future__ import annotations

import pytest

import streamfold

from ..streams import Source, assert_refused, check_seeded
from .test_differential import R_COLS, S_COLS

pytestmark = [pytest.mark.spark]

R = Source("R", R_COLS)
RW = Source("R", R_COLS, weighted=True)
S = Source("S", S_COLS)

QUERIES = [
    ("top-groups-joined",
     "SELECT t.a, t.n, S.v FROM (SELECT a, count(*) AS n FROM R GROUP BY a ORDER BY n DESC, a LIMIT 3) t "
     "JOIN S ON S.k = t.a", [RW, S]),
    ("offset-then-aggregated",
     "SELECT count(*) AS n, sum(b) AS t FROM (SELECT a, b, c, s, d FROM R ORDER BY b DESC, a, c, s, d "
     "LIMIT 4 OFFSET 1) t", [R]),
    ("offset-over-deletions",
     "SELECT count(*) AS n, sum(b) AS t FROM (SELECT a, b, c, s, d FROM R ORDER BY b DESC, a, c, s, d "
     "LIMIT 4 OFFSET 1) t", [RW]),
    ("in-subquery",
     "SELECT * FROM S WHERE k IN (SELECT a FROM R ORDER BY b DESC NULLS FIRST, a, c, s, d LIMIT 3)", [RW, S]),
    ("cte-read-twice-under-the-querys-own-limit",
     "WITH top AS (SELECT s, count(*) AS n FROM R GROUP BY s ORDER BY n DESC, s LIMIT 2) "
     "SELECT x.s, y.s AS s2 FROM top x JOIN top y ON x.n >= y.n ORDER BY x.s, s2 LIMIT 3", [RW]),
]


FIRST_ROWS = [
    ("correlated-with-itself",
     "SELECT a, b, (SELECT b FROM R r2 WHERE r2.a = r.a ORDER BY b DESC LIMIT 1) AS top FROM R r", [RW]),
    ("correlated-nulls-first-and-a-tie-breaker",
     "SELECT k, (SELECT c FROM R WHERE R.a = t.k ORDER BY b DESC NULLS FIRST, c LIMIT 1) AS first_c FROM S t",
     [RW, S]),
    ("uncorrelated-in-where",
     "SELECT k, v FROM S WHERE v = (SELECT b FROM R ORDER BY b DESC NULLS LAST LIMIT 1)", [RW, S]),
]


@pytest.mark.parametrize("qid,sql,sources", FIRST_ROWS, ids=[q[0] for q in FIRST_ROWS])
def test_a_scalar_subquery_of_its_first_row_equals_duckdb(spark, tmp_path, qid, sql, sources):
    check_seeded(spark, str(tmp_path), f"first-row-{qid}", sql, sources, None, batches=5)


@pytest.mark.parametrize("qid,sql,sources", QUERIES, ids=[q[0] for q in QUERIES])
def test_a_limit_inside_a_subquery_equals_duckdb(spark, tmp_path, qid, sql, sources):
    explained = streamfold.explain(sql, {s.name: s.schema_sql() for s in sources})
    assert "row_number() OVER (ORDER BY" in explained, explained
    check_seeded(spark, str(tmp_path), f"nested-limit-{qid}", sql, sources, None, batches=5)


def test_limit_zero_keeps_no_row_and_no_state(spark, tmp_path):
    sql = "SELECT count(*) AS n FROM (SELECT a FROM R ORDER BY b LIMIT 0) t"
    assert "row_number" not in streamfold.explain(sql, {"R": RW.schema_sql()})
    check_seeded(spark, str(tmp_path), "nested-limit-zero", sql, [RW], None, batches=3)


def test_a_limit_that_keeps_arbitrary_rows_is_refused():
    assert_refused([
        ("SELECT count(*) FROM (SELECT a, b FROM R ORDER BY b LIMIT 2) t", "LIMIT_ORDER_NOT_TOTAL"),
        ("SELECT * FROM S WHERE k IN (SELECT a FROM R ORDER BY b LIMIT 2)", "LIMIT_ORDER_NOT_TOTAL"),
        ("SELECT count(*) FROM (SELECT a FROM R LIMIT 2) t", "LIMIT_WITHOUT_ORDER"),
        ("SELECT k, (SELECT b FROM R WHERE R.a = t.k ORDER BY c LIMIT 1) AS x FROM S t", "LIMIT_ORDER_NOT_TOTAL"),
        ("SELECT k, (SELECT b FROM R WHERE R.a < t.k ORDER BY b LIMIT 1) AS x FROM S t", "UNSUPPORTED_SUBQUERY"),
    ], {"R": RW.schema_sql(), "S": S.schema_sql()})
