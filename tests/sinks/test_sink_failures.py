"""A sink that fails: refused at start with a coded error (wrong password, a table with other
columns, nothing listening); down while the run goes on, it delays delivery, never a commit —
each batch reports its lag, and once the server takes connections again (a Delta table's path is
usable again) the next batch catches the table up, in order, exactly once."""

from __future__ import annotations

import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfold
from streamfold.errors import SinkError

from .oracle import postgres_rows

pytestmark = [pytest.mark.spark]

SQL = "SELECT k, count(*) AS n, sum(v) AS total FROM S GROUP BY k"
SCHEMA = "k INT, v BIGINT"


def _file(src: str, i: int, rows: list[tuple[int, int]]) -> None:
    pq.write_table(pa.table({"k": pa.array([r[0] for r in rows], pa.int32()),
                             "v": pa.array([r[1] for r in rows], pa.int64())}), os.path.join(src, f"{i:04d}.parquet"))


def _start(spark, tmp_path, sink: str):
    src = tmp_path / "S"
    src.mkdir(parents=True, exist_ok=True)
    return str(src), lambda: streamfold.start(SQL, {"S": str(src)}, str(tmp_path / "out"), schemas={"S": SCHEMA},
                                              spark=spark, background=False, sinks=[sink], partitions=2)


def test_wrong_password_other_schema_and_no_server_are_coded_errors_at_start(spark, tmp_path, postgres, monkeypatch):
    src, start = _start(spark, tmp_path / "a", postgres.url("t_auth"))
    _file(src, 0, [(1, 1)])
    monkeypatch.setenv("PGPASSWORD", "not-the-password")
    with pytest.raises(SinkError) as e:
        start()
    assert e.value.code == "SINK_AUTH" and "not-the-password" not in str(e.value)
    monkeypatch.setenv("PGPASSWORD", postgres.password)

    conn = postgres.connect()
    conn.execute("CREATE TABLE t_other (k integer, n text)")
    src, start = _start(spark, tmp_path / "b", postgres.url("t_other"))
    _file(src, 0, [(1, 1)])
    with pytest.raises(SinkError) as e:
        start()
    assert e.value.code == "SINK_SCHEMA" and e.value.params["found"] == ["k integer", "n text"]

    # A changes table with other columns is refused the same way, naming its option.
    conn.execute("CREATE TABLE t_changes_other (k integer)")
    src, start = _start(spark, tmp_path / "d", postgres.url("t_fresh") + "&changes=t_changes_other")
    _file(src, 0, [(1, 1)])
    with pytest.raises(SinkError) as e:
        start()
    assert e.value.code == "SINK_SCHEMA" and "?changes=" in e.value.hint

    closed = f"postgres://{postgres.user}@127.0.0.1:1/postgres?table=t"
    src, start = _start(spark, tmp_path / "c", closed)
    _file(src, 0, [(1, 1)])
    with pytest.raises(SinkError) as e:
        start()
    assert e.value.code == "SINK_UNAVAILABLE"
    assert not os.path.exists(tmp_path / "c" / "out" / "commits" / "000000.json")  # refused before any batch
    conn.close()


def test_a_sink_down_lags_and_catches_up_when_it_is_back(spark, tmp_path, postgres):
    admin = postgres.connect()
    db = f"down_{uuid.uuid4().hex[:8]}"
    admin.execute(f"CREATE DATABASE {db}")
    url = f"postgres://{postgres.user}@{postgres.host}:{postgres.port}/{db}?table=answer"
    src, start = _start(spark, tmp_path, url)
    _file(src, 0, [(1, 10), (2, 20)])
    query = start()
    try:
        first = query.process_available()
        assert first.sink_lags == {url: 0} and "delivered" in first.line()
        # The server refuses new connections to the database and drops the sink's.
        admin.execute(f"ALTER DATABASE {db} ALLOW_CONNECTIONS false")
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (db,))
        _file(src, 1, [(1, 5), (3, 7)])
        second = query.process_available()
        assert second.batch == 1 and second.sink_lags == {url: 1} and "1 behind" in second.line()
        _file(src, 2, [(None, 1)])
        third = query.process_available()
        assert third.batch == 2 and third.sink_lags == {url: 2}  # committed all the same
        assert query.status()["sinks"] == [{"sink": url, "delivered": 0, "failing": True}]
        from streamfold.control.cli import show_status

        assert f"sink {url}: holds batch 000000 (failing" in show_status(query.status())
        admin.execute(f"ALTER DATABASE {db} ALLOW_CONNECTIONS true")
        _file(src, 3, [(2, -20)])
        fourth = query.process_available()
        assert fourth.sink_lags == {url: 0}
        assert query.status()["sinks"] == [{"sink": url, "delivered": 3, "failing": False}]
    finally:
        query.stop()
    import psycopg

    with psycopg.connect(host=postgres.host, port=postgres.port, user=postgres.user, password=postgres.password,
                         dbname=db) as conn:
        rows = postgres_rows(conn, "answer", ["k", "n", "total"], False)
        assert sorted(rows, key=repr) == sorted([(1, 2, 15), (2, 2, 0), (3, 1, 7), (None, 1, 1)], key=repr)
        assert conn.execute("SELECT batch FROM streamfold_sink_progress").fetchall() == [(3,)]
    admin.execute(f"DROP DATABASE {db}")
    admin.close()


