"""Top-k per group over rows that are only inserted (``σ_{rank ≤ k}`` over ``row_number``,
``rank`` or ``dense_rank``): the state keeps each partition's rows ranked ≤ k, not the partition.
For random data with NULLs and ties, random batch splits and partitions touched again and again,
every snapshot and every changes file equals DuckDB's answer on the prefix; the plan keeps k rows
(its note says so) where the input only inserts, and each partition's first rows and a reserve
where it may delete (``rules_topk_reserve``)."""

from __future__ import annotations

import random

import pytest

import streamfold

from ..streams import Source, check_restarting, check_stream
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
    ("row-number-over-a-join-ordered-by-its-key",
     "SELECT k, v, a, rn FROM (SELECT S.k, S.v, R.a, row_number() OVER (PARTITION BY S.v ORDER BY R.a DESC) AS rn "
     "FROM R JOIN S ON R.a = S.k) t WHERE rn <= 2", [R, S]),
    ("ordered-and-limited",
     "SELECT a, b, s, rn FROM (SELECT a, b, s, row_number() OVER (PARTITION BY a ORDER BY b DESC, s) AS rn FROM R) t "
     "WHERE rn <= 2 ORDER BY b DESC NULLS LAST, a NULLS FIRST, s NULLS FIRST, rn LIMIT 4", [R]),
    ("read-by-an-aggregate",
     "SELECT s, count(*) AS n, sum(b) AS t FROM (SELECT s, b, rank() OVER (PARTITION BY s ORDER BY b DESC) AS r "
     "FROM R) t WHERE r <= 3 GROUP BY s", [R]),
    # QUALIFY: the same filter right over the window
    ("qualify", "SELECT a, b, s FROM R QUALIFY row_number() OVER (PARTITION BY a ORDER BY b DESC, s) <= 2", [R]),
]


@pytest.mark.parametrize("qid,sql,sources", QUERIES, ids=[q[0] for q in QUERIES])
def test_top_k_of_inserts_equals_duckdb(spark, tmp_path, qid, sql, sources):
    notes = streamfold.compile(sql, {s.name: s.schema_sql() for s in sources}).notes
    assert any("top-" in n and "rows that are only inserted" in n for n in notes), notes
    batches = random_stream(random.Random(f"topk-{qid}"), sources, 5, max_rows=12, min_rows=3)
    run = check_stream(spark, str(tmp_path), sql, sources, batches)
    assert any(run.snapshots), "no row ever ranked: the test would prove nothing"


def test_the_answer_reads_the_kept_rows_and_a_restart_restores_them(spark, tmp_path):
    """The kept rows carry their rank, so the answer reads them (no output state of its own) and
    the changes are theirs, projected and filtered; stopped and started again every other
    batch, the answer comes back from the kept rows in the checkpoint."""
    # a filter beside the rank's bound (it drops every partition's first row): the answer and
    # its changes are the kept rows' filtered
    sql = ("SELECT a, b, s, rn FROM (SELECT a, b, s, row_number() OVER (PARTITION BY a ORDER BY b DESC, s) AS rn "
           "FROM R) t WHERE rn <= 3 AND rn > 1")
    plan = streamfold.compile(sql, {"R": R.schema_sql()})
    assert [s.name for s in plan.states] == ["topk"], [s.name for s in plan.states]
    assert any("the answer's rows are topk's" in n for n in plan.notes), plan.notes
    batches = random_stream(random.Random("topk-restart"), [R], 8, max_rows=10, min_rows=3)
    check_restarting(spark, str(tmp_path), sql, R, [b["R"] for b in batches], every=2)


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


def test_a_global_top_k_that_deletes_keeps_one_partitions_first_rows():
    """Without PARTITION BY the window is one partition, kept as a prefix too (a constant key)."""
    sql = QUERIES[3][1]
    notes = streamfold.compile(sql, {"R": Source("R", R_COLS, weighted=True).schema_sql()}).notes
    assert any("top-3 per partition (one partition) of rows that may be deleted" in n for n in notes), notes


DELETING = [(qid, sql, [Source(s.name, s.columns, weighted=True) for s in sources])
            for qid, sql, sources in QUERIES]


@pytest.mark.parametrize("qid,sql,sources", DELETING, ids=[q[0] for q in DELETING])
def test_top_k_under_deletions_equals_duckdb(spark, tmp_path, qid, sql, sources):
    """Sources that delete up to half their rows each batch, few partitions (``a``: NULL and 0–4)
    of up to ~60 rows: prefixes lose rows, some below k, and are refilled from the window's rows."""
    notes = streamfold.compile(sql, {s.name: s.schema_sql() for s in sources}).notes
    assert any("of rows that may be deleted" in n for n in notes), notes
    batches = random_stream(random.Random(f"topk-del-{qid}"), sources, 7, max_rows=40, min_rows=10)
    run = check_stream(spark, str(tmp_path), sql, sources, batches)
    assert any(run.snapshots), "no row ever ranked: the test would prove nothing"


def test_deleting_a_partitions_first_rows_refills_it(spark, tmp_path):
    """One partition of 30 rows and k = 2, so its prefix keeps 12: deleting its first 11 rows
    leaves one, and the next ranks come from the window's rows; then rows inserted before, among
    and after the prefix, deletions of rows outside it, and the partition emptied and filled."""
    r = Source("R", R_COLS, weighted=True)
    sql = QUERIES[0][1]

    def row(a, b, s="x", w=1):  # type: ignore[no-untyped-def]
        return (a, b, 0.5, s, None, w)

    first = [row(1, b) for b in range(1, 31)] + [row(None, b) for b in range(5)] + [row(2, 7), row(2, 7, "y")]
    batches = [
        {"R": first},
        {"R": [row(1, b, w=-1) for b in range(20, 31)]},  # the first 11 (b DESC): one of 12 left
        {"R": [row(1, 19, w=-1), row(1, 3, w=-1), row(2, 7, "y", w=-1)]},
        {"R": [row(1, 50), row(1, 10, "a"), row(1, 2, "z"), row(1, 15, w=-1)]},
        {"R": [row(1, b, w=-1) for b in range(1, 19) if b not in (3, 15)] + [row(1, 50, w=-1), row(1, 10, "a", w=-1),
                                                                                  row(1, 2, "z", w=-1)]},
        {"R": [row(1, 4), row(1, 4), row(None, 9)]},
    ]
    run = check_stream(spark, str(tmp_path), sql, [r], batches)
    assert [len(s) for s in run.snapshots][:2] == [2 + 2 + 2, 2 + 2 + 2]
