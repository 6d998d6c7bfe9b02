"""Inline tables — ``VALUES (…), (…) AS t(c, …)`` in FROM, in a join, as a CTE's body
(``sql/bind/values.py``) — and rows compared with a list of rows, ``(a, b) IN ((1, 2), …)``, which
Spark compares as structs (NULL equal to NULL): after every batch, with deletions, the snapshot
equals DuckDB's answer on the prefix; columns are named and typed as Spark names and widens them."""

from __future__ import annotations

import pytest

import streamfold

from ..streams import Source, assert_refused, check_seeded

R = Source("R", (("a", "INT"), ("b", "INT"), ("s", "STRING")), weighted=True)

CASES = [
    ("a mapping joined and grouped",
     "SELECT R.a, v.name, count(*) AS n FROM R JOIN (VALUES (1, 'one'), (2, 'two'), (NULL, 'none')) AS v(x, name) "
     "ON R.a = v.x GROUP BY R.a, v.name",
     "SELECT R.a, v.name, count(*) FROM R JOIN (VALUES (1, 'one'), (2, 'two'), (NULL, 'none')) AS v(x, name) "
     "ON R.a = v.x GROUP BY R.a, v.name"),
    ("a CTE of weights, left joined",
     "WITH m(x, w) AS (VALUES (0, 1.5), (1, 2), (4, -1)) "
     "SELECT R.s, sum(R.b * m.w) AS weighted, count(m.x) AS matched FROM R LEFT JOIN m ON R.a = m.x GROUP BY R.s",
     "WITH m(x, w) AS (VALUES (0, 1.5), (1, 2), (4, -1)) "
     "SELECT R.s, sum(R.b * m.w), count(m.x) FROM R LEFT JOIN m ON R.a = m.x GROUP BY R.s"),
    ("the rows of a stream pick",
     "SELECT x, y FROM VALUES (1, 'a'), (2, 'b'), (3, 'c') AS v(x, y) WHERE x IN (SELECT a FROM R WHERE b > 1)",
     "SELECT x, y FROM (VALUES (1, 'a'), (2, 'b'), (3, 'c')) AS v(x, y) WHERE x IN (SELECT a FROM R WHERE b > 1)"),
    ("rows in a list of rows",
     "SELECT a, b, (a, b) IN ((1, 2), (3, CAST(NULL AS INT))) AS hit FROM R WHERE NOT ((a, s) IN ((1, 'a'))) ORDER BY a LIMIT ALL",
     "SELECT a, b, (a IS NOT DISTINCT FROM 1 AND b IS NOT DISTINCT FROM 2) OR (a IS NOT DISTINCT FROM 3 "
     "AND b IS NOT DISTINCT FROM NULL) FROM R WHERE NOT (a IS NOT DISTINCT FROM 1 AND s IS NOT DISTINCT FROM 'a')"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle", CASES, ids=[c[0] for c in CASES])
def test_inline_tables_equal_duckdb(spark, tmp_path, qid, sql, oracle):
    run = check_seeded(spark, str(tmp_path), f"values-{qid}", sql, [R], oracle, batches=4)
    assert any(run.snapshots), "no row ever answered: the test would prove nothing"


def test_an_inline_table_over_a_static_table_keeps_no_state():
    """Its one row is counted over a static table when there is one: nothing changes per batch."""
    sql = "SELECT R.a, v.y FROM R JOIN (VALUES (1, 'p'), (2, 'q')) AS v(x, y) ON R.a = v.x"
    over_static = streamfold.compile(sql, {"R": R.schema_sql(), "T": "k INT"}, tables=["T"])
    over_stream = streamfold.compile(sql, {"R": R.schema_sql()})
    def counts(plan) -> list[str]:  # the one row's count, a global aggregate state
        return [s.name for s in plan.states if s.role.value == "aggregate" and not s.key and not s.static]

    assert counts(over_stream) and not counts(over_static)
    assert len([s for s in over_static.states if not s.static]) < len([s for s in over_stream.states if not s.static])


def test_inline_tables_are_named_and_typed_as_spark_does():
    schema = {"R": R.schema_sql()}
    plan = streamfold.compile("SELECT * FROM VALUES (1, 1.5), (2, 2) AS v(x, y)", schema)
    assert plan.answer.output == ("x", "y")
    assert [str(f.type) for f in plan.logical.schema] == ["INT", "DECIMAL(11,1)"]
    assert streamfold.compile("SELECT * FROM VALUES 1, 2", schema).answer.output == ("col1",)
    assert_refused([
        ("SELECT * FROM VALUES (1, 2), (3) AS v(x, y)", "VALUES_WIDTH"),
        ("SELECT * FROM VALUES (1, 2) AS v(x)", "VALUES_WIDTH"),
        ("SELECT * FROM VALUES (1), (DATE '2020-01-01') AS v(x)", "TYPE_MISMATCH"),
        ("SELECT a FROM R WHERE (a, b) IN ((1, 2L))", "TYPE_MISMATCH"),  # Spark: one struct type
        ("SELECT a FROM R WHERE (a, b) IN ((1, 2, 3))", "TYPE_MISMATCH"),
        ("SELECT a FROM R WHERE (a, b) IN ((1, NULL))", "TYPE_MISMATCH"),
    ], schema)