def test_a_delta_table_that_cannot_be_written_lags_and_catches_up(spark, tmp_path):
    """The Delta sink's table path unusable (here a file in its place) while batches commit: each
    batch reports its lag, its files are never named by a log; once the path is back the next
    batch catches both tables up, each missed batch once."""
    from collections import Counter

    from streamfold.connectors.delta_sink import changes_path

    from .oracle import delta_batch_files, delta_changes_netted, delta_rows

    path = str(tmp_path / "lake" / "answer")
    sink = f"{path}:delta"
    src, start = _start(spark, tmp_path, sink)
    _file(src, 0, [(1, 10), (2, 20)])
    query = start()
    try:
        assert query.process_available().sink_lags == {sink: 0}
        os.rename(path, path + ".away")
        open(path, "w").close()
        _file(src, 1, [(1, 5), (3, 7)])
        second = query.process_available()
        assert second.batch == 1 and second.sink_lags == {sink: 1} and "1 behind" in second.line()
        _file(src, 2, [(None, 1)])
        assert query.process_available().sink_lags == {sink: 2}
        assert query.status()["sinks"] == [{"sink": sink, "delivered": 0, "failing": True}]
        os.remove(path)
        os.rename(path + ".away", path)
        _file(src, 3, [(2, -20)])
        assert query.process_available().sink_lags == {sink: 0}
        assert query.status()["sinks"] == [{"sink": sink, "delivered": 3, "failing": False}]
    finally:
        query.stop()
    expected = [(1, 2, 15), (2, 2, 0), (3, 1, 7), (None, 1, 1)]
    assert sorted(delta_rows(path), key=repr) == sorted(expected, key=repr)
    assert +delta_changes_netted(changes_path(path)) == Counter(expected)
    batches = delta_batch_files(changes_path(path))
    assert sorted(batches) == ["000000", "000001", "000002", "000003"] and set(batches.values()) == {1}


def test_a_full_disk_is_a_coded_error_and_the_batch_follows_once_there_is_room(spark, tmp_path, postgres, caplog):
    """The sink's table on a tablespace whose disk (a 4 MB tmpfs) is full: the batch that needs
    new pages fails with ``SINK_FULL`` and its hint, stays committed, and is delivered with the
    next one once space is freed."""
    import logging
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs for the tablespace needs root")
    import pathlib
    import tempfile

    disk = pathlib.Path(tempfile.mkdtemp(prefix="streamfold-disk-"))  # a path the server's user can reach
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(disk)], capture_output=True).returncode:
        os.rmdir(disk)
        pytest.skip("this machine does not allow mounting a tmpfs")
    admin = postgres.connect()
    try:
        os.chown(disk, *_uid_gid("postgres"))
        admin.autocommit = True
        space = f"small_{uuid.uuid4().hex[:6]}"
        admin.execute(f"CREATE TABLESPACE {space} LOCATION '{disk}'")
        table = f"full_{uuid.uuid4().hex[:6]}"
        admin.execute(f"CREATE TABLE {table} (k integer, n bigint, total bigint) TABLESPACE {space}")
        admin.execute(f"CREATE UNIQUE INDEX ON {table} (k) NULLS NOT DISTINCT TABLESPACE {space}")
        url = postgres.url(table)
        src, start = _start(spark, tmp_path, url)
        _file(src, 0, [(1, 10), (2, 20)])
        query = start()
        try:
            assert query.process_available().sink_lags == {url: 0}
            filler = disk / "filler"
            with open(filler, "wb") as fh:  # the disk filled to its last byte
                try:
                    while True:
                        fh.write(b"\0" * 65536)
                        fh.flush()
                except OSError:
                    pass
            _file(src, 1, [(k, k) for k in range(3, 5003)])  # 5,000 new keys: new pages for table and index
            with caplog.at_level(logging.WARNING, logger="streamfold"):
                second = query.process_available()
            assert second.batch == 1 and second.sink_lags == {url: 1}
            assert "SINK_FULL" in caplog.text and "free space on the server" in caplog.text
            os.remove(filler)
            _file(src, 2, [(1, 5)])
            assert query.process_available().sink_lags == {url: 0}
        finally:
            query.stop()
        rows = postgres_rows(admin, table, ["k", "n", "total"], False)
        expected = [(1, 2, 15), (2, 1, 20)] + [(k, 1, k) for k in range(3, 5003)]
        assert sorted(rows, key=repr) == sorted(expected, key=repr)
        admin.execute(f"DROP TABLE {table}")
        admin.execute(f"DROP TABLESPACE {space}")
    finally:
        admin.close()
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
        os.rmdir(disk)


def _uid_gid(user: str) -> tuple[int, int]:
    import pwd

    entry = pwd.getpwnam(user)
    return entry.pw_uid, entry.pw_gid
