"""Exactly once across SIGKILL: ``streamfold run --sink postgres://… --sink PATH:delta`` killed
after its commit, inside the PostgreSQL sink's transaction (the Delta sink's files written, not
yet in its log), and at a random instant while batches commit and are delivered; each rerun
catches both sinks up, and after more than 20 batches the PostgreSQL table and the Delta table
equal the last committed snapshot (and DuckDB's answer), the progress row and Delta's transaction
id at the last batch — no batch applied twice, none skipped; the changes tables beside them net
to the same answer, each batch in them once.

The first instant is made, not hoped for: the test holds a lock on the table (reads pass, writes
wait), so the run is provably past its commit, its rows staged inside the sink's transaction,
when it is killed. Three processes in all: each start of one is a JVM's."""

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

from .oracle import delta_app_ids, delta_batch_files, delta_changes_netted, delta_rows, postgres_rows
from .test_postgres_sink import changes_netted

pytestmark = [pytest.mark.spark]

SQL = "SELECT k, count(*) AS n, sum(v) AS total FROM S GROUP BY k"
SCHEMA = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64()), pa.field("_weight", pa.int64())])


def _check_delta(path: str, rows: list[tuple], last: int) -> None:
    """The Delta sink's answer table equals ``rows`` and its transaction id is at ``last``; its
    changes table nets to the same answer, each batch's changes one Delta commit (one file per
    batch: no batch written twice)."""
    from collections import Counter

    from deltalake import DeltaTable

    from streamfold.connectors.delta_sink import changes_path

    assert sorted(delta_rows(path), key=repr) == sorted(rows, key=repr)
    (app,) = delta_app_ids(path)
    assert DeltaTable(path).transaction_version(app) == last == DeltaTable(changes_path(path)).transaction_version(app)
    assert +delta_changes_netted(changes_path(path)) == Counter(rows)
    per_batch = delta_batch_files(changes_path(path))
    assert all(n == 1 for n in per_batch.values()), per_batch


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
    delta = str(tmp_path / "delta" / "answer")
    env = {**os.environ, "STREAMFOLD_DRIVER_MEMORY": "1g"}  # PGPASSWORD comes from the fixture

    def command(idle: float) -> list[str]:
        return [sys.executable, "-m", "streamfold", "run", SQL, "--source", f"S={src}", "--output", out,
                "--trigger", "0.2", "--until-idle", str(idle), "--partitions", "2", "--quiet",
                "--sink", postgres.url(table) + f"&changes={table}_changes", "--sink", f"{delta}:delta"]

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
        conn, blocker = postgres.connect(), postgres.connect()
        # The table made beforehand, as a user may (empty, the answer's columns): the sink takes it.
        conn.execute(f'CREATE TABLE "{table}" (k integer, n bigint, total bigint)')

        # 1. Past the commit, inside the sink's transaction: the table held against writes.
        blocker.execute("BEGIN")
        blocker.execute(f'LOCK TABLE "{table}" IN EXCLUSIVE MODE')
        proc = start()
        wait(lambda: _committed(out) >= 0 and conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND application_name = 'streamfold'").fetchone()[0] > 0)
        kill(proc)
        blocker.execute("ROLLBACK")
        before = _committed(out)
        assert _progress(conn, table) < before == 0  # committed, not delivered

        # 2. At a random instant while files arrive, one batch each.
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

        # 3. A last run catches up, takes the rest, one file a batch, and exits once idle.
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
        # The changes table got every batch once: one _batch per batch with changes, netting to the answer.
        assert compare(changes_netted(conn, f"{table}_changes", ["k", "n", "total"]), rows).matches
        batches = [b for (b,) in conn.execute(f'SELECT DISTINCT _batch FROM "{table}_changes" ORDER BY 1')]
        assert batches == sorted(set(batches)) and batches[-1] <= last
        _check_delta(delta, rows, last)
        conn.close()
        blocker.close()
    finally:
        for p in procs:
            if p.poll() is None:
                kill(p)
