"""Exactly once across SIGKILL: ``streamfold run --sink postgres://…`` killed between its commit
and the sink's transaction, inside the sink's transaction, and at a random instant; each rerun
catches the table up, and at the end it equals the last committed snapshot (and DuckDB's answer)
with its progress row at the last batch — no batch applied twice, none skipped.

The two precise instants are made, not hoped for: the test holds a lock the sink's transaction
needs (the progress row's, or the table's) so the run is provably past its commit and waiting
inside the sink when it is killed."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamfold.verify import compare, duckdb_answer

from .oracle import postgres_rows

pytestmark = [pytest.mark.spark]

SQL = "SELECT k, count(*) AS n, sum(v) AS total FROM S GROUP BY k"
SCHEMA = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64()), pa.field("_weight", pa.int64())])


def _files(n: int, seed: int) -> list[pa.Table]:
    rng = random.Random(seed)
    live: list[tuple[int, int]] = []
    out = []
    for _ in range(n):
        rows = [(rng.choice([None, 0, 1, 2, 3, 4, 5]), rng.randint(0, 9), 1) for _ in range(rng.randint(3, 12))]
        for r in rng.sample(live, k=min(len(live), rng.randint(0, 3))):
            rows.append(r + (-1,))
            live.remove(r)
        live.extend(r[:2] for r in rows if r[2] == 1)
        out.append(pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in rows], schema=SCHEMA))
    return out


def _write(src: str, i: int, table: pa.Table) -> None:
    tmp = os.path.join(src, f".{i:04d}.parquet")
    pq.write_table(table, tmp)
    os.rename(tmp, os.path.join(src, f"{i:04d}.parquet"))


def _committed(out: str) -> int:
    d = os.path.join(out, "commits")
    return max((int(n[:6]) for n in os.listdir(d) if n.endswith(".json")), default=-1) if os.path.isdir(d) else -1


def _wait(pred, log, timeout: float = 240) -> None:
    end = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < end, f"timed out; the run's output:\n{log()}"
        time.sleep(0.1)


def _progress(conn, table: str) -> int:
    row = conn.execute("SELECT batch FROM streamfold_sink_progress WHERE target = %s", (table,)).fetchone()
    return -1 if row is None else row[0]


def test_sigkill_around_the_sinks_transaction_delivers_every_batch_once(tmp_path, postgres):
    src, out = str(tmp_path / "S"), str(tmp_path / "out")
    os.makedirs(src)
    files = _files(28, seed=5)
    table = f"k_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "STREAMFOLD_DRIVER_MEMORY": "1g"}  # PGPASSWORD comes from the fixture

    def command(idle: float) -> list[str]:
        return [sys.executable, "-m", "streamfold", "run", SQL, "--source", f"S={src}", "--output", out,
                "--trigger", "0.2", "--until-idle", str(idle), "--partitions", "2", "--quiet",
                "--sink", postgres.url(table)]

    logs, procs = [], []

    def start() -> subprocess.Popen:
        logs.append(open(tmp_path / f"run{len(logs)}.log", "w+"))
        procs.append(subprocess.Popen(command(120), stdout=logs[-1], stderr=subprocess.STDOUT,
                                      start_new_session=True, env=env))
        return procs[-1]

    def wait(pred) -> None:
        _wait(pred, lambda: logs[-1].seek(0) or logs[-1].read()[-3000:])

    def kill(proc: subprocess.Popen) -> None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    try:
        written = 0
        for _ in range(3):
            _write(src, written, files[written])
            written += 1
        first = subprocess.run(command(1), capture_output=True, text=True, env=env, timeout=600)
        assert first.returncode == 0, first.stderr[-3000:]
        conn, blocker = postgres.connect(), postgres.connect()
        assert _progress(conn, table) == _committed(out) >= 0

        # 1. Between streamfold's commit and the sink's transaction: the progress row is held.
        blocker.execute("BEGIN")
        blocker.execute("SELECT batch FROM streamfold_sink_progress WHERE target = %s FOR UPDATE", (table,))
        before = _committed(out)
        _write(src, written, files[written])
        written += 1
        proc = start()
        wait(lambda: _committed(out) > before)
        time.sleep(1.0)
        kill(proc)
        blocker.execute("ROLLBACK")
        assert _progress(conn, table) == before < _committed(out)  # committed, not delivered

        # 2. Inside the sink's transaction: its rows staged, the table held.
        blocker.execute("BEGIN")
        blocker.execute(f'LOCK TABLE "{table}" IN ACCESS EXCLUSIVE MODE')
        proc = start()
        wait(lambda: conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                                   "AND application_name = 'streamfold'").fetchone()[0] > 0)
        kill(proc)  # killed waiting inside the catch-up's transaction
        blocker.execute("ROLLBACK")
        assert _progress(conn, table) == before

        # 3. At a random instant while files arrive, one batch each.
        rng = random.Random(3)
        stop = threading.Event()

        def feed(until: int) -> None:
            nonlocal written
            while not stop.is_set() and written < until:
                mark = _committed(out)
                _write(src, written, files[written])
                written += 1
                deadline = time.monotonic() + 240
                while not stop.is_set() and _committed(out) <= mark:
                    assert time.monotonic() < deadline, "no batch for a new file"
                    time.sleep(0.05)

        proc = start()
        feeder = threading.Thread(target=feed, args=(len(files) - 8,))
        feeder.start()
        wait(lambda: _committed(out) > before + 2)
        time.sleep(rng.uniform(0.0, 3.0))
        kill(proc)
        stop.set()
        feeder.join()

        # 4. A last run takes the rest, one file a batch, and exits once idle.
        stop.clear()
        logs.append(open(tmp_path / "final.log", "w+"))
        proc = subprocess.Popen(command(3), stdout=logs[-1], stderr=subprocess.STDOUT, start_new_session=True,
                                env=env)
        procs.append(proc)
        feed(len(files))
        assert proc.wait(timeout=600) == 0, (logs[-1].seek(0), logs[-1].read()[-3000:])[1]
        assert _committed(out) + 1 >= 20  # batches

        last = _committed(out)
        assert _progress(conn, table) == last
        rows = postgres_rows(conn, table, ["k", "n", "total"], False)
        snapshot = [tuple(r.values()) for r in pq.read_table(os.path.join(out, "snapshots", f"{last:06d}")).to_pylist()]
        assert sorted(rows, key=repr) == sorted(snapshot, key=repr)
        result = compare(rows, duckdb_answer(SQL, {"S": files}))
        assert result.matches, result.detail
        conn.close()
        blocker.close()
    finally:
        for p in procs:
            if p.poll() is None:
                kill(p)
