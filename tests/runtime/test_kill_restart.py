"""Durability: SIGKILL ``streamfold run`` at random instants, rerun the same command, repeat.

Afterwards every committed batch must be exactly what an uninterrupted run gives over the same
files: the snapshot equals DuckDB over the files the commits list up to it (at the batch time the
commit records: the query keeps the rows of the last minutes of event time, so rows expire across
the kills), every file is listed by exactly one commit, and batches are numbered without gaps.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamfold.verify import compare, duckdb_answer

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SQL = ("SELECT k, count(*) AS n, sum(v) AS total, count(DISTINCT v) AS d, min(v) AS lo FROM S "
       "WHERE ts > max_event_time() - INTERVAL 4 MINUTES GROUP BY k")
SCHEMA = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64()), pa.field("ts", pa.timestamp("us", tz="UTC")),
                    pa.field("_weight", pa.int64())])
T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
PLAIN_SQL = "SELECT k, count(*) AS n, sum(v) AS total FROM S GROUP BY k"
PLAIN_SCHEMA = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64()), pa.field("_weight", pa.int64())])
MINUTE_US = 60_000_000


def _oracle(record: dict) -> str:
    """DuckDB's text for SQL at the batch time ``record`` gives."""
    return ("SELECT k, count(*), sum(v), count(DISTINCT v), min(v) FROM S "
            f"WHERE epoch_us(ts) > {int(record['batch_time_us'])} - {4 * MINUTE_US} GROUP BY k")


def _files(n: int, seed: int) -> list[pa.Table]:
    """Files of inserts and of deletions of rows inserted by earlier files; file i's event times
    lie around minute i, some of them out of order (up to three minutes early: late for the bound
    when the stream has moved on)."""
    rng = random.Random(seed)
    live: list[tuple[int, int, dt.datetime]] = []
    out = []
    for i in range(n):
        rows = []
        for _ in range(rng.randint(5, 30)):
            r = (rng.randint(0, 6), rng.randint(0, 20), T0 + dt.timedelta(seconds=60 * i + rng.randint(-180, 30)))
            rows.append(r + (1,))
        for r in rng.sample(live, k=min(len(live), rng.randint(0, 4))):
            rows.append(r + (-1,))
            live.remove(r)
        live.extend(r[:3] for r in rows if r[3] == 1)
        out.append(pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA))
    return out


def _command(src: str, out: str, idle: float) -> list[str]:
    return [sys.executable, "-m", "streamfold", "run", SQL, "--source", f"S={src}", "--output", out,
            "--trigger", "0.2", "--until-idle", str(idle), "--partitions", "2", "--compact-every", "3"]


def _write(src: str, i: int, table: pa.Table) -> None:
    tmp = os.path.join(src, f".{i:04d}.parquet")
    pq.write_table(table, tmp)
    os.rename(tmp, os.path.join(src, f"{i:04d}.parquet"))  # appears whole


def test_sigkill_at_random_points_loses_nothing_and_counts_nothing_twice(tmp_path):
    src, out = str(tmp_path / "S"), str(tmp_path / "out")
    os.makedirs(src)
    files = _files(24, seed=7)
    rng = random.Random(11)
    written = 0
    for i in range(3):
        _write(src, i, files[i])
        written += 1
    env = {**os.environ, "STREAMFOLD_DRIVER_MEMORY": "1g"}
    kills = 0
    # Three kills, one at a random instant in each third of the span five were drawn from
    # (3–14 s after the command starts; in a random order): early, while the JVM starts and the
    # checkpoint is restored; then as the run works through the backlog and new files, batch
    # after batch, a compaction every 3. (Five anywhere in the span took ~18 s more and
    # hit the same thirds.)
    windows = [(3.0, 6.0), (6.0, 10.0), (10.0, 14.0)]
    rng.shuffle(windows)
    for window in windows:
        proc = subprocess.Popen(_command(src, out, 60), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True, env=env)
        stop = threading.Event()

        def feed(stop: threading.Event = stop) -> None:
            nonlocal written
            while not stop.is_set() and written < len(files) - 4:
                time.sleep(rng.uniform(0.3, 1.5))
                _write(src, written, files[written])
                written += 1

        feeder = threading.Thread(target=feed)
        feeder.start()
        time.sleep(rng.uniform(*window))
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
        stop.set()
        feeder.join()
        # (--until-idle 60: a run that is gone before its kill failed)
        assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
    assert kills == len(windows)
    while written < len(files):
        _write(src, written, files[written])
        written += 1
    final = subprocess.run(_command(src, out, 3), capture_output=True, text=True, env=env, timeout=600)
    assert final.returncode == 0, final.stderr[-3000:]

    commits = sorted(os.listdir(os.path.join(out, "commits")))
    assert commits == [f"{b:06d}.json" for b in range(len(commits))], "batches must be numbered without gaps"
    by_name = {f"{i:04d}.parquet": t for i, t in enumerate(files)}
    consumed: list[str] = []
    for b, name in enumerate(commits):
        record = json.load(open(os.path.join(out, "commits", name)))
        consumed += record["inputs"]["S"]
        prefix = [by_name[n] for n in consumed]
        snapshot = pq.read_table(os.path.join(out, "snapshots", f"{b:06d}")).to_pylist()
        actual = [tuple(r.values()) for r in snapshot]
        result = compare(actual, duckdb_answer(SQL, {"S": prefix}, duckdb_sql=_oracle(record)))
        assert result.matches, f"batch {b} after restarts: {result.detail}"
    assert sorted(consumed) == sorted(by_name), "every file is applied exactly once"
    # the bound kept only the last minutes: most rows (of 24 files, a minute apart) left by expiring
    assert sum(r[1] for r in actual) < sum(t.column("_weight").to_pylist().count(1) for t in files) // 2


