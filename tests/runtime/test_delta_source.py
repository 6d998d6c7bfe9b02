"""Delta Lake tables as sources (issue 54): differential against DuckDB on the table's contents.

A Delta table is written by delta-rs (``deltalake``: appends, UPDATEs, DELETEs, MERGEs, an
UPDATE that rewrites rows unchanged) in a random sequence with NULLs, with and without the change
data feed; between batches one to three versions are committed. After every batch the snapshot
must equal DuckDB's answer over the table's current contents, read by delta-rs (another reader
than Spark), and the changes must be the difference of two snapshots.
"""

from __future__ import annotations

import os
import random

import pyarrow as pa
import pytest

from streamfold.verify import changes_difference, compare, duckdb_answer

from ..streams import _rows

pytestmark = [pytest.mark.spark]

SCHEMA = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64()), pa.field("s", pa.string())])
GROUP_BY = "SELECT k, count(*) AS n, sum(v) AS t, count(s) AS c, min(s) AS lo FROM T GROUP BY k"
JOIN = "SELECT T.k, count(*) AS n, sum(U.v) AS t, max(T.s) AS hi FROM T JOIN U ON T.k = U.k GROUP BY T.k"


def _rows_of(rng: random.Random, n: int) -> pa.Table:
    def maybe(x):
        return None if rng.random() < 0.15 else x

    return pa.Table.from_pylist([{"k": maybe(rng.randint(0, 5)), "v": maybe(rng.randint(-5, 20)),
                                  "s": maybe(rng.choice("abcd"))} for _ in range(n)], schema=SCHEMA)


def _create(path: str, rng: random.Random, cdf: bool, partition_by: list[str] | None = None) -> None:
    from deltalake import write_deltalake

    config = {"delta.enableChangeDataFeed": "true"} if cdf else None
    write_deltalake(path, _rows_of(rng, rng.randint(3, 12)), configuration=config, partition_by=partition_by)


def _change(path: str, rng: random.Random) -> str:
    """One random version of the table at ``path``; returns what it did."""
    from deltalake import DeltaTable, write_deltalake

    dt = DeltaTable(path)
    op = rng.choice(["append", "append", "update", "delete", "merge", "rewrite", "optimize"])
    k = rng.randint(0, 5)
    if op == "append":
        write_deltalake(path, _rows_of(rng, rng.randint(1, 10)), mode="append")
    elif op == "update":
        dt.update(updates={"v": "v + 1", "s": "'u'"} if rng.random() < 0.5 else {"v": "NULL"},
                  predicate=f"k = {k} OR v IS NULL" if rng.random() < 0.3 else f"k = {k}")
    elif op == "delete":
        dt.delete(f"k = {k}" if rng.random() < 0.7 else "s IS NULL")
    elif op == "optimize":  # files compacted: no row changes (dataChange false)
        dt.optimize.compact()
    elif op == "rewrite":  # every row of the files it touches rewritten unchanged
        dt.update(updates={"v": "v"}, predicate=f"k = {k}")
    else:
        source = pa.Table.from_pylist([{"k": key, "v": rng.randint(0, 9), "s": rng.choice(["m", None])}
                                       for key in rng.sample(range(0, 8), 3)], schema=SCHEMA)
        (dt.merge(source, predicate="t.k = s.k", source_alias="s", target_alias="t")
         .when_matched_update(updates={"v": "s.v", "s": "s.s"})
         .when_not_matched_insert_all().execute())
    return op


def _contents(path: str) -> pa.Table:
    from deltalake import DeltaTable

    return DeltaTable(path).to_pyarrow_table()


def _run(spark, tmp, sql: str, names: list[str], cdf: bool, seed: int, batches: int,
         partition_by: list[str] | None = None, **options):
    import streamfold

    rng = random.Random(seed)
    paths = {n: os.path.join(tmp, n.lower()) for n in names}
    for p in paths.values():
        _create(p, rng, cdf, partition_by)
    query = streamfold.start(sql, {n: p for n, p in paths.items()}, os.path.join(tmp, "out"),
                             formats={n: "delta" for n in names}, spark=spark, background=False, partitions=2,
                             endpoint=False, **options)
    previous: list[tuple] = []
    ops = []
    try:
        for batch in range(batches):
            if batch > 0:
                for _ in range(rng.randint(1, 3)):
                    name = rng.choice(names)
                    ops.append(f"{name}:{_change(paths[name], rng)}")
            result = query.process_available()
            assert result is not None and result.batch == batch
            snapshot = _rows(query.snapshot_pandas())
            expected = duckdb_answer(sql, {n: [_contents(p)] for n, p in paths.items()})
            check = compare(snapshot, expected)
            assert check.matches, f"batch {batch} after {ops}: {check.detail}"
            problem = changes_difference(previous, snapshot, _rows(query.changes_pandas()))
            assert problem is None, f"batch {batch}: {problem}"
            previous = snapshot
        return query, paths
    finally:
        query.stop()


