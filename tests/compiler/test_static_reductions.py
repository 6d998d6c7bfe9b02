"""Streams semi-joined with the filtered static tables they are joined with (passes/static_reductions.py):
every snapshot equals DuckDB's, with deletions, for each place the semi join can be pushed to —
a stream scan, one equated only through another stream, below a GROUP BY on the key (a
correlated aggregate, min under deletions), into UNION ALL branches, DISTINCT, the preserved
side of a LEFT JOIN, and reduced through a chain of static tables. Each query is checked to
have been reduced, so a change that stops the pass from applying fails here too."""

from __future__ import annotations

import random

import pytest

import streamfold
from streamfold.ir.rel import Join, JoinKind
from streamfold.passes import normalize
from streamfold.sql import Catalog, bind

from ..streams import Source, check_stream
from ..strategies import random_rows, random_stream

pytestmark = [pytest.mark.spark, pytest.mark.slow]

R = Source("R", (("a", "INT"), ("b", "INT"), ("s", "STRING")), weighted=True)
S = Source("S", (("k", "INT"), ("v", "INT")), weighted=True)
D = Source("D", (("k", "INT"), ("g", "INT"), ("name", "STRING")), static=True)
G = Source("G", (("g", "INT"), ("label", "STRING")), static=True)

# (id, query, how many semi joins with static rows it gets at least)
QUERIES = [
    ("two-streams-one-through-the-other",
     "SELECT D.name, count(*) AS n, sum(S.v) AS t FROM R JOIN D ON R.a = D.k JOIN S ON S.k = R.a "
     "WHERE D.name <> 'a' GROUP BY D.name", 2),
    ("correlated-avg-below-its-group-by",
     "SELECT count(*) AS n, sum(R.b) AS t FROM R JOIN D ON D.k = R.a "
     "WHERE D.name IN ('a', 'b') AND R.b < (SELECT avg(S.v) + 1 FROM S WHERE S.k = D.k)", 2),
    ("correlated-min-under-deletions",
     "SELECT R.a, R.b, D.name FROM R JOIN D ON D.k = R.a "
     "WHERE D.g > 1 AND R.b = (SELECT min(S.v) FROM S WHERE S.k = R.a)", 2),
    ("chain-of-static-tables",
     "SELECT G.label, count(*) AS n, sum(R.b) AS t FROM R JOIN S ON S.k = R.a JOIN D ON R.a = D.k "
     "JOIN G ON D.g = G.g WHERE G.label = 'a' GROUP BY G.label", 2),
    ("union-all-branches",
     "SELECT D.name, count(*) AS n FROM (SELECT a AS k, b FROM R UNION ALL SELECT k, v FROM S) u "
     "JOIN D ON u.k = D.k WHERE D.name <> 'b' GROUP BY D.name", 2),
    ("distinct-and-group-by",
     "SELECT D.name, y.b, x.n FROM (SELECT DISTINCT a, b FROM R) y JOIN D ON y.a = D.k "
     "JOIN (SELECT k, count(*) AS n FROM S GROUP BY k) x ON x.k = y.a WHERE D.name = 'a'", 2),
    ("left-join-preserved-side",
     "SELECT D.name, count(*) AS n, count(j.v) AS m FROM (SELECT R.a, S.v FROM R LEFT JOIN S ON R.b = S.k) j "
     "JOIN D ON j.a = D.k WHERE D.g <= 2 GROUP BY D.name", 1),
    ("implied-by-an-or-over-two-static-tables",
     "SELECT d1.name AS n1, d2.name AS n2, count(*) AS n FROM R JOIN D d1 ON R.a = d1.k JOIN S ON S.k = R.b "
     "JOIN D d2 ON S.v = d2.k WHERE (d1.name = 'a' AND d2.name = 'b') OR (d1.name = 'b' AND d2.g = 1) "
     "GROUP BY d1.name, d2.name", 2),
    ("self-join-both-sides-reduced",
     "SELECT r1.a, count(*) AS n, sum(r2.b) AS t FROM R r1 JOIN R r2 ON r1.a = r2.a JOIN D ON r1.a = D.k "
     "WHERE D.g = 1 OR D.name = 'b' GROUP BY r1.a", 2),
    ("a-filtered-dimension-cte-read-twice",
     "WITH d AS (SELECT k, name FROM D WHERE g <> 0) SELECT x.name, count(*) AS n FROM R JOIN d x ON R.a = x.k "
     "JOIN S ON S.k = R.b JOIN d y ON S.v = y.k GROUP BY x.name", 2),
    ("exists-above-the-reduced-stream",
     "SELECT D.name, count(*) AS n FROM R JOIN D ON R.a = D.k JOIN S ON S.k = R.a "
     "WHERE D.name <> 'c' AND EXISTS (SELECT 1 FROM S s2 WHERE s2.v = R.b) GROUP BY D.name", 2),
]


