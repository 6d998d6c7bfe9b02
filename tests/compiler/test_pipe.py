"""Pipe syntax written out (``sql/pipe.py``): each operator folded into the query so far where
SQL's clause order keeps its meaning, else over it as a derived table named as its table was;
what Spark refuses, or what needs the input's columns, is ``UNSUPPORTED_PIPE``. No Spark needed."""

from __future__ import annotations

import pytest

import streamfold
from streamfold.errors import StreamfoldError
from streamfold.sql.pipe import unpipe

SCHEMAS = {"t": "k INT, x INT, v INT", "u": "k INT, w INT"}


@pytest.mark.parametrize("pipe,written", [
    ("FROM t |> WHERE x > 1 |> AGGREGATE sum(v) AS s GROUP BY k AS kk",
     "SELECT k AS kk, sum(v) AS s FROM t WHERE (x > 1) GROUP BY k"),
    # a WHERE after an aggregate filters its rows, not the input's (sqlglot moves it into the GROUP BY)
    ("SELECT k, sum(v) AS s FROM t GROUP BY k |> WHERE s > 3",
     "SELECT * FROM (SELECT k, sum(v) AS s FROM t GROUP BY k) AS _piped WHERE (s > 3)"),
    # DISTINCT kept (sqlglot drops it)
    ("FROM t |> SELECT DISTINCT k", "SELECT DISTINCT k FROM t"),
    # after a projection the derived table keeps the table's name, so t.k still reads k
    ("FROM t |> SELECT k, x AS y |> WHERE t.k > 1", "SELECT * FROM (SELECT k, x AS y FROM t) AS t WHERE (t.k > 1)"),
    ("FROM t |> EXTEND x + 1 AS y |> EXTEND y + 1 AS z", "SELECT *, y + 1 AS z FROM (SELECT *, x + 1 AS y FROM t) AS t"),
    # a join folds into a bare FROM; a filter before it stays before it
    ("FROM t |> JOIN u USING (k) |> WHERE w > 0", "SELECT * FROM t JOIN u USING (k) WHERE (w > 0)"),
    ("FROM t |> WHERE x > 1 |> RIGHT JOIN u ON t.k = u.k",
     "SELECT * FROM (SELECT * FROM t WHERE (x > 1)) AS t RIGHT JOIN u ON t.k = u.k"),
    ("FROM t |> DROP x, v |> WHERE k > 1", "SELECT * FROM (SELECT * EXCEPT (x, v) FROM t) AS t WHERE (k > 1)"),
    ("FROM t |> AS a |> WHERE a.x > 1", "SELECT * FROM (SELECT * FROM t) AS a WHERE (a.x > 1)"),
    ("FROM t |> WHERE x > 1 |> UNPIVOT (y FOR c IN (x, v)) |> WHERE y > 2",
     "SELECT * FROM (SELECT * FROM t WHERE (x > 1)) AS t UNPIVOT (y FOR c IN (x, v)) WHERE (y > 2)"),
    ("FROM t |> ORDER BY x DESC |> LIMIT 2 OFFSET 1", "SELECT * FROM t ORDER BY x DESC LIMIT 2 OFFSET 1"),
    ("FROM t |> SELECT k |> UNION ALL (FROM u |> SELECT k)", "(SELECT k FROM t) UNION ALL (SELECT k FROM u)"),
    # nested in a subquery, comments dropped (one would swallow the closing parenthesis)
    ("SELECT * FROM (FROM t |> WHERE x > 1 -- big\n |> SELECT k) s", "SELECT * FROM (SELECT k FROM t WHERE (x > 1)) s"),
    ("SELECT '|>' AS p FROM t", "SELECT '|>' AS p FROM t"),
])
def test_pipes_are_written_as_the_query_they_mean(pipe: str, written: str) -> None:
    assert unpipe(pipe) == written


def test_a_pipe_query_compiles_to_the_plan_of_the_query_it_means() -> None:
    def plan(sql: str) -> list[str]:
        text = streamfold.explain(sql, SCHEMAS).splitlines()
        return text[text.index("Sources"):]
    assert plan("FROM t |> WHERE x > 1 |> AGGREGATE count(*) AS n GROUP BY k |> ORDER BY n DESC |> LIMIT 3") == \
        plan("SELECT k, count(*) AS n FROM t WHERE x > 1 GROUP BY k ORDER BY n DESC LIMIT 3")


@pytest.mark.parametrize("sql", [
    "FROM t |> SET x = x * 2",
    "FROM t |> SELECT k, sum(v)",  # Spark: aggregates only in |> AGGREGATE
    "FROM t |> WHERE sum(v) > 1",
    "FROM t |> AGGREGATE sum(v) GROUP BY 1",
    "FROM t |> TABLESAMPLE (10 PERCENT)",
    "FROM t |> FROBNICATE",
])
def test_pipes_spark_refuses_or_that_need_the_columns_are_refused_with_a_hint(sql: str) -> None:
    with pytest.raises(StreamfoldError) as e:
        streamfold.compile(sql, SCHEMAS)
    assert e.value.code == "UNSUPPORTED_PIPE" and e.value.hint


def test_an_error_in_a_pipe_query_marks_the_query_it_means() -> None:
    with pytest.raises(StreamfoldError) as e:
        streamfold.compile("FROM t |> WHERE nope > 1", SCHEMAS)
    assert e.value.code == "UNKNOWN_COLUMN" and "SELECT * FROM t WHERE (nope > 1)" in str(e.value)
