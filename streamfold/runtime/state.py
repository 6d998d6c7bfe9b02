"""States on Spark: materialized, hash-partitioned on their key, merged by their monoids.

One Spark job per state per batch does the merge ⊗ and keeps what the rest of the batch needs.
It computes, for every key of ``state UNION ALL Δ``, the merged columns (each by its monoid),
the old columns, and whether the batch touched the key::

    SELECT key, sum(_weight) AS _weight, …,                               -- the new state (⊗)
           max(CASE WHEN __src = 0 THEN _weight END) AS `__old::_weight`, …   -- the old row
           max(__src) AS __touched
    FROM (state UNION ALL Δ) GROUP BY key

and materializes it with ``localCheckpoint`` (lineage cut, blocks on the executors). Everything
else is a view of that result: the new state (keys whose ``_weight`` is not 0), the delta a later
join step needs (new − old), the touched keys' new and old rows that give the answer's changes,
and the state's changelog for the checkpoint. With adaptive execution off, Spark keeps the
result hash-partitioned on the state's key, so the next batch's merge — and the joins of a
delta with the state — shuffle only the batch's rows (seed 000 §2, "Merging States").

**One partition for a small batch over small states.** When the batch's rows and the states it
reads are few (:data:`.emit.ONE_TASK_ROWS` in all), a state's merge runs in one partition: the
batch's rows are gathered with a coalesce (no shuffle), the old state is one partition already,
and a partition that is all of a relation satisfies every clustering an aggregate or a join
asks for — so Spark plans the whole batch (read, h, every merge, the outputs) as one stage of
one task, with no exchange. The outputs of such a batch were one task anyway. A state that
grows past the bound is hash-partitioned again by the next batch's merge (one shuffle).

The changelog of a batch holds the new row of every key it touched; a row whose ``_weight`` is 0
marks a key that left. Replaying logs keeps each key's latest row, which works for every monoid.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..plan.model import State
from . import lowering
from .lowering import StateTable
from .profile import Part, no_part
from .sources import empty_frame
from .stats import DeltaRows
from .views import Views, output_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


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


_CLASSES: dict[tuple[int, str], tuple[Any, Any]] = {}  # (id of the JVM view, name) -> (that view, class)


def _jvm_class(jvm: Any, name: str) -> Any:
    """A JVM class (or Scala object) by its full name, looked up once per gateway: each step of
    ``jvm.a.b.C`` is a py4j round trip (six for Spark's ``Dataset``), and states are re-planned
    with their sizes every batch."""
    key = (id(jvm), name)
    held = _CLASSES.get(key)
    if held is None or held[0] is not jvm:  # (the view is held, so its id is not reused meanwhile)
        found = jvm
        for part in name.split("."):
            found = getattr(found, part)
        held = _CLASSES[key] = (jvm, found)
    return held[1]


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
        jvm: Any = spark._jvm
        plan = kept._jdf.queryExecution().logical()
        if plan.getClass().getSimpleName() != "LogicalRDD":
            return kept
        if rows is not None:
            utils = _jvm_class(jvm, "org.apache.spark.sql.catalyst.plans.logical.statsEstimation.EstimationUtils")
            size = rows * int(utils.getSizePerRow(plan.output(), getattr(utils, "getSizePerRow$default$2")()))
        else:
            size = int(plan.stats().sizeInBytes())
            if size <= _SIZE_CAP:
                return kept
        size = min(size, _SIZE_CAP)
        stats = spark.range(0, max(size // 8, 1))._jdf.queryExecution().analyzed().stats()
        some = _jvm_class(jvm, "scala.Some")
        copy = plan.copy(plan.output(), plan.rdd(), plan.outputPartitioning(), plan.outputOrdering(),
                         plan.isStreaming(), plan.stream(), spark._jsparkSession, some(stats),
                         some(plan.constraints()), plan.isCheckpointedInput())
        from pyspark.sql import DataFrame
        dataset = _jvm_class(jvm, "org.apache.spark.sql.classic.Dataset")
        return DataFrame(dataset.ofRows(spark._jsparkSession, copy), spark)
    except Exception:  # noqa: BLE001 - an estimate only; the checkpoint itself is sound
        return kept


def release(df: DataFrame | None) -> None:
    """Free the blocks of a DataFrame made by :func:`materialize` (a no-op for others)."""
    if df is None:
        return
    try:
        plan = df._jdf.queryExecution().logical()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            rdd = plan.rdd()
            if rdd.getClass().getSimpleName() == "SlotRDD":  # a state kept by prepared plans (prepared.py)
                if rdd.blocksRead() >= 0:
                    jvm: Any = df.sparkSession._jvm
                    jvm.streamfold.jvm.Plans.dropBlocks(rdd.blocksRead())
            else:
                rdd.unpersist(False)
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
    """The states of one running query: current versions, schemas, row counts."""

    def __init__(self, spark: SparkSession, states: tuple[State, ...]) -> None:
        self.spark = spark
        self.defs = {s.name: s for s in states}
        self.schemas: dict[str, StructType] = {}
        self.current: dict[str, DataFrame] = {}  # the state as the next batch reads it
        self._backing: dict[str, DataFrame] = {}  # the materialized DataFrame behind it
        self.rows: dict[str, int | None] = {}
        self.touched: dict[str, int | None] = {}  # keys each merge of the last batch touched
        self._delta_rows = DeltaRows()
        self._executed: dict[str, DataFrame] = {}  # merges whose row counts are read once they ran
        self.part: Part = no_part  # names the steps of a merge for a profile (the engine sets it)
        # Set while a batch's plans are being prepared (prepared.py): keeps a merge for every job
        # that runs them, instead of checkpointing it for one.
        self.keep: Callable[[str, DataFrame], DataFrame] | None = None

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

    def table(self, name: str) -> StateTable:
        """The state as its SQL sees it (:mod:`.lowering`): its definition and Spark columns."""
        return StateTable(self.defs[name], tuple((f.name, f.dataType.simpleString())
                                                 for f in self.schemas[name].fields))

    # -- the merge -------------------------------------------------------------------------------
    def merge(self, name: str, delta_sql: str, views: Views, eager: bool = True, single: bool = False) -> DataFrame:
        """The merge of ``name`` with the delta ``delta_sql`` computes (now, or by the first job
        that reads it); ``single`` keeps the result in one partition (a small batch over small
        states: see the module's docstring)."""
        with self.part(f"analyse ⊗ {name}"):
            old = views.relation(self.current[name], f"old_{name}") + " _old"
            df = self.spark.sql(lowering.merge(self.table(name), old, delta_sql, single))
            if single or not self.defs[name].key:
                df = df.coalesce(1)
        with self.part(f"checkpoint ⊗ {name}" + ("" if eager else " (lazy: plans it)")):
            merged = materialize(df, eager) if self.keep is None else self.keep(name, df)
        self._executed[name] = df
        return merged

    def unchanged(self, name: str, views: Views) -> DataFrame:
        """What :meth:`merge` gives for an empty delta, without a job: every key's new row is its
        old row, and no key is touched (so the delta, changes and changelog views are empty, and
        Spark drops the joins that read them)."""
        return self.spark.sql(lowering.unchanged(self.table(name), views.relation(self.current[name], f"same_{name}")))

    def executed(self, merges: Mapping[str, DataFrame]) -> None:
        """Merges that ran (planned earlier: prepared plans), for :meth:`count_rows`."""
        self._executed.update(merges)

    def count_rows(self) -> None:
        """Read the row counts of the merges that ran, and the keys each touched, from their
        plans' metrics (:mod:`.stats`)."""
        for name, df in self._executed.items():
            self.rows[name] = output_rows(df)
            self.touched[name] = self._delta_rows(name, df)
        self._executed.clear()

    def merged_shape(self, name: str, views: Views) -> DataFrame:
        """A merge's result over empty inputs: its columns, for analysing programs that read it."""
        empty = views.name(self.empty(name), f"empty_{name}")
        return self.spark.sql(lowering.merge(self.table(name), empty, lowering.select_all(empty)))

    # -- views of a merge's result (SQL text read by later statements of the batch) --------------
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
        return lowering.new_rows(self.table(name), views.name(merged, "merged_" + name))

    def delta_view(self, name: str, merged: DataFrame, views: Views) -> str:
        """What the batch changed, per touched key (see :func:`.lowering.delta_rows`)."""
        return lowering.delta_rows(self.table(name), views.name(merged, "merged_" + name))

    def touched_view(self, name: str, merged: DataFrame, views: Views) -> str:
        """The new rows of the keys the batch touched (what a state breakpoint looks at)."""
        return lowering.touched_new(self.table(name), views.name(merged, "merged_" + name))

    def log_view(self, name: str, merged: DataFrame, views: Views) -> str:
        """The changelog rows of the batch: the touched keys' new rows (``_weight`` 0: the key left)."""
        return lowering.changelog(self.table(name), views.name(merged, "merged_" + name))

    # -- durable form ----------------------------------------------------------------------------
    def pack_sql(self, frames: Mapping[str, DataFrame | str], views: Views) -> str:
        """The durable states' rows as one relation (see :func:`.lowering.pack`)."""
        names = self.durable()
        return lowering.pack([self.table(n) for n in names],
                             {n: views.relation(frames[n], "pack_" + n) for n in names})

    def pack_columns(self) -> list[tuple[str, str]]:
        """(name, Spark type) of the columns :meth:`pack_sql` gives."""
        return lowering.pack_columns([self.table(n) for n in self.durable()])

    def restore(self, logs: list[tuple[int, str]], views: Views) -> None:
        """Rebuild every durable state from packed changelogs (batch, directory), oldest first:
        each key's latest row wins, and a key whose latest row has ``_weight`` 0 is gone."""
        if not logs:
            return
        every = views.name(self.spark.sql(lowering.changelogs(logs)), "logs")
        for name in self.durable():
            df = self.spark.sql(lowering.latest(self.table(name), every))
            self.replace({name: (materialize(df), None)})
            self.rows[name] = output_rows(df)

    # -- a reconfiguration's states (Engine.install) ---------------------------------------------
    def carried_over(self, name: str, rows: DataFrame, schema: StructType, views: Views) -> DataFrame:
        """State ``name``'s rows from another plan's state with the same key (``rows``, with
        ``schema``): see :func:`.lowering.carried_over`. The same rows when the columns are equal."""
        if [(f.name, f.dataType) for f in schema.fields] == [(f.name, f.dataType) for f in self.schemas[name].fields]:
            return rows
        return self.spark.sql(lowering.carried_over(self.table(name), [f.name for f in schema.fields],
                                                    views.name(rows, "carried_" + name)))

    def whole_merge(self, name: str, rows: DataFrame, views: Views) -> DataFrame:
        """``rows`` (all of state ``name``) as the result of a merge that brought every one of them
        into an empty state (see :func:`.lowering.whole_merge`)."""
        return self.spark.sql(lowering.whole_merge(self.table(name), views.name(rows, "whole_" + name)))

    def adopt(self, name: str, rows: DataFrame, backing: DataFrame | None, count: int | None) -> None:
        """Make ``rows`` (held by ``backing``, another store's) the current version of ``name``."""
        self.current[name] = rows
        if backing is not None:
            self._backing[name] = backing
        self.rows[name] = count

    def backing(self, name: str) -> DataFrame | None:
        return self._backing.get(name)

    def backings(self) -> list[DataFrame]:
        return list(self._backing.values())

    def release_except(self, keep: list[DataFrame]) -> None:
        """Free what this store holds, except the DataFrames in ``keep`` (shared with another)."""
        kept = {id(df) for df in keep}
        for df in self._backing.values():
            if id(df) not in kept:
                release(df)

    def replace(self, new: Mapping[str, tuple[DataFrame, DataFrame | None]]) -> None:
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
