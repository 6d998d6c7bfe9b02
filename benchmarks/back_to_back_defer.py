"""Back-to-back increments: does the work after a commit delay the next batch? (issue 58)

    .venv/bin/python benchmarks/back_to_back_defer.py KEYS HISTORY INCREMENT INCREMENTS COMPACT_EVERY

The seed's groupBy over ``KEYS`` keys: a history of ``HISTORY`` rows, then ``INCREMENTS``
increments of ``INCREMENT`` rows, each file renamed into the source as soon as the previous
batch's commit is visible (a writer thread watching ``commits/``), with ``--compact-every
COMPACT_EVERY``. Runs four times in one process, alternating ``STREAMFOLD_DEFER`` off and on
(runtime/features/maintenance.py), and prints per run: the median wait from a file's arrival to
its batch's start (the ``--profile`` waterfall's first span), the same for the batches right
after a compaction was due, and the median file → commit and batch start → commit times
(docs/benchmarks.md, "Post-commit work gives way to a waiting file").
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import streamfold
from streamfold.runtime.profile import WAITED
from streamfold.runtime.session import get_spark
from streamfold.settings import Settings

SQL = "SELECT x, count(*) AS n, sum(y) AS s FROM S GROUP BY x"


def main(keys: int, history: int, increment: int, increments: int, every: int) -> None:
    spark = get_spark("local[2]", app_name="back-to-back")
    rng = np.random.default_rng(1)

    def table(n: int) -> pa.Table:
        return pa.table({"x": pa.array(rng.integers(0, keys, n), pa.int32()),
                         "y": pa.array(rng.integers(0, 100, n), pa.int32())})

    data = [table(history)] + [table(increment) for _ in range(increments)]
    for defer in (False, True, False, True):
        waits, e2e, durations = _run(spark, data, every, defer)
        inc = [b for b in waits if b >= 1]
        after = [b for b in inc if b % every == 0]  # the batch after one whose compaction was due
        print(f"defer={defer}: median wait {statistics.median(waits[b] for b in inc):.3f} s, after a compaction "
              f"median wait {statistics.median(waits[b] for b in after):.3f} s (max {max(waits[b] for b in after):.3f}); "
              f"file->commit median {statistics.median(e2e[b] for b in inc):.3f} s, after a compaction "
              f"{statistics.median(e2e[b] for b in after):.3f} s; batch start->commit median "
              f"{statistics.median(durations[b] for b in inc):.3f} s", flush=True)


def _run(spark, data: list[pa.Table], every: int, defer: bool):
    tmp = tempfile.mkdtemp(prefix="b2b-")
    src, out = os.path.join(tmp, "in"), os.path.join(tmp, "out")
    os.makedirs(src)
    files = []
    for i, t in enumerate(data):
        path = os.path.join(tmp, f"{i:04d}.parquet")
        pq.write_table(t, path)
        files.append(path)
    landed: dict[int, float] = {}

    def land(i: int) -> None:
        os.rename(files[i], os.path.join(src, f"{i:04d}.parquet"))
        landed[i] = time.time()

    land(0)
    n = len(data) - 1
    query = streamfold.start(SQL, {"S": src}, out, spark=spark, schemas={"S": "x INT, y INT"}, background=False,
                             endpoint=False, compact_every=every, profile=True,
                             settings=Settings.from_environ().replace(defer=defer))

    def writer() -> None:
        for i in range(1, n + 1):
            path = os.path.join(out, "commits", f"{i - 1:06d}.json")
            while not os.path.exists(path):
                time.sleep(0.0005)
            land(i)

    thread = threading.Thread(target=writer)
    thread.start()
    waits: dict[int, float] = {}
    e2e: dict[int, float] = {}
    durations: dict[int, float] = {}
    done = 0
    while done <= n:
        result = query.process_available()
        if result is None:
            time.sleep(0.001)
            continue
        waterfall = result.waterfall()
        spans = [s for s in waterfall.spans if s.name == WAITED] if waterfall is not None else []
        waits[result.batch] = -spans[0].start_s if spans else 0.0
        committed = os.stat(os.path.join(out, "commits", f"{result.batch:06d}.json")).st_mtime
        e2e[result.batch] = committed - min(landed[int(f[:4])] for f in result.inputs["S"])
        durations[result.batch] = result.commit_s or result.duration_s
        done = result.batch + 1
    thread.join()
    query.stop()
    return waits, e2e, durations


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:6]))
