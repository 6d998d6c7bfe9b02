"""Deletions that come before the insertions they delete.

A source's order is not always the order its rows were written in: Spark's file source takes the
files of one poll in any order, a Kafka topic's partitions interleave as they like. A deletion
can then reach the engine a batch or more before its insertion, and for a while a prefix holds
a row −1 times. No batch query has an answer there, but once the insertion comes the answer is
DuckDB's again: a group whose count passed through zero must have kept what its other rows
added up to (its sums, its counts of non-NULL values). These runs check that, after every batch
whose prefix holds no row a negative number of times, the snapshot equals DuckDB's answer — and
across a restart in the middle, which rebuilds the states from their changelogs.
"""

from __future__ import annotations

import itertools
import random
from decimal import Decimal

import pyarrow.parquet as pq
import pytest

import streamfold
from streamfold.runtime import runs

from ..streams import Source, check_stream
from .test_runs import runs_settings

pytestmark = [pytest.mark.spark]

R = Source("R", (("a", "INT"), ("b", "INT"), ("c", "DECIMAL(10,2)")), weighted=True)
S = Source("S", (("k", "INT"), ("v", "INT")), weighted=True)

QUERIES = [
    # one row per group, read row by row (the merge's touched keys: no join)
    ("sums", "SELECT a, count(*) AS n, count(b) AS nb, sum(b) AS t, avg(c) AS m, sum(c) AS sc FROM R GROUP BY a", "R"),
    ("having", "SELECT a, sum(b) AS t FROM R GROUP BY a HAVING count(*) > 1", "R"),
    # a group state beside a multiset state (the answer reads them as one union)
    ("distinct-and-min", "SELECT a, count(DISTINCT b) AS d, min(c) AS lo, sum(b) AS t FROM R GROUP BY a", "R"),
    # an aggregate nested under another: the inner one hands on its changes
    ("aggregate-of-aggregate", "SELECT t, count(*) AS groups FROM (SELECT a, sum(b) AS t FROM R GROUP BY a) GROUP BY t", "R"),
    ("join-then-aggregate", "SELECT R.a, count(*) AS n, sum(S.v) AS t FROM R JOIN S ON R.b = S.k GROUP BY R.a", "RS"),
    ("global", "SELECT count(*) AS n, sum(b) AS t, count(c) AS nc FROM R", "R"),
    # a state of each row's copies in all and on the left
    ("except-all", "SELECT b FROM R EXCEPT ALL SELECT k FROM S", "RS"),
    ("intersect", "SELECT b FROM R INTERSECT SELECT k FROM S", "RS"),
]


def out_of_order(rng: random.Random, sources: list[Source], batches: int, rows: int) -> list[dict[str, list[tuple]]]:
    """``batches`` batches of ``rows`` insertions per source, each row put in a random batch; about
    half of them deleted again in a random batch — before its insertion as often as after — and a
    few deleted and inserted twice. Values from small domains, so groups meet and cancel."""
    out: list[dict[str, list[tuple]]] = [{s.name: [] for s in sources} for _ in range(batches)]
    for s in sources:
        for _ in range(rows):
            if s.name == "R":
                row: tuple = (rng.randrange(3), rng.choice([None, *range(4)]), rng.choice([None, Decimal("1.25"), Decimal("3.50"), Decimal("-2.00")]))
            else:
                row = (rng.randrange(4), rng.randrange(-3, 9))
            copies = 2 if rng.random() < 0.15 else 1
            out[rng.randrange(batches)][s.name].append(row + (copies,))
            if rng.random() < 0.5:
                out[rng.randrange(batches)][s.name].append(row + (-copies,))
    return out


_counter = itertools.count()


@pytest.mark.parametrize("layout", ["whole", "runs"])
@pytest.mark.parametrize("qid,sql,uses", QUERIES, ids=[q[0] for q in QUERIES])
def test_deletions_before_their_insertions_equal_duckdb_once_the_insertions_came(
        spark, tmp_path_factory, monkeypatch, qid, sql, uses, layout):
    if layout == "runs":  # every candidate state kept as a base and a tail, folded now and then
        monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
        runs_settings(monkeypatch, 0, 0.3)
    sources = [s for s in (R, S) if s.name in uses]
    checked, negative = 0, 0
    for seed in range(3):
        rng = random.Random(f"{qid}-{layout}-{seed}")
        batches = out_of_order(rng, sources, rng.randrange(4, 8), rng.randrange(8, 16))
        tmp = str(tmp_path_factory.mktemp(f"ooo-{qid}-{next(_counter)}"))
        run = check_stream(spark, tmp, sql, sources, batches, out_of_order=True)
        assert run.checked and run.checked[-1] == run.batches - 1, "the whole history holds no negative row"
        checked += len(run.checked)
        negative += run.batches - len(run.checked)
    assert negative, f"some prefix held a deletion ahead of its insertion ({checked} compared with DuckDB)"


