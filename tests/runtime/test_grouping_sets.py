"""ROLLUP, CUBE, GROUPING SETS, grouping() and grouping_id() (issue 59, item 2): after every batch,
with deletions, the snapshot equals DuckDB's answer on the prefix.

NULL keys come from the domains (every column has NULLs), so a group whose key is NULL and a
rolled-up one both appear, told apart by grouping(). The first query's aggregates all roll up
(one aggregate of the finest partials shared by the sets, min/max through multisets under
deletions); the second has DISTINCT and a moment (each set aggregates the input itself); the
last repeats a set, whose rows then appear twice.
"""

from __future__ import annotations

import random

import pytest

import streamfold

from ..streams import Source, check_stream
from ..strategies import random_stream

pytestmark = [pytest.mark.spark]

R = Source("R", (("a", "INT"), ("b", "INT"), ("c", "DOUBLE"), ("s", "STRING")), weighted=True)
SCHEMA = {"R": R.schema_sql()}

QUERIES = [
    ("rollup-shared",
     "SELECT a, s, grouping(a) AS ga, grouping_id(a, s) AS gid, count(*) AS n, sum(b), avg(b), min(s), "
     "max(c) FROM R GROUP BY ROLLUP(a, s)"),
    ("cube-distinct", "SELECT a, b, grouping_id() AS gid, count(DISTINCT s) AS ds, sum(DISTINCT b), stddev_pop(b), max(s) "
     "FROM R GROUP BY CUBE(a, b) HAVING count(*) > 0"),
    ("sets-having-mixed",
     "SELECT a, b, s, grouping(b) AS gb, sum(b) AS t, count(*) FROM R GROUP BY a, GROUPING SETS ((b, s), (s), ()) "
     "HAVING count(*) > 1 OR grouping(s) = 1"),
    # a set given twice: its rows twice, its partials read twice in one statement (the prepared
    # plans' frame of that statement was refused by Spark's constraint propagation: Plans.fromDataset)
    ("sets-repeated", "SELECT a, count(*) AS n, sum(b) AS t FROM R GROUP BY GROUPING SETS ((a), (a), ())"),
]
# DuckDB spells grouping_id() over every key with the keys named
ORACLE = {"cube-distinct": QUERIES[1][1].replace("grouping_id()", "grouping_id(a, b)")}


@pytest.mark.parametrize("qid,sql", QUERIES, ids=[q[0] for q in QUERIES])
def test_grouping_sets_equal_duckdb(spark, tmp_path, qid, sql):
    batches = random_stream(random.Random(qid), [R], batches=2, max_rows=10, min_rows=3)
    run = check_stream(spark, str(tmp_path), sql, [R], batches, oracle_sql=ORACLE.get(qid))
    assert run.batches == 2


def test_rolled_up_sets_share_the_finest_partials():
    """One aggregate state grouped by every key feeds the coarser sets; with DISTINCT each set
    keeps its own."""
    shared = streamfold.compile(QUERIES[0][1], SCHEMA)
    finest = [s for s in shared.states if s.role == "aggregate" and s.key_names == ("R.a", "R.s")]
    assert len(finest) == 1
    assert not any(s.role == "aggregate" and s.key_names[:2] == ("R.a", "R.s") and len(s.key_names) == 3
                   for s in shared.states)
    distinct = streamfold.compile(QUERIES[1][1], SCHEMA)
    assert not any(s.key_names == ("R.a", "R.b") for s in distinct.states)


@pytest.mark.parametrize("sql,code", [
    ("SELECT a, grouping(a) FROM R GROUP BY a", "GROUPING_NOT_ALLOWED"),
    ("SELECT a FROM R WHERE grouping(a) = 0 GROUP BY ROLLUP(a)", "GROUPING_NOT_ALLOWED"),
    ("SELECT a, grouping(b) FROM R GROUP BY ROLLUP(a)", "GROUPING_NOT_A_KEY"),
])
def test_grouping_misuse_is_a_coded_error(sql, code):
    with pytest.raises(streamfold.SqlError) as e:
        streamfold.compile(sql, SCHEMA)
    assert e.value.code == code
