"""The recompute strategy's Spark work: the batch query over every file so far, from scratch.

It runs in a Spark session of its own, with Spark's defaults — adaptive execution on, as a
scheduled batch job has it (the engine's session turns it off to keep states partitioned, which
a query from scratch does not need) — so that a recompute costs what Spark's own does.

Each stream's files are read as the batch reader reads them (columns checked, ``_weight`` added)
and registered under the stream's own name; a stream that may delete rows is netted first — rows
grouped whole, their weights summed, each kept as many times as its net weight (a Z-set made a
bag again, :mod:`.netting`, as :func:`streamfold.verify.recompute` does for the bench's
recompute). Only the rows that can meet a deletion are netted: a Parquet file whose footer
statistics say each ``_weight`` is 1 (no deletion, no copy) has its other rows taken as they are,
and when every file is such, nothing is netted (the statistics of a file are read once). A
history of at most ``shape.ONE_TASK_ROWS`` rows is netted whole (when a file may delete) and
cached, once per recompute, whatever the number of subqueries that read it; a history without
a deletion is read as it is. Static tables
are registered under theirs. The query is the text Spark analysed for the output schema
(``spark_schema_sql``), so its answer has the snapshot's columns and types exactly — with its
divisions in their NULL-on-zero form, as the incremental plan divides (``sql/batch_text.py``),
and then named as the snapshot's columns.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..plan.model import IncrementalPlan
from ..sql import Catalog, SourceSchema
from . import netting, shape
from .inputs import BatchReader
from .lowering.netting import projected
from .sources import InputSpec, parquet_rows, parquet_weights_all_one, read_files, table_paths

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Recomputer:
    def __init__(self, engine_session: SparkSession, plan: IncrementalPlan, sql: str,
                 specs: dict[str, InputSpec], catalog: Catalog, names: list[str] | None = None) -> None:
        self._engine_session = engine_session
        self.plan, self.sql, self.specs = plan, sql, specs
        self._names = names  # the snapshot's column names, where sql's own differ (None: sql's)
        self._catalog = catalog
        self._spark: SparkSession | None = None  # made at the first recompute: most runs never need it
        self._reader: BatchReader | None = None
        self._tables: set[str] = set()

    @property
    def spark(self) -> SparkSession:
        if self._spark is None:
            engine = self._engine_session
            spark = engine.newSession()
            spark.conf.set("spark.sql.session.timeZone", engine.conf.get("spark.sql.session.timeZone") or "UTC")
            spark.conf.set("spark.sql.adaptive.enabled", "true")
            # the outputs' job (adaptive execution off) shuffles the answer as the engine's do
            spark.conf.set("spark.sql.shuffle.partitions", engine.conf.get("spark.sql.shuffle.partitions") or "4")
            # every file of the history is listed by path: on the driver, not by a Spark job per
            # recompute (Spark lists in parallel above 32 paths)
            spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.threshold", "4096")
            self._spark = spark
            self._reader = BatchReader(spark, self.plan.streams, self.specs, self._catalog)
        return self._spark

    def nets(self, stream: SourceSchema, files: Sequence[str]) -> bool:
        """Whether a recompute over ``files`` (names in ``stream``'s directory) nets rows: a
        stream with ``_weight`` whose Parquet file's footers do not prove every weight is 1, or
        any file of such a stream in another format (netted whole, whatever its weights)."""
        if not stream.weighted or not files:
            return False
        spec = self.specs[stream.name.lower()]
        if spec.format != "parquet":
            return True
        return not all(parquet_weights_all_one(os.path.join(spec.path, n)) for n in files)

    def register(self, history: dict[str, list[str]]) -> list[DataFrame]:
        """Every input as a temp view under its name, over all of ``history``'s files (per
        stream); returns what to unpersist afterwards."""
        spark = self.spark
        assert self._reader is not None
        frames, _, cached = self._reader.read(history, cache=False)
        for s in self.plan.streams:
            names = [c for c, _ in s.columns]
            view = f"__all_{s.name}"
            frames[s.name].createOrReplaceTempView(view)
            spec = self.specs[s.name.lower()]
            if not s.weighted:
                spark.sql(projected(view, names)).createOrReplaceTempView(s.name)
                continue
            paths = [os.path.join(spec.path, n) for n in history.get(s.name, [])] if spec.format == "parquet" else None
            small = paths is not None and sum(parquet_rows(p) for p in paths) <= shape.ONE_TASK_ROWS
            # A small history with a deletion is netted whole (one grouping: the split's driver
            # reads, broadcast and anti join cost more than grouping a task's worth of rows)...
            whole = small and self.nets(s, history.get(s.name, []))
            cached += netting.register_netted(spark, s.name, names, None if whole else paths,
                                              functools.partial(read_files, spark, spec, s), view)
            if whole:
                # ... once, and kept: a query that reads the stream in each of its subqueries
                # (nine times, bench/small-states) netted it nine times and recomputed 5-15x slower.
                # Not kept when nothing is netted: the query reads its files as Spark's own does,
                # only its columns — a copy of every column cost a job per stream (TPC-DS at SF 0.1:
                # half of a recompute batch).
                kept = spark.table(s.name).cache()
                kept.count()
                kept.createOrReplaceTempView(s.name)
                cached.append(kept)
        for t in self.plan.tables:
            if t.name not in self._tables:  # read once: a static table never changes
                spec = self.specs[t.name.lower()]
                read_files(spark, spec, self._catalog[t.name], table_paths(spec.path)) \
                    .createOrReplaceTempView(t.name)
                self._tables.add(t.name)
        return cached

    def answer(self) -> DataFrame:
        """The query's answer over the registered inputs (lazy), its columns without Spark's
        metadata: a ``session_window`` column carries ``spark.sessionWindow``, which made the
        GROUP BY that compares it with the answer before (its changes) a session aggregation
        merging the old and the new sessions of a key."""
        from pyspark.sql import functions as F

        answer = self.spark.sql(self.sql)
        names = self._names if self._names is not None else answer.columns
        positional = answer.toDF(*(f"_c{i}" for i in range(len(names))))  # (names may repeat)
        return positional.select(*(F.col(f"_c{i}").alias(n, metadata={}) for i, n in enumerate(names)))

    def measure(self, history: dict[str, list[str]],
                outputs: Callable[[DataFrame], None] | None = None) -> float:
        """Seconds to run the query over ``history`` (a probe of what a recompute costs): to
        Spark's ``noop`` sink, or through ``outputs`` — what a recompute batch computes from its
        answer besides (its changes), written nowhere."""
        began = time.monotonic()
        cached = self.register(history)
        try:
            if outputs is not None:
                outputs(self.answer())
            else:
                self.answer().write.format("noop").mode("overwrite").save()
        finally:
            for df in cached:
                df.unpersist()
        return time.monotonic() - began