def _feed(on: bool):
    from streamfold import Settings

    return Settings(delta_change_feed=on)


@pytest.mark.parametrize("cdf, strategy, partition_by", [
    (False, "incremental", None), (True, "incremental", None), (False, "recompute", None),
    (True, "incremental", ["k"]), (False, "incremental", ["s", "k"])],
    ids=["log", "cdf-feed", "log-recompute", "cdf-feed-partitioned", "log-partitioned"])
def test_a_delta_source_follows_random_updates_deletes_and_merges(spark, tmp_path, cdf, strategy, partition_by):
    """(``cdf-feed``: the table has the change data feed on and the source reads it —
    ``delta_change_feed``; a table with the feed read through its files is the kill test's.
    ``recompute``: every batch reads the staged history whole, deletions netted with inserts;
    partitioned: the partition columns' values, NULL among them, come from the log.)"""
    _run(spark, str(tmp_path), GROUP_BY, ["T"], cdf, seed=3 + cdf, batches=5, partition_by=partition_by,
         strategy=strategy, settings=_feed(cdf))


@pytest.mark.parametrize("cdf", [False, True], ids=["log", "cdf-feed"])
def test_two_delta_sources_joined(spark, tmp_path, cdf):
    _run(spark, str(tmp_path), JOIN, ["T", "U"], cdf, seed=11 + cdf, batches=4, settings=_feed(cdf))


class _Killed(BaseException):
    """The process dying at this instant (nothing after it runs, no handler catches it)."""


def _die_at(monkeypatch, target, name):
    real = getattr(target, name)

    def die(*args, **kwargs):
        if name == "rename" and not os.path.basename(args[1]).startswith("delta-v"):
            return real(*args, **kwargs)
        monkeypatch.undo()
        raise _Killed

    monkeypatch.setattr(target, name, die)


def test_killed_while_staging_between_versions_and_mid_batch_the_rerun_applies_each_version_once(
        spark, tmp_path, monkeypatch):
    """A run dies while it writes a staged file, after staging (before the batch records it), and
    after the batch's offsets (before its commit); versions are committed to the table between the
    deaths. Each rerun resumes at the next version: every commit's snapshot equals DuckDB over the
    table at the version the commit names, and the versions the commits cover follow each other."""
    import streamfold
    from streamfold.runtime import staged
    from streamfold.runtime.checkpoint import Checkpoint, OutputDir

    rng = random.Random(5)
    path, out = str(tmp_path / "t"), str(tmp_path / "out")
    _create(path, rng, cdf=False)

    def start():
        return streamfold.start(GROUP_BY, {"T": path + ":delta"}, out, spark=spark, background=False,
                                partitions=2, endpoint=False)

    deaths = [(staged.os, "rename"), (Checkpoint, "write_offsets"), (OutputDir, "commit")]
    q = start()
    assert q.process_available() is not None
    for target, name in deaths:
        for _ in range(2):
            _change(path, rng)
        _die_at(monkeypatch, target, name)
        with pytest.raises(_Killed):
            q.process_available()
        q.engine.close()
        _change(path, rng)  # a version committed while the run is down
        q = start()
        assert q.process_available() is not None
    while q.process_available() is not None:
        pass
    q.stop()

    from deltalake import DeltaTable

    commits = sorted(os.listdir(os.path.join(out, "commits")))
    next_version = 0
    for b, _name in enumerate(commits):
        record = q.commit(b)
        position = record["positions"]["T"]
        assert position["kind"] == "delta" and position["first_version"] == next_version, record
        next_version = position["version"] + 1
        snapshot = _rows(q.snapshot_pandas(b))
        expected = duckdb_answer(GROUP_BY, {"T": [DeltaTable(path, version=position["version"]).to_pyarrow_table()]})
        check = compare(snapshot, expected)
        assert check.matches, f"batch {b}: {check.detail}"
    assert next_version == DeltaTable(path).version() + 1


def _start(spark, path: str, out: str, sql: str = GROUP_BY, feed: bool = False):
    import streamfold

    return streamfold.start(sql, {"T": path + ":delta"}, out, spark=spark, background=False, partitions=2,
                            endpoint=False, settings=_feed(feed))


def _staged(out: str) -> list[str]:
    return sorted(os.listdir(os.path.join(out, "_checkpoint", "sources", "T")))


def _check_snapshot(q, path: str) -> None:
    expected = duckdb_answer(GROUP_BY, {"T": [_contents(path).select(["k", "v", "s"])]})
    check = compare(_rows(q.snapshot_pandas()), expected)
    assert check.matches, check.detail


