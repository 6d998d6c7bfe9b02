"""W1 with and without sinks: the seed's groupBy (1M-row history, nine 40K increments, ~10K
groups changed per increment) run three times in one Spark session — no sink, a PostgreSQL
sink, a Delta sink — and each increment's time to its commit and to its delivery compared.

    PYTHONPATH=. .venv/bin/python scripts/bench_sinks.py [--postgres postgres://USER@HOST:PORT/DB] [--out DIR] [--cli]

With ``--cli`` each configuration is ``streamfold run`` in a process of its own, as a user runs it
(``--trigger 0.02``; its history delivered before the clock starts), and an increment's time runs
from its file landing in the source directory to its rows being visible where a reader looks: the
commit record published without a sink, the commit of the transaction that moved the sink's
progress row in PostgreSQL (``pg_xact_commit_timestamp``: the server tracks commit times), the
changes table's log entry for the batch in Delta (written after the answer table's). The reader
looks every 20 ms and takes those instants from the server and the files, so its looking costs
the machine next to nothing and adds nothing to the figure.

Without ``--postgres`` a throw-away server is started on loopback (fsync on, as a user's server
has it: ``streamfold.bench.pgserver``); with it, the password comes from PGPASSWORD or ~/.pgpass.

Prints one line per configuration and round: the median increment (the batch's whole time, delivery
included) and the median delivery alone; then, over every round after the first (a warm-up), the
median of all their increments per configuration and its ratio to the run without a sink — the
issue's target (≤ 1.3×). Figures go to docs/benchmarks.md with the machine's load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import uuid

LOOK_S = 0.02  # how often --cli's reader looks for a batch (the instant is read, not the look)


def main() -> None:
    from contextlib import nullcontext

    from streamfold.bench.pgserver import throwaway_postgres

    args = _args()
    settings = {"track_commit_timestamp": "on"} if args.cli else None
    with nullcontext(None) if args.postgres else throwaway_postgres(durable=True, settings=settings) as server:
        if server is not None:
            args.postgres = server.url("w1").split("?")[0]
        _run_cli(args) if args.cli else _run(args)


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", help="postgres://USER@HOST:PORT/DB (a table is created in it; default: a "
                                           "throw-away server)")
    parser.add_argument("--out", default="bench-out/sinks")
    parser.add_argument("--increments", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=2,
                        help="each configuration this many times, in turn (the first round warms the JVM up)")
    parser.add_argument("--cli", action="store_true", help="through `streamfold run`, file landed to rows visible")
    return parser.parse_args()


def _run(args: argparse.Namespace) -> None:
    import streamfold
    from streamfold.bench.data import cached
    from streamfold.bench.workloads import GROUPBY_SQL, WORKLOADS
    from streamfold.runtime.session import get_spark

    data = cached(WORKLOADS["groupby"], os.path.dirname(args.out) or ".")
    spark = get_spark("local[*]", app_name="bench-sinks")
    configs: list[tuple[str, list[str]]] = [("none", [])]
    if args.postgres:
        configs.append(("postgres", [f"{args.postgres}?table=w1"]))
    configs.append(("delta", [os.path.abspath(os.path.join(args.out, "delta", "answer")) + ":delta"]))
    base = None
    pooled: dict[str, list[float]] = {name: [] for name, _ in configs}
    for round_, (name, sinks) in enumerate(configs * args.rounds):
        if round_ == len(configs) * (args.rounds - 1):
            base = None  # ratios within the last round
        root = os.path.join(args.out, name)
        shutil.rmtree(root, ignore_errors=True)
        if name == "delta":
            shutil.rmtree(os.path.join(args.out, "delta"), ignore_errors=True)
        sinks = [s.replace("table=w1", f"table=w1_{uuid.uuid4().hex[:8]}") for s in sinks]  # a fresh table
        src = os.path.join(root, "S")
        os.makedirs(src)
        query = streamfold.start(GROUPBY_SQL, {"S": src}, os.path.join(root, "out"), schemas={"S": "x INT, y INT"},
                                 spark=spark, background=False, sinks=sinks)
        totals, delivery = [], []
        try:
            for inc, files in enumerate(data.files[: args.increments + 1]):
                for p in files["S"]:
                    os.link(p, os.path.join(src, os.path.basename(p)))
                result = query.process_available()
                if inc > 0:
                    totals.append(result.duration_s)
                    delivery.append(result.timings.get("sinks", 0.0))
        finally:
            query.stop()
        median = statistics.median(totals)
        if round_ >= len(configs):
            pooled[name] += totals
        base = base or median
        print(f"round {round_ // len(configs) + 1} {name:9s} increment median {median:.3f} s  (×{median / base:.2f})  delivery median "
              f"{statistics.median(delivery):.3f} s  changes/increment {result.change_rows}", flush=True)
    if args.rounds > 1:
        none = statistics.median(pooled["none"])
        for name, totals in pooled.items():
            median = statistics.median(totals)
            print(f"rounds 2-{args.rounds} {name:9s} increment median {median:.3f} s  (×{median / none:.2f})  "
                  f"over {len(totals)} increments", flush=True)


def _run_cli(args: argparse.Namespace) -> None:
    import subprocess
    import time

    import psycopg

    from streamfold.bench.data import cached
    from streamfold.bench.systems.cli import run_command
    from streamfold.bench.workloads import GROUPBY_SQL, WORKLOADS

    data = cached(WORKLOADS["groupby"], os.path.dirname(args.out) or ".")
    pooled: dict[str, list[float]] = {}
    for round_ in range(args.rounds):
        for name in ["none"] + (["postgres"] if args.postgres else []) + ["delta"]:
            root = os.path.abspath(os.path.join(args.out, "cli", name))
            shutil.rmtree(root, ignore_errors=True)
            src, out = os.path.join(root, "S"), os.path.join(root, "out")
            os.makedirs(src)
            cmd = run_command(GROUPBY_SQL, {"S": src}, out) + ["--schema", "S=x INT, y INT"]
            table, delta = f"w1_{uuid.uuid4().hex[:8]}", os.path.join(root, "delta", "answer")
            conn = None
            if name == "postgres":
                cmd += ["--sink", f"{args.postgres}?table={table}"]
                conn = psycopg.connect(args.postgres.replace("postgres://", "postgresql://"), autocommit=True)
            elif name == "delta":
                cmd += ["--sink", f"{delta}:delta"]

            log = open(os.path.join(root, "run.log"), "w")  # noqa: SIM115 - closed below
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
            times = []
            try:
                for inc, files in enumerate(data.files[: args.increments + 1]):
                    started = time.time()
                    for p in files["S"]:
                        os.link(p, os.path.join(src, os.path.basename(p)))
                    while (seen := _visible(name, inc, out, conn, table, delta)) is None:
                        if proc.poll() is not None:
                            raise SystemExit(f"streamfold run exited: see {log.name}")
                        time.sleep(LOOK_S)
                    if inc > 0:
                        times.append(seen - started)
            finally:
                proc.terminate()
                proc.wait(timeout=60)
                log.close()
                if conn is not None:
                    conn.close()
            if round_ > 0:
                pooled.setdefault(name, []).extend(times)
            print(f"round {round_ + 1} {name:9s} file landed → rows visible, median {statistics.median(times):.3f} s",
                  flush=True)
    if pooled:
        none = statistics.median(pooled["none"])
        for name, times in pooled.items():
            median = statistics.median(times)
            print(f"rounds 2-{args.rounds} {name:9s} file landed → rows visible, median {median:.3f} s  "
                  f"(×{median / none:.2f})  over {len(times)} increments", flush=True)


def _visible(name: str, batch: int, out: str, conn: object, table: str, delta: str) -> float | None:
    """The wall-clock instant ``batch`` became visible to a reader of configuration ``name``, or None yet."""
    if name == "postgres":
        row = conn.execute("SELECT batch, extract(epoch FROM pg_xact_commit_timestamp(xmin)) FROM "  # type: ignore[attr-defined]
                           "streamfold_sink_progress WHERE target = %s", (table,)).fetchone() if _has_progress(conn) else None
        return float(row[1]) if row is not None and row[0] == batch else None
    path = (os.path.join(delta + "_changes", "_delta_log", f"{batch:020d}.json") if name == "delta"
            else os.path.join(out, "commits", f"{batch:06d}.json"))
    return os.stat(path).st_mtime if os.path.exists(path) else None


def _has_progress(conn: object) -> bool:
    return conn.execute("SELECT to_regclass('streamfold_sink_progress') IS NOT NULL").fetchone()[0]  # type: ignore[attr-defined]


if __name__ == "__main__":
    main()
