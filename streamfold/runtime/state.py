"""States on Spark: materialized, hash-partitioned on their key, merged by their monoids.

A state is a DataFrame materialized with ``localCheckpoint`` (lineage cut, blocks cached on
the executors) and hash-partitioned on its partition key. With adaptive execution off, Spark
keeps that partitioning in the checkpointed plan, so the merge

    SELECT key, sum(_w), …  FROM (state UNION ALL Δ)  GROUP BY key  HAVING sum(_w) <> 0

and the joins of a delta with a state shuffle only the delta (seed 000 §2, "Merging States").
A replaced state's blocks are released at once, so nothing accumulates from batch to batch.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ..ir.printer import quote
from ..plan.model import WEIGHT_COLUMN, Monoid, State
from .lower import Views, output_rows

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
    """The states of one running query, and their row counts."""

    def __init__(self, spark: SparkSession, states: tuple[State, ...]) -> None:
        self.spark = spark
        self.defs = {s.name: s for s in states}
        self.schemas: dict[str, StructType] = {}
        self.current: dict[str, DataFrame] = {}
        self.rows: dict[str, int | None] = {}

    # -- shape -----------------------------------------------------------------------------------
    def declare(self, name: str, schema: StructType) -> None:
        """Fix a state's schema (from its delta program's analysed schema) and start it empty."""
        self.schemas[name] = widen(schema)
        self.current[name] = self.empty(name)
        self.rows[name] = 0

    def set_static(self, name: str, df: DataFrame) -> None:
        self.schemas[name] = df.schema
        self.current[name] = df
        self.rows[name] = output_rows(df)

    def empty(self, name: str) -> DataFrame:
        return self.spark.createDataFrame([], self.schemas[name])

    def conform_sql(self, name: str, inner: str) -> str:
        """SQL giving ``inner``'s rows with exactly the state's columns and types, partitioned
        like the state (DISTRIBUTE BY is a hash repartition into the session's partitions)."""
        cols = ", ".join(f"CAST({quote(f.name)} AS {f.dataType.simpleString()}) AS {quote(f.name)}"
                         for f in self.schemas[name].fields)
        body = "\n".join("  " + line for line in inner.split("\n"))
        sql = f"SELECT {cols}\nFROM (\n{body}\n) _delta"
        keys = self.defs[name].partition_names
        if keys:
            sql += "\nDISTRIBUTE BY " + ", ".join(quote(k) for k in keys)
        return sql

    # -- batch operations ------------------------------------------------------------------------
    def materialize_delta(self, name: str, program_sql: str) -> DataFrame:
        """A batch's Δstate, computed once, partitioned like the state it merges into."""
        df = self.spark.sql(self.conform_sql(name, program_sql))
        if not self.defs[name].partition_names:
            df = df.coalesce(1)
        return materialize(df)

    def merge_sql(self, name: str, old_view: str, delta_view: str) -> str:
        state = self.defs[name]
        schema = self.schemas[name]
        monoids = {c.name: c.monoid for c in state.columns}
        items = []
        for f in schema.fields:
            n = quote(f.name)
            if f.name in monoids:
                fn = {Monoid.SUM: "sum", Monoid.MIN: "min", Monoid.MAX: "max"}[monoids[f.name]]
                items.append(f"CAST({fn}({n}) AS {f.dataType.simpleString()}) AS {n}")
            else:
                items.append(n)
        sql = (f"SELECT {', '.join(items)}\nFROM (SELECT * FROM {old_view} UNION ALL SELECT * FROM {delta_view}) _u")
        if state.key:
            sql += "\nGROUP BY " + ", ".join(quote(k) for k in state.key_names)
        if not state.keep_empty:
            sql += f"\nHAVING sum({quote(WEIGHT_COLUMN)}) <> 0"
        return sql

    def merge(self, name: str, old: DataFrame, delta: DataFrame, views: Views) -> DataFrame:
        """``old ⊗ delta``: union, group by key, combine each column by its monoid."""
        df = self.spark.sql(self.merge_sql(name, views.name(old, f"old_{name}"), views.name(delta, f"delta_{name}")))
        if not self.defs[name].key:
            df = df.coalesce(1)
        out = materialize(df)
        self.rows[name] = output_rows(df)
        return out

    # -- durable form ----------------------------------------------------------------------------
    def durable(self) -> list[str]:
        """The states written to the checkpoint (static ones are recomputed from their tables)."""
        return [n for n, d in self.defs.items() if not d.static]

    def pack_sql(self, frames: dict[str, DataFrame], views: Views) -> str:
        """One relation holding several states' rows, so they are written in a single job.

        Column ``__state`` names the state; state ``s``'s column ``c`` is ``s::c``, NULL in the
        rows of other states.
        """
        names = self.durable()
        parts = []
        for name in names:
            cols = [f"'{name}' AS __state"]
            for other in names:
                for f in self.schemas[other].fields:
                    packed = quote(f"{other}::{f.name}")
                    value = quote(f.name) if other == name else f"CAST(NULL AS {f.dataType.simpleString()})"
                    cols.append(f"{value} AS {packed}")
            parts.append(f"SELECT {', '.join(cols)} FROM {views.name(frames[name], 'pack_' + name)}")
        return "\nUNION ALL\n".join(parts)

    def restore(self, paths: list[str], views: Views) -> None:
        """Rebuild every durable state from packed files (a base and later deltas) by merging them."""
        existing = [p for p in paths if os.path.isdir(p)]
        if not existing:
            return
        files = views.name(self.spark.read.parquet(*existing), "restore")
        for name in self.durable():
            cols = ", ".join(f"{quote(name + '::' + f.name)} AS {quote(f.name)}" for f in self.schemas[name].fields)
            rows = f"SELECT {cols} FROM {files} WHERE __state = '{name}'"
            delta = materialize(self.spark.sql(self.conform_sql(name, rows)))
            merged = self.merge(name, self.empty(name), delta, views)
            release(delta)
            self.replace({name: merged})

    def replace(self, new: dict[str, DataFrame]) -> None:
        """Make ``new`` the current states, releasing the ones they replace."""
        for name, df in new.items():
            old = self.current.get(name)
            self.current[name] = df
            if old is not None and old is not df:
                release(old)

    def close(self) -> None:
        for df in self.current.values():
            release(df)
        self.current.clear()
