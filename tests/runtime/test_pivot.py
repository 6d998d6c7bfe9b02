"""``PIVOT`` as the grouped query Spark evaluates it as (``sql/bind/pivot.py``): after every batch,
with deletions, NULL pivot values and groups that lack a value, the snapshot equals DuckDB's
conditional aggregates on the prefix — a count NULL where the group has no row of the value when
every aggregate is a number (Spark's two-step form), 0 when one is not (its one-step form) — and a
recompute, Spark's own PIVOT, gives the same; output columns are named as Spark names them."""

from __future__ import annotations

import pytest

import streamfold

from ..streams import Source, assert_refused, check_seeded

R = Source("R", (("a", "INT"), ("b", "INT"), ("s", "STRING"), ("c", "DOUBLE")), weighted=True)


def _when(column: str, value: str) -> str:
    return f"FILTER (WHERE {column} IS NOT DISTINCT FROM {value})"


def _counted(column: str, value: str) -> str:
    """DuckDB's count(*) of a value's rows, NULL where there are none."""
    return f"CASE WHEN count(*) {_when(column, value)} > 0 THEN count(*) {_when(column, value)} END"


QUERIES = [
    ("numbers",
     "SELECT * FROM (SELECT a, s, b FROM R) PIVOT (sum(b) AS total, count(*) AS n FOR s IN ('a', 'b' AS bee, NULL))",
     "SELECT a, " + ", ".join(f"CASE WHEN count(*) {_when('s', v)} > 0 THEN sum(b) {_when('s', v)} END, {_counted('s', v)}"
                              for v in ("'a'", "'b'", "NULL")) + " FROM R GROUP BY a",
     ("a", "a_total", "a_n", "bee_total", "bee_n", "null_total", "null_n")),
    ("a string aggregate",
     "SELECT * FROM (SELECT a, s, b FROM R) PIVOT (max(s) AS m, count(b) AS n FOR b IN (1, 2)) AS p WHERE p.a > 0",
     "SELECT a, " + ", ".join(f"max(s) {_when('b', v)}, count(b) {_when('b', v)}" for v in ("1", "2"))
     + " FROM R WHERE a > 0 GROUP BY a",
     ("a", "1_m", "1_n", "2_m", "2_n")),
    ("a whole table, global",
     "SELECT * FROM (SELECT a, c FROM R) PIVOT (avg(c) FOR a IN (1, 2, 3))",
     "SELECT " + ", ".join(f"CASE WHEN count(*) {_when('a', v)} > 0 THEN avg(c) {_when('a', v)} END" for v in "123")
     + " FROM R",
     ("1", "2", "3")),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle,names", QUERIES, ids=[q[0] for q in QUERIES])
def test_pivot_equals_duckdb(spark, tmp_path, qid, sql, oracle, names):
    assert streamfold.compile(sql, {"R": R.schema_sql()}).answer.output == names
    run = check_seeded(spark, str(tmp_path), f"pivot-{qid}", sql, [R], oracle, batches=4)
    assert any(run.snapshots), "no row ever answered: the test would prove nothing"


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle,names", QUERIES[:2], ids=[q[0] for q in QUERIES[:2]])
def test_a_pivot_recomputed_is_sparks_own(spark, tmp_path, qid, sql, oracle, names):
    check_seeded(spark, str(tmp_path), f"pivot-recomputed-{qid}", sql, [R], oracle, batches=3, strategy="recompute")


def test_pivots_spark_names_otherwise_are_refused():
    assert_refused([
        ("SELECT * FROM (SELECT a, s, b FROM R) PIVOT (sum(b), count(*) FOR s IN ('a', 'b'))", "UNSUPPORTED_CLAUSE"),
        ("SELECT * FROM (SELECT a, s, b FROM R) PIVOT (sum(b) FOR s IN (upper('a')))", "UNSUPPORTED_CLAUSE"),
        ("SELECT * FROM (SELECT a, s, b FROM R) PIVOT (sum(b) FOR (s, a) IN (('a', 1)))", "UNSUPPORTED_CLAUSE"),
    ], {"R": R.schema_sql()})
