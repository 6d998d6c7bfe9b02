"""Spark's higher-order functions over arrays (``sql/bind_expr/lambdas.py``): ``transform``,
``filter``, ``exists``, ``forall``, ``aggregate``, ``zip_with`` and ``array_sort`` with a
lambda, in the select list, in WHERE, under an aggregate and nested — after every batch, with
deletions and NULL elements, the snapshot equals DuckDB's answer, written without Spark's lambdas
where their semantics differ (a 0-based index, three-valued ``exists``/``forall``)."""

from __future__ import annotations

import pytest

import streamfold

from ..streams import Source, assert_refused, check_seeded

R = Source("R", (("a", "INT"), ("b", "INT"), ("c", "INT"), ("s", "STRING")), weighted=True)

CASES = [
    ("transform and filter",
     "SELECT a, transform(array(a, b, c), x -> x * 2 + a) AS twice, "
     "filter(array(a, b, c), (x, i) -> i > 0 AND x IS NOT NULL) AS rest, "
     "transform(array(b, c), (x, i) -> x + i) AS shifted FROM R",
     "SELECT a, [a * 2 + a, b * 2 + a, c * 2 + a], list_filter([a, b, c], lambda x, i: i > 1 AND x IS NOT NULL), "
     "[b, c + 1] FROM R"),
    ("exists, forall, aggregate",
     "SELECT a, exists(array(a, b, c), x -> x > 1) AS any_big, forall(array(a, b, c), x -> x > 1) AS all_big, "
     "aggregate(array(a, b, c), 0, (acc, x) -> acc + x) AS total, "
     "aggregate(array(a, b), 0, (acc, x) -> acc + coalesce(x, 0), acc -> acc * 10) AS tens FROM R",
     "SELECT a, (a > 1) OR (b > 1) OR (c > 1), (a > 1) AND (b > 1) AND (c > 1), a + b + c, "
     "(coalesce(a, 0) + coalesce(b, 0)) * 10 FROM R"),
    ("zip, sort, structs, nested",
     "SELECT a, zip_with(array(a, b), array(s, 'z', 'y'), (x, y) -> concat(y, x)) AS zipped, "
     "array_sort(array(coalesce(a, 0), coalesce(b, 0), coalesce(c, 0)), "
     "(l, r) -> CASE WHEN l < r THEN 1 WHEN l > r THEN -1 ELSE 0 END) AS desc_sorted, "
     "transform(array(named_struct('k', s, 'v', b)), p -> p.v + a) AS fields, "
     "transform(array(a, b), x -> transform(array(b, c), y -> x * y)) AS products FROM R",
     "SELECT a, [s || CAST(a AS VARCHAR), 'z' || CAST(b AS VARCHAR), CAST(NULL AS VARCHAR)], "
     "list_sort([coalesce(a, 0), coalesce(b, 0), coalesce(c, 0)], 'DESC'), [b + a], "
     "[[a * b, a * c], [b * b, b * c]] FROM R"),
    ("grouped and filtered",
     "SELECT a, sum(aggregate(array(b, c), 0, (acc, x) -> acc + coalesce(x, 0))) AS total, count(*) AS n "
     "FROM R WHERE exists(array(b, c), x -> x = a) GROUP BY a",
     "SELECT a, sum(coalesce(b, 0) + coalesce(c, 0)), count(*) FROM R WHERE (b = a) OR (c = a) GROUP BY a"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle", CASES, ids=[c[0] for c in CASES])
def test_higher_order_functions_equal_duckdb(spark, tmp_path, qid, sql, oracle):
    run = check_seeded(spark, str(tmp_path), f"lambdas-{qid}", sql, [R], oracle, batches=4)
    assert any(run.snapshots), "no row ever answered: the test would prove nothing"


def test_lambda_parameters_type_and_hide_columns():
    schema = {"R": R.schema_sql()}
    plan = streamfold.compile("SELECT transform(array(a, b), a -> a + c) AS t FROM R", schema)
    assert plan.answer.output == ("t",)
    assert_refused([
        ("SELECT aggregate(array(a), 0, (acc, x) -> acc + x * 1.5) AS t FROM R", "TYPE_MISMATCH"),
        ("SELECT filter(array(a), x -> x + 1) AS t FROM R", "TYPE_MISMATCH"),
        ("SELECT transform(s, x -> x) AS t FROM R", "TYPE_MISMATCH"),
        ("SELECT transform(array(a), (x, i, j) -> x) AS t FROM R", "TYPE_MISMATCH"),
        ("SELECT transform(array(a), x -> sum(x)) AS t FROM R", "UNSUPPORTED_FUNCTION"),
        ("SELECT map_filter(array(a), (k, v) -> v > 1) AS t FROM R", "UNSUPPORTED_FUNCTION"),
        ("SELECT transform(array(a), x -> y) AS t FROM R", "UNKNOWN_COLUMN"),
    ], schema)