def test_an_incompatible_schema_change_is_refused_whole_and_the_run_goes_on_once_the_column_is_back(
        spark, tmp_path):
    from deltalake import write_deltalake

    from streamfold.connectors.delta_source import DeltaSourceError

    rng = random.Random(8)
    path, out = str(tmp_path / "t"), str(tmp_path / "out")
    _create(path, rng, cdf=False)
    q = _start(spark, path, out)
    try:
        assert q.process_available() is not None
        _change(path, rng)
        changed = pa.table({"k": pa.array([1, 2], pa.int32()), "v": ["x", "y"], "s": ["a", "b"]})
        write_deltalake(path, changed, mode="overwrite", schema_mode="overwrite")  # v: BIGINT → STRING
        staged = _staged(out)
        for _ in range(2):  # refused again on a retry: nothing half-applied
            with pytest.raises(DeltaSourceError) as e:
                q.process_available()
            assert e.value.code == "DELTA_SCHEMA_CHANGED" and e.value.params["column"] == "v", e.value
            assert e.value.hint and _staged(out) == staged and q.last_batch == 0
        write_deltalake(path, _rows_of(rng, 6), mode="overwrite", schema_mode="overwrite")  # v is back
        _change(path, rng)
        assert q.process_available() is not None and q.last_batch == 1
        _check_snapshot(q, path)
    finally:
        q.stop()
    # A column added (a compatible change) is ignored, also by a restart: the query is the same one.
    wider = _rows_of(rng, 4).append_column("extra", pa.array([1, 2, 3, 4], pa.int64()))
    write_deltalake(path, wider, mode="append", schema_mode="merge")
    q = _start(spark, path, out)
    try:
        assert q.process_available() is not None and q.last_batch == 2
        _check_snapshot(q, path)
    finally:
        q.stop()


def test_a_table_vacuumed_past_the_version_needed_is_refused_and_the_checkpoint_is_untouched(spark, tmp_path):
    from deltalake import DeltaTable

    from streamfold.connectors.delta_source import DeltaSourceError

    rng = random.Random(9)
    path, out = str(tmp_path / "t"), str(tmp_path / "out")
    _create(path, rng, cdf=False)
    DeltaTable(path).update(updates={"v": "v"}, predicate="true")
    q = _start(spark, path, out)
    try:
        assert q.process_available() is not None
        _contents(path)
        DeltaTable(path).delete("true")  # removes the files batch 1 must read as deletions
        DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
        staged = _staged(out)
        with pytest.raises(DeltaSourceError) as e:
            q.process_available()
        assert e.value.code == "DELTA_VERSION_GONE" and "vacuum" in (e.value.hint or ""), e.value
        assert _staged(out) == staged and q.last_batch == 0
        assert len(os.listdir(os.path.join(out, "commits"))) == 1
    finally:
        q.stop()


@pytest.mark.parametrize("make, code", [
    ("directory", "NOT_A_DELTA_TABLE"),
    ("missing", "NOT_A_DELTA_TABLE"),
    ("deletion_vectors", "DELTA_DELETION_VECTORS"),
])
def test_what_cannot_be_read_exactly_is_refused_before_anything_runs(spark, tmp_path, make, code):
    from deltalake import write_deltalake

    from streamfold.errors import SourceError

    path, out = str(tmp_path / "t"), str(tmp_path / "out")
    rows = _rows_of(random.Random(1), 5)
    if make == "directory":
        os.makedirs(path)
        import pyarrow.parquet as pq

        pq.write_table(rows, os.path.join(path, "0.parquet"))
    elif make == "deletion_vectors":
        write_deltalake(path, rows, configuration={"delta.enableDeletionVectors": "true"})
    with pytest.raises(SourceError) as e:
        _start(spark, path, out)
    assert e.value.code == code and e.value.hint, e.value
    assert not os.path.exists(os.path.join(out, "commits"))


@pytest.mark.parametrize("cdf", [False, True], ids=["log", "cdf"])
def test_rows_rewritten_unchanged_and_files_compacted_cost_no_row(spark, tmp_path, cdf):
    """An UPDATE that sets every row to itself rewrites every file; an OPTIMIZE moves the rows
    into one file: neither changes a row, so the batch carries none (netted, or no dataChange)."""
    from deltalake import DeltaTable, write_deltalake

    rng = random.Random(4)
    path, out = str(tmp_path / "t"), str(tmp_path / "out")
    _create(path, rng, cdf=cdf)
    write_deltalake(path, _rows_of(rng, 7), mode="append")
    q = _start(spark, path, out, feed=cdf)
    try:
        first = q.process_available()
        assert first is not None and first.rows["T"] > 0
        DeltaTable(path).update(updates={"s": "s"}, predicate="true")
        DeltaTable(path).optimize.compact()
        result = q.process_available()
        if cdf:  # the change feed has each row's pre- and post-image: they cancel in the batch
            assert result is not None and result.change_rows == 0
        else:
            assert result is not None and result.rows["T"] == 0 and result.change_rows == 0, result
        version = DeltaTable(path).version()
        assert q.commit(1)["positions"]["T"] == {"kind": "delta", "first_version": 2, "version": version}
        _check_snapshot(q, path)
        from streamfold.runtime.analyze import analyze

        assert f"source T (Delta table) after batch 1: version {version}" in analyze(out).text("")
    finally:
        q.stop()


