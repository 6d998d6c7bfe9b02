"""A restart after kill -9 against the first batch (issue 57): time from starting ``streamfold
run`` to its first commit over a history, and from starting it again after SIGKILL (an increment
waiting) to its next commit — the states read back from the checkpoint, not recomputed.

    PYTHONPATH=. .venv/bin/python benchmarks/restart_time.py [--workload groupby|join-groupby] [--reps 2]

Both are whole processes (a cold JVM each), measured to the commit file appearing. Prints each
rep and the ratio restart / first batch (target ≤ 0.5).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time


def _committed(out: str, batch: int) -> bool:
    return os.path.exists(os.path.join(out, "commits", f"{batch:06d}.json"))


def _until(out: str, batch: int, proc: subprocess.Popen, started: float) -> float:
    while not _committed(out, batch):
        if proc.poll() is not None:
            raise SystemExit(f"streamfold run exited with {proc.returncode} before batch {batch}")
        time.sleep(0.02)
    return time.monotonic() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="groupby", choices=("groupby", "join-groupby"))
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--data", default="bench-out")
    args = ap.parse_args()

    from streamfold.bench.data import cached
    from streamfold.bench.workloads import GROUPBY_SQL, JOIN_GROUPBY_SQL, WORKLOADS

    data = cached(WORKLOADS[args.workload], args.data)
    sql = GROUPBY_SQL if args.workload == "groupby" else JOIN_GROUPBY_SQL
    firsts, restarts = [], []
    for rep in range(args.reps):
        root = tempfile.mkdtemp(prefix="restart-")
        out = os.path.join(root, "out")
        dirs = {name: os.path.join(root, name) for name in data.files[0]}
        for name, d in dirs.items():
            os.makedirs(d)
            for p in data.files[0][name]:
                os.link(p, os.path.join(d, os.path.basename(p)))
        command = [sys.executable, "-m", "streamfold", "run", sql, "--output", out, "--quiet", "--trigger", "0.1",
                   *[a for name, d in dirs.items() for a in ("--source", f"{name}={d}")]]
        started = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        first = _until(out, 0, proc, started)
        time.sleep(2.0)  # batch 0's work after its commit (plans prepared ahead) is done or under way
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for name, d in dirs.items():
            for p in data.files[1][name]:
                os.link(p, os.path.join(d, os.path.basename(p)))
        started = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        again = _until(out, 1, proc, started)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        shutil.rmtree(root, ignore_errors=True)
        firsts.append(first)
        restarts.append(again)
        print(f"rep {rep + 1}: first commit {first:.1f} s, restart to the next commit {again:.1f} s "
              f"(×{again / first:.2f}); load {os.getloadavg()[0]:.1f}", flush=True)
    f, r = statistics.median(firsts), statistics.median(restarts)
    print(f"{args.workload}: median first commit {f:.1f} s, restart {r:.1f} s, ratio {r / f:.2f} (target ≤ 0.5)")


if __name__ == "__main__":
    main()
