"""Spark DataFrames as inputs (the Python API): a streaming DataFrame is a source, a static one a table.

Whatever Spark can read as a stream on the user's cluster (Kafka, Delta, Iceberg, files, ``rate``)
feeds a query without an export job of the user's own: streamfold runs the DataFrame as a Spark
streaming query, ``df.writeStream.foreachBatch(…)``, with its own checkpoint
(``CHECKPOINT/sources/NAME/_spark``). **Spark's offsets and checkpoint decide what a micro-batch
holds**; each micro-batch's rows are written (by Spark, Parquet) as one file named by Spark's
batch id, ``spark-b<id>``, into the source's staging directory, under a hidden name renamed into
place. From there on the engine reads it as a batch of files (``runtime/staged.py``).

Exactly once: Spark writes its commit for micro-batch ``id`` only after ``foreachBatch`` returned,
i.e. after the file is in place; killed in between, Spark runs batch ``id`` again over the same
offsets, finds ``spark-b<id>`` there and skips it — a replayed batch is never applied twice.
Killed before the rename, the hidden file is written again.

Rows: a ``_weight`` column (integer) inserts or deletes copies, as in files; a ``_change_type``
column (a Delta change feed: ``insert``/``update_postimage`` +1, ``delete``/``update_preimage``
−1) is mapped to ``_weight``; otherwise every row is an insert. No Python runs per row.

Several streaming DataFrames are several Spark streaming queries; each engine batch takes the
micro-batches every one of them finished since the last (one consistent cut over whole
micro-batches — not aligned in event time across the sources).

A static DataFrame is a table: written once (Parquet) into ``CHECKPOINT/tables/NAME`` the first
time the query starts; a restart reads that copy (a table never changes during a run).
"""

from __future__ import annotations

import os
import re
import shutil
from typing import TYPE_CHECKING, Any

from ..errors import SourceError, UsageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

WEIGHT = "_weight"
CHANGE_TYPE = "_change_type"
STAGED = re.compile(r"^spark-b(\d{20})$")


def is_dataframe(value: Any) -> bool:
    return hasattr(value, "sparkSession") and hasattr(value, "isStreaming")


class SparkStreamSource:
    """A streaming DataFrame staged micro-batch by micro-batch into ``directory``."""

    def __init__(self, name: str, df: DataFrame, directory: str) -> None:
        if not df.isStreaming:
            raise UsageError(f"source {name} is a static DataFrame", code="STATIC_DATAFRAME_SOURCE",
                             params={"source": name}, hint="give a static DataFrame in tables=, a streaming one "
                             "(spark.readStream…) in sources=")
        self.name = name
        self.df = df
        self.directory = directory
        self.query: StreamingQuery | None = None
        names = [f.name for f in df.schema.fields]
        if WEIGHT in names and CHANGE_TYPE in names:
            raise UsageError(f"source {name} has both _weight and _change_type", code="BAD_SOURCE_COLUMNS",
                             params={"source": name}, hint="keep one of them: the weight, or the change type")
        self.columns = [n for n in names if n not in (WEIGHT, CHANGE_TYPE) and not n.startswith("_commit_")]
        self.weighted = WEIGHT in names or CHANGE_TYPE in names

    def schema(self) -> str:
        """The source's columns as ``col TYPE, …`` (and ``_weight BIGINT`` when rows may delete)."""
        types = {f.name: f.dataType.simpleString() for f in self.df.schema.fields}
        cols = [f"{c} {types[c]}" for c in self.columns]
        return ", ".join(cols + ([f"{WEIGHT} BIGINT"] if self.weighted else []))

    def start(self, trigger_s: float) -> None:
        """Start the Spark streaming query that stages each micro-batch."""
        os.makedirs(self.directory, exist_ok=True)
        writer = (self.df.writeStream.foreachBatch(self._stage)
                  .option("checkpointLocation", os.path.join(self.directory, "_spark"))
                  .queryName(f"streamfold-{self.name}").trigger(processingTime=f"{trigger_s} seconds"))
        try:
            self.query = writer.start()
        except Exception as e:  # noqa: BLE001 - Spark's own error, kept as the cause
            raise SourceError(f"Spark cannot run source {self.name} as a checkpointed stream: "
                              f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}",
                              code="SPARK_SOURCE_NOT_CHECKPOINTABLE", params={"source": self.name},
                              hint="the source must be replayable from Spark's checkpoint (files, Kafka, Delta, "
                                   "rate…; not a socket or memory stream)") from e

    def _stage(self, batch: DataFrame, batch_id: int) -> None:
        final = os.path.join(self.directory, f"spark-b{batch_id:020d}")
        if os.path.exists(final):  # a micro-batch Spark replays after a crash: applied already
            return
        tmp = os.path.join(self.directory, f".spark-b{batch_id:020d}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        batch.select(*self._columns(batch)).write.parquet(tmp)
        os.rename(tmp, final)

    def _columns(self, batch: DataFrame) -> list[Any]:
        from pyspark.sql import functions as F

        cols: list[Any] = [F.col(f"`{c}`") for c in self.columns]
        names = set(batch.columns)
        if WEIGHT in names:
            cols.append(F.coalesce(F.col(WEIGHT).cast("bigint"), F.lit(1).cast("bigint")).alias(WEIGHT))
        elif CHANGE_TYPE in names:
            kind = F.col(CHANGE_TYPE)
            cols.append(F.when(kind.isin("insert", "update_postimage"), F.lit(1)).when(
                kind.isin("delete", "update_preimage"), F.lit(-1)).otherwise(F.lit(0)).cast("bigint").alias(WEIGHT))
        return cols

    def check(self) -> None:
        """Raise the streaming query's failure, if it failed (as a coded error)."""
        if self.query is not None and not self.query.isActive and self.query.exception() is not None:
            raise SourceError(f"the Spark stream of source {self.name} failed: {self.query.exception()}",
                              code="SPARK_SOURCE_FAILED", params={"source": self.name},
                              hint="fix the cause and start the query again: Spark resumes from its checkpoint")

    def busy(self) -> bool:
        """Still staging: the stream has not finished a trigger yet, runs one, or its last one
        found data (a source with more to read, as files beyond ``maxFilesPerTrigger``)."""
        if self.query is None or not self.query.isActive:
            return False
        status = self.query.status
        return self.query.lastProgress is None or bool(status.get("isTriggerActive") or status.get("isDataAvailable"))

    def stop(self) -> None:
        if self.query is not None:
            self.query.stop()
            self.query = None


def stage_table(name: str, df: DataFrame, directory: str) -> str:
    """A static DataFrame written once as Parquet into ``directory`` (kept across restarts)."""
    if df.isStreaming:
        raise UsageError(f"table {name} is a streaming DataFrame", code="STREAMING_DATAFRAME_TABLE",
                         params={"table": name}, hint="give a streaming DataFrame in sources=")
    if not os.path.isdir(directory):
        tmp = os.path.join(os.path.dirname(directory), f".{os.path.basename(directory)}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        df.write.parquet(tmp)
        os.rename(tmp, directory)
    return directory


class SparkFeeds:
    """The streaming DataFrames of one run, started and stopped together."""

    def __init__(self, sources: list[SparkStreamSource]) -> None:
        self.sources = sources

    def start(self, trigger_s: float) -> None:
        try:
            for s in self.sources:
                s.start(trigger_s)
        except BaseException:
            self.stop()
            raise

    def check(self) -> None:
        for s in self.sources:
            s.check()

    def busy(self) -> bool:
        return any(s.busy() for s in self.sources)

    def stop(self) -> None:
        for s in self.sources:
            s.stop()
