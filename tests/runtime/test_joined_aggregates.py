"""Joins of global aggregates with each other and with static tables — TPC-DS Q9's scalar
subqueries over the streams in a query over a dimension, Q28/Q88's aggregates side by side, Q90's
ratio of two counts: the answer a reads the aggregates' states (one row each) and the static
rows, no join input is kept and no delta join runs. With random data, NULLs, random batch splits
and deletions, every snapshot and every changes file equals DuckDB's answer on the prefix."""

from __future__ import annotations

import random

import pytest

import streamfold

from ..streams import Source, check_stream
from ..strategies import random_stream

pytestmark = [pytest.mark.spark]

R = Source("R", (("a", "INT"), ("b", "INT"), ("c", "DECIMAL(12,2)")), weighted=True)
S = Source("S", (("k", "INT"), ("v", "INT")), weighted=True)
T = Source("T", (("id", "INT"), ("name", "STRING")), static=True)
T_ROWS = [(1, "x"), (2, "y"), (2, "y"), (None, "z"), (4, None)]

QUERIES = [
    ("case-of-scalar-subqueries",  # Q9's shape
     "SELECT CASE WHEN (SELECT count(*) FROM R WHERE b BETWEEN 0 AND 5) > 3 "
     "THEN (SELECT avg(c) FROM R WHERE b BETWEEN 0 AND 5) ELSE (SELECT avg(a) FROM R WHERE b BETWEEN 0 AND 5) END "
     "AS bucket1, (SELECT sum(c) FROM R WHERE b > 5) AS bucket2 FROM T WHERE id = 2", "RT"),
    ("aggregates-side-by-side",  # Q28's shape: distinct counts and min/max under deletions
     "SELECT * FROM (SELECT avg(c) AS avg_c, count(c) AS n, count(DISTINCT b) AS nb FROM R WHERE a < 5) x, "
     "(SELECT min(v) AS lo, max(v) AS hi, count(*) AS m FROM S) y LIMIT 100", "RS"),
    ("ratio-of-counts",  # Q90's shape, division by zero
     "SELECT CAST(n1 AS DECIMAL(15,4)) / CAST(n2 AS DECIMAL(15,4)) AS ratio FROM "
     "(SELECT count(*) AS n1 FROM R WHERE b > 2) p, (SELECT count(*) AS n2 FROM S WHERE v > 2) q ORDER BY ratio", "RS"),
    ("static-rows-joined-on-an-aggregate",
     "SELECT T.id, T.name, x.m FROM T JOIN (SELECT max(b) AS m FROM R) x ON T.id <= x.m", "RT"),
    ("having-and-left-join",
     "SELECT y.n, x.s FROM (SELECT count(*) AS n FROM R WHERE b > 1) y LEFT JOIN "
     "(SELECT sum(a) AS s FROM R HAVING count(*) > 3) x ON y.n > 0", "R"),
    ("merged-distinct-min-max-and-unfiltered",
     "SELECT x.n, x.d, y.lo, y.hi, z.t, w.m FROM (SELECT count(*) AS n, count(DISTINCT b) AS d FROM R WHERE a < 3) x, "
     "(SELECT min(c) AS lo, max(c) AS hi FROM R WHERE b > 0 OR a IS NULL) y, (SELECT sum(b) AS t FROM R) z, "
     "(SELECT count(v) AS m FROM S) w", "RS"),
]
# the queries whose aggregates of R are kept as one (each under its own WHERE)
MERGED = {"case-of-scalar-subqueries", "having-and-left-join", "merged-distinct-min-max-and-unfiltered"}


@pytest.mark.parametrize("qid,sql,uses", QUERIES, ids=[q[0] for q in QUERIES])
def test_joined_global_aggregates_equal_duckdb(spark, tmp_path, qid, sql, uses):
    sources = [s for s in (R, S, T) if s.name in uses]
    streams = [s for s in sources if not s.static]
    compiled = streamfold.compile(sql, {s.name: s.schema_sql() for s in sources},
                                  tables=[s.name for s in sources if s.static])
    assert any("a join of global aggregates" in n for n in compiled.notes), compiled.notes
    assert not compiled.delta_joins and all(not s.name.startswith("in_") for s in compiled.states)
    merged = [n for n in compiled.notes if "kept as one aggregate per source" in n]
    assert bool(merged) == (qid in MERGED), compiled.notes
    batches = random_stream(random.Random(f"joined-aggregates-{qid}"), streams, batches=4, max_rows=10, min_rows=2)
    run = check_stream(spark, str(tmp_path), sql, sources, batches, tables={"T": T_ROWS})
    assert run.batches == 4


def test_a_stream_read_outside_an_aggregate_keeps_the_join():
    sql = "SELECT R.a, x.n FROM R, (SELECT count(*) AS n FROM S) x"
    compiled = streamfold.compile(sql, {"R": R.schema_sql(), "S": S.schema_sql()})
    assert not any("a join of global aggregates" in n for n in compiled.notes)
