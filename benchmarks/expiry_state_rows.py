"""A time bound keeps the state to the bound: the states' rows per batch while the history grows.

    .venv/bin/python benchmarks/expiry_state_rows.py OUTDIR [--batches 20] [--rows 40]

Batches five minutes apart on a clock the script moves (``batch_time.wall_clock``), each of
``--rows`` rows with event times from the last 12 minutes (some already outside the 10-minute
bound: late), under ``… WHERE ts > current_timestamp() - INTERVAL 10 MINUTES GROUP BY
window(ts, '5 minutes')`` with ``max(v)`` (a multiset state, since expiry deletes). Prints per
batch the history's rows, each state's rows, the late rows and the batch's seconds
(docs/journal.md, "Rows that expire").
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import sys

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import streamfold  # noqa: E402
from streamfold.runtime.features import batch_time  # noqa: E402
from streamfold.runtime.session import get_spark  # noqa: E402

SQL = ("SELECT window.start, count(*) AS n, sum(v) AS t, max(v) AS m FROM R "
       "WHERE ts > current_timestamp() - INTERVAL 10 MINUTES GROUP BY window(ts, '5 minutes')")
T0 = int(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000
MINUTE = 60_000_000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("outdir")
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rows", type=int, default=40)
    args = parser.parse_args()
    clock = iter([T0 + 5 * i * MINUTE for i in range(args.batches)])
    batch_time.wall_clock = lambda: next(clock)
    src = os.path.join(args.outdir, "R")
    os.makedirs(src, exist_ok=True)
    schema = pa.schema([("k", pa.int32()), ("ts", pa.timestamp("us", tz="UTC")), ("v", pa.int32())])
    spark = get_spark("local[2]", app_name="expiry-state-rows")
    q = streamfold.start(SQL, {"R": src}, os.path.join(args.outdir, "out"), spark=spark, background=False,
                         partitions=2, schemas={"R": "k INT, ts TIMESTAMP, v INT"})
    rng = random.Random(1)
    try:
        for i in range(args.batches):
            now = T0 + 5 * i * MINUTE
            rows = [{"k": rng.randint(0, 9), "v": rng.randint(0, 99),
                     "ts": dt.datetime.fromtimestamp((now - rng.randint(0, 720) * 1_000_000) / 1e6, dt.timezone.utc)}
                    for _ in range(args.rows)]
            pq.write_table(pa.Table.from_pylist(rows, schema=schema), os.path.join(src, f"{i:04d}.parquet"))
            q.process_available()
            rec = q.commit(i)
            print(f"batch {i:3d}  history {(i + 1) * args.rows:6d}  states {rec['state_rows']}  "
                  f"late {rec['late_rows']}  {rec['duration_s']:.2f} s", flush=True)
    finally:
        q.stop()


if __name__ == "__main__":
    main()
