"""A driver fed by a Spark streaming DataFrame, killed with SIGKILL while files arrive, and
started again by the same program (issue 54): Spark's checkpoint and the staged micro-batches
decide what each engine batch holds, so after the restart the answer over every file equals
DuckDB's — nothing lost, nothing counted twice — and no micro-batch appears in two commits.

The program is a user's: ``spark.readStream…parquet(DIR)`` (one file per micro-batch) joined
into a grouped query, run by ``Query.run`` until idle."""

from __future__ import annotations

import glob
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow.parquet as pq
import pytest

from streamfold.verify import compare, duckdb_answer

from .test_spark_sources import _file

pytestmark = [pytest.mark.spark]

SQL = "SELECT k, count(*) AS n, sum(v) AS t, min(v) AS lo FROM E GROUP BY k"

PROGRAM = textwrap.dedent('''
    import sys
    import streamfold
    from streamfold.runtime.session import get_spark

    src, out, idle = sys.argv[1], sys.argv[2], float(sys.argv[3])
    spark = get_spark("local[2]", app_name="spark-source-kill")
    df = (spark.readStream.schema("k INT, v BIGINT, _weight BIGINT").option("maxFilesPerTrigger", 1)
          .parquet(src))
    q = streamfold.start(sys.argv[4], {"E": df}, out, spark=spark, background=False, partitions=2,
                         endpoint=False)
    q.run(trigger=0.2, until_idle=idle)
    q.stop()
''')


def _commits(out: str) -> list[dict]:
    found = []
    for path in sorted(glob.glob(os.path.join(out, "commits", "*.json"))):
        with open(path) as f:
            found.append(json.load(f))
    return found


def test_sigkill_of_a_driver_fed_by_a_streaming_dataframe_loses_and_doubles_nothing(tmp_path):
    src, out = str(tmp_path / "E"), str(tmp_path / "out")
    os.makedirs(src)
    program = tmp_path / "program.py"
    program.write_text(PROGRAM)
    rng, live, files = random.Random(11), [], []
    env = {**os.environ, "STREAMFOLD_DRIVER_MEMORY": "1g"}
    logs: list = []

    def start(idle: float) -> subprocess.Popen:
        logs.append(open(tmp_path / f"run{len(logs)}.log", "w+"))
        return subprocess.Popen([sys.executable, str(program), src, out, str(idle), SQL], stdout=logs[-1],
                                stderr=subprocess.STDOUT, start_new_session=True, env=env)

    def log() -> str:
        logs[-1].seek(0)
        return logs[-1].read()[-3000:]

    def wait(pred, timeout: float = 300) -> None:
        end = time.monotonic() + timeout
        while not pred():
            assert time.monotonic() < end, f"timed out; the run's output:\n{log()}"
            time.sleep(0.1)

    for i in range(4):
        files.append(_file(src, i, rng, live))
    proc = start(idle=300)
    try:
        wait(lambda: len(_commits(out)) >= 2)
        for i in range(4, 10):  # files keep arriving; the driver dies at a random instant among them
            files.append(_file(src, i, rng, live))
            time.sleep(rng.uniform(0.05, 0.6))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        before = len(_commits(out))
        for i in range(10, 14):  # and while it is down
            files.append(_file(src, i, rng, live))
        proc = start(idle=6)
        assert proc.wait(timeout=600) == 0, log()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    commits = _commits(out)
    assert len(commits) > before
    staged = [n for c in commits for n in c["inputs"].get("E", [])]
    assert len(staged) == len(set(staged)), f"a micro-batch applied twice: {staged}"
    last = commits[-1]["batch"]
    rows = [tuple(r.values()) for r in pq.read_table(os.path.join(out, "snapshots", f"{last:06d}")).to_pylist()]
    result = compare(rows, duckdb_answer(SQL, {"E": files}))
    assert result.matches, f"after the restart: {result.detail}"
