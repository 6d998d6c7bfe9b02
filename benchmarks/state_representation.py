"""How to keep a state on Spark: measure the merge ``state ⊗ Δ`` in three representations.

    .venv/bin/python benchmarks/state_representation.py [--batches 30] [--keys 10000] [--rows 40000]

* ``cache``   — the merged DataFrame is ``cache()``d; its logical plan keeps the previous
  state's plan, so the lineage grows by one merge per batch.
* ``checkpoint`` — the merged DataFrame is ``localCheckpoint``ed (what streamfold does): lineage
  cut, blocks cached, hash partitioning kept (adaptive execution off).
* ``files``   — the state lives as Parquet on local disk, read, merged and rewritten per batch
  (the seed's "sorted by lineage key" files, without the sorted merge).

Prints per-batch seconds (median of the last third) and whether the state was shuffled.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from streamfold.runtime.session import engine_session, get_spark  # noqa: E402

MERGE = ("SELECT k, CAST(sum(n) AS BIGINT) AS n, CAST(sum(s) AS BIGINT) AS s "
         "FROM (SELECT k AS k, n, s FROM {old} UNION ALL SELECT k, n, s FROM {delta}) GROUP BY k")
DELTA = ("SELECT CAST(id % {keys} AS INT) AS k, CAST(1 AS BIGINT) AS n, CAST(id % 97 AS BIGINT) AS s "
         "FROM range({start}, {end})")


def run(kind: str, spark, batches: int, keys: int, rows: int) -> tuple[list[float], bool]:
    times = []
    shuffled_state = False
    tmp = tempfile.mkdtemp()
    state = spark.sql(f"SELECT CAST(id AS INT) AS k, CAST(0 AS BIGINT) AS n, CAST(0 AS BIGINT) AS s FROM range({keys}) "
                      "DISTRIBUTE BY k")
    state = state.localCheckpoint(True) if kind != "files" else state
    if kind == "files":
        state.write.parquet(f"{tmp}/state0")
    for b in range(batches):
        start = time.perf_counter()
        spark.sql(f"SELECT * FROM ({DELTA.format(keys=keys, start=b * rows, end=(b + 1) * rows)}) "
                  "DISTRIBUTE BY k").createOrReplaceTempView("delta")
        if kind == "files":
            spark.read.parquet(f"{tmp}/state{b}").createOrReplaceTempView("old")
        else:
            state.createOrReplaceTempView("old")
        merged = spark.sql(MERGE.format(old="old", delta="delta"))
        if kind == "cache":
            new = merged.cache()
            new.count()
            state.unpersist()
        elif kind == "checkpoint":
            new = merged.localCheckpoint(True)
        else:
            merged.write.parquet(f"{tmp}/state{b + 1}")
            shutil.rmtree(f"{tmp}/state{b}")
            new = None
        times.append(time.perf_counter() - start)
        plan = merged._jdf.queryExecution().executedPlan().toString()
        shuffled_state = shuffled_state or plan.count("Exchange") > 1
        state = new if new is not None else state
    shutil.rmtree(tmp, ignore_errors=True)
    return times, shuffled_state


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rows", type=int, default=40_000)
    args = ap.parse_args()
    spark = engine_session(get_spark("local[2]"), 4)
    print(f"merge of a {args.keys:,}-key state with {args.rows:,}-row batches, {args.batches} batches, local[2]")
    for kind in ("cache", "checkpoint", "files"):
        times, shuffled = run(kind, spark, args.batches, args.keys, args.rows)
        tail = times[-max(1, len(times) // 3):]
        print(f"  {kind:<10} first {times[0]:.3f} s  last-third median {statistics.median(tail):.3f} s  "
              f"max {max(times):.3f} s  state shuffled: {'yes' if shuffled else 'no'}")


if __name__ == "__main__":
    main()