@pytest.mark.parametrize("layout", ["whole", "runs"])
def test_a_restart_while_a_count_is_zero_keeps_the_sums(spark, tmp_path, monkeypatch, layout):
    """S's key 1 — and with it group 1 — has its count pass through zero with a sum of −7 (a
    deletion ahead of its insertion beside an insertion); the run stops there and restarts, its
    states rebuilt from their changelogs (S's pre-aggregated join input, kept in runs, from its
    logged deltas), and the late insertion brings group 1 back to DuckDB's answer."""
    if layout == "runs":
        monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
        runs_settings(monkeypatch, 0, 1000.0)
    sql = "SELECT R.a, count(*) AS n, sum(S.v) AS t, count(S.v) AS nv FROM R JOIN S ON R.b = S.k GROUP BY R.a"
    r = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
    s = Source("S", (("k", "INT"), ("v", "INT")), weighted=True)
    folders = {x.name: tmp_path / "in" / x.name for x in (r, s)}
    for folder in folders.values():
        folder.mkdir(parents=True)
    batches = [
        {r: [(1, 1, 1), (2, 2, 1)], s: [(1, 3, 1), (2, 5, 1)]},  # group 1: count 1, sum 3
        {s: [(1, 10, -1), (2, 5, 1)]},  # key 1 and group 1: count 0, sum −7 — v = 10 deleted before it comes
        {s: [(2, 6, 1)]},  # group 1 untouched while its count is zero
        {s: [(1, 10, 1), (1, None, 1)]},  # the insertion: count 2, sum 3, one NULL
    ]
    want = [[(1, 1, 3, 1), (2, 1, 5, 1)], [(2, 2, 10, 2)], [(2, 3, 16, 3)], [(1, 2, 3, 1), (2, 3, 16, 3)]]

    def start():
        return streamfold.start(sql, {n: str(f) for n, f in folders.items()}, str(tmp_path / "out"), spark=spark,
                                background=False, partitions=2, schemas={x.name: x.schema_sql() for x in (r, s)})

    query = start()
    try:
        for i, batch in enumerate(batches):
            if i in (2, 3):  # stopped while the count is zero, and again right after
                query.stop()
                query = start()
            for source, rows in batch.items():
                pq.write_table(source.table(rows), str(folders[source.name] / f"{i:04d}.parquet"))
            assert query.process_available() is not None
            got = sorted(tuple(x) for x in query.snapshot_pandas().itertuples(index=False, name=None))
            assert got == want[i], f"batch {i}"
            assert layout == "whole" or i == 0 or query.engine.store.bases, "S's state is kept in runs"
    finally:
        query.stop()


def test_a_group_gone_in_another_order_leaves_its_state_despite_a_rounding_residue(spark, tmp_path):
    """0.1 + 0.2 − 0.1 − 0.2 is not 0 in doubles: a group whose rows are all deleted leaves its
    state all the same (its floating-point sum within FLOAT_ZERO), so churn does not grow it."""
    sql = "SELECT a, sum(c) AS t FROM R GROUP BY a"
    source = Source("R", (("a", "INT"), ("c", "DOUBLE")), weighted=True)
    folder = tmp_path / "in"
    folder.mkdir()
    assert 0.1 + 0.2 - 0.1 - 0.2 != 0
    query = streamfold.start(sql, {"R": str(folder)}, str(tmp_path / "out"), spark=spark, background=False,
                             partitions=2, schemas={"R": source.schema_sql()})
    try:
        for i, rows in enumerate([[(1, 0.1, 1), (1, 0.2, 1), (2, 1.5, 1)], [(1, 0.1, -1)], [(1, 0.2, -1)]]):
            pq.write_table(source.table(rows), str(folder / f"{i:04d}.parquet"))
            assert query.process_available() is not None
        assert sorted(tuple(x) for x in query.snapshot_pandas().itertuples(index=False, name=None)) == [(2, 1.5)]
        (name,) = [n for n in query.engine.store.current if n.startswith("agg")]
        assert [r[0] for r in query.engine.store.visible(name).collect()] == [2]  # its key first
    finally:
        query.stop()