@pytest.mark.slow
def test_sigkill_of_streamfold_run_while_versions_land_applies_each_version_once(tmp_path):
    """``streamfold run --source T=PATH:delta`` killed (SIGKILL) at a random instant after each run's
    first commit while a writer commits versions (staging, between batches, mid-batch), then run
    again: the commits cover the versions 0, 1, 2, … once each, in
    order, and each commit's snapshot equals DuckDB over the table at the version it names."""
    import json
    import signal
    import subprocess
    import sys
    import threading
    import time

    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    rng = random.Random(21)
    path, out = str(tmp_path / "t"), str(tmp_path / "out")
    _create(path, rng, cdf=True)
    env = {**os.environ, "STREAMFOLD_DRIVER_MEMORY": "1g"}

    def command(idle: float) -> list[str]:
        return [sys.executable, "-m", "streamfold", "run", GROUP_BY, "--source", f"T={path}:delta", "--output", out,
                "--trigger", "0.2", "--until-idle", str(idle), "--partitions", "2"]

    def committed() -> int:
        directory = os.path.join(out, "commits")
        return len(os.listdir(directory)) if os.path.isdir(directory) else 0

    for _ in range(2):
        before = committed()
        proc = subprocess.Popen(command(60), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True, env=env)
        stop = threading.Event()

        def write(stop: threading.Event = stop) -> None:
            while not stop.is_set():
                time.sleep(rng.uniform(0.3, 1.0))
                _change(path, rng)

        writer = threading.Thread(target=write)
        writer.start()
        deadline = time.monotonic() + 120
        while committed() == before and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)  # killed once this run has committed a batch: mid-stream, not at start-up
        time.sleep(rng.uniform(0.0, 2.0))
        alive = proc.poll() is None
        if alive:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        stop.set()
        writer.join()
        assert alive and proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
    _change(path, rng)
    final = subprocess.run(command(3), capture_output=True, text=True, env=env, timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]

    commits = sorted(os.listdir(os.path.join(out, "commits")))
    assert commits == [f"{b:06d}.json" for b in range(len(commits))], "batches numbered without gaps"
    next_version = 0
    for b, name in enumerate(commits):
        with open(os.path.join(out, "commits", name)) as fh:
            position = json.load(fh)["positions"]["T"]
        assert position["first_version"] == next_version, f"batch {b}: {position}"
        next_version = position["version"] + 1
        snapshot = [tuple(r.values()) for r in pq.read_table(os.path.join(out, "snapshots", f"{b:06d}")).to_pylist()]
        expected = duckdb_answer(GROUP_BY, {"T": [DeltaTable(path, version=position["version"]).to_pyarrow_table()]})
        check = compare(snapshot, expected)
        assert check.matches, f"batch {b} after restarts: {check.detail}"
    assert next_version == DeltaTable(path).version() + 1


def test_an_update_into_equal_rows_is_exact_with_the_change_feed_on(spark, tmp_path):
    """Two rows an UPDATE makes equal: delta-rs 1.6.6's change feed has one post-image for them
    (found by the kill test above); read from the files the version removed and added, the batch
    has both. So by default a table's change feed is not read (``delta_change_feed``)."""
    from deltalake import DeltaTable, write_deltalake

    path, out = str(tmp_path / "t"), str(tmp_path / "out")
    rows = pa.Table.from_pylist([{"k": 0, "v": 13, "s": "u"}, {"k": 0, "v": 13, "s": "b"}, {"k": 1, "v": 2, "s": None}],
                                schema=SCHEMA)
    write_deltalake(path, rows, configuration={"delta.enableChangeDataFeed": "true"})
    q = _start(spark, path, out)
    try:
        assert q.process_available() is not None
        DeltaTable(path).update(updates={"v": "v + 1", "s": "'u'"}, predicate="k = 0")
        assert q.process_available() is not None
        _check_snapshot(q, path)
        assert ("u", 2) in {(r[4], r[1]) for r in _rows(q.snapshot_pandas())}
    finally:
        q.stop()
