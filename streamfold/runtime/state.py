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

**A base and a tail** (:mod:`.runs`): a large join input is kept as two runs, a base left alone
and a tail the batches merge into, so a batch does not copy the whole state. Its changelog is
the batch's delta, and replaying adds the logs up.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..ir.printer import sql
from ..plan.model import Monoid, State
from ..settings import Settings, resolve
from . import lowering, runs
from .jvm import helper_class
from .lowering import StateTable
from .profile import Part, no_part
from .sources import empty_frame
from .stats import DeltaRows, join_rows
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
# The cap is far above any broadcast threshold, and far enough below Long.MAX_VALUE that what
# Spark derives from it through projections and aggregates (each a ratio of row widths) stays
# below spark.sql.maxSinglePartitionBytes (session.py), so a join of one-partition inputs stays in
# their partition; past it, Spark shuffles every input into spark.sql.shuffle.partitions. The
# prepared plans' frames of kept merges are capped alike (Plans.frame): uncapped, a window's state
# over a join's groups carried an estimate of 10^20 bytes, and every batch shuffled the whole
# state to meet its few touched keys (TPC-DS Q89, docs/journal.md "Stop 90"). A join's estimate
# is still the product of its sides', so a chain of joins over capped inputs can pass the bound:
# the prepared plans place their shuffles with every estimate capped (Plans.executed).
SIZE_CAP = 1 << 40


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
    width when the rows are known, else its plan's own estimate, capped at :data:`SIZE_CAP`;
    and with its hash partitioning named by its own columns (``Plans.partitioning``), which a
    second read of it in one statement renames with them (else Spark shuffles that read whole).

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
        # its partitioning over its own columns, so that a second read in one statement keeps it
        helpers = _helpers(spark)
        partitioning = helpers.partitioning(plan) if helpers is not None else plan.outputPartitioning()
        if rows is not None:
            utils = _jvm_class(jvm, "org.apache.spark.sql.catalyst.plans.logical.statsEstimation.EstimationUtils")
            size = rows * int(utils.getSizePerRow(plan.output(), getattr(utils, "getSizePerRow$default$2")()))
        else:
            size = int(plan.stats().sizeInBytes())
            if size <= SIZE_CAP and partitioning.equals(plan.outputPartitioning()):
                return kept
        if size <= SIZE_CAP and rows is None:
            stats = plan.stats()
        else:
            stats = spark.range(0, max(min(size, SIZE_CAP) // 8, 1))._jdf.queryExecution().analyzed().stats()
        some = _jvm_class(jvm, "scala.Some")
        copy = plan.copy(plan.output(), plan.rdd(), partitioning, plan.outputOrdering(),
                         plan.isStreaming(), plan.stream(), spark._jsparkSession, some(stats),
                         some(plan.constraints()), plan.isCheckpointedInput())
        from pyspark.sql import DataFrame
        dataset = _jvm_class(jvm, "org.apache.spark.sql.classic.Dataset")
        return DataFrame(dataset.ofRows(spark._jsparkSession, copy), spark)
    except Exception:  # noqa: BLE001 - an estimate only; the checkpoint itself is sound
        return kept


def release(df: DataFrame | None) -> None:
    """Free the blocks of a DataFrame made by :func:`materialize` or read through a slot of
    prepared plans (a no-op for others): one call to the JVM's helpers, where they are loaded."""
    if df is None:
        return
    try:
        helpers = _helpers(df.sparkSession)
        if helpers is not None:
            helpers.release(df._jdf)
            return
        plan = df._jdf.queryExecution().logical()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
    except Exception:  # noqa: BLE001 - releasing is best effort; the cleaner frees it later
        pass


def _helpers(spark: Any) -> Any:
    """The JVM helpers' ``Plans`` class of ``spark``'s JVM (None without them)."""
    return helper_class(spark, "Plans")


def widen(schema: StructType, kept: frozenset[str] = frozenset()) -> StructType:
    """State column types stable under repeated merges: decimals widened to 38 digits — but not
    those ``kept`` as they are (keys, and columns merged by min or max): such a column is a value
    of the query (an aggregate's result in a join input's key, a min), and widened, arithmetic
    over it is typed by Spark's rules for decimal(38, s) and loses digits: ``x.s / y.s`` over
    an aggregate's sums of a decimal(7,2) kept 6 decimals, not Spark's 20 (issue 59)."""
    from pyspark.sql.types import DecimalType, StructField, StructType

    fields = []
    for f in schema.fields:
        t = f.dataType
        if isinstance(t, DecimalType) and f.name not in kept:
            t = DecimalType(38, t.scale)
        fields.append(StructField(f.name, t, True))
    return StructType(fields)


class StateStore:
    """The states of one running query: current versions, schemas, row counts."""

    def __init__(self, spark: SparkSession, states: tuple[State, ...], candidates: frozenset[str] = frozenset(),
                 settings: Settings | None = None) -> None:
        self.spark = spark
        self.defs = {s.name: s for s in states}
        self.settings = resolve(settings)  # runs_min_rows and runs_fold: when a candidate starts its runs, and folds
        # States that may be kept as a base and a tail (.runs): logged as deltas, merged with
        # their old values summed over both runs. Those kept so: their base (rows, backing), its
        # rows, and the tail merge whose rows are the tail (None: an empty tail).
        self.candidates = candidates
        self.bases: dict[str, tuple[DataFrame, DataFrame]] = {}
        self.base_rows: dict[str, int] = {}
        self.tails: dict[str, DataFrame | None] = {}
        self.base_nulls: dict[str, frozenset[str]] = {}  # the key columns in which a base holds a NULL
        self.folds = 0  # tails folded into their bases so far
        self._schemas: dict[str, StructType] = {}
        self._current: dict[str, DataFrame] = {}  # the state as the next batch reads it
        self._backing: dict[str, DataFrame] = {}  # the materialized DataFrame behind it
        self._rows: dict[str, int | None] = {}
        # The states' declaration (their schemas, from analysing their programs), when deferred
        # to the first read of a schema, a version or a row count (:meth:`declare_later`).
        self._undeclared: Callable[[], None] | None = None
        self._declaring = threading.RLock()
        self.touched: dict[str, int | None] = {}  # keys each merge of the last batch touched
        self._delta_rows = DeltaRows()
        # the merges whose plans' joins are read (delta joins' steps: features/join_order.py), and
        # what the last batch's read: each join's (rows in, rows out), pre-order (stats.join_rows)
        self.watch_joins: set[str] = set()
        self.joins: dict[str, list[tuple[int, int]] | None] = {}
        self._executed: dict[str, DataFrame] = {}  # merges whose row counts are read once they ran
        self._into_nothing: set[str] = set()  # those of them whose old side was empty
        self.part: Part = no_part  # names the steps of a merge for a profile (the engine sets it)
        # Set while a batch's plans are being prepared (prepared.py): keeps a merge for every job
        # that runs them, instead of checkpointing it for one.
        self.keep: Callable[[str, DataFrame], DataFrame] | None = None

    # -- shape -----------------------------------------------------------------------------------
    def declare_later(self, declare: Callable[[], None]) -> None:
        """Declare the states (``declare`` calls :meth:`declare` and :meth:`set_static` for each)
        only when something first reads their schemas, versions or row counts: a batch that
        recomputes the answer reads none of them, and a plan of many states spends a second or
        more analysing their programs (``bundle._declare_states``)."""
        self._undeclared = declare

    def ensure_declared(self) -> None:
        """Declare the states now if that was deferred (:meth:`declare_later`)."""
        if self._undeclared is None:
            return
        with self._declaring:  # (the control's inspection may read a state from its own thread)
            declare, self._undeclared = self._undeclared, None
            if declare is None:
                return
            try:
                declare()
            except BaseException:  # nothing half declared: the next read declares them again
                for held in (self._schemas, self._current, self._rows, self._backing):
                    held.clear()
                self._undeclared = declare
                raise

    @property
    def declared(self) -> bool:
        """Whether the states are declared (not deferred, or read since)."""
        return self._undeclared is None

    @property
    def schemas(self) -> dict[str, StructType]:
        self.ensure_declared()
        return self._schemas

    @property
    def current(self) -> dict[str, DataFrame]:
        self.ensure_declared()
        return self._current

    @property
    def rows(self) -> dict[str, int | None]:
        self.ensure_declared()
        return self._rows

    def declare(self, name: str, schema: StructType) -> None:
        """Fix a state's schema (from its delta program's analysed schema) and start it empty."""
        state = self.defs.get(name)
        kept = frozenset(state.key_names) | {c.name for c in state.columns if c.monoid != Monoid.SUM} \
            if state is not None else frozenset()
        self.schemas[name] = widen(schema, kept)
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

    # -- a base and a tail (.runs) -----------------------------------------------------------------
    def start_runs(self) -> bool:
        """Before a batch: start the runs of each candidate grown to the setting ``runs_min_rows``
        whose batches touch few of its keys (:func:`.runs.worth_it`) — its whole state becomes the
        base, the tail is empty (the same rows; no job). Whether one started (its merge then takes
        another shape: prepared plans do not fit the batch)."""
        started = False
        for name in sorted(self.candidates - set(self.bases)):
            rows = self.rows.get(name)
            if (rows is not None and runs.worth_it(rows, self.touched.get(name), self.settings.runs_min_rows)
                    and name in self._backing):
                self.bases[name] = (self.current[name], self._backing[name])
                self.base_rows[name] = rows
                self.base_nulls[name] = self._null_keys(name, self.current[name])
                self.tails[name] = None
                started = True
        return started

    def _null_keys(self, name: str, base: DataFrame) -> frozenset[str]:
        """The key columns of state ``name`` in which the base ``base`` holds a NULL: a scan of it,
        once per base (a start, a fold), so that a batch's look-up of its touched keys in the
        base needs no second, null-safe scan when there are none (:func:`.lowering.runs_merged`),
        and a read of the rows with a NULL in other key columns reads only the tail
        (:meth:`tail_versions`)."""
        nullable = [f.name for f in self.defs[name].key if f.nullable]
        if not nullable:
            return frozenset()
        views = Views(self.spark, f"nulls_{name}")
        try:
            row = self.spark.sql(lowering.null_columns(views.relation(base, "base"), nullable)).collect()[0]
            return frozenset(c for c, found in zip(nullable, row) if found)
        finally:
            views.drop()

    def _tail_merge(self, name: str) -> bool:
        """Whether a merge of ``name`` merges into its tail (not into the whole state)."""
        return name in self.bases

    def fold_due(self) -> list[str]:
        """The states in runs whose tail has outgrown its bound (:func:`.runs.fold_fraction` of the
        base, from the keys the last batch touched)."""
        return [n for n in sorted(self.bases) if self.tails.get(n) is not None
                and (self.rows.get(n) or 0) - self.base_rows[n]
                > runs.fold_fraction(self.base_rows[n], self.touched.get(n), self.settings.runs_fold)
                * max(self.base_rows[n], 1)]

    def fold(self, name: str) -> DataFrame:
        """Fold ``name``'s tail into a new base, in a job of its own: the base and the tail added up
        per key (a merge of the tail into the base, so the base stays where it lies and only the
        tail moves), materialized; the tail is then empty. The state's rows do not change, so the
        checkpoint does not either (its changelogs are deltas). Returns the new base."""
        t = self.table(name)
        base, before = self.bases[name]
        tail = self.tails[name]
        assert tail is not None
        single = base._jdf.queryExecution().toRdd().getNumPartitions() == 1
        views = Views(self.spark, f"fold_{name}")
        try:
            merged = self.spark.sql(lowering.merge(
                t, views.relation(base, "base") + " _old", lowering.tail_rows(t, views.name(tail, "tail")),
                single, summed=True))
            merged = merged.coalesce(1) if single else merged
            sc = self.spark.sparkContext
            sc.setJobDescription(runs.FOLD_JOB + name)
            try:
                with self.part(f"fold {name}"):
                    held = materialize(merged)  # a merge's rows, as every state's backing is (prepared.py)
                    nulls = self._null_keys(name, held)  # (of its rows with _weight 0 too: a safe side)
            finally:
                sc.setJobDescription(None)  # type: ignore[arg-type]  # None removes it
            rows = output_rows(merged) or 0
            new = self.as_frame(lowering.new_rows(t, views.name(held, "folded")))
        finally:
            views.drop()
        old = self._backing.get(name)
        self.bases[name] = (new, held)
        self.base_nulls[name] = nulls
        self.current[name], self._backing[name] = new, held
        self.tails[name] = None
        self.base_rows[name] = self.rows[name] = rows
        for df in {id(d): d for d in (before, old) if d is not None}.values():
            release(df)
        self.folds += 1
        return new

    def _tail(self, name: str, views: Views) -> str:
        """The FROM item of ``name``'s tail: the rows of its last tail merge, or none."""
        tail = self.tails[name]
        if tail is None:
            return lowering.no_rows(views.relation(self.bases[name][0], f"base_{name}"))
        return lowering.subquery(lowering.tail_rows(self.table(name), views.name(tail, f"tail_{name}")))

    def tail_versions(self, name: str, merged: DataFrame, views: Views) -> tuple[frozenset[str], dict[str, str]] | None:
        """For a state kept as a base and a tail: its key columns in which the base holds no NULL,
        and the SQL of its tail's rows before the batch (``old``) and after its merge ``merged``
        (``new``) — every row of that version with a NULL in one of those columns is among
        them. None for a state kept whole."""
        nulls = self.base_nulls.get(name)
        if not self._tail_merge(name) or nulls is None:
            return None
        t = self.table(name)
        return (frozenset(t.keys) - nulls, {"old": lowering.select_all(self._tail(name, views)),
                                    "new": lowering.tail_rows(t, views.name(merged, "merged_" + name))})

    def _base(self, name: str, views: Views) -> str:
        return views.relation(self.bases[name][0], f"base_{name}")

    def visible(self, name: str) -> DataFrame:
        """State ``name`` as a person or a breakpoint reads it: one row per key, its runs added up."""
        return self.settled(name, self.current[name])

    def _summed(self, name: str) -> bool:
        """Whether state ``name`` may hold a key in more than one row (a candidate for runs, an
        appended state): its changelogs are added up on a restart (:meth:`log_view`)."""
        return name in self.candidates or self.defs[name].appended

    def settled(self, name: str, rows: DataFrame) -> DataFrame:
        """``rows`` (a version of state ``name``) with one row per key: a state in runs, or an
        appended state, added up."""
        if name not in self.bases and not self.defs[name].appended:
            return rows
        views = Views(self.spark, f"settled_{name}")
        try:  # analysed now: the view is not needed once the frame is
            return self.spark.sql(lowering.summed(self.table(name), views.relation(rows, "runs")))
        finally:
            views.drop()

    def whole(self, name: str) -> tuple[DataFrame, DataFrame | None]:
        """State ``name``'s rows, one per key, and the DataFrame that holds them: a state in runs
        is added up into a checkpoint of its own (for another plan that keeps it)."""
        if name in self.bases and self.tails.get(name) is not None:
            kept = materialize(self.visible(name))
            return kept, kept
        return self.current[name], self._backing.get(name)

    # -- the merge -------------------------------------------------------------------------------
    def merge(self, name: str, delta_sql: str, views: Views, eager: bool = True, single: bool = False) -> DataFrame:
        """The merge of ``name`` with the delta ``delta_sql`` computes (now, or by the first job
        that reads it); ``single`` keeps the result in one partition (a small batch over small
        states: see the module's docstring)."""
        empty = self.tails.get(name) is None if self._tail_merge(name) else self.rows.get(name) == 0
        if empty:
            self._into_nothing.add(name)
        with self.part(f"analyse ⊗ {name}"):
            old = (self._tail(name, views) if self._tail_merge(name)
                   else views.relation(self.current[name], f"old_{name}")) + " _old"
            df = self.spark.sql(self._merge_sql(name, old, delta_sql, single))
            if single or not self.defs[name].key:
                df = df.coalesce(1)
        with self.part(f"checkpoint ⊗ {name}" + ("" if eager else " (lazy: plans it)")):
            merged = materialize(df, eager) if self.keep is None else self.keep(name, df)
        self._executed[name] = df
        return merged

    def _merge_sql(self, name: str, old: str, delta_sql: str, single: bool) -> str:
        kept = self.defs[name].kept_while
        if kept is not None:  # an appended state: no grouping (lowering.appended)
            partitions = 1 if single else int(self.spark.conf.get("spark.sql.shuffle.partitions") or 1)
            return lowering.appended(self.table(name), old, delta_sql, sql(kept, spark=True), partitions)
        return lowering.merge(self.table(name), old, delta_sql, single, name in self.candidates)

    def unchanged(self, name: str, views: Views) -> DataFrame:
        """What :meth:`merge` gives for an empty delta, without a job: every key's new row is its
        old row, and no key is touched (so the delta, changes and changelog views are empty, and
        Spark drops the joins that read them). A state in runs: its tail, as it is."""
        if name in self.bases:
            return self.spark.sql(lowering.unchanged(self.table(name), self._tail(name, views)))
        return self.spark.sql(lowering.unchanged(self.table(name), views.relation(self.current[name], f"same_{name}")))

    def executed(self, merges: Mapping[str, DataFrame]) -> None:
        """Merges that ran (planned earlier: prepared plans), for :meth:`count_rows`."""
        self._executed.update(merges)

    def count_rows(self) -> None:
        """Read the row counts of the merges that ran, and the keys each touched, from their
        plans' metrics (:mod:`.stats`)."""
        self.joins = {n: join_rows(df) for n, df in self._executed.items() if n in self.watch_joins}
        for name, df in self._executed.items():
            merged = output_rows(df)
            touched = self._delta_rows(name, df)
            if name in self._into_nothing and merged is not None:
                # A merge into nothing (a history, a first tail) touched every key it holds, at
                # least. What the delta's row count says is not that: Spark drops a union with an
                # empty side, and the count with it (None); and where a state's delta is a union
                # of its own (an outer join's matched and unmatched keys: TPC-H Q13's counts per
                # customer) the count read is one branch's — 50,007 of Q13's 150,000 at SF 1, which
                # kept the state whole after the history (a third touched: :func:`.runs.worth_it`),
                # then started its runs after batch 1, and batch 2 captured its plans again.
                touched = max(touched or 0, merged)
            self.touched[name] = touched
            self.rows[name] = merged + self.base_rows[name] if self._tail_merge(name) and merged is not None else merged
        self._executed.clear()
        self._into_nothing.clear()

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
        (each an extra job, and a bit array of megabytes serialized into every task of its stage):
        task binaries grew batch after batch until the driver ran out of memory serializing one.
        Once the batch has run, its merges' row counts are known (:meth:`count_rows`).
        """
        rows = self.rows.get(name)
        if self._tail_merge(name) and rows is not None:
            rows -= self.base_rows[name]
        sized = _with_size(merged, rows)
        return self.as_frame(self.new_view(name, sized, views))

    def new_view(self, name: str, merged: DataFrame, views: Views) -> str:
        """The state after the merge: every key whose row count is not zero; for a state in runs,
        its base and then the tail."""
        if self._tail_merge(name):
            return lowering.runs(self.table(name), self._base(name, views), views.name(merged, "merged_" + name))
        return lowering.new_rows(self.table(name), views.name(merged, "merged_" + name))

    def delta_view(self, name: str, merged: DataFrame, views: Views) -> str:
        """What the batch changed, per touched key (see :func:`.lowering.delta_rows`)."""
        return lowering.delta_rows(self.table(name), views.name(merged, "merged_" + name))

    def merged_view(self, name: str, merged: DataFrame, views: Views) -> str | None:
        """The merge of a state kept as a base and a tail as programs read it — on the touched keys
        only (plan/runs.py), each once, its values added up over both runs (see
        :func:`.lowering.runs_merged`); None for a state kept whole (its merge is read as it is)."""
        if not self._tail_merge(name):
            return None
        return lowering.runs_merged(self.table(name), self._base(name, views), views.name(merged, "merged_" + name),
                                    bool(self.base_nulls.get(name, True)))

    def touched_view(self, name: str, merged: DataFrame, views: Views) -> str:
        """The new rows of the keys the batch touched (what a state breakpoint looks at)."""
        if self._tail_merge(name):
            return lowering.runs_touched(self.table(name), self._base(name, views),
                                         views.name(merged, "merged_" + name))
        return lowering.touched_new(self.table(name), views.name(merged, "merged_" + name))

    def log_view(self, name: str, merged: DataFrame, views: Views) -> str:
        """The changelog rows of the batch: the touched keys' new rows (``_weight`` 0: the key left);
        for a candidate for runs, the batch's delta (replayed by adding the logs up); for an
        appended state, the rows that entered it (:meth:`restore` leaves out the expired)."""
        if self.defs[name].appended:  # the rows that entered it; a restart drops the expired (restore)
            return lowering.touched_new(self.table(name), views.name(merged, "merged_" + name))
        if self._summed(name):
            return lowering.delta_rows(self.table(name), views.name(merged, "merged_" + name))
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

    def restore(self, logs: list[tuple[int, str]], views: Views, based: bool = False) -> None:
        """Rebuild every durable state from packed changelogs (batch, directory), oldest first
        (``based``: the first is a whole copy of the states, a base): each key's latest row wins,
        and a key whose latest row has ``_weight`` 0 is gone. States logged as deltas are added
        up (one batch's delta log alone holds each key once: nothing to add); an appended state
        keeps the rows its condition holds for at the batch time shown (the caller shows the
        last committed batch's)."""
        if not logs:
            return
        every = views.name(self.spark.sql(lowering.changelogs(logs)), "logs")
        one_delta = len(logs) == 1 and not based
        for name in self.durable():
            kept = self.defs[name].kept_while
            if self._summed(name):
                text = lowering.summed_logs(self.table(name), every, None if kept is None else sql(kept, spark=True),
                                            one_delta=one_delta and not self.defs[name].appended)
            else:
                text = lowering.latest(self.table(name), every, single=len(logs) == 1)
            df = self.spark.sql(text)
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

    def hold(self) -> Callable[[], None]:
        """What planning a batch changes here (its states' frames, the merges planned), and a
        function that puts it back: a batch planned ahead and not run (prepared.py)."""
        held = (dict(self.current), dict(self.bases), dict(self.tails), dict(self._executed), set(self._into_nothing))

        def put_back() -> None:
            self._current, self.bases, self.tails, self._executed, self._into_nothing = held
            self.keep = None

        return put_back

    def backing(self, name: str) -> DataFrame | None:
        return self._backing.get(name)

    def backings(self) -> list[DataFrame]:
        return list(self._backing.values()) + [b for _, b in self.bases.values()]

    def release_except(self, keep: list[DataFrame]) -> None:
        """Free what this store holds, except the DataFrames in ``keep`` (shared with another)."""
        kept = {id(df) for df in keep}
        for df in self.backings():
            if id(df) not in kept:
                release(df)

    def replace(self, new: Mapping[str, tuple[DataFrame, DataFrame | None]]) -> None:
        """Make each ``(state, backing)`` current, releasing what the replaced ones held. For a
        state in runs, ``backing`` is its new tail merge."""
        for name, (state, backing) in new.items():
            old = self._backing.get(name)
            self.current[name] = state
            self._backing[name] = backing if backing is not None else state
            if name in self.bases:
                self.tails[name] = self._backing[name]
            if old is not None and old is not self._backing[name] and all(old is not b for _, b in self.bases.values()):
                release(old)

    def close(self) -> None:
        self._undeclared = None  # never declared: nothing to release
        for df in self.backings():
            release(df)
        self._current.clear()
        self._backing.clear()
        self.bases.clear()
        self.base_nulls.clear()
        self.tails.clear()
