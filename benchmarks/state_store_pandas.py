"""The alternative the runtime issue names: Spark's state store via ``transformWithStateInPandas``.

    .venv/bin/pip install protobuf   # Spark needs it for this API; streamfold does not
    .venv/bin/python benchmarks/state_store_pandas.py [--batches 15] [--keys 10000] [--rows 40000]

A running (sum, count) per key kept in the RocksDB state store by a Python StatefulProcessor —
the groupBy-avg merge of ``state_representation.py`` — fed 40,000-row micro-batches. Every key
of a batch runs Python code on the executor (per group, with pandas), which streamfold's design
rules out for its hot path; this measures what that costs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Iterator

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import pandas as pd  # noqa: E402
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle  # noqa: E402
from pyspark.sql.types import LongType, StructField, StructType  # noqa: E402

from streamfold.runtime.session import get_spark  # noqa: E402


class RunningSum(StatefulProcessor):
    def init(self, handle: StatefulProcessorHandle) -> None:
        schema = StructType([StructField("n", LongType()), StructField("s", LongType())])
        self.acc = handle.getValueState("acc", schema)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[pd.DataFrame]:  # noqa: N802 - Spark's API
        n, s = (self.acc.get() if self.acc.exists() else (0, 0))
        for pdf in rows:
            n += len(pdf)
            s += int(pdf["v"].sum())
        self.acc.update((n, s))
        yield pd.DataFrame({"k": [key[0]], "avg": [s / n]})

    def close(self) -> None:
        pass


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=15)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--rows", type=int, default=40_000)
    args = ap.parse_args()
    spark = get_spark("local[2]")
    spark.conf.set("spark.sql.streaming.stateStore.providerClass",
                   "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider")
    spark.conf.set("spark.sql.shuffle.partitions", "4")
    stream = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", args.rows).load()
              .selectExpr(f"CAST(value % {args.keys} AS INT) AS k", "value % 97 AS v"))
    out = StructType([StructField("k", LongType()), StructField("avg", LongType())])
    out = "k INT, avg DOUBLE"
    query = (stream.groupBy("k").transformWithStateInPandas(RunningSum(), outputStructType=out, outputMode="Update",
                                                           timeMode="None")
             .writeStream.format("noop").outputMode("update").trigger(processingTime="0 seconds").start())
    try:
        while len(query.recentProgress) < args.batches:
            query.awaitTermination(1)
            if query.exception():
                raise query.exception()  # type: ignore[misc]
    finally:
        query.stop()
    times = [p["durationMs"]["triggerExecution"] / 1000 for p in query.recentProgress[: args.batches]]
    tail = times[-max(1, len(times) // 3):]
    print(f"transformWithStateInPandas, {args.keys:,} keys, {args.rows:,}-row micro-batches: "
          f"first {times[0]:.3f} s, last-third median {statistics.median(tail):.3f} s, max {max(times):.3f} s")


if __name__ == "__main__":
    main()
