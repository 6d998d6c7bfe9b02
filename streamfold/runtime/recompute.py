"""The recompute strategy's Spark work: the batch query over every file so far, from scratch.

It runs in a Spark session of its own, with Spark's defaults — adaptive execution on, as a
scheduled batch job has it (the engine's session turns it off to keep states partitioned, which
a query from scratch does not need) — so that a recompute costs what Spark's own does.

Each stream's files are read as the batch reader reads them (columns checked, ``_weight`` added)
and registered under the stream's own name; a stream that may delete rows is netted first — rows
grouped whole, their weights summed, each kept as many times as its net weight (a Z-set made a
bag again, as :func:`streamfold.verify.recompute` does for the bench's recompute). Static tables
are registered under theirs. The query is the text Spark analysed for the output schema
(``spark_schema_sql``), so its answer has the snapshot's columns and types exactly.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ..ir.printer import quote
from ..ir.rel import WEIGHT
from ..plan.model import IncrementalPlan
from ..sql import Catalog
from .inputs import BatchReader
from .sources import InputSpec, read_files, table_paths

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class Recomputer:
    def __init__(self, engine_session: SparkSession, plan: IncrementalPlan, sql: str,
                 specs: dict[str, InputSpec], catalog: Catalog) -> None:
        self.spark = engine_session.newSession()
        self.spark.conf.set("spark.sql.session.timeZone", engine_session.conf.get("spark.sql.session.timeZone") or "UTC")
        self.plan, self.sql, self.specs = plan, sql, specs
        self.reader = BatchReader(self.spark, plan.streams, specs, catalog)
        self._tables: set[str] = set()
        self._catalog = catalog

    def register(self, history: dict[str, list[str]]) -> list[DataFrame]:
        """Every input as a temp view under its name, over all of ``history``'s files (per
        stream); returns what to unpersist afterwards."""
        frames, _, cached = self.reader.read(history, cache=False)
        for s in self.plan.streams:
            cols = ", ".join(quote(c) for c, _ in s.columns)
            view = f"__all_{s.name}"
            frames[s.name].createOrReplaceTempView(view)
            if s.weighted:
                text = (f"SELECT {cols} FROM (SELECT {cols}, sum({WEIGHT}) AS __w FROM {view} GROUP BY {cols}) "
                        f"LATERAL VIEW explode(sequence(1, __w)) AS __copy WHERE __w > 0")
            else:
                text = f"SELECT {cols} FROM {view}"
            self.spark.sql(text).createOrReplaceTempView(s.name)
        for t in self.plan.tables:
            if t.name not in self._tables:  # read once: a static table never changes
                spec = self.specs[t.name.lower()]
                read_files(self.spark, spec, self._catalog[t.name], table_paths(spec.path)) \
                    .createOrReplaceTempView(t.name)
                self._tables.add(t.name)
        return cached

    def answer(self) -> DataFrame:
        """The query's answer over the registered inputs (lazy)."""
        return self.spark.sql(self.sql)

    def measure(self, history: dict[str, list[str]]) -> float:
        """Seconds to run the query over ``history`` to Spark's ``noop`` sink: every row computed,
        nothing written (a probe of what a recompute costs)."""
        began = time.monotonic()
        cached = self.register(history)
        try:
            self.answer().write.format("noop").mode("overwrite").save()
        finally:
            for df in cached:
                df.unpersist()
        return time.monotonic() - began
