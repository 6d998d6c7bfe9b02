"""Work after a commit gives way to a file already waiting (runtime/features/maintenance.py).

A compaction due after batch N is deferred when the file of batch N+1 is there at N's commit:
batch N+1 starts first, and the compaction runs after the first commit that finds no file
waiting (with that batch's states), when the run is idle, or after it gave way MAX_DEFERRED
times in a row. The answers and a restart are the same either way. A tail's fold does not give
way: it runs after its commit whether or not a file waits.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfold
from streamfold.runtime import runs
from streamfold.runtime.features.maintenance import PostCommit
from streamfold.runtime.profile import WAITED

SQL = "SELECT x, count(*) AS n, sum(y) AS s FROM S GROUP BY x"


def test_work_gives_way_to_a_waiting_file_at_most_limit_times_and_runs_when_idle() -> None:
    waiting = [True]
    ran: list[str] = []
    later = PostCommit(lambda: waiting[0], limit=3)
    assert not later.offer(0, "compact", lambda: ran.append("compact@0"))
    assert later.due == {"compact": 1} and ran == []
    later.batch_started()  # batch 1 starts: the work offered after batch 0 is for older states
    later.run_pending()
    assert ran == []  # nothing offered since the batch started
    assert not later.offer(1, "compact", lambda: ran.append("compact@1"))
    assert not later.offer(2, "compact", lambda: ran.append("compact@2"))
    assert later.offer(3, "compact", lambda: ran.append("compact@3"))  # deferred 3 times in a row: runs anyway
    assert ran == ["compact@3"] and later.due == {}
    assert not later.offer(4, "collect", lambda: ran.append("collect@4"))
    assert not later.offer(4, "probe", lambda: ran.append("probe@4"))
    later.run_pending()  # still a file waiting
    assert ran == ["compact@3"]
    waiting[0] = False
    later.run_pending()  # idle: what was deferred after the last commit runs, in the order it was offered
    assert ran == ["compact@3", "collect@4", "probe@4"] and later.due == {}
    assert [e for e in later.events if e[1] == "ran"] == [(3, "ran", "compact"), (4, "ran", "collect"), (4, "ran", "probe")]
    later.cancel("nothing due")  # harmless


def _table(rng: random.Random, rows: int) -> pa.Table:
    return pa.table({"x": pa.array([rng.randrange(40) for _ in range(rows)], pa.int32()),
                     "y": pa.array([rng.randrange(100) for _ in range(rows)], pa.int32())})


def _expected(tables: list[pa.Table]) -> dict[int, tuple[int, int]]:
    n: Counter[int] = Counter()
    s: Counter[int] = Counter()
    for t in tables:
        for x, y in zip(t.column("x").to_pylist(), t.column("y").to_pylist()):
            n[x] += 1
            s[x] += y
    return {x: (n[x], s[x]) for x in n}


def _landing(tmp_path: Path, seed: int, files: int, when: str):  # type: ignore[no-untyped-def]
    """A source directory and an output directory, ``files`` random tables, ``land(i)`` writing
    table i into the source, and a progress hook that lands table 1 at the message ``when``."""
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    rng = random.Random(seed)
    tables = [_table(rng, 400) for _ in range(files)]

    def land(i: int) -> None:
        pq.write_table(tables[i], src / f"{i:04d}.parquet")

    def progress(message: str) -> None:
        if message == when and not (src / "0001.parquet").exists():
            land(1)

    return src, out, tables, land, progress


def _answer(out: Path, batch: int) -> dict[int, tuple[int, int]]:
    return {r["x"]: (r["n"], r["s"]) for r in pq.read_table(out / "snapshots" / f"{batch:06d}").to_pylist()}


def _compactions(query) -> list[tuple[int, str]]:
    return [(batch, what) for batch, what, name in query.engine.post_commit.events if name == "compact"]


def _bases(out: Path) -> list[str]:
    state = out / "_checkpoint" / "state"
    return sorted(n for n in os.listdir(state) if n.startswith("base-")) if state.is_dir() else []


@pytest.mark.spark
def test_a_file_waiting_at_a_commit_starts_its_batch_before_the_compaction(spark, tmp_path: Path) -> None:
    # while batch 0 writes its answer, batch 1's file lands
    src, out, tables, land, progress = _landing(tmp_path, 7, 3, "batch 000000: answer")

    def start():
        return streamfold.start(SQL, {"S": str(src)}, str(out), spark=spark, schemas={"S": "x INT, y INT"},
                                background=False, endpoint=False, partitions=2, compact_every=1, profile=True,
                                progress=progress)

    land(0)
    query = start()
    try:
        first = query.process_available()
        assert first is not None and first.batch == 0
        later = query.engine.post_commit
        # the compaction due after batch 0 (every batch here) gave way: nothing written yet
        # (Python's collection after the batch gave way too)
        assert _compactions(query) == [(0, "deferred")] and later.due["compact"] == 1
        assert _bases(out) == [] and _answer(out, 0) == _expected(tables[:1])
    finally:
        query.stop()
    # A restart meanwhile replays batch 0's changelog: the deferral lost nothing.
    query = start()
    try:
        second = query.process_available()
        assert second is not None and second.batch == 1 and second.inputs == {"S": ["0001.parquet"]}
        assert _compactions(query) == [(1, "ran")]  # no file waiting now
        assert _bases(out) == ["base-000001"] and _answer(out, 1) == _expected(tables[:2])
        # the file waited from its landing (during batch 0) until batch 1 began: the waterfall's first span
        waterfall = second.waterfall()
        assert waterfall is not None and waterfall.spans[0].name == WAITED
        assert waterfall.spans[0].start_s < 0 and waterfall.spans[0].end_s == 0.0
        land(2)
        third = query.process_available()
        assert third is not None and _answer(out, 2) == _expected(tables)
        assert _compactions(query) == [(1, "ran"), (2, "ran")] and _bases(out) == ["base-000002"]
    finally:
        query.stop()


@pytest.mark.spark
def test_a_tails_fold_runs_at_its_commit_even_with_a_file_waiting(spark, tmp_path: Path, monkeypatch) -> None:
    """A fold is what makes the batches after it cheaper (each merges and joins the tail), so it
    does not give way to a waiting file as the compaction does."""
    from tests.runtime.test_runs import runs_settings

    monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
    runs_settings(monkeypatch, 0, 0.0)  # runs from the first batch, a fold after every batch
    dirs = {n: tmp_path / "in" / n for n in ("R", "S")}
    for d in dirs.values():
        d.mkdir(parents=True)
    rng = random.Random(3)

    def land(i: int) -> None:
        pq.write_table(pa.table({"a": pa.array([rng.randrange(9) for _ in range(50)], pa.int32()),
                                 "b": pa.array([rng.randrange(5) for _ in range(50)], pa.int32())}),
                       dirs["R"] / f"{i:04d}.parquet")
        pq.write_table(pa.table({"k": pa.array([rng.randrange(5) for _ in range(20)], pa.int32()),
                                 "v": pa.array([rng.randrange(100) for _ in range(20)], pa.int32())}),
                       dirs["S"] / f"{i:04d}.parquet")

    def progress(message: str) -> None:  # while batch 1 writes its answer, batch 2's files land
        if message == "batch 000001: answer" and not (dirs["R"] / "0002.parquet").exists():
            land(2)

    sql = "SELECT R.a, count(*) AS n, sum(S.v) AS t FROM R JOIN S ON R.b = S.k GROUP BY R.a"
    query = streamfold.start(sql, {n: str(d) for n, d in dirs.items()}, str(tmp_path / "out"), spark=spark,
                             background=False, endpoint=False, partitions=2, compact_every=1, progress=progress,
                             schemas={"R": "a INT, b INT", "S": "k INT, v INT"})
    try:
        land(0)
        assert query.process_available() is not None
        land(1)
        store = query.engine.store
        assert store.tails, "the join inputs are kept as runs after batch 0"
        before = store.folds
        second = query.process_available()
        assert second is not None and second.batch == 1
        assert store.folds > before and not store.fold_due(), "the fold ran after batch 1 though a file waited"
        assert _compactions(query)[-1] == (1, "deferred")  # the compaction gave way to that file
    finally:
        query.stop()


@pytest.mark.spark
def test_the_warm_up_stops_after_its_first_run_when_a_file_waits(spark, tmp_path: Path, monkeypatch) -> None:
    """After the history's commit batch 1's plans are captured ahead and warmed: up to
    ``WARM_RUNS`` runs over a sample, but once a file waits only the first, and batch 1 starts."""
    from streamfold.runtime import shape
    from streamfold.runtime.prepared import Prepared

    monkeypatch.setattr(shape, "AHEAD_MIN_ROWS", 100)
    runs: list[bool] = []
    run_discarded = Prepared.run_discarded

    def counted(self: Prepared, frames):  # type: ignore[no-untyped-def]
        runs.append(frames is not None)
        return run_discarded(self, frames)

    monkeypatch.setattr(Prepared, "run_discarded", counted)
    # batch 1's file lands as the warm-up begins
    src, out, tables, land, progress = _landing(tmp_path, 11, 4, "batch 000000: warming the next batch's plans")

    land(0)
    query = streamfold.start(SQL, {"S": str(src)}, str(out), spark=spark, schemas={"S": "x INT, y INT"},
                             background=False, endpoint=False, partitions=2, progress=progress)
    try:
        assert query.process_available() is not None
        assert runs == [True], runs  # one warm-up run: the file waited before the second
        second = query.process_available()
        assert second is not None and second.batch == 1 and _answer(out, 1) == _expected(tables[:2])
        # with no file waiting the warm-up runs WARM_RUNS times (tests/runtime/test_prepared.py);
        # here the batches after the first replay the plans warmed once
        for i in (2, 3):
            land(i)
            assert query.process_available() is not None and _answer(out, i) == _expected(tables[:i + 1])
        assert runs == [True]
    finally:
        query.stop()
