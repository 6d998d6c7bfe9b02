"""A rolling window over one partition, maintained: ``sum(v) OVER (ORDER BY t RANGE BETWEEN
INTERVAL 1 MINUTE PRECEDING AND CURRENT ROW)`` over a history of events one second apart, then
increments of events appended after them, through the Python API in one Spark session.

    PYTHONPATH=. .venv/bin/python scripts/bench_rolling_window.py [--history 200000] [--increment 1000] [--strategy recompute]

Prints batch 0's time and each increment's (a batch, from its file in place to its commit), and
the median of the increments after the first two. To compare with a commit before
``plan/rules_window_range.py`` (the partition recomputed whole), run the same script with
``PYTHONPATH`` at a worktree of that commit.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import time

SQL = "SELECT t, v, sum(v) OVER (ORDER BY t RANGE BETWEEN INTERVAL 1 MINUTE PRECEDING AND CURRENT ROW) AS s FROM E"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="bench-out/rolling-window")
    parser.add_argument("--history", type=int, default=200_000)
    parser.add_argument("--increment", type=int, default=1_000)
    parser.add_argument("--increments", type=int, default=8)
    parser.add_argument("--strategy", default="incremental", help="incremental, or recompute: the window computed whole")
    args = parser.parse_args()

    import pyarrow as pa
    import pyarrow.parquet as pq

    import streamfold
    from streamfold.runtime.session import get_spark

    shutil.rmtree(args.out, ignore_errors=True)
    src = os.path.join(args.out, "E")
    os.makedirs(src)
    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)

    def write(i: int, start: int, n: int) -> None:
        seconds = range(start, start + n)
        pq.write_table(pa.table({"t": pa.array([t0 + dt.timedelta(seconds=s) for s in seconds], pa.timestamp("us", tz="UTC")),
                                 "v": pa.array([s % 7 for s in seconds], pa.int32())}),
                       os.path.join(src, f"f{i:04d}.parquet"))

    spark = get_spark("local[2]", app_name="bench-rolling-window")
    write(0, 0, args.history)
    query = streamfold.start(SQL, {"E": src}, os.path.join(args.out, "out"), schemas={"E": "t TIMESTAMP, v INT"},
                             spark=spark, background=False, endpoint=False, strategy=args.strategy)
    times = []
    try:
        began = time.monotonic()
        query.process_available()
        print(f"batch 0 ({args.history:,} rows): {time.monotonic() - began:.2f} s", flush=True)
        start = args.history
        for i in range(1, args.increments + 1):
            write(i, start, args.increment)
            start += args.increment
            began = time.monotonic()
            query.process_available()
            times.append(time.monotonic() - began)
    finally:
        query.stop()
    print("increments (s):", " ".join(f"{x:.2f}" for x in times))
    print(f"median of increments 3–{len(times)}: {statistics.median(times[2:]):.3f} s")


if __name__ == "__main__":
    main()
