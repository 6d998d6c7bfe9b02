"""Every socket of the Spark that streamfold starts with a local master listens on loopback only.

`streamfold run` is started as a user starts it; while it runs, the listening TCP sockets of it
and its descendants (the JVM that PySpark launches) are read from ``ss -ltnp``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.spark]

LOOPBACK = re.compile(r"^(127\.\d+\.\d+\.\d+|\[::1\]|\[::ffff:127\.\d+\.\d+\.\d+\]):\d+$")


def _descendants(root: int) -> set[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found.add(child)
                frontier.append(child)
    return found


def _listening(pids: set[int]) -> list[str]:
    """Local addresses of the TCP sockets ``pids`` listen on."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    addresses = []
    for line in out.splitlines():
        owners = {int(p) for p in re.findall(r"pid=(\d+)", line)}
        if owners & pids:
            addresses.append(line.split()[3])
    return addresses


@pytest.mark.skipif(shutil.which("ss") is None, reason="ss (iproute2) lists sockets")
def test_a_running_query_listens_on_loopback_only(tmp_path):
    source = tmp_path / "S"
    source.mkdir()
    pq.write_table(pa.table({"x": [1, 2, 2], "y": [10, 20, 30]}), source / "part-0.parquet")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_GATEWAY")}
    run = subprocess.Popen(
        [sys.executable, "-m", "streamfold", "run", "SELECT x, sum(y) AS s FROM S GROUP BY x",
         "--source", f"S={source}", "--output", str(tmp_path / "out"), "--until-idle", "60", "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True)
    seen: set[str] = set()
    try:
        commits = tmp_path / "out" / "commits"
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and run.poll() is None:
            seen.update(_listening(_descendants(run.pid)))
            if commits.is_dir() and any(commits.iterdir()) and seen:
                break
            time.sleep(0.5)
        assert run.poll() is None, run.communicate()[0][-3000:]
        seen.update(_listening(_descendants(run.pid)))
    finally:
        run.terminate()
        run.wait(60)
    assert seen, "the run's JVM listens on no TCP socket: nothing was inspected"
    assert all(LOOPBACK.match(a) for a in seen), f"listening beyond loopback: {sorted(seen)}"
