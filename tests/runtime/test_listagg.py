"""``listagg(x, sep) WITHIN GROUP (ORDER BY x)`` and ``string_agg``, kept as the group's multiset
of values (``sql/bind_expr/listagg.py``): after every batch, with deletions, NULLs (a group of
NULLs alone answers NULL, as Spark does) and repeated values, the snapshot equals DuckDB's answer
on the prefix; the forms whose string depends on the order Spark reads rows in are refused with
the spelling that does not."""

from __future__ import annotations

import pytest

import streamfold

from ..streams import Source, assert_refused, check_seeded

R = Source("R", (("a", "INT"), ("b", "INT"), ("s", "STRING"), ("c", "DOUBLE")), weighted=True)
S = Source("S", (("k", "INT"), ("v", "INT")), weighted=True)


def _distinct(x: str, sep: str, desc: bool = False) -> str:
    """DuckDB's distinct non-NULL values of ``x`` sorted and joined (NULL for none, as Spark)."""
    listed = f"list(DISTINCT {x}) FILTER (WHERE {x} IS NOT NULL)"
    return (f"CASE WHEN count({x}) = 0 THEN NULL ELSE array_to_string("
            f"{'list_reverse_sort' if desc else 'list_sort'}({listed}), '{sep}') END")


QUERIES = [
    ("grouped",
     "SELECT a, listagg(s, ',') WITHIN GROUP (ORDER BY s) AS l, string_agg(DISTINCT b, '-') WITHIN GROUP "
     "(ORDER BY b DESC) AS d, listagg(s) WITHIN GROUP (ORDER BY s DESC) AS n, count(*) AS rows FROM R GROUP BY a",
     f"SELECT a, string_agg(s, ',' ORDER BY s), {_distinct('b', '-', desc=True)}, string_agg(s, '' ORDER BY s DESC), "
     "count(*) FROM R GROUP BY a", "R"),
    ("global-filter",
     "SELECT listagg(b, ', ') WITHIN GROUP (ORDER BY b) FILTER (WHERE c > 0) AS pos, "
     "string_agg(DISTINCT s, ';') WITHIN GROUP (ORDER BY s) AS names FROM R",
     f"SELECT string_agg(CAST(b AS VARCHAR), ', ' ORDER BY b) FILTER (WHERE c > 0), {_distinct('s', ';')} FROM R",
     "R"),
    ("join", "SELECT s.v, listagg(r.s, '|') WITHIN GROUP (ORDER BY r.s DESC) AS names "
     "FROM R r JOIN S s ON r.a = s.k GROUP BY s.v",
     "SELECT s.v, string_agg(r.s, '|' ORDER BY r.s DESC) FROM R r JOIN S s ON r.a = s.k GROUP BY s.v", "RS"),
    ("rollup", "SELECT a, b, listagg(s, ',') WITHIN GROUP (ORDER BY s) AS l FROM R GROUP BY ROLLUP(a, b)",
     "SELECT a, b, string_agg(s, ',' ORDER BY s) FROM R GROUP BY ROLLUP(a, b)", "R"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle,uses", QUERIES, ids=[q[0] for q in QUERIES])
def test_listagg_equals_duckdb(spark, tmp_path, qid, sql, oracle, uses):
    sources = [s for s in (R, S) if s.name in uses]
    run = check_seeded(spark, str(tmp_path), f"listagg-{qid}", sql, sources, oracle)
    assert any(run.snapshots), "no group ever answered: the test would prove nothing"


@pytest.mark.spark
def test_listagg_recomputed_is_sparks_own_and_equals_duckdb(spark, tmp_path):
    """Recomputed, the query is Spark's over the rows (its sorted collect_list), not the multiset's."""
    _, sql, oracle, _ = QUERIES[0]
    check_seeded(spark, str(tmp_path), "listagg-recomputed", sql, [R], oracle, strategy="recompute")


def test_listagg_keeps_the_multiset_is_named_as_spark_names_it_and_refuses_an_order_spark_does_not_promise():
    plan = streamfold.compile("SELECT a, listagg(s, ',') WITHIN GROUP (ORDER BY s) AS l, count(DISTINCT s) AS d "
                              "FROM R GROUP BY a", {"R": R.schema_sql()})
    assert len([s for s in plan.states if s.role.name == "MULTISET"]) == 1
    assert any("collect_list(R.s): the multiset of values per group is kept" in n for n in plan.notes), plan.notes
    names = streamfold.compile("SELECT listagg(s, ',') WITHIN GROUP (ORDER BY s), string_agg(DISTINCT b) WITHIN "
                               "GROUP (ORDER BY b DESC) FROM R", {"R": R.schema_sql()}).answer.output_names
    assert names == ("listagg(s, ,) WITHIN GROUP (ORDER BY s ASC NULLS FIRST)",
                     "listagg(DISTINCT b, NULL) WITHIN GROUP (ORDER BY b DESC NULLS LAST)")
    assert_refused([("SELECT listagg(s, ',') FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT listagg(s, ',') WITHIN GROUP (ORDER BY b) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT listagg(c, ',') WITHIN GROUP (ORDER BY c) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT listagg(s, s) WITHIN GROUP (ORDER BY s) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT a FROM R WHERE listagg(s) WITHIN GROUP (ORDER BY s) = 'x'", "AGGREGATE_NOT_ALLOWED")],
                   {"R": R.schema_sql()}, unhinted=("AGGREGATE_NOT_ALLOWED",))
