"""The same query as a Spark Structured Streaming job: the baseline Spark itself offers.

Each source is read with ``readStream`` (Parquet, explicit schema, no ``maxFilesPerTrigger``
limit) from this system's directory; the query runs with Spark's default trigger (a new
micro-batch as soon as files appear) and a ``foreachBatch`` sink writing each micro-batch's rows
to ``sink/<batch>/``. The runner calls ``processAllAvailable()`` after an increment's files
appear; it returns once every file has been processed and its batch committed.

The output mode is the first of ``complete``, ``update``, ``append`` that Spark accepts (or the
one asked for); Spark's exact message for each mode it rejects is kept for the report. In
complete mode the committed answer is the last batch's rows; in update mode it is the
accumulated upserts (the last row per group key); in append mode, the union of all batches.
"""

from __future__ import annotations

import os
from typing import Any

from ...verify import read_rows
from .base import Context, Rejected, System

MODES = ("complete", "update", "append")


class StreamingSystem(System):
    name = "spark-streaming"
    commit_means = ("processAllAvailable() returned: every micro-batch over the new files has run its "
                    "foreachBatch sink (Parquet) and committed")
    counts_jobs = False  # micro-batches run in the query's own job group: see micro_batches instead

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.query: Any = None
        self.mode: str | None = None
        self.rejections: dict[str, str] = {}
        self.sink = os.path.join(ctx.work, "sink")
        self._seen_batch = -1

    def start(self) -> None:
        from pyspark.errors import AnalysisException

        session = self.ctx.spark.newSession()
        for name, d in self.ctx.dirs.items():
            (session.readStream.schema(self.ctx.schemas[name]).parquet(d)
             .createOrReplaceTempView(name))
        for name, d in self.ctx.tables.items():  # static tables: batch DataFrames joined to the stream
            session.read.parquet(d).createOrReplaceTempView(name)
        try:
            df = session.sql(self.ctx.workload.batch_sql)
        except AnalysisException as e:  # refused before any output mode is tried
            raise Rejected({"analysis": str(e)}) from None
        wanted = self.ctx.options.get("streaming_mode") or "auto"
        modes = MODES if wanted == "auto" else (wanted,)
        sink = self.sink

        def write(batch: Any, batch_id: int) -> None:
            batch.write.mode("overwrite").parquet(os.path.join(sink, f"{batch_id:06d}"))

        for mode in modes:
            try:
                self.query = (df.writeStream.outputMode(mode).foreachBatch(write)
                              .option("checkpointLocation", os.path.join(self.ctx.work, "checkpoint", mode))
                              .start())
                self.mode = mode
                return
            except AnalysisException as e:  # Spark's own refusal of this mode: recorded, next mode
                self.rejections[mode] = str(e)
        raise Rejected(self.rejections)

    def process(self, increment: int) -> dict[str, Any]:
        self.query.processAllAvailable()
        error = self.query.exception()
        if error is not None and "not supported" in str(error):  # the query's shape, refused at its first batch
            raise Rejected({"planning": str(error).splitlines()[0]})
        if error is not None:
            raise RuntimeError(f"the streaming query failed: {error}")
        return {"timings": self._progress()}

    def _progress(self) -> dict[str, float]:
        """Spark's own phase durations (seconds) of the micro-batches run since the last call."""
        totals: dict[str, float] = {}
        batches = 0
        for p in self.query.recentProgress:
            batch_id = p["batchId"] if isinstance(p, dict) else p.batchId
            if batch_id <= self._seen_batch:
                continue
            durations = p["durationMs"] if isinstance(p, dict) else p.durationMs
            for k, v in (durations or {}).items():
                totals[k] = totals.get(k, 0.0) + v / 1000
            self._seen_batch = max(self._seen_batch, batch_id)
            batches += 1
        out = {k: round(v, 4) for k, v in totals.items()}
        out["micro_batches"] = batches
        return out

    def answer(self) -> list[tuple]:
        batches = sorted(n for n in os.listdir(self.sink) if not n.startswith((".", "_"))) \
            if os.path.isdir(self.sink) else []
        if not batches:
            return []
        if self.mode == "complete":
            return read_rows(os.path.join(self.sink, batches[-1]))
        keys = self.ctx.workload.keys
        if self.mode == "append" or keys is None:
            return [r for b in batches for r in read_rows(os.path.join(self.sink, b))]
        return _upserts(self.sink, batches, keys)

    def describe(self) -> dict[str, Any]:
        return {"output_mode": self.mode, "rejected_modes": self.rejections, "sink": "foreachBatch → Parquet",
                "trigger": "default (next micro-batch as soon as the previous ends and files are there)",
                "state_partitions": self.ctx.spark.conf.get("spark.sql.shuffle.partitions")}

    def close(self) -> None:
        if self.query is not None:
            self.query.stop()


def _upserts(sink: str, batches: list[str], keys: tuple[str, ...]) -> list[tuple]:
    """Update mode's committed answer: per key, the row of the last batch that emitted it."""
    import pyarrow.parquet as pq

    latest: dict[tuple, tuple] = {}
    for b in batches:
        table = pq.read_table(os.path.join(sink, b))
        index = [table.column_names.index(k) for k in keys]
        for row in table.to_pylist():
            values = tuple(row.values())
            latest[tuple(values[i] for i in index)] = values
    return list(latest.values())
