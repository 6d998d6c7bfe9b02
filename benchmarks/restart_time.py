"""A restart after kill -9 against the first batch (issue 57): time from starting ``streamfold
run`` to its first commit over a history, and from starting it again after SIGKILL (an increment
waiting) to its next commit — the states read back from the checkpoint, not recomputed.

    PYTHONPATH=. .venv/bin/python benchmarks/restart_time.py [--workload groupby|join-groupby] [--reps 2]
    PYTHONPATH=. .venv/bin/python benchmarks/restart_time.py --workload tpch-q18 [--sf 1]

W1 (``groupby``) and ``join-groupby`` are the seed's workloads: the history is their first batch,
the increment their second. ``tpch-q18`` is TPC-H Q18 with ``orders`` and ``lineitem`` streamed
(``customer`` a static table): the history 99 % of the orders with their line items, the
increment the last 1 % (``tpchgen-cli``'s data, generated into ``bench-out/tpch`` once).

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


def _workload(args) -> tuple[dict[str, list[str]], dict[str, list[str]], dict[str, str], str]:
    """The history's files and the increment's per stream, the static tables, the query."""
    if args.workload == "tpch-q18":
        from streamfold.bench.tpch.data import ensure
        from streamfold.bench.tpch.run import load_query

        ds = ensure(os.path.join(args.data, "tpch"), sf=args.sf, batches=2, increment=0.01)
        streams = ("orders", "lineitem")
        return ({t: [ds.batch_path(t, 0)] for t in streams}, {t: [ds.batch_path(t, 1)] for t in streams},
                {"customer": ds.table_path("customer")}, load_query("q18"))
    from streamfold.bench.data import cached
    from streamfold.bench.workloads import GROUPBY_SQL, JOIN_GROUPBY_SQL, WORKLOADS

    data = cached(WORKLOADS[args.workload], args.data)
    sql = GROUPBY_SQL if args.workload == "groupby" else JOIN_GROUPBY_SQL
    return data.files[0], data.files[1], {}, sql


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workload", default="groupby", choices=("groupby", "join-groupby", "tpch-q18"))
    ap.add_argument("--sf", type=float, default=1.0, help="tpch-q18's scale factor")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--data", default="bench-out")
    args = ap.parse_args()

    history, increment, tables, sql = _workload(args)
    firsts, restarts = [], []
    for rep in range(args.reps):
        root = tempfile.mkdtemp(prefix="restart-")
        out = os.path.join(root, "out")
        dirs = {name: os.path.join(root, name) for name in history}
        for name, d in dirs.items():
            os.makedirs(d)
            for p in history[name]:
                os.link(p, os.path.join(d, os.path.basename(p)))
        command = [sys.executable, "-m", "streamfold", "run", sql, "--output", out, "--quiet", "--trigger", "0.1",
                   *[a for name, d in dirs.items() for a in ("--source", f"{name}={d}")],
                   *[a for name, p in tables.items() for a in ("--table", f"{name}={p}")]]
        started = time.monotonic()
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        first = _until(out, 0, proc, started)
        time.sleep(2.0)  # batch 0's work after its commit (plans prepared ahead) is done or under way
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for name, d in dirs.items():
            for p in increment[name]:
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
