"""``sort_array(collect_set(x))``, ``array_sort(collect_set(x))`` and ``size(collect_set(x))`` kept
as the group's set of distinct values (``collect_list``'s: each as often as its rows) (``sql/bind_expr/value_sets.py``): after every batch, with
deletions and NULLs (a group of NULLs alone answers ``[]``, as Spark does), the snapshot equals
DuckDB's answer on the prefix; a bare ``collect_set`` (its order is the hash set's) and one of
doubles are refused with a hint."""

from __future__ import annotations

import pytest

import streamfold

from ..streams import Source, assert_refused, check_seeded

R = Source("R", (("a", "INT"), ("b", "INT"), ("s", "STRING"), ("c", "DOUBLE")), weighted=True)
S = Source("S", (("k", "INT"), ("v", "INT")), weighted=True)


def _set(x: str, desc: bool = False, where: str = "") -> str:
    """DuckDB's sorted set of the non-NULL values of ``x`` ([] for none, as Spark)."""
    listed = f"list(DISTINCT {x}) FILTER (WHERE {x} IS NOT NULL{' AND ' + where if where else ''})"
    return f"coalesce({'list_reverse_sort' if desc else 'list_sort'}({listed}), [])"


def _list(x: str, desc: bool = False, where: str = "") -> str:
    """DuckDB's sorted list of the non-NULL values of ``x``, each as often as its rows ([] for none)."""
    listed = f"list({x}) FILTER (WHERE {x} IS NOT NULL{' AND ' + where if where else ''})"
    return f"coalesce({'list_reverse_sort' if desc else 'list_sort'}({listed}), [])"


QUERIES = [
    ("lists",  # collect_list: each value as often as its rows
     "SELECT a, sort_array(collect_list(b)) AS bs, array_sort(collect_list(s)) AS ss, size(collect_list(s)) AS n, "
     "sort_array(collect_list(b) FILTER (WHERE c > 0), false) AS pos, sort_array(collect_list(DISTINCT s)) AS d "
     "FROM R GROUP BY a",
     f"SELECT a, {_list('b')}, {_list('s')}, count(s), {_list('b', desc=True, where='c > 0')}, {_set('s')} "
     "FROM R GROUP BY a", "R"),
    ("grouped",
     "SELECT a, sort_array(collect_set(b)) AS bs, array_sort(collect_set(s)) AS ss, size(collect_set(b)) AS n, "
     "sort_array(collect_set(s), false) AS sd FROM R GROUP BY a",
     f"SELECT a, {_set('b')}, {_set('s')}, len({_set('b')}), {_set('s', desc=True)} FROM R GROUP BY a", "R"),
    ("global-filter",
     "SELECT sort_array(collect_set(b) FILTER (WHERE c > 0)) AS pos, cardinality(collect_set(a)) AS n, "
     "min(b) AS mn FROM R",
     f"SELECT {_set('b', where='c > 0')}, len({_set('a')}), min(b) FROM R", "R"),
    ("join", "SELECT s.v, sort_array(collect_set(r.s)) AS names FROM R r JOIN S s ON r.a = s.k GROUP BY s.v",
     f"SELECT s.v, {_set('r.s')} FROM R r JOIN S s ON r.a = s.k GROUP BY s.v", "RS"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle,uses", QUERIES, ids=[q[0] for q in QUERIES])
def test_sorted_sets_equal_duckdb(spark, tmp_path, qid, sql, oracle, uses):
    sources = [s for s in (R, S) if s.name in uses]
    check_seeded(spark, str(tmp_path), qid, sql, sources, oracle)


def test_sets_share_the_distinct_multiset_and_refuse_an_order_spark_does_not_promise():
    plan = streamfold.compile("SELECT a, sort_array(collect_set(b)) AS bs, count(DISTINCT b) AS d FROM R GROUP BY a",
                              {"R": R.schema_sql()})
    assert len([s for s in plan.states if s.role.name == "MULTISET"]) == 1
    # unaliased, each is named as Spark names it
    names = streamfold.compile("SELECT sort_array(collect_set(b)), size(collect_set(b)), sort_array(collect_list(s)) "
                               "FROM R", {"R": R.schema_sql()}).answer.output_names
    assert names == ("sort_array(collect_set(b), true)", "size(collect_set(b))", "sort_array(collect_list(s), true)")
    assert_refused([("SELECT collect_set(b) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT element_at(collect_set(b), 1) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT sort_array(collect_set(c)) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT collect_list(b) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT sort_array(collect_list(c)) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT array_sort(collect_set(b), (l, r) -> r - l) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT a FROM R WHERE size(collect_set(b)) > 1", "AGGREGATE_NOT_ALLOWED")],
                   {"R": R.schema_sql()})
