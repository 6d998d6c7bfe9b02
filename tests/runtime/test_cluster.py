"""``--master spark://…``: a standalone master and worker from the pyspark distribution on
localhost run a query; executors need no Python, everything they run is Spark SQL."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ..standalone import standalone

pytestmark = [pytest.mark.spark, pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with standalone(tmp_path_factory.mktemp("cluster")) as c:
        yield c.url


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
