"""Generators of rows with several columns (``sql/bind/row_generators.py``): ``inline`` and
``inline_outer`` of an array of structs, ``stack`` and ``json_tuple``, in a LATERAL VIEW, a
LATERAL join and the select list — after every batch, with deletions and NULLs, the snapshot
equals DuckDB's answer written as one SELECT per generated row (UNION ALL)."""

from __future__ import annotations

import pytest

import streamfold

from ..streams import Source, assert_refused, check_seeded

R = Source("R", (("k", "INT"), ("a", "INT"), ("b", "INT"), ("s", "STRING")), weighted=True)

_JSON = ("concat('{\"a\":', coalesce(CAST(a AS STRING), 'null'), ',\"s\":', "
         "CASE WHEN s IS NULL THEN 'null' ELSE concat('\"', s, '\"') END, '}')")

CASES = [
    ("inline in a lateral view, outer",
     "SELECT k, t.x, t.y FROM R LATERAL VIEW OUTER inline(filter(array(named_struct('x', a, 'y', s), "
     "named_struct('x', b, 'y', 'z')), p -> coalesce(a <= 2, true))) t AS x, y",
     "SELECT k, a, s FROM R WHERE NOT coalesce(a > 2, false) UNION ALL SELECT k, b, 'z' FROM R "
     "WHERE NOT coalesce(a > 2, false) UNION ALL SELECT k, NULL, NULL FROM R WHERE a > 2"),
    ("stack grouped",
     "SELECT t.col0 AS side, sum(t.col1) AS total, count(*) AS n FROM R LATERAL VIEW stack(2, 'a', a, 'b', b) t "
     "GROUP BY t.col0",
     "SELECT side, sum(v), count(*) FROM (SELECT 'a' AS side, a AS v FROM R UNION ALL SELECT 'b', b FROM R) "
     "GROUP BY side"),
    ("stack padded, in the select list",
     "SELECT stack(2, k, a, b) AS (x, y) FROM R",
     "SELECT k, a FROM R UNION ALL SELECT b, NULL FROM R"),
    ("json_tuple, lateral join",
     f"SELECT k, j.c0 AS ja, j.c1 AS js, j.c2 AS missing FROM (SELECT k, {_JSON} AS doc FROM R) AS d, "
     "LATERAL json_tuple(d.doc, 'a', 's', 'x') AS j",
     "SELECT k, CAST(a AS VARCHAR), s, NULL FROM R"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle", CASES, ids=[c[0] for c in CASES])
def test_row_generators_equal_duckdb(spark, tmp_path, qid, sql, oracle):
    run = check_seeded(spark, str(tmp_path), f"rowgen-{qid}", sql, [R], oracle, batches=4)
    assert any(run.snapshots), "no row ever answered: the test would prove nothing"


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle", CASES, ids=[c[0] for c in CASES])
def test_sparks_own_generators_give_the_same(spark, tmp_path, qid, sql, oracle):
    """A recompute runs the query's own text: Spark's inline, stack and json_tuple agree with the oracle."""
    check_seeded(spark, str(tmp_path), f"rowgen-recomputed-{qid}", sql, [R], oracle, batches=2, strategy="recompute")


def test_row_generators_name_their_columns_as_spark_does():
    schema = {"R": R.schema_sql(), "P": "ps ARRAY<STRUCT<x: INT, y: STRING>>"}
    assert streamfold.compile("SELECT inline(ps) FROM P", schema).answer.output == ("x", "y")
    assert streamfold.compile("SELECT t.* FROM R LATERAL VIEW stack(2, a, s, b, s) t",
                              schema).answer.output == ("col0", "col1")
    assert streamfold.compile("SELECT json_tuple(s, 'a', 'b') FROM R", schema).answer.output == ("c0", "c1")
    assert_refused([
        ("SELECT k, x FROM P LATERAL VIEW inline(ps) t AS x", "GENERATOR_COLUMNS"),
        ("SELECT stack(2, a, s) FROM R", "TYPE_MISMATCH"),
        ("SELECT stack(k, a, b) FROM R", "WRONG_ARGUMENTS"),
        ("SELECT json_tuple(s, s) FROM R", "WRONG_ARGUMENTS"),
        ("SELECT inline(array(a)) FROM R", "TYPE_MISMATCH"),
    ], schema)
