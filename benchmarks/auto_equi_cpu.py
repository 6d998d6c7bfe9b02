"""What ``matrix_equi="auto"`` costs on an equi-join that is not skewed: CPU seconds per batch.

    .venv/bin/python benchmarks/auto_equi_cpu.py [--history 100000] [--increment 40000]
                                                 [--increments 5] [--rounds 2] [--master local[4]]

Runs the seed's join-groupBy (``SELECT x.A, avg(y.D) FROM S1 x JOIN S2 y ON x.B = y.C GROUP BY
x.A``, keys uniform in [0, 10000]) once per partitioning and round — ``hash`` and ``auto``
alternately, each in a fresh process (its own JVM) — and prints, per batch, the CPU seconds of
the whole run (the Python driver and the JVM: user + system, read from /proc), the wall time, and
for ``auto`` whether the batch checked the key frequencies. CPU seconds, not wall time, because
the machine is shared: other work slows a batch down but does not add to its CPU. The load
average before and after each run is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

SQL = "SELECT x.A, avg(y.D) AS avg_d FROM S1 x JOIN S2 y ON x.B = y.C GROUP BY x.A"


def _cpu(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_run(args: argparse.Namespace) -> None:
    """A child: the query under ``--mode``, batch by batch; JSON lines on stdout."""
    import streamfold
    from streamfold.bench.data import appear, cached
    from streamfold.bench.workloads import get_workload
    from streamfold.runtime.session import get_spark

    workload = get_workload("join-groupby").sized(args.history, args.increment, args.increments)
    data = cached(workload, args.data, progress=False)
    spark = get_spark(args.master)
    jvm = int(spark._jvm.java.lang.ProcessHandle.current().pid())
    work = tempfile.mkdtemp(prefix=f"auto-{args.mode}-", dir=args.data)
    dirs = {s.name: os.path.join(work, "in", s.name) for s in workload.sources}
    for d in dirs.values():
        os.makedirs(d)
    out = os.path.join(work, "out")
    schemas = {s.name: ", ".join(f"{c} INT" for c in s.columns) for s in workload.sources}
    query = streamfold.start(SQL, dirs, out, schemas=schemas, spark=spark, background=False, matrix_equi=args.mode,
                             profile=True)
    try:
        for inc in range(workload.increments + 1):
            appear(data, inc, dirs)
            cpu0, py0, wall0 = _cpu(jvm), time.process_time(), time.monotonic()
            result = query.process_available()
            cpu = _cpu(jvm) - cpu0 + time.process_time() - py0
            assert result is not None and result.batch == inc
            with open(os.path.join(out, "commits", f"{inc:06d}.json"), encoding="utf-8") as fh:
                record = json.load(fh)
            checked = any("checked" in e for e in (record.get("partitioning") or {}).values())
            waterfall = result.waterfall()
            assert waterfall is not None
            task_s = sum(st.task_s for j in waterfall.jobs for st in j.stages)
            print(json.dumps({"mode": args.mode, "batch": inc, "cpu_s": round(cpu, 3),
                              "wall_s": round(time.monotonic() - wall0, 3), "checked": checked,
                              "jobs": len(waterfall.jobs), "task_s": round(task_s, 3),
                              "matrix": "matrix" in record}), flush=True)
    finally:
        query.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--history", type=int, default=100_000)
    ap.add_argument("--increment", type=int, default=40_000)
    ap.add_argument("--increments", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--master", default="local[4]")
    ap.add_argument("--data", default=os.path.join(tempfile.gettempdir(), "streamfold-auto-equi"))
    ap.add_argument("--mode", help=argparse.SUPPRESS)  # a child's
    args = ap.parse_args()
    if args.mode:
        one_run(args)
        return
    os.makedirs(args.data, exist_ok=True)
    runs: dict[str, list[list[dict]]] = {"hash": [], "auto": []}
    for r in range(args.rounds):
        for mode in ("hash", "auto") if r % 2 == 0 else ("auto", "hash"):
            load = os.getloadavg()
            child = subprocess.run([sys.executable, __file__, "--mode", mode, "--history", str(args.history),
                                    "--increment", str(args.increment), "--increments", str(args.increments),
                                    "--master", args.master, "--data", args.data],
                                   capture_output=True, text=True)
            if child.returncode:
                sys.exit(f"the {mode} run failed:\n{child.stderr[-3000:]}")
            lines = [json.loads(x) for x in child.stdout.splitlines() if x.startswith("{")]
            runs[mode].append(lines)
            after = os.getloadavg()
            print(f"round {r} {mode}: load {load[0]:.2f} → {after[0]:.2f}; per batch CPU s / Spark jobs / task s "
                  + "  ".join(f"{x['cpu_s']:.2f}/{x['jobs']}/{x['task_s']:.2f}{'*' if x['checked'] else ''}"
                              for x in lines), flush=True)
    print("\nbatch  " + "  ".join(f"{m:>26}" for m in runs) + "   (CPU s, min over rounds, its wall s and "
          "Spark jobs; * = checked)")
    for b in range(args.increments + 1):
        cells = []
        for rounds in runs.values():
            best = min(rounds, key=lambda lines: lines[b]["cpu_s"])[b]
            cells.append(f"{best['cpu_s']:>8.2f} ({best['wall_s']:.2f} wall, {best['jobs']} jobs){'*' if best['checked'] else ' '}")
        print(f"{b:>5}  " + "  ".join(cells))
    for mode, rounds in runs.items():
        totals = [sum(x["cpu_s"] for x in lines[1:]) for lines in rounds]
        jobs = [sum(x["jobs"] for x in lines[1:]) for lines in rounds]
        print(f"{mode}: increments 1–{args.increments}, CPU s per round: " + ", ".join(f"{t:.2f}" for t in totals)
              + f"; Spark jobs: {jobs[0]}")


if __name__ == "__main__":
    main()