def _reductions(sql: str) -> int:
    sources = [R, S, D, G]
    catalog = Catalog.from_mapping({s.name: s.schema_sql() for s in sources}, static=[s.name for s in sources if s.static])
    rel = normalize(bind(sql, catalog).rel)
    return sum(1 for n in rel.walk() if isinstance(n, Join) and n.kind == JoinKind.SEMI
               and any(name.startswith("_static") for name in n.right.names))


@pytest.mark.parametrize("qid,sql,reduced", QUERIES, ids=[q[0] for q in QUERIES])
def test_a_stream_reduced_by_a_static_table_equals_duckdb_with_deletions(spark, tmp_path, qid, sql, reduced):
    assert _reductions(sql) >= reduced, "the pass no longer reduces this query"
    assert "st_rows" in streamfold.explain(sql, {s.name: s.schema_sql() for s in (R, S, D, G)}, tables=["D", "G"])
    rng = random.Random(qid)
    tables = {"D": random_rows(rng, D, max_size=8, min_size=4), "G": random_rows(rng, G, max_size=5, min_size=3)}
    batches = random_stream(rng, [R, S], batches=4, max_rows=12, min_rows=2)
    check_stream(spark, str(tmp_path), sql, [R, S, D, G], batches, tables)


def test_a_static_table_without_a_filter_reduces_nothing():
    """Keys that every dimension row has are no restriction: no semi join is added for them."""
    assert _reductions("SELECT D.name, count(*) FROM R JOIN S ON S.k = R.a JOIN D ON R.a = D.k GROUP BY D.name") == 0


@pytest.mark.parametrize("with_null", [False, True], ids=["no-null", "a-null-key"])
def test_not_in_a_static_table_follows_sql_null_rules_from_its_kept_rows(spark, tmp_path, with_null):
    """``NOT IN`` a static table reads its distinct rows kept once (st_rows): a NULL among them
    still lets no row pass, and without one the rows not in it pass."""
    sql = "SELECT a, b FROM R WHERE a NOT IN (SELECT k FROM D WHERE g <> 4 OR g IS NULL)"
    assert "st_rows" in streamfold.explain(sql, {s.name: s.schema_sql() for s in (R, D)}, tables=["D"])
    dims = [(1, 0, "a"), (2, 1, "b"), (2, 1, "b")] + ([(None, 2, "c")] if with_null else [])
    rng = random.Random(11)
    batches = random_stream(rng, [R], batches=3, max_rows=10, min_rows=3)
    run = check_stream(spark, str(tmp_path), sql, [R, D], batches, {"D": dims})
    assert with_null or any(run.snapshots), "rows not in the table pass when it has no NULL"


def test_a_static_join_under_exists_is_kept_once(spark, tmp_path):
    """A join of static tables a stream's EXISTS filters (TPC-DS Q35's customer ⋈ address ⋈
    demographics) is a static state the keys a batch flips meet, not a join run again each batch:
    here under a semi join and under the flags of an OR of EXISTS and NOT EXISTS."""
    sql = ("SELECT D.k, G.label FROM D JOIN G ON D.g = G.g WHERE EXISTS (SELECT 1 FROM S WHERE S.k = D.k) "
           "AND (EXISTS (SELECT 1 FROM R WHERE R.a = D.k) OR NOT EXISTS (SELECT 1 FROM R r2 WHERE r2.b = D.g))")
    plan = streamfold.explain(sql, {s.name: s.schema_sql() for s in (R, S, D, G)}, tables=["D", "G"])
    assert "which the keys a batch flips meet" in plan
    rng = random.Random(sql)
    tables = {"D": random_rows(rng, D, max_size=8, min_size=4), "G": random_rows(rng, G, max_size=5, min_size=3)}
    batches = random_stream(rng, [R, S], batches=4, max_rows=12, min_rows=2)
    check_stream(spark, str(tmp_path), sql, [R, S, D, G], batches, tables)
