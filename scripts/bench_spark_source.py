"""W1 fed two ways: files into a source directory, and the same files read by a Spark streaming
DataFrame (``spark.readStream.parquet(DIR)``) given as the source — the seed's groupBy (1M-row
history, 40K-row increments), run in turn in one Spark session.

    PYTHONPATH=. .venv/bin/python scripts/bench_spark_source.py [--increments 9] [--rounds 2]

An increment's time is what a user waits for: from its files landing in the directory to the
commit of the batch that holds them. For the directory that is the engine's batch; for the
streaming DataFrame it is Spark's micro-batch (listing the new files, reading them, staging
them as one Parquet file: ``connectors/spark_source.py``) and then the engine's batch over the
staged file; the Spark stream looks for new files every ``STREAMFOLD_SPARK_TRIGGER`` seconds (0.1).
Prints one line per configuration and round with the median increment, its ratio to the
directory's (issue 54's target: at most 1.2×) and the part of it spent until the micro-batch was
staged. Figures go to docs/benchmarks.md with the machine's load.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="bench-out/spark-source")
    parser.add_argument("--increments", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=2,
                        help="each configuration this many times, in turn (the first round warms the JVM up)")
    args = parser.parse_args()

    import streamfold
    from streamfold.bench.data import cached
    from streamfold.bench.workloads import GROUPBY_SQL, WORKLOADS
    from streamfold.runtime.session import get_spark

    data = cached(WORKLOADS["groupby"], os.path.dirname(args.out) or ".")
    spark = get_spark("local[*]", app_name="bench-spark-source")
    base = None
    for round_ in range(args.rounds):
        base = None  # ratios within a round
        for name in ("directory", "dataframe"):
            root = os.path.join(args.out, name)
            shutil.rmtree(root, ignore_errors=True)
            src = os.path.join(root, "S")
            os.makedirs(src)
            source = (spark.readStream.schema("x INT, y INT").parquet(src) if name == "dataframe" else src)
            query = streamfold.start(GROUPBY_SQL, {"S": source}, os.path.join(root, "out"),
                                     schemas={"S": "x INT, y INT"}, spark=spark, background=False, endpoint=False)
            waits, staging = [], []
            try:
                for inc, files in enumerate(data.files[: args.increments + 1]):
                    landed = time.monotonic()
                    for p in files["S"]:
                        os.link(p, os.path.join(src, os.path.basename(p)))
                    if name == "dataframe":  # Spark stages the new files as a micro-batch; a run's watch
                        _wait_for_staged(query, inc + 1)  # of the staging directory starts the batch then
                    staged = time.monotonic()
                    result = query.process_available()
                    assert result is not None, f"{name}: no batch for increment {inc}"
                    if inc > 0:
                        waits.append(time.monotonic() - landed)
                        staging.append(staged - landed)
            finally:
                query.stop()
            median = statistics.median(waits)
            base = base or median
            print(f"round {round_ + 1} {name:9s} increment median {median:.3f} s  (×{median / base:.2f})  "
                  f"min {min(waits):.3f}  max {max(waits):.3f}  (of it staging: median {statistics.median(staging):.3f} s)",
                  flush=True)


def _wait_for_staged(query, count: int) -> None:
    """Until ``count`` micro-batches with rows are staged (polled every 5 ms, as the watch wakes a run)."""
    source = query.feeds.sources[0]
    while True:
        staged = [n for n in os.listdir(source.directory) if n.startswith("spark-b")]
        rows = [n for n in staged if any(f.endswith(".parquet") for f in os.listdir(os.path.join(source.directory, n)))]
        if len(rows) >= count:
            return
        source.check()
        time.sleep(0.005)


if __name__ == "__main__":
    main()
