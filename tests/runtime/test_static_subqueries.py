"""Scalar subqueries over static tables that are no aggregate, and queries whose sources are read
only inside subqueries (issue 59, item 6): after every batch, with deletions, the snapshot equals
DuckDB's answer on the prefix; a subquery's second row is Spark's error, at the first batch."""

from __future__ import annotations

import random

import pytest

import streamfold

from ..streams import Source, check_stream
from ..strategies import random_stream

pytestmark = [pytest.mark.spark]

R = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
T = Source("T", (("k", "INT"), ("name", "STRING")), static=True)
T_ROWS = [(1, "x"), (2, "y"), (2, "y"), (None, "z"), (4, None)]

QUERIES = [
    # TPC-DS's `(SELECT d_month_seq FROM date_dim WHERE d_year = … AND d_moy = …)`: one row
    ("one-row", "SELECT a, b FROM R WHERE a >= (SELECT k FROM T WHERE name = 'x') AND b IS NOT NULL", "RT"),
    # DISTINCT makes one row of two; no row is NULL; a NULL value is NULL
    ("distinct-none-null", "SELECT a, (SELECT DISTINCT k + 1 FROM T WHERE name = 'y') AS y, "
     "(SELECT k FROM T WHERE name = 'w') AS w, (SELECT k FROM T WHERE name = 'z') AS z FROM R", "RT"),
    # sources only inside subqueries: one row
    ("no-from", "SELECT 2 NOT IN (SELECT a FROM R) AS x, (SELECT count(*) FROM R WHERE b > 1) AS n, "
     "3 IN (SELECT k FROM T) AS s", "RT"),
    # TPC-DS Q44: GROUP BY a key the WHERE fixes to a constant is one group at most (a stream's)
    ("one-group", "SELECT a, b FROM R WHERE b > (SELECT avg(b) FROM R WHERE a = 1 GROUP BY a) - 1", "R"),
    ("one-group-none", "SELECT a, (SELECT max(b) FROM R WHERE a = 99 AND b IS NULL GROUP BY a) AS m FROM R", "R"),
    ("no-from-stream-only", "SELECT EXISTS (SELECT 1 FROM R WHERE a = b) AS e, (SELECT max(a) FROM R) AS m", "R"),
]


@pytest.mark.parametrize("qid,sql,uses", QUERIES, ids=[q[0] for q in QUERIES])
def test_static_subqueries_equal_duckdb(spark, tmp_path, qid, sql, uses):
    sources = [R, T] if "T" in uses else [R]
    batches = random_stream(random.Random(qid), [R], batches=2, max_rows=8, min_rows=2)
    run = check_stream(spark, str(tmp_path), sql, sources, batches, tables={"T": T_ROWS})
    assert run.batches == 2


def test_a_second_row_is_sparks_error(spark, tmp_path):
    sql = "SELECT a FROM R WHERE a = (SELECT k FROM T WHERE name = 'y' OR name = 'x')"
    with pytest.raises(streamfold.StreamfoldError) as e:
        check_stream(spark, str(tmp_path), sql, [R, T], [{"R": [(1, 1, 1)]}], tables={"T": T_ROWS})
    assert e.value.code == "BATCH_FAILED" and "SCALAR_SUBQUERY_TOO_MANY_ROWS" in str(e.value)


def test_a_stream_scalar_subquery_that_is_no_aggregate_stays_refused():
    with pytest.raises(streamfold.SqlError) as e:
        streamfold.compile("SELECT k FROM T WHERE k = (SELECT a FROM R WHERE b = 1)",
                           {"R": R.schema_sql(), "T": "k INT, name STRING"}, tables=["T"])
    assert e.value.code == "UNSUPPORTED_SUBQUERY"


@pytest.mark.parametrize("sub", ["SELECT count(*) FROM R WHERE a = 1 GROUP BY a",  # 0 or no row: differ
                                 "SELECT avg(b) FROM R WHERE a > 1 GROUP BY a",  # a key not fixed
                                 "SELECT a FROM R WHERE a = 1 GROUP BY a"])  # a key, not an aggregate
def test_a_grouped_stream_scalar_subquery_of_many_groups_or_a_count_stays_refused(sub):
    with pytest.raises(streamfold.SqlError) as e:
        streamfold.compile(f"SELECT a FROM R WHERE b > ({sub})", {"R": R.schema_sql()})
    assert e.value.code == "UNSUPPORTED_SUBQUERY"


def test_a_select_reading_no_table_is_refused():
    with pytest.raises(streamfold.SqlError) as e:
        streamfold.compile("SELECT 1 + 2", {"R": R.schema_sql()})
    assert e.value.code == "NO_FROM"
