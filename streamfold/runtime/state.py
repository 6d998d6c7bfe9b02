"""States on Spark: materialized, hash-partitioned on their key, merged by their monoids.

A state is a DataFrame materialized with ``localCheckpoint`` (lineage cut, blocks cached on
the executors) and hash-partitioned on its partition key. With adaptive execution off, Spark
keeps that partitioning in the checkpointed plan, so the merge

    state ⊗ Δ  =  (state UNION ALL Δ) GROUP BY key, each column by its monoid, _w ≠ 0

and the joins of a delta with a state shuffle only the delta (seed 000 §2, "Merging States").
A replaced state's blocks are released at once, so nothing accumulates from batch to batch.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..plan.model import WEIGHT_COLUMN, Monoid, State
from .lower import col

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def materialize(df: DataFrame) -> DataFrame:
    """Compute ``df`` now, keep it on the executors, and cut its lineage."""
    return df.localCheckpoint(eager=True)


def release(df: DataFrame | None) -> None:
    """Free the blocks of a DataFrame made by :func:`materialize` (a no-op for others)."""
    if df is None:
        return
    try:
        plan = df._jdf.queryExecution().logical()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
    except Exception:  # noqa: BLE001 - releasing is best effort; the cleaner frees it later
        pass


def widen(schema: StructType) -> StructType:
    """State column types stable under repeated merges: decimals widened to 38 digits."""
    from pyspark.sql.types import DecimalType, StructField, StructType

    fields = []
    for f in schema.fields:
        t = f.dataType
        if isinstance(t, DecimalType):
            t = DecimalType(38, t.scale)
        fields.append(StructField(f.name, t, True))
    return StructType(fields)


class StateStore:
    """The states of one running query."""

    def __init__(self, spark: SparkSession, states: tuple[State, ...], partitions: int) -> None:
        self.spark = spark
        self.defs = {s.name: s for s in states}
        self.partitions = partitions
        self.schemas: dict[str, StructType] = {}
        self.current: dict[str, DataFrame] = {}

    # -- shape -----------------------------------------------------------------------------------
    def declare(self, name: str, schema: StructType) -> None:
        """Fix a state's schema (from its delta program's analysed schema) and start it empty."""
        self.schemas[name] = widen(schema)
        self.current[name] = self.empty(name)

    def empty(self, name: str) -> DataFrame:
        return self.spark.createDataFrame([], self.schemas[name])

    def conform(self, name: str, df: DataFrame) -> DataFrame:
        """``df`` with exactly the state's columns, in order, in the state's types."""
        schema = self.schemas[name]
        return df.select(*[col(f.name).cast(f.dataType).alias(f.name) for f in schema.fields])

    def _partitioned(self, name: str, df: DataFrame) -> DataFrame:
        keys = self.defs[name].partition_names
        if not keys:
            return df.coalesce(1)
        return df.repartition(self.partitions, *[col(k) for k in keys])

    # -- batch operations ------------------------------------------------------------------------
    def materialize_delta(self, name: str, df: DataFrame) -> DataFrame:
        """A batch's Δstate, computed once, partitioned like the state it merges into."""
        return materialize(self._partitioned(name, self.conform(name, df)))

    def merge(self, name: str, old: DataFrame, delta: DataFrame) -> DataFrame:
        """``old ⊗ delta``: union, group by key, combine each column by its monoid."""
        from pyspark.sql import functions as F

        state = self.defs[name]
        schema = self.schemas[name]
        keys = [col(k) for k in state.key_names]
        monoids = {c.name: c.monoid for c in state.columns}
        aggs = []
        for f in schema.fields:
            if f.name in monoids:
                fn = {Monoid.SUM: F.sum, Monoid.MIN: F.min, Monoid.MAX: F.max}[monoids[f.name]]
                aggs.append(fn(col(f.name)).cast(f.dataType).alias(f.name))
        merged = old.unionByName(delta).groupBy(*keys).agg(*aggs)
        if not state.keep_empty:
            merged = merged.filter(col(WEIGHT_COLUMN) != 0)
        return materialize(merged.select(*[col(f.name) for f in schema.fields]))

    def load(self, name: str, paths: list[str]) -> DataFrame:
        """A state rebuilt from its durable files (a base and deltas) by merging them."""
        existing = [p for p in paths if os.path.isdir(p)]
        if not existing:
            return self.current[name]
        df = self.spark.read.schema(self.schemas[name]).parquet(*existing)
        return self.merge(name, self.empty(name), self._partitioned(name, self.conform(name, df)))

    def replace(self, new: dict[str, DataFrame]) -> None:
        """Make ``new`` the current states, releasing the ones they replace."""
        for name, df in new.items():
            old = self.current.get(name)
            self.current[name] = df
            if old is not None and old is not df:
                release(old)

    def row_counts(self) -> dict[str, int]:
        return {name: df.count() for name, df in self.current.items()}

    def close(self) -> None:
        for df in self.current.values():
            release(df)
        self.current.clear()
