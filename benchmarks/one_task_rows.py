"""One task or hash partitions: where should a batch stop running in one task? (``shape.ONE_TASK_ROWS``)

    PYTHONPATH=. .venv/bin/python benchmarks/one_task_rows.py KEYS INCREMENT INCREMENTS [QUERIES]

For each query (``groupby``: the seed's groupBy of one stream; ``join``: two streams joined on
their key, then grouped), a history of ``KEYS`` rows per stream over ``KEYS`` keys, then
``INCREMENTS`` increments of ``INCREMENT`` rows per stream, each batch run as soon as the one
before committed (``process_available``). Four runs per query in one Spark session, alternating
the bound at 100,000 rows (states of ``KEYS`` rows are hash-partitioned) and 1,000,000 (they stay
in one task), so load on the machine falls on both. Prints the median and mean of increments
4 on per run (the first three carry the plans' capture and the JIT's warm-up).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import streamfold
from streamfold.runtime import shape
from streamfold.runtime.session import get_spark

QUERIES = {
    "groupby": ("SELECT x, count(*) AS n, sum(y) AS s FROM S GROUP BY x", ("S",)),
    "join": ("SELECT a.x, count(*) AS n, sum(b.y) AS s FROM S a JOIN T b ON a.x = b.x GROUP BY a.x", ("S", "T")),
}
BOUNDS = (100_000, 1_000_000, 100_000, 1_000_000)


def run(spark, root: str, query: str, bound: int, keys: int, increment: int, increments: int,
        rng: np.random.Generator) -> list[float]:
    """Seconds of each increment of ``query`` with ``shape.ONE_TASK_ROWS = bound``."""
    sql, streams = QUERIES[query]
    shape.ONE_TASK_ROWS = bound
    work = os.path.join(root, f"{query}-{bound}")
    dirs = {s: os.path.join(work, "in", s) for s in streams}
    for d in dirs.values():
        os.makedirs(d)

    def put(rows: int, i: int) -> None:
        for d in dirs.values():
            table = pa.table({"x": rng.integers(0, keys, rows), "y": rng.integers(0, 100, rows)})
            pq.write_table(table, os.path.join(d, f"{i:06d}.parquet"))

    put(keys, 0)
    q = streamfold.start(sql, dirs, os.path.join(work, "out"), spark=spark, background=False,
                         schemas={s: "x BIGINT, y BIGINT" for s in streams})
    try:
        q.process_available()
        seconds = []
        for i in range(1, increments + 1):
            put(increment, i)
            began = time.perf_counter()
            q.process_available()
            seconds.append(time.perf_counter() - began)
    finally:
        q.stop()
        shutil.rmtree(work, ignore_errors=True)
    return seconds


def main(keys: int, increment: int, increments: int, queries: list[str]) -> None:
    spark = get_spark("local[2]", app_name="one-task-rows")
    rng = np.random.default_rng(1)
    kept = shape.ONE_TASK_ROWS
    with tempfile.TemporaryDirectory() as root:
        try:
            for query in queries:
                for bound in BOUNDS:
                    s = run(spark, root, query, bound, keys, increment, increments, rng)[3:]
                    print(f"{query} keys={keys} increment={increment} ONE_TASK_ROWS={bound}: "
                          f"median {statistics.median(s):.3f} s, mean {statistics.fmean(s):.3f} s", flush=True)
        finally:
            shape.ONE_TASK_ROWS = kept


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]),
         sys.argv[4].split(",") if len(sys.argv) > 4 else list(QUERIES))
