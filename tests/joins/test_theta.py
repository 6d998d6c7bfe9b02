"""Theta joins over the join matrix (issue 20), against DuckDB after every batch: bands, BETWEEN,
inequalities and ``<>``, alone and under aggregates, with deletions and random batch splits.

Values come from small domains (INT 0–4, a few dates), so bands and inequalities match often and
several rows share a cell and a bucket. Each shape runs one random example of two
batches, the second deleting some of the first's rows (inserts take the same plan): the suite's
time allows no more.
"""

from __future__ import annotations

import itertools
import json
import os
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyarrow.parquet as pq

import streamfold
from streamfold.runtime.matrices import ratio
from streamfold.verify import compare, duckdb_answer

from ..streams import Source, check_stream
from ..strategies import stream

pytestmark = [pytest.mark.spark]

R = Source("R", (("a", "INT"), ("t", "INT"), ("d", "DATE"), ("c", "DOUBLE")), weighted=True)
S = Source("S", (("k", "INT"), ("u", "INT"), ("e", "DATE"), ("w", "DOUBLE")), weighted=True)

# Inner and outer, band (integers and dates), inequality, with and without an aggregate above
# (`<>` runs through the matrix in test_differential's inequality-correlated subqueries).
SHAPES = [
    ("band-between-aggregate",
     "SELECT R.a, count(*) AS n, sum(S.k) AS sk, max(S.w) AS mw FROM R JOIN S ON R.t BETWEEN S.u - 2 AND S.u + 1 "
     "GROUP BY R.a"),
    ("band-dates-rows", "SELECT R.a, R.d, S.k FROM R, S WHERE abs(datediff(R.d, S.e)) <= 60 AND R.a < 3"),
    ("left-band", "SELECT R.a, R.t, S.k FROM R LEFT JOIN S ON abs(R.t - S.u) <= 1"),
    ("full-inequality", "SELECT R.a, S.k, S.u FROM R FULL JOIN S ON R.t > S.u"),
    ("right-key-inequality-aggregate",
     "SELECT S.k, count(R.a) AS n, sum(R.t) AS st FROM R RIGHT JOIN S ON R.a = S.k AND R.t >= S.u GROUP BY S.k"),
    # as people write them: a band over DOUBLEs, a date window by INTERVAL, a stream against itself
    ("band-doubles-aggregate", "SELECT R.a, count(*) AS n FROM R JOIN S ON abs(R.c - S.w) <= 0.5 GROUP BY R.a"),
    ("interval-window", "SELECT R.a, S.k FROM R JOIN S ON R.d BETWEEN S.e - INTERVAL 30 DAYS AND S.e"),
    ("self-inequality-aggregate", "SELECT r1.a, count(*) AS n FROM R r1 JOIN R r2 ON r1.t < r2.t GROUP BY r1.a"),
]

SETTINGS = settings(max_examples=1, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])
_counter = itertools.count()


@pytest.mark.parametrize("qid,sql", SHAPES, ids=[q[0] for q in SHAPES])
@SETTINGS
@given(data=st.data())
def test_theta_join_equals_duckdb_after_every_batch(spark, tmp_path_factory, qid, sql, data):
    """Outer joins' NULL-padded rows appear and disappear as matches come and go."""
    batches = data.draw(stream([R, S], min_batches=2, max_batches=2, min_rows=3, max_rows=10), label="batches")
    tmp = str(tmp_path_factory.mktemp(f"{qid}-{next(_counter)}"))
    check_stream(spark, tmp, sql, [R, S], batches)


# -- adaptivity: Algorithm 2 at batch boundaries ---------------------------------------------------
A = Source("R", (("a", "INT"), ("t", "INT")), weighted=True)
B = Source("S", (("k", "INT"), ("u", "INT")), weighted=True)
ADAPTIVE_SQL = "SELECT R.a, count(*) AS n, sum(S.k) AS sk FROM R LEFT JOIN S ON abs(R.t - S.u) <= 1 GROUP BY R.a"
# S grows first, then R past it: (2, 2) → (1, 4) after batch 0, → (2, 2) after batch 2, → (4, 1).
ADAPTIVE_BATCHES = [
    {"R": [(1, 1, 1), (2, 5, 1)], "S": [(k, k % 7, 1) for k in range(12)]},
    {"R": [(3, 2, 1)], "S": [(k, k % 5, 1) for k in range(12, 30)] + [(3, 3, -1)]},
    {"R": [(a, a % 6, 1) for a in range(4, 40)] + [(1, 1, -1)], "S": [(0, 0, -1)]},
    {"R": [(a, a % 9, 1) for a in range(40, 100)] + [(4, 4, -1)], "S": [(2, 2, -1), (40, 8, 1)]},
]
MAPPINGS = [[1, 4], [1, 4], [2, 2], [4, 1]]


def _commit(out: str, batch: int) -> dict:
    return json.load(open(os.path.join(out, "commits", f"{batch:06d}.json")))


