"""Top-k per group over rows that are only inserted (``σ_{rank ≤ k}`` over ``row_number``,
``rank`` or ``dense_rank``): the state keeps each partition's rows ranked ≤ k, not the partition.
For random data with NULLs and ties, random batch splits and partitions touched again and again,
every snapshot and every changes file equals DuckDB's answer on the prefix; the plan keeps k rows
(its note says so) where the input only inserts, and the whole partition where it may delete."""

from __future__ import annotations

import random

import pytest

import streamfold

from ..streams import Source, check_stream
from ..strategies import random_stream
from .test_differential import R_COLS, S_COLS

pytestmark = [pytest.mark.spark]

R = Source("R", R_COLS)
S = Source("S", S_COLS)

QUERIES = [
    ("row-number-per-group",
     "SELECT a, b, s, rn FROM (SELECT a, b, s, row_number() OVER (PARTITION BY a ORDER BY b DESC, s) AS rn FROM R) t "
     "WHERE rn <= 2", [R]),
    ("rank-with-ties-at-the-boundary",
     "SELECT s, a, b, r FROM (SELECT s, a, b, rank() OVER (PARTITION BY s ORDER BY b) AS r FROM R) t WHERE r <= 2",
     [R]),
    ("dense-rank-first-two-keys",
     "SELECT a, s, c FROM (SELECT a, s, c, dense_rank() OVER (PARTITION BY a, s ORDER BY c DESC) AS dr FROM R) t "
     "WHERE dr = 1", [R]),
    ("global-reversed-bound-and-filter",
     "SELECT a, b, c, s, d, rn FROM (SELECT *, row_number() OVER (ORDER BY b DESC, a, c, s, d) AS rn FROM R) t "
     "WHERE 4 > rn AND b IS NOT NULL", [R]),
    ("over-a-join",
     "SELECT k, v, a, r FROM (SELECT S.k, S.v, R.a, rank() OVER (PARTITION BY S.k ORDER BY S.v DESC) AS r "
     "FROM R JOIN S ON R.a = S.k WHERE R.b > 0) t WHERE r <= 2", [R, S]),
    ("read-by-an-aggregate",
     "SELECT s, count(*) AS n, sum(b) AS t FROM (SELECT s, b, rank() OVER (PARTITION BY s ORDER BY b DESC) AS r "
     "FROM R) t WHERE r <= 3 GROUP BY s", [R]),
]


@pytest.mark.parametrize("qid,sql,sources", QUERIES, ids=[q[0] for q in QUERIES])
def test_top_k_of_inserts_equals_duckdb(spark, tmp_path, qid, sql, sources):
    notes = streamfold.compile(sql, {s.name: s.schema_sql() for s in sources}).notes
    assert any("top-" in n and "rows that are only inserted" in n for n in notes), notes
    batches = random_stream(random.Random(f"topk-{qid}"), sources, 5, max_rows=12, min_rows=3)
    run = check_stream(spark, str(tmp_path), sql, sources, batches)
    assert any(run.snapshots), "no row ever ranked: the test would prove nothing"


def test_the_state_keeps_k_rows_per_partition(spark, tmp_path):
    """Many rows in few partitions (``a``: NULL and 0–4): after every batch the top-k state holds
    at most k = 2 rows per partition, whatever has arrived."""
    sql = QUERIES[0][1]
    batches = random_stream(random.Random("topk-size"), [R], 6, max_rows=40, min_rows=16)
    kept: list[dict] = []

    def count(query) -> None:  # type: ignore[no-untyped-def]
        per: dict = {}
        for row in query.engine.store.visible("topk").collect():
            per[row["R.a"]] = per.get(row["R.a"], 0) + row["_weight"]
        kept.append(per)

    check_stream(spark, str(tmp_path), sql, [R], batches, inspect=count)
    assert len(kept) == 6 and all(per and max(per.values()) <= 2 for per in kept), kept
    assert sum(len(b["R"]) for b in batches) > 5 * sum(kept[-1].values())


def test_a_source_that_deletes_keeps_the_partition():
    """With deletions a row below the top k may come back: the window's state keeps every row (a
    row_number is a running function, computed from each partition's first changed row)."""
    sql = QUERIES[0][1]
    notes = streamfold.compile(sql, {"R": Source("R", R_COLS, weighted=True).schema_sql()}).notes
    assert not any("rows that are only inserted" in n for n in notes)
    assert any("OVER: running functions over the window's rows kept in" in n for n in notes), notes
