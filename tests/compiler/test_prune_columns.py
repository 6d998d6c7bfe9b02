"""Column pruning (passes/prune_columns.py): the states keep only the columns something reads,
and a node whose meaning depends on all its columns keeps them all. Pure: no Spark."""

from __future__ import annotations

import pytest

import streamfold

SCHEMAS = {
    "PS": "pk INT, supp INT, qty INT, note STRING, _weight BIGINT",
    "P": "k INT, brand STRING, name STRING, comment STRING",
    "SUP": "s INT, c STRING",
    "R": "a INT, b INT, c STRING, _weight BIGINT",
}


def _keys(sql: str, tables: tuple[str, ...] = ("P", "SUP")) -> dict[str, tuple[str, ...]]:
    plan = streamfold.compile(sql, SCHEMAS, tables=list(tables))
    return {s.name: tuple(f.name for f in s.key) for s in plan.states}


def test_a_join_filtered_by_a_subquery_keeps_only_the_columns_read_above_it():
    # TPC-H Q16's shape: the select list reads two columns, the NOT IN one more, the join its keys.
    keys = _keys("SELECT p.brand, count(DISTINCT ps.supp) AS n FROM PS ps, P p "
                 "WHERE p.k = ps.pk AND ps.supp NOT IN (SELECT s FROM SUP WHERE c LIKE '%x%') GROUP BY p.brand")
    static = keys["st_p"]
    assert set(static) == {"p.k", "p.brand"}, static  # not p.name, p.comment
    assert all("note" not in c and "qty" not in c for cols in keys.values() for c in cols)


def test_an_outer_join_keeps_the_preserved_side_to_its_lineage():
    # Only the join key of R is read: R's other columns would only multiply the state's keys.
    keys = _keys("SELECT R.a, sum(PS.qty) FROM R LEFT JOIN PS ON R.a = PS.pk GROUP BY R.a", tables=())
    assert keys["in_R"] == ("R.a",) and keys["left"] == ("R.a",)


@pytest.mark.parametrize("sql,column", [
    ("SELECT count(*) FROM (SELECT DISTINCT a, b FROM R) t", "b"),           # DISTINCT counts every column
    ("SELECT count(*) FROM (SELECT a, b FROM R UNION SELECT pk, qty FROM PS) t", "b"),  # so does a set union
])
def test_what_a_row_is_made_of_is_never_pruned(sql, column):
    keys = _keys(sql, tables=())
    assert any(c.endswith(column) for cols in keys.values() for c in cols), keys


def test_count_star_over_a_pruned_scan_still_reads_rows():
    plan = streamfold.compile("SELECT count(*) AS n FROM (SELECT a, c FROM R WHERE b > 0) t", SCHEMAS)
    assert plan.states and "n" in streamfold.explain("SELECT count(*) AS n FROM (SELECT a, c FROM R WHERE b > 0) t",
                                                     SCHEMAS)


def test_a_window_keeps_what_is_read_above_it_and_what_its_calls_read():
    # c is read by nobody: the window's state keeps a (its partition, with its NULL-free key),
    # b (its order and argument)
    keys = _keys("SELECT a, sum(b) OVER (PARTITION BY a ORDER BY b) AS t FROM R", tables=())
    assert keys["win"] == ("R.a", "R.b", "R.a#null", "R.a#value")
