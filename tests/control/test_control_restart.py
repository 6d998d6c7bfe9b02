"""The control log across SIGKILL: ``streamfold run`` killed while paused, or while a
reconfiguration applies, and run again with the same command, replays the control actions at
the same points — a paused query comes back paused, a reconfiguration applies at the batch it
applied at — and every committed snapshot equals DuckDB's answer under its query version."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from streamfold.control.client import ControlClient

from ..controlled import Feed, check_every_commit, commits, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SQL = "SELECT k, sum(v) AS s, count(*) AS n FROM S GROUP BY k"
HAVING = f"{SQL} HAVING sum(v) > 5"  # the answer only: every state kept
FILTERED = "SELECT k, sum(v) AS s, count(*) AS n FROM S WHERE v > 3 GROUP BY k"  # its state is rebuilt
ENV = {**os.environ, "STREAMFOLD_DRIVER_MEMORY": "1g"}


def run(src: str, out: str, idle: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "streamfold", "run", SQL, "--source", f"S={src}", "--output", out,
                             "--trigger", "0.2", "--until-idle", str(idle), "--partitions", "2", "--compact-every", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, env=ENV)


def client(out: str, proc: subprocess.Popen, since: float) -> ControlClient:
    """The endpoint of this run (its _control.json, not one a killed run left behind)."""
    path = os.path.join(out, "_control.json")

    def ready() -> ControlClient | None:
        assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
        if os.path.exists(path) and os.path.getmtime(path) >= since:
            return ControlClient(out)
        return None

    return wait_for(ready, 300, "the endpoint")  # type: ignore[return-value]


def committed(out: str) -> int:
    directory = os.path.join(out, "commits")
    return len([n for n in os.listdir(directory) if n.endswith(".json")]) if os.path.isdir(directory) else 0


def kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def log(out: str) -> list[dict]:
    return [json.loads(line) for line in open(os.path.join(out, "_checkpoint", "control.log"))]


def applied(out: str) -> list[dict]:
    return [r for r in log(out) if r["action"] == "reconfigure applied"]


def test_killed_while_paused_it_comes_back_paused_and_killed_while_reconfiguring_it_applies_at_the_same_batch(
        tmp_path):
    """Two SIGKILLs in one query's life, three runs of the same command (two tests of one kill
    each took four runs: a JVM start, an idle wait and a shutdown more). Killed while paused
    after an answer-only change, it comes back paused and loses nothing; then, resumed and
    reconfigured to a query whose state is rebuilt, killed while that applies, the next run
    applies it at the same batch."""
    feed, out = Feed(str(tmp_path / "S")), str(tmp_path / "out")
    feed.put([(1, 5), (2, 6)])
    started = time.time()
    proc = run(feed.directory, out, 600)
    try:
        control = client(out, proc, started)
        wait_for(lambda: committed(out) >= 1, 300, "batch 0")
        # an answer-only change first: the restart restores the new version's states from the
        # changelogs written before and after it
        control.reconfigure(HAVING, wait=True)
        assert control.pause()["state"] == "paused"
        feed.put([(1, 1)])
        feed.put([(3, 2)])
        time.sleep(1.0)
    finally:
        kill(proc)
    assert committed(out) == 2
    started = time.time()
    proc = run(feed.directory, out, 600)
    try:
        control = client(out, proc, started)
        status = control.status()
        assert status["state"] == "paused" and status["pause"]["reason"] == "restored"
        time.sleep(1.0)
        assert committed(out) == 2, "files that arrived while paused wait for the resume"
        control.resume()
        wait_for(lambda: committed(out) >= 3, 300, "the batch of the files that waited")
        # now a reconfiguration that rebuilds the state, killed while it applies
        control.pause()
        boundary = committed(out)  # the batch the reconfiguration applies at
        control.reconfigure(FILTERED)
        control.resume()
        wait_for(lambda: len(applied(out)) == 2, 60, "the reconfiguration")
    finally:
        kill(proc)  # while it builds the new plan's states, or runs its first batch
    assert boundary == 3 and [r["batch"] for r in applied(out)][1:] == [boundary]
    feed.put([(1, 4), (4, 8)])
    proc = run(feed.directory, out, 4)
    try:
        assert proc.wait(600) == 0, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
    finally:
        if proc.poll() is None:
            kill(proc)
    records = check_every_commit(out, feed, SQL)
    assert [r["query_version"] for r in records[:3]] == [1, 2, 2]
    assert sum(len(r["inputs"]["S"]) for r in records[:3]) == 3
    versions = [r.get("query_version") for r in records]
    assert versions == [1, 2, 2] + [3] * (len(records) - boundary), versions
    assert records[boundary]["reconfigured"]["rebuilt_states"] == ["agg"]
    assert sum(len(r["inputs"]["S"]) for r in commits(out)) == 4
    actions = [r["action"] for r in log(out)]
    assert actions[:5] == ["start", "reconfigure", "reconfigure applied", "pause", "start"] and "resume" in actions