def test_ctrl_c_mid_batch_says_where_a_rerun_resumes_and_the_rerun_loses_nothing(tmp_path):
    """Ctrl-C (SIGINT) while a batch runs: exit 130 with one line on where the rerun resumes, no
    traceback (PySpark's own handler called into the JVM from inside the signal and printed two);
    the same command again applies every file exactly once."""
    src, out = str(tmp_path / "S"), str(tmp_path / "out")
    os.makedirs(src)
    rng = random.Random(5)
    files = [pa.table({"k": pa.array([rng.randint(0, 50) for _ in range(20_000)], pa.int32()),
                       "v": pa.array([rng.randint(0, 9) for _ in range(20_000)], pa.int64()),
                       "_weight": pa.array([1] * 20_000, pa.int64())}, schema=PLAIN_SCHEMA) for _ in range(3)]
    _write(src, 0, files[0])
    command = [sys.executable, "-m", "streamfold", "run", PLAIN_SQL, "--source", f"S={src}", "--output", out,
               "--trigger", "0.2", "--partitions", "2"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 300
        while not os.path.exists(os.path.join(out, "commits", "000000.json")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()[-3000:]  # type: ignore[union-attr]
            time.sleep(0.05)
        _write(src, 1, files[1])  # batch 1, the first increment in a cold JVM: about a second
        time.sleep(0.4)
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read()  # type: ignore[union-attr]
    assert code == 130, err[-3000:]
    assert "Traceback" not in err and "ERROR:root" not in err, err[-3000:]
    last = max(int(n[:6]) for n in os.listdir(os.path.join(out, "commits")) if n.endswith(".json"))
    assert f"committed through batch {last:06d}: the same command resumes after it" in err and "interrupted" in err
    _write(src, 2, files[2])
    rerun = subprocess.run(command + ["--until-idle", "2"], capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    consumed = [n for c in sorted(os.listdir(os.path.join(out, "commits")))
                for n in json.load(open(os.path.join(out, "commits", c)))["inputs"]["S"]]
    assert sorted(consumed) == ["0000.parquet", "0001.parquet", "0002.parquet"], "every file once"
    final = max(os.listdir(os.path.join(out, "snapshots")))
    actual = [tuple(r.values()) for r in pq.read_table(os.path.join(out, "snapshots", final)).to_pylist()]
    assert compare(actual, duckdb_answer(PLAIN_SQL, {"S": files})).matches


class _Killed(BaseException):
    """The process dying at this instant (nothing after it runs, no handler catches it)."""


def test_killed_right_after_quarantining_a_file_the_rerun_commits_the_batch_without_it(spark, tmp_path, monkeypatch):
    """--on-bad-file quarantine moves a bad file away; a run killed just after the move must not
    leave a batch whose recorded inputs name the moved file (every rerun failed on it)."""
    import shutil

    import streamfold
    from streamfold.runtime import inputs as inputs_module

    src, out = str(tmp_path / "S"), str(tmp_path / "out")
    os.makedirs(src)
    good = pa.Table.from_pylist([{"k": 1, "v": 5, "_weight": 1}, {"k": 2, "v": 7, "_weight": 1}], schema=PLAIN_SCHEMA)
    _write(src, 0, good)
    with open(os.path.join(src, "0001.parquet"), "wb") as fh:
        fh.write(b"PAR1 not parquet")

    def run():
        return streamfold.start(PLAIN_SQL, {"S": src}, out, spark=spark, background=False, partitions=2,
                                on_bad_file="quarantine")

    real_move = shutil.move

    def move_then_die(a, b):
        real_move(a, b)
        raise _Killed

    q = run()
    monkeypatch.setattr(inputs_module.shutil, "move", move_then_die)
    with pytest.raises(_Killed):
        q.process_available()
    q.engine.close()
    monkeypatch.undo()

    q = run()
    try:
        assert q.process_available() is not None
        assert q.commit(0)["inputs"] == {"S": ["0000.parquet"]}
        assert os.listdir(os.path.join(out, "quarantine", "S"))[:1] == ["0001.parquet"]
        check = compare(q.snapshot_pandas(0).itertuples(index=False, name=None),
                        duckdb_answer(PLAIN_SQL, {"S": [good]}))
        assert check.matches, check.detail
    finally:
        q.stop()
