"""Spark's SQL pipe syntax (``FROM t |> WHERE … |> AGGREGATE … GROUP BY …``), written out as the
standard query it means (``sql/pipe.py``) and maintained as that query is: after every batch,
with deletions, the snapshot equals DuckDB's answer to the standard query on the prefix; and the
standard query is what Spark's own pipe query answers, over the same rows."""

from __future__ import annotations

import random

import pytest

from ..streams import Source, check_seeded
from .test_windows import assert_oracle_is_sparks

pytestmark = [pytest.mark.spark]

R = Source("R", (("k", "INT"), ("x", "INT"), ("v", "INT")), weighted=True)
U = Source("U", (("k", "INT"), ("w", "INT")), weighted=True)

# (id, pipe query, the standard query DuckDB answers, sources, ordered)
QUERIES = [
    ("filter-aggregate-filter",
     "FROM R |> WHERE x > 0 |> AGGREGATE count(*) AS n, sum(v) AS sv GROUP BY k |> WHERE n > 1",
     "SELECT k, count(*), sum(v) FROM R WHERE x > 0 GROUP BY k HAVING count(*) > 1", [R], False),
    ("extend-filter-distinct",
     "FROM R |> EXTEND x + v AS xv |> WHERE xv > 2 |> SELECT DISTINCT k, xv",
     "SELECT DISTINCT k, x + v FROM R WHERE x + v > 2", [R], False),
    ("join-qualified",
     "FROM R |> WHERE R.x > 0 |> JOIN U ON R.k = U.k |> SELECT R.k, U.w, R.v",
     "SELECT R.k, U.w, R.v FROM R JOIN U ON R.k = U.k WHERE R.x > 0", [R, U], False),
    ("query-then-pipes",
     "SELECT k, sum(v) AS s FROM R GROUP BY k |> WHERE s > 3 |> EXTEND s * 2 AS s2",
     "SELECT k, sum(v), sum(v) * 2 FROM R GROUP BY k HAVING sum(v) > 3", [R], False),
    ("window-filter-named-aggregate",
     "FROM R |> SELECT k, v, rank() OVER (PARTITION BY k ORDER BY v DESC) AS r |> WHERE r <= 2 |> AS top "
     "|> AGGREGATE count(*) AS n, max(top.v) AS mv GROUP BY top.k",
     "SELECT k, count(*), max(v) FROM (SELECT k, v, rank() OVER (PARTITION BY k ORDER BY v DESC NULLS LAST) AS r "
     "FROM R) t WHERE r <= 2 GROUP BY k", [R], False),
    ("union-aggregate",
     "FROM R |> SELECT k, v |> UNION ALL (FROM U |> SELECT k, w) |> AGGREGATE sum(v) AS t GROUP BY k",
     "SELECT k, sum(v) FROM (SELECT k, v FROM R UNION ALL SELECT k, w FROM U) u GROUP BY k", [R, U], False),
    ("drop-then-aggregate", "FROM R |> DROP x |> AGGREGATE count(*) AS n GROUP BY k, v",
     "SELECT k, v, count(*) FROM R GROUP BY k, v", [R], False),
    ("filter-unpivot-filter",
     "FROM R |> WHERE x > 0 |> UNPIVOT (val FOR col IN (x, v)) |> WHERE val > 1",
     "SELECT k, 'x', x FROM R WHERE x > 0 AND x > 1 UNION ALL SELECT k, 'v', v FROM R WHERE x > 0 AND v > 1",
     [R], False),
    ("pivot-then-filter",
     "FROM R |> SELECT k, x, v |> PIVOT (sum(v) AS s FOR x IN (0, 1 AS one)) |> WHERE R.k > 0",
     "SELECT k, " + ", ".join(f"CASE WHEN count(*) FILTER (WHERE x IS NOT DISTINCT FROM {n}) > 0 "
                              f"THEN sum(v) FILTER (WHERE x IS NOT DISTINCT FROM {n}) END" for n in "01")
     + " FROM R WHERE k > 0 GROUP BY k", [R], False),
    ("aggregate-order-limit",
     "FROM R |> AGGREGATE sum(v) AS t GROUP BY k |> ORDER BY t DESC NULLS LAST, k NULLS FIRST |> LIMIT 2",
     "SELECT k, sum(v) AS t FROM R GROUP BY k ORDER BY t DESC NULLS LAST, k NULLS FIRST LIMIT 2", [R], True),
]


@pytest.mark.parametrize("qid,sql,oracle,sources,ordered", QUERIES, ids=[q[0] for q in QUERIES])
def test_a_pipe_query_is_maintained_as_the_query_it_means(spark, tmp_path, qid, sql, oracle, sources, ordered):
    run = check_seeded(spark, str(tmp_path), f"pipe-{qid}", sql, sources, oracle, ordered=ordered)
    assert any(run.snapshots), "no rows ever: the test would prove nothing"


@pytest.mark.parametrize("qid,sql,oracle,sources,ordered", QUERIES, ids=[q[0] for q in QUERIES])
def test_the_query_it_means_is_what_spark_answers_to_the_pipe_query(spark, qid, sql, oracle, sources, ordered):
    assert_oracle_is_sparks(spark, random.Random(f"pipe-spark-{qid}"), sql, oracle, sources, 20, 10)
