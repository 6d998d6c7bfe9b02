"""Spark's boolean aggregates — ``count_if``, ``bool_or``/``some``/``any``, ``bool_and``/``every``
— kept as counts (``sql/bind_expr/aggregates.py``): after every batch, with deletions and NULLs,
the snapshot equals DuckDB's answer on the prefix — grouped, global, in HAVING and over a
window (OVER: the counts over the same window) (DuckDB spells them ``bool_or`` and
``bool_and``; its ``count_if`` is NULL over no rows where Spark's is 0, so the oracle counts)."""

from __future__ import annotations

import pytest

import streamfold

from ..streams import Source, check_seeded

R = Source("R", (("a", "INT"), ("b", "INT"), ("c", "DOUBLE")), weighted=True)

QUERIES = [
    ("grouped",
     "SELECT a, count(CASE WHEN b > 1 THEN 1 END) AS ci, bool_or(b > 1) AS bo, bool_and(b > 1) AS ba, every(c > 0) AS ev, "
     "some(b IS NULL) AS so, any(c < 0) AS an FROM R GROUP BY a",
     "SELECT a, count(CASE WHEN b > 1 THEN 1 END) AS ci, bool_or(b > 1) AS bo, bool_and(b > 1) AS ba, bool_and(c > 0) AS ev, "
     "bool_or(b IS NULL) AS so, bool_or(c < 0) AS an FROM R GROUP BY a"),
    ("global-filter-having",
     "SELECT count_if(b > 0) FILTER (WHERE c > 0) AS cf, bool_and(b > 0) FILTER (WHERE a = 1) AS bf, "
     "bool_or(c > 1) AS bo FROM R HAVING count(*) > 0",
     "SELECT count(CASE WHEN b > 0 AND c > 0 THEN 1 END) AS cf, bool_and(CASE WHEN a = 1 THEN b > 0 END) AS bf, "
     "bool_or(c > 1) AS bo FROM R HAVING count(*) > 0"),
    ("over", "SELECT a, b, bool_or(b > 1) OVER (PARTITION BY a) AS x, count_if(b > 0) OVER (PARTITION BY a) AS y, "
             "every(b > 0) OVER (PARTITION BY a ORDER BY b ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS z FROM R",
     "SELECT a, b, bool_or(b > 1) OVER (PARTITION BY a) AS x, count(CASE WHEN b > 0 THEN 1 END) OVER (PARTITION BY a) "
     "AS y, bool_and(b > 0) OVER (PARTITION BY a ORDER BY b ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) AS z FROM R"),
    ("in-having", "SELECT a, count(*) AS n FROM R GROUP BY a HAVING bool_or(b > 2) OR count_if(c > 0) > 1",
     "SELECT a, count(*) AS n FROM R GROUP BY a HAVING bool_or(b > 2) OR count(CASE WHEN c > 0 THEN 1 END) > 1"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle", QUERIES, ids=[q[0] for q in QUERIES])
def test_boolean_aggregates_equal_duckdb(spark, tmp_path, qid, sql, oracle):
    check_seeded(spark, str(tmp_path), qid, sql, [R], oracle)


def test_boolean_aggregates_are_sums_and_need_a_boolean():
    plan = streamfold.compile("SELECT a, bool_and(b > 1) AS x, count_if(b > 1) AS y FROM R GROUP BY a",
                              {"R": R.schema_sql()})
    assert all(c.monoid.name == "SUM" for s in plan.states for c in s.columns)  # no multiset of values
    with pytest.raises(streamfold.StreamfoldError) as e:
        streamfold.compile("SELECT bool_or(b) FROM R", {"R": R.schema_sql()})
    assert e.value.code == "TYPE_MISMATCH"