def _restart_and_check(spark, tmp_path, sql: str, batches: list[dict], more: dict) -> dict:
    """Start the query again over its output (its states restored from the checkpoint), give
    it one more batch (``more``) and check its answer against DuckDB; returns that commit."""
    dirs = {n: str(tmp_path / "in" / n) for n in ("R", "S")}
    for name, src in (("R", A), ("S", B)):
        pq.write_table(src.table(more[name]), os.path.join(dirs[name], "9999.parquet"))
    out = str(tmp_path / "out")
    query = streamfold.start(sql, dirs, out, schemas={s.name: s.schema_sql() for s in (A, B)},
                             spark=spark, background=False, partitions=2)
    try:
        result = query.process_available()
        assert result is not None and result.batch == len(batches)
        prefix = {"R": [A.table(b["R"]) for b in batches] + [A.table(more["R"])],
                  "S": [B.table(b["S"]) for b in batches] + [B.table(more["S"])]}
        snapshot = [tuple(r) for r in query.snapshot_pandas().itertuples(index=False)]
        assert compare(snapshot, duckdb_answer(sql, prefix)).matches, "after the restart"
    finally:
        query.stop()
    return _commit(out, len(batches))


def test_join_matrix_migrates_as_sizes_change_exactly_and_survives_a_crash_before_the_commit(
        spark, tmp_path, monkeypatch):
    """Each commit records the mapping, the exact sizes and ILF/ILF* (≤ 1.25: the mapping is
    re-chosen after the batch's merges). A crash just before the commit of a migrating batch —
    its states already written whole — loses nothing: the rerun restores the old mapping's
    states, decides the same migration and commits it, answers exact throughout."""
    from streamfold.runtime import checkpoint

    out = str(tmp_path / "out")
    real_commit = checkpoint.OutputDir.commit

    def crash_on_batch_2(self, batch, record):
        if batch == 2:
            raise KeyboardInterrupt("killed before the commit")
        return real_commit(self, batch, record)

    monkeypatch.setattr(checkpoint.OutputDir, "commit", crash_on_batch_2)
    with pytest.raises(KeyboardInterrupt):
        check_stream(spark, str(tmp_path), ADAPTIVE_SQL, [A, B], ADAPTIVE_BATCHES[:3])
    assert not os.path.exists(os.path.join(out, "commits", "000002.json"))
    monkeypatch.setattr(checkpoint.OutputDir, "commit", real_commit)
    # rerun: batch 2's files are there (its offsets too); then batch 3 arrives
    dirs = {n: str(tmp_path / "in" / n) for n in ("R", "S")}
    query = streamfold.start(ADAPTIVE_SQL, dirs, out, schemas={s.name: s.schema_sql() for s in (A, B)},
                             spark=spark, background=False, partitions=2)
    prefix = {"R": [A.table(b["R"]) for b in ADAPTIVE_BATCHES[:2]], "S": [B.table(b["S"]) for b in ADAPTIVE_BATCHES[:2]]}
    try:
        for b in (2, 3):
            if b == 3:
                for name, src in (("R", A), ("S", B)):
                    pq.write_table(src.table(ADAPTIVE_BATCHES[b][name]), os.path.join(dirs[name], f"{b:04d}.parquet"))
            prefix["R"].append(A.table(ADAPTIVE_BATCHES[b]["R"]))
            prefix["S"].append(B.table(ADAPTIVE_BATCHES[b]["S"]))
            result = query.process_available()
            assert result is not None and result.batch == b
            snapshot = [tuple(r) for r in query.snapshot_pandas().itertuples(index=False)]
            assert compare(snapshot, duckdb_answer(ADAPTIVE_SQL, prefix)).matches, f"batch {b} after the crash"
    finally:
        query.stop()
    for b in range(4):
        entry = _commit(out, b)["matrix"]["in_R"]
        assert entry["mapping"] == MAPPINGS[b], (b, entry)
        assert ratio(entry) <= Fraction(5, 4)
    assert _commit(out, 0)["matrix"]["in_R"]["migrated_from"] == [2, 2]
    assert _commit(out, 2)["matrix"]["in_R"]["migrated_from"] == [1, 4]
    assert _commit(out, 3)["matrix"]["in_R"]["migrated_from"] == [2, 2]
    assert "migrated_from" not in _commit(out, 1)["matrix"]["in_R"]


