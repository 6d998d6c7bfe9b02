"""``min``/``max`` of a GROUP BY key read from the group (passes/key_aggregates.py): no multiset
is kept for them, and after every batch, with deletions and NULL keys, the snapshot equals
DuckDB's — over a key expression beside a plain key, and under ROLLUP (where a coarser set's
``min(s)`` is over the finer groups' keys, not a key of its own)."""

from __future__ import annotations

import random

import pytest

import streamfold

from ..streams import Source, check_stream
from ..strategies import random_stream

pytestmark = [pytest.mark.spark]

R = Source("R", (("a", "INT"), ("b", "INT"), ("s", "STRING")), weighted=True)
SCHEMA = {"R": R.schema_sql()}

# (id, query, multisets its plan keeps)
QUERIES = [
    ("key-expression", "SELECT a % 3 AS g, b, min(a % 3) AS lo, max(a % 3) + 1 AS hi, max(b) AS mb, max(s) AS ms "
     "FROM R GROUP BY a % 3, b HAVING min(a % 3) IS NULL OR count(*) > 1", 1),
    ("rollup", "SELECT a, s, min(s) AS lo, max(a) AS hi, count(*) AS n FROM R GROUP BY ROLLUP(a, s)", 4),  # 6 without the pass
]


@pytest.mark.parametrize("qid,sql,multisets", QUERIES, ids=[q[0] for q in QUERIES])
def test_min_max_of_a_key_equal_duckdb_without_a_multiset(spark, tmp_path, qid, sql, multisets):
    plan = streamfold.compile(sql, SCHEMA)
    assert sum(s.role == "multiset" for s in plan.states) == multisets
    batches = random_stream(random.Random(qid), [R], batches=3, max_rows=10, min_rows=3)
    check_stream(spark, str(tmp_path), sql, [R], batches)
