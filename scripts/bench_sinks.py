"""W1 with and without sinks: the seed's groupBy (1M-row history, nine 40K increments, ~10K
groups changed per increment) run three times in one Spark session — no sink, a PostgreSQL
sink, a Delta sink — and each increment's time to its commit and to its delivery compared.

    PYTHONPATH=. .venv/bin/python scripts/bench_sinks.py [--postgres postgres://USER@HOST:PORT/DB] [--out DIR]

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


def main() -> None:
    from contextlib import nullcontext

    from streamfold.bench.pgserver import throwaway_postgres

    args = _args()
    with nullcontext(None) if args.postgres else throwaway_postgres(durable=True) as server:
        if server is not None:
            args.postgres = server.url("w1").split("?")[0]
        _run(args)


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", help="postgres://USER@HOST:PORT/DB (a table is created in it; default: a "
                                           "throw-away server)")
    parser.add_argument("--out", default="bench-out/sinks")
    parser.add_argument("--increments", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=2,
                        help="each configuration this many times, in turn (the first round warms the JVM up)")
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


if __name__ == "__main__":
    main()
