"""States on Spark: materialized, hash-partitioned on their key, merged by their monoids.

One Spark job per state per batch does the merge ⊗ and keeps what the rest of the batch needs.
It computes, for every key of ``state UNION ALL Δ``, the merged columns (each by its monoid),
the old columns, and whether the batch touched the key::

    SELECT key, sum(_w) AS _w, …,                       -- the new state (⊗)
           max(CASE WHEN __src = 0 THEN _w END) AS `__old::_w`, …   -- the old row
           max(__src) AS __touched
    FROM (state UNION ALL Δ) GROUP BY key

and materializes it with ``localCheckpoint`` (lineage cut, blocks on the executors). Everything
else is a view of that result: the new state (keys whose ``_w`` is not 0), the delta a later
join step needs (new − old), the touched keys' new and old rows that give the answer's changes,
and the state's changelog for the checkpoint. With adaptive execution off, Spark keeps the
result hash-partitioned on the state's key, so the next batch's merge — and the joins of a
delta with the state — shuffle only the batch's rows (seed 000 §2, "Merging States").

The changelog of a batch holds the new row of every key it touched; a row whose ``_w`` is 0
marks a key that left. Replaying logs keeps each key's latest row, which works for every monoid.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.printer import quote
from ..plan.model import WEIGHT_COLUMN, Monoid, State
from .lower import Views, output_rows
from .sources import empty_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructField, StructType

OLD = "__old::"
TOUCHED = "__touched"
W = quote(WEIGHT_COLUMN)


def materialize(df: DataFrame, eager: bool = True) -> DataFrame:
    """Keep ``df`` on the executors once computed, and cut its lineage.

    ``eager`` computes it now. Otherwise the first job that reads it computes it — so a batch's
    merges and its outputs can be one Spark job — and later jobs read the stored blocks.
    """
    kept = df.localCheckpoint(eager=eager)
    return _with_size(kept, output_rows(df) if eager else None)


# The size estimate a checkpoint keeps, at most. Spark estimates a join's output as the product of
# its sides' sizes and a checkpoint keeps its plan's estimate, so estimates of states merged batch
# after batch, or of an iteration's rounds, would multiply without bound (k-means' round plans
# reached BigInts of millions of digits: minutes of planning, then the driver ran out of memory).
_SIZE_CAP = 1 << 62


def _with_size(kept: DataFrame, rows: int | None) -> DataFrame:
    """``kept`` (a checkpoint) with a size estimate Spark can plan with: ``rows`` times the row
    width when the rows are known, else its plan's own estimate, capped at :data:`_SIZE_CAP`.

    With a true size, a small state or delta is broadcast into the joins that read it instead of
    being shuffled. Spark offers no API to set a plan's statistics; the checkpoint's ``LogicalRDD``
    is copied with the statistics of a ``range`` of the same size in bytes (only the size is
    used to plan joins: the cost-based optimizer is off).
    """
    try:
        spark = kept.sparkSession
        jvm = spark._jvm
        plan = kept._jdf.queryExecution().logical()
        if plan.getClass().getSimpleName() != "LogicalRDD":
            return kept
        if rows is not None:
            utils = jvm.org.apache.spark.sql.catalyst.plans.logical.statsEstimation.EstimationUtils
            size = rows * int(utils.getSizePerRow(plan.output(), getattr(utils, "getSizePerRow$default$2")()))
        else:
            size = int(plan.stats().sizeInBytes())
            if size <= _SIZE_CAP:
                return kept
        size = min(size, _SIZE_CAP)
        stats = spark.range(0, max(size // 8, 1))._jdf.queryExecution().analyzed().stats()
        copy = plan.copy(plan.output(), plan.rdd(), plan.outputPartitioning(), plan.outputOrdering(),
                         plan.isStreaming(), plan.stream(), spark._jsparkSession, jvm.scala.Some(stats),
                         jvm.scala.Some(plan.constraints()), plan.isCheckpointedInput())
        from pyspark.sql import DataFrame
        return DataFrame(jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, copy), spark)
    except Exception:  # noqa: BLE001 - an estimate only; the checkpoint itself is sound
        return kept


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


def _type(f: StructField) -> str:
    return f.dataType.simpleString()


class StateStore:
    """The states of one running query: current versions, schemas, row counts."""

    def __init__(self, spark: SparkSession, states: tuple[State, ...]) -> None:
        self.spark = spark
        self.defs = {s.name: s for s in states}
        self.schemas: dict[str, StructType] = {}
        self.current: dict[str, DataFrame] = {}  # the state as the next batch reads it
        self._backing: dict[str, DataFrame] = {}  # the materialized DataFrame behind it
        self.rows: dict[str, int | None] = {}
        self._executed: dict[str, DataFrame] = {}  # merges whose row counts are read once they ran

    # -- shape -----------------------------------------------------------------------------------
    def declare(self, name: str, schema: StructType) -> None:
        """Fix a state's schema (from its delta program's analysed schema) and start it empty."""
        self.schemas[name] = widen(schema)
        self.current[name] = self.empty(name)
        self.rows[name] = 0

    def set_static(self, name: str, df: DataFrame) -> None:
        self.schemas[name] = df.schema
        self.current[name] = self._backing[name] = df
        self.rows[name] = output_rows(df)

    def empty(self, name: str) -> DataFrame:
        return empty_frame(self.spark, self.schemas[name])

    def durable(self) -> list[str]:
        """The states kept in the checkpoint (static ones are recomputed from their tables)."""
        return [n for n, d in self.defs.items() if not d.static]

    def _keys(self, name: str) -> list[str]:
        return list(self.defs[name].key_names)

    def _values(self, name: str) -> list[StructField]:
        keys = set(self._keys(name))
        return [f for f in self.schemas[name].fields if f.name not in keys]

    def conform_sql(self, name: str, inner: str) -> str:
        """``inner``'s rows with exactly the state's columns and types, distributed like the state
        (DISTRIBUTE BY is a hash repartition into the session's partitions)."""
        cols = ", ".join(f"CAST({quote(f.name)} AS {_type(f)}) AS {quote(f.name)}" for f in self.schemas[name].fields)
        sql = f"SELECT {cols}\nFROM (\n{_indent(inner)}\n) _rows"
        keys = self.defs[name].partition_names
        if keys:
            sql += "\nDISTRIBUTE BY " + ", ".join(quote(k) for k in keys)
        return sql

    # -- the merge -------------------------------------------------------------------------------
    def merge_sql(self, name: str, old_view: str, delta_sql: str) -> str:
        """The one statement of a state's merge: new and old columns per key, and ``__touched``.

        Both sides rename the key (``__g0`` …): Spark 4.3 keeps a union's hash partitioning
        through projections that alias the key, not through ones that pass it beside other
        computed columns, and the old state must not be shuffled.
        """
        state = self.defs[name]
        keys = self._keys(name)
        values = self._values(name)
        monoids = {c.name: c.monoid for c in state.columns}

        def branch(source: str, src: int) -> str:
            cols = [f"{quote(k)} AS __g{i}" for i, k in enumerate(keys)] + [quote(v.name) for v in values]
            return f"SELECT {', '.join(cols + [f'{src} AS __src'])} FROM {source}"

        items = [f"__g{i} AS {quote(k)}" for i, k in enumerate(keys)]
        for v in values:
            fn = {Monoid.SUM: "sum", Monoid.MIN: "min", Monoid.MAX: "max"}[monoids[v.name]]
            items.append(f"CAST({fn}({quote(v.name)}) AS {_type(v)}) AS {quote(v.name)}")
        for v in values:
            items.append(f"CAST(max(CASE WHEN __src = 0 THEN {quote(v.name)} END) AS {_type(v)}) "
                         f"AS {quote(OLD + v.name)}")
        items.append(f"max(__src) AS {TOUCHED}")
        delta = f"(\n{_indent(self.conform_sql(name, delta_sql))}\n) _delta"
        sql = (f"SELECT {', '.join(items)}\nFROM (\n  {branch(old_view, 0)}\n  UNION ALL\n  "
               f"{_indent(branch(delta, 1)).strip()}\n) _merge")
        if keys:
            sql += "\nGROUP BY " + ", ".join(f"__g{i}" for i in range(len(keys)))
        return sql

    def merge(self, name: str, delta_sql: str, views: Views, eager: bool = True) -> DataFrame:
        """The merge of ``name`` with the delta ``delta_sql`` computes (now, or by the first job
        that reads it)."""
        old = views.relation(self.current[name], f"old_{name}") + " _old"
        df = self.spark.sql(self.merge_sql(name, old, delta_sql))
        if not self.defs[name].key:
            df = df.coalesce(1)
        merged = materialize(df, eager)
        self._executed[name] = df
        return merged

    def unchanged(self, name: str, views: Views) -> DataFrame:
        """What :meth:`merge` gives for an empty delta, without a job: every key's new row is its
        old row, and no key is touched (so the delta, changes and changelog views are empty, and
        Spark drops the joins that read them)."""
        cols = [quote(k) for k in self._keys(name)] + [quote(v.name) for v in self._values(name)]
        cols += [f"{quote(v.name)} AS {quote(OLD + v.name)}" for v in self._values(name)]
        cols.append(f"0 AS {TOUCHED}")
        return self.spark.sql(f"SELECT {', '.join(cols)} FROM {views.relation(self.current[name], 'same_' + name)}")

    def count_rows(self) -> None:
        """Read the row counts of the merges that ran, from their plans' metrics."""
        for name, df in self._executed.items():
            self.rows[name] = output_rows(df)
        self._executed.clear()

    def merged_shape(self, name: str, views: Views) -> DataFrame:
        """A merge's result over empty inputs: its columns, for analysing programs that read it."""
        empty = views.name(self.empty(name), f"empty_{name}")
        return self.spark.sql(self.merge_sql(name, empty, f"SELECT * FROM {empty}"))

    # -- views of a merge's result (SQL text read by later statements of the batch) --------------
    def _view(self, merged: DataFrame, views: Views, name: str, select: list[str], where: str | None) -> str:
        sql = f"SELECT {', '.join(select)} FROM {views.name(merged, 'merged_' + name)}"
        if where:
            sql += f" WHERE {where}"
        return sql

    def as_frame(self, sql: str) -> DataFrame:
        return self.spark.sql(sql)

    def next_version(self, name: str, merged: DataFrame, views: Views) -> DataFrame:
        """The state after this batch as the next batch reads it: the new rows of the merge's
        result (:meth:`new_view`), planned with the result's true size.

        Why the size is set again here: a merge checkpointed lazily (a small batch: the merge and
        the outputs are one job) keeps its plan's estimate, and Spark estimates a join as the
        product of its sides, so a state fed by a join (a join's output, an aggregate over one)
        carried the product of every input's size into the next batch, whose estimate multiplied
        it again — 10^4 bytes, then 10^17, then the cap, for 40 rows of TPC-H Q21's ``left``.
        With those estimates each batch planned more sort-merge joins with runtime bloom filters
        (each an extra job, and a bit array of 1–8 MB serialized into every task of its stage):
        task binaries of 0, 15, then 56 MB, until the driver ran out of memory serializing one.
        Once the batch has run, its merges' row counts are known (:meth:`count_rows`).
        """
        sized = _with_size(merged, self.rows.get(name))
        return self.as_frame(self.new_view(name, sized, views))

    def new_view(self, name: str, merged: DataFrame, views: Views) -> str:
        """The state after the merge: every key whose row count is not zero."""
        cols = [quote(f.name) for f in self.schemas[name].fields]
        where = None if self.defs[name].keep_empty else f"{W} <> 0"
        return self._view(merged, views, name, cols, where)

    def delta_view(self, name: str, merged: DataFrame, views: Views) -> str:
        """What the batch changed, per touched key: new − old for sums, the new value for min/max
        (idempotent: merging it again changes nothing already merged)."""
        monoids = {c.name: c.monoid for c in self.defs[name].columns}
        cols = [quote(k) for k in self._keys(name)]
        for v in self._values(name):
            n = quote(v.name)
            if monoids[v.name] == Monoid.SUM:
                cols.append(f"CAST({n} - coalesce({quote(OLD + v.name)}, 0) AS {_type(v)}) AS {n}")
            else:
                cols.append(n)
        return self._view(merged, views, name, cols, f"{TOUCHED} = 1")

    def touched_new(self, name: str, merged: DataFrame, views: Views) -> str:
        """The new rows of the keys the batch touched."""
        cols = [quote(f.name) for f in self.schemas[name].fields]
        where = f"{TOUCHED} = 1" + ("" if self.defs[name].keep_empty else f" AND {W} <> 0")
        return self._view(merged, views, name, cols, where)

    def touched_old(self, name: str, merged: DataFrame, views: Views) -> str:
        """The old rows of the keys the batch touched (those that existed before it)."""
        cols = [quote(k) for k in self._keys(name)]
        cols += [f"{quote(OLD + v.name)} AS {quote(v.name)}" for v in self._values(name)]
        return self._view(merged, views, name, cols, f"{TOUCHED} = 1 AND {quote(OLD + WEIGHT_COLUMN)} IS NOT NULL")

    def change_view(self, name: str, merged: DataFrame, views: Views) -> str:
        """Touched keys with their multiplicity change ``_weight`` = new ``_w`` − old ``_w``."""
        cols = [quote(k) for k in self._keys(name)]
        diff = f"{W} - coalesce({quote(OLD + WEIGHT_COLUMN)}, 0)"
        return self._view(merged, views, name, cols + [f"{diff} AS _weight"], f"{TOUCHED} = 1 AND {diff} <> 0")

    def log_view(self, name: str, merged: DataFrame, views: Views) -> str:
        """The changelog rows of the batch: the touched keys' new rows (``_w`` 0: the key left)."""
        cols = [quote(f.name) for f in self.schemas[name].fields]
        return self._view(merged, views, name, cols, f"{TOUCHED} = 1")

    # -- durable form ----------------------------------------------------------------------------
    def pack_sql(self, frames: dict[str, DataFrame | str], views: Views) -> str:
        """Several states' rows as one relation, so they are written in a single job.

        Column ``__state`` names the state; state ``s``'s column ``c`` is ``s::c``, NULL in the
        rows of other states.
        """
        names = self.durable()
        parts = []
        for name in names:
            cols = [f"'{name}' AS __state"]
            for other in names:
                for f in self.schemas[other].fields:
                    value = quote(f.name) if other == name else f"CAST(NULL AS {_type(f)})"
                    cols.append(f"{value} AS {quote(other + '::' + f.name)}")
            parts.append(f"SELECT {', '.join(cols)} FROM {views.relation(frames[name], 'pack_' + name)} _p")
        return "\nUNION ALL\n".join(parts)

    def pack_columns(self) -> list[tuple[str, str]]:
        """(name, Spark type) of the columns :meth:`pack_sql` gives."""
        cols = [("__state", "string")]
        for name in self.durable():
            cols += [(f"{name}::{f.name}", _type(f)) for f in self.schemas[name].fields]
        return cols

    def restore(self, logs: list[tuple[int, str]], views: Views) -> None:
        """Rebuild every durable state from packed changelogs (batch, directory), oldest first:
        each key's latest row wins, and a key whose latest row has ``_w`` 0 is gone."""
        if not logs:
            return
        parts = []
        for batch, path in logs:
            parts.append(f"SELECT *, {batch} AS __batch FROM parquet.`{path}`")
        every = views.name(self.spark.sql("\nUNION ALL\n".join(parts)), "logs")
        for name in self.durable():
            keys = [quote(name + "::" + k) for k in self._keys(name)]
            cols = ", ".join(f"{quote(name + '::' + f.name)} AS {quote(f.name)}" for f in self.schemas[name].fields)
            order = "PARTITION BY " + ", ".join(keys) + " " if keys else ""
            latest = (f"SELECT {cols} FROM (SELECT *, row_number() OVER ({order}ORDER BY __batch DESC) AS __n "
                      f"FROM {every} WHERE __state = '{name}') _l WHERE __n = 1")
            if not self.defs[name].keep_empty:
                latest += f" AND {quote(name + '::' + WEIGHT_COLUMN)} <> 0"
            df = self.spark.sql(self.conform_sql(name, latest))
            self.replace({name: (materialize(df), None)})
            self.rows[name] = output_rows(df)

    def replace(self, new: dict[str, tuple[DataFrame, DataFrame | None]]) -> None:
        """Make each ``(state, backing)`` current, releasing what the replaced ones held."""
        for name, (state, backing) in new.items():
            old = self._backing.get(name)
            self.current[name] = state
            self._backing[name] = backing if backing is not None else state
            if old is not None and old is not self._backing[name]:
                release(old)

    def close(self) -> None:
        for df in self._backing.values():
            release(df)
        self.current.clear()
        self._backing.clear()


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.split("\n"))