def test_algorithm_2_decides_from_the_merges_counts_and_a_restart_restores_the_migrated_states(
        spark, tmp_path, monkeypatch):
    """A join matrix without a hybrid is decided on after the batch's outputs, from the merges'
    own row counts: no job counts its inputs (counting them fails this test), yet every batch
    migrates as Algorithm 2 says. A migrating batch writes its states whole beside its
    changelog; a restart after it restores them (the base wins) and goes on exactly."""
    from streamfold.runtime.features.adaptive_joins import AdaptiveJoins

    def no_count(self, b, reads, views):
        raise AssertionError("a join matrix without a hybrid needs no count of its inputs")

    monkeypatch.setattr(AdaptiveJoins, "_matrix_sizes", no_count)
    check_stream(spark, str(tmp_path), ADAPTIVE_SQL, [A, B], ADAPTIVE_BATCHES)
    out = str(tmp_path / "out")
    for b in range(4):
        entry = _commit(out, b)["matrix"]["in_R"]
        assert entry["mapping"] == MAPPINGS[b], (b, entry)
        assert ratio(entry) <= Fraction(5, 4)
    assert _commit(out, 3)["matrix"]["in_R"]["migrated_from"] == [2, 2]
    # batch 3's states written whole (its changelog, and what came before, pruned with its commit)
    state = [sorted(os.listdir(d)) for d, _, _ in os.walk(tmp_path) if os.path.basename(d) == "state"]
    assert state == [["base-000003"]], state
    # a restart restores the states batch 3 migrated, and the next batch is exact
    more = {"R": [(a, a % 9, 1) for a in range(100, 110)] + [(50, 50 % 9, -1)], "S": [(41, 7, 1), (7, 0, -1)]}
    assert _restart_and_check(spark, tmp_path, ADAPTIVE_SQL, ADAPTIVE_BATCHES, more)["matrix"]["in_R"]["mapping"] == [4, 1]


def test_prepared_plans_run_a_join_matrix_until_it_migrates_and_then_are_prepared_afresh(spark, tmp_path):
    """A join matrix's batches run prepared plans (planned once, replayed) while its mapping
    holds; the replayed batch whose merges' counts call for a migration migrates, commits it,
    and the next batches plan afresh for the new mapping — exact after every batch, and after a
    restart."""
    sql = "SELECT R.a, count(*) AS n, sum(S.k) AS sk FROM R JOIN S ON abs(R.t - S.u) <= 1 GROUP BY R.a"
    # (each S row its own u, so that S's state keeps a row per S row: its size is its rows)
    grow = [{"R": [(a, a % 7, 1) for a in range(10)], "S": [(k, k, 1) for k in range(10)]}]
    grow += [{"R": [(a, a % 7, 1) for a in range(10 + 2 * i, 12 + 2 * i)] + ([(1, 1, -1)] if i == 1 else []),
              "S": [(k, k, 1) for k in range(10 + 2 * i, 12 + 2 * i)]} for i in range(3)]
    grow += [{"R": [(40, 3, 1)], "S": [(k, k, 1) for k in range(100, 140)] + [(2, 2, -1)]}]  # S past R
    grow += [{"R": [(41 + i, 4, 1)], "S": [(k, k, 1) for k in range(140 + 2 * i, 142 + 2 * i)]} for i in range(3)]
    check_stream(spark, str(tmp_path), sql, [A, B], grow)
    out = str(tmp_path / "out")
    commits = [_commit(out, b) for b in range(len(grow))]
    assert [c.get("prepared") for c in commits[:4]] == [None, "capture", "replay", "replay"], commits
    assert commits[4]["prepared"] == "replay" and commits[4]["matrix"]["in_R"]["migrated_from"] == [2, 2]
    assert commits[4]["matrix"]["in_R"]["mapping"] == [1, 4]
    # the migrated states are kept as a merge's rows: the next batch captures plans for them
    assert [c.get("prepared") for c in commits[5:]] == ["capture", "replay", "replay"], commits
    _restart_and_check(spark, tmp_path, sql, grow, {"R": [(50, 5, 1), (3, 3, -1)], "S": [(150, 2, 1), (5, 5, -1)]})


def test_plans_captured_ahead_of_a_migrated_history_log_only_the_touched_keys(spark, tmp_path, monkeypatch):
    """A history that migrates writes its states whole; the plans captured after it, ahead of
    batch 1 (as after any large history), replay batch 1 and log the keys it touches — not the
    states whole as the history left them, which a restart would have restored as batch 1's."""
    from streamfold.runtime import shape

    monkeypatch.setattr(shape, "AHEAD_MIN_ROWS", 0)  # capture ahead after this small history too
    sql = "SELECT R.a, count(*) AS n, sum(S.k) AS sk FROM R JOIN S ON abs(R.t - S.u) <= 1 GROUP BY R.a"
    batches = [{"R": [(a, a % 7, 1) for a in range(3)], "S": [(k, k, 1) for k in range(12)]},
               {"R": [(3, 2, 1), (0, 0, -1)], "S": [(12, 12, 1), (13, 1, 1), (4, 4, -1)]}]
    check_stream(spark, str(tmp_path), sql, [A, B], batches)
    out = str(tmp_path / "out")
    first, second = _commit(out, 0), _commit(out, 1)
    assert first["matrix"]["in_R"]["migrated_from"] == [2, 2]
    assert second.get("prepared") == "replay", second
    state = next(d for d, _, _ in os.walk(tmp_path) if os.path.basename(d) == "state")
    logged = pq.read_table(os.path.join(state, "000001")).num_rows
    assert logged < sum(first["state_rows"].values()), (logged, first["state_rows"])
    # restored from the history's base and batch 1's changelog, the states go on exactly
    _restart_and_check(spark, tmp_path, sql, batches, {"R": [(4, 1, 1)], "S": [(14, 0, 1), (13, 1, -1)]})
