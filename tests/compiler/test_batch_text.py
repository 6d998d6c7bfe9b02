"""The recompute's text of the batch query (sql/batch_text.py): divisions in their NULL-on-zero
form, and the IN subqueries whose NULL Spark's batch plan would lose."""

from __future__ import annotations

import pytest
import sqlglot

from streamfold.sql.batch_text import null_observable_in, tolerant_division


def test_divisions_take_their_null_on_zero_form():
    tree = sqlglot.parse_one("SELECT a / b, a % b AS m, a DIV b, sum(a) / count(*) AS r FROM R", read="spark")
    text = tolerant_division(tree).sql(dialect="spark")
    assert text == "SELECT TRY_DIVIDE(a, b), TRY_MOD(a, b) AS m, a DIV NULLIF(b, 0), " \
                   "TRY_DIVIDE(SUM(a), COUNT(*)) AS r FROM R"
    assert tree.sql(dialect="spark").startswith("SELECT a / b")  # the tree itself is not changed


@pytest.mark.parametrize("sql,observable", [
    ("SELECT a, a IN (SELECT k FROM S) AS f FROM R", True),
    ("SELECT CASE WHEN a IN (SELECT k FROM S) THEN 1 END FROM R", True),
    ("SELECT a FROM R WHERE NOT (a IN (SELECT k FROM S) OR a > 1)", True),  # NOT over an OR: NULL shows
    ("SELECT a FROM R WHERE (a IN (SELECT k FROM S)) IS NULL", True),
    ("SELECT a FROM R WHERE a IN (SELECT k FROM S) AND a > 1", False),
    ("SELECT a FROM R WHERE a IN (SELECT k FROM S) OR a > 1", False),
    ("SELECT a FROM R WHERE NOT (a IN (SELECT k FROM S))", False),
    ("SELECT a FROM R WHERE a NOT IN (SELECT k FROM S)", False),
    ("SELECT a, count(*) FROM R GROUP BY a HAVING a IN (SELECT k FROM S)", False),
    ("SELECT a, a IN (1, 2) AS f FROM R", False),  # a list, not a subquery: Spark gives NULL
])
def test_an_in_subquery_is_observable_outside_a_filters_ands_and_ors(sql: str, observable: bool):
    assert null_observable_in(sqlglot.parse_one(sql, read="spark")) is observable
