"""``--master spark://…``: a standalone master and worker from the pyspark distribution on
localhost run a query; executors need no Python, everything they run is Spark SQL."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for(path: str, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if os.path.exists(path) and text in open(path, errors="replace").read():
            return
        time.sleep(0.5)
    raise AssertionError(f"{text!r} did not appear in {path}:\n" + open(path, errors="replace").read()[-3000:])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(home, "bin", "spark-class")
    tmp = tmp_path_factory.mktemp("cluster")
    port = _free_port()
    env = {**os.environ, "SPARK_HOME": home}
    master_log, worker_log = str(tmp / "master.log"), str(tmp / "worker.log")
    procs = []
    with open(master_log, "w") as out:
        procs.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(_free_port())], stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
    try:
        _wait_for(master_log, "ALIVE", 60)
        url = f"spark://127.0.0.1:{port}"
        with open(worker_log, "w") as out:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--cores", "2", "--memory", "1g",
                 "--webui-port", str(_free_port()), "--work-dir", str(tmp / "work")],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True))
        _wait_for(master_log, "Registering worker", 60)
        yield url
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for p in procs:
            p.wait(timeout=30)


def test_run_on_a_standalone_cluster(cluster, tmp_path):
    src, out = tmp_path / "S", tmp_path / "out"
    src.mkdir()
    pq.write_table(pa.table({"k": pa.array([1, 1, 2], pa.int32()), "v": [1.0, 2.0, 5.0]}), src / "0.parquet")
    command = [sys.executable, "-m", "streamfold", "run", "SELECT k, avg(v) AS m, count(*) AS n FROM S GROUP BY k",
               "--source", f"S={src}", "--output", str(out), "--until-idle", "2", "--trigger", "0.2",
               "--master", cluster]
    env = {**os.environ, "STREAMFOLD_DRIVER_MEMORY": "1g"}
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = sorted(pq.read_table(out / "snapshots" / "000000").to_pylist(), key=lambda r: r["k"])
    assert rows == [{"k": 1, "m": 1.5, "n": 2}, {"k": 2, "m": 5.0, "n": 1}]
    # a second run resumes on the cluster and applies only the new file
    pq.write_table(pa.table({"k": pa.array([2], pa.int32()), "v": [7.0]}), src / "1.parquet")
    proc = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = sorted(pq.read_table(out / "snapshots" / "000001").to_pylist(), key=lambda r: r["k"])
    assert rows == [{"k": 1, "m": 1.5, "n": 2}, {"k": 2, "m": 6.0, "n": 2}]
