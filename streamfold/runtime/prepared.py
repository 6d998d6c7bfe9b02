"""Prepared plans: a warm batch's Spark plans built once and run again for every later batch.

A warm batch is one Spark job, but building it — analysing the merges' and the outputs' SQL,
optimizing, planning and generating code, building the RDDs — cost more than the job itself
(docs/journal.md, "the waterfall"), every batch, for plans that differ only in their leaves:
the batch's rows and the states before it. That holds for both layouts of :mod:`.state`: small
states in one partition, and large ones hash-partitioned on their keys.

So one batch (the *capture*) is planned with leaves that can be re-pointed: each stream's rows
and each state are read through a :class:`SlotRDD` (``java/SlotRDD.java``), and each merge's
result is kept once per job by a :class:`KeepRDD` instead of a lazy ``localCheckpoint`` (which
an RDD can do only once). The outputs' plan is executed once into an RDD of Arrow batches. Every
later batch then only re-points the slots — the streams at the batch's file scans, the states
at the blocks the previous job kept — gives each merge a fresh block id, and runs that RDD again:
no SQL is analysed, nothing is planned, no code is generated (:meth:`Prepared.run`). After a
history the capture is made ahead of its batch, with no job (Engine._prepare_ahead,
:meth:`Prepared.captured_ahead`): the first increment is already a replay.

Running a physical plan again is only sound if nothing in it keeps what it computed from its
slots. A shuffle keeps its map output: before each job the shuffles over slots are forgotten
(``Plans.forgetShuffles``, what Spark's context cleaner does for a shuffle nothing references),
so the job runs their map stages again; a shuffle of static rows only is kept, and reused. A
broadcast and a subquery's value are computed when the plan is built: while a capture is planned
nothing is broadcast (the statements hint a shuffled hash join instead), and a plan that still
has one over a slot is refused at the capture (:meth:`Prepared.verify`; over static rows it is
harmless), and the engine then plans every batch as before. A batch that does not fit the
prepared plans (a large one, a reconfiguration, a recompute, states laid out otherwise than at
the capture) runs the plain way; the states are handed over as frames over their kept blocks
(:meth:`Prepared.current`), so either way can follow the other. The A/B switch ``prepared`` off
turns prepared plans off, ``index`` off their index look-ups (``streamfold/settings.py``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from ..errors import BadInputError
from ..ir.expr import CLOCK_COLUMN
from ..settings import Settings, resolve
from . import lowering
from .jvm import loaded
from ..sql import SourceSchema
from .sources import InputSpec, check_file, parquet_rows
from .state import SIZE_CAP

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("streamfold")

class Prepared:
    """The prepared plans of one engine, from their capture to the batch that cannot use them."""

    def __init__(self, spark: SparkSession, settings: Settings | None = None, clocked: bool = False) -> None:
        self.spark = spark
        self.clocked = clocked  # the plans read the batch time: each replay sets it (:meth:`tick`)
        self._clocks: Any = None  # the batch time's subqueries in the plans (a Java list; Plans.clocks)
        # Joins that probe a base with a few keys read it through an index (Plans.lookups); off: they scan it.
        self.indexed = resolve(settings).index
        jvm: Any = spark._jvm
        self._sc = spark.sparkContext._jsc.sc()  # type: ignore[attr-defined]
        # The classes, looked up once (each step of a py4j name is a round trip).
        self._slot_class, self._keep_class, self._helpers = jvm.streamfold.jvm.SlotRDD, jvm.streamfold.jvm.KeepRDD, \
            jvm.streamfold.jvm.Plans
        self._python_rdd = jvm.org.apache.spark.api.python.PythonRDD
        self._gateway: Any = spark.sparkContext._gateway  # type: ignore[attr-defined]
        self._scans: dict[str, tuple[Any, tuple]] = {}  # stream → its captured rows' RDD, its files' columns
        self._light: dict[str, Any] | None = None  # stream → the partition its slot reads this batch
        self.streams: dict[str, Any] = {}  # stream → its slot
        self.states: dict[str, Any] = {}  # durable state → its slot
        self.bases: dict[str, Any] = {}  # state kept as a base and a tail (runs.py) → its base's slot
        self.keeps: dict[str, tuple[Any, DataFrame]] = {}  # merged state or temp → (KeepRDD, its frame)
        self.executed: dict[str, DataFrame] = {}  # state → its merge as planned (metrics are read from it)
        self.kept: dict[str, int] = {}  # state → the blocks holding its merged rows after the last job
        self.keeping: dict[str, int] = {}  # merged state or temp → the blocks its merge goes into this job
        self.lookups = 0  # scans of a base that look their keys up in its index (Plans.lookups)
        self._outputs: Any = None  # the stacked outputs as an RDD of Arrow batches
        self._schema: pa.Schema | None = None  # the outputs' Arrow schema, as toArrow gives it
        self._written: pa.Schema | None = None  # … and as Spark writes their batches
        self._plans: list[Any] = []  # the executed plans whose metrics a job updates
        self._shuffles: Any = None  # the ids of the shuffles each job computes afresh (a Java int[])
        self.single = True  # captured in one partition (state.py); else over hash-partitioned states
        self.ready = False  # captured and verified: later batches can run it
        self.ahead = False  # captured ahead of its first batch (Engine._prepare_ahead), not run yet
        self.refused: str | None = None  # why this plan cannot be prepared (then it is not tried again)
        self._settings: dict[str, str | None] = {}  # the session's, while a capture is planned
        self._hints = ExitStack()  # broadcasts hinted as shuffled hash joins, while a capture is planned
        self._templates: dict[str, tuple[DataFrame, DataFrame]] = {}  # state → its merged rows and view, over its slot

    @staticmethod
    def available(spark: SparkSession, settings: Settings | None = None) -> bool:
        """Whether a run's batches may use prepared plans: the settings allow them and the
        session's JVM has the helpers."""
        return resolve(settings).prepared and loaded(spark)

    # -- capture -------------------------------------------------------------------------------------
    def slot_frame(self, template: DataFrame, rows: Any, parts: int = 1) -> tuple[Any, DataFrame]:
        """A frame with ``template``'s columns and partitioning whose rows come from a new slot of
        ``parts`` partitions, pointed at ``rows`` (an RDD of ``template``'s rows with as many
        partitions or none, or None: no rows)."""
        slot = self._slot_class(self._sc, parts)
        if rows is None:
            slot.readNothing()
        else:
            slot.read(rows)
        return slot, self._frame(slot, template)

    def _frame(self, rdd: Any, template: DataFrame) -> DataFrame:
        from pyspark.sql import DataFrame

        return DataFrame(self._helpers.frame(rdd, template._jdf, SIZE_CAP), self.spark)

    # A broadcast over a slot would keep the first batch's rows: while a capture is planned, joins
    # are planned without broadcasts — none by size, and the statements hint a shuffled hash join
    # where they would hint a broadcast (lowering.without_broadcasts). A join with a static table
    # is then shuffled; its static side's shuffle is computed once and reused by later jobs.
    # Spark 4.3's MergeSubplans turns equal global aggregates of the stacked outputs (a global
    # aggregate's snapshot and changes) into one scalar subquery, whose value a plan keeps: not
    # while a capture is planned.
    _CAPTURE_SETTINGS = {"spark.sql.autoBroadcastJoinThreshold": "-1",
                         "spark.sql.optimizer.excludedRules": "org.apache.spark.sql.execution.planmerging.MergeSubplans"}

    def plan_without_broadcasts(self, statics: frozenset[str] = frozenset()) -> None:
        """Plan the capture: nothing broadcast but the static states ``statics`` (small ones, whose
        rows never change: lowering.without_broadcasts)."""
        conf = self.spark.conf
        self._settings = {k: conf.get(k, None) for k in self._CAPTURE_SETTINGS}
        for k, v in self._CAPTURE_SETTINGS.items():
            had = self._settings[k]
            conf.set(k, f"{had},{v}" if k.endswith("excludedRules") and had else v)  # the session's rules stay out too
        self._hints.enter_context(lowering.without_broadcasts(statics, self.single))

    def planned(self) -> None:
        """The capture batch is over: the session's settings as they were."""
        self._hints.close()
        for k, v in self._settings.items():
            if v is None:
                self.spark.conf.unset(k)
            else:
                self.spark.conf.set(k, v)
        self._settings = {}

    def stream(self, name: str, frame: DataFrame, columns: tuple | None, ahead: bool = False) -> DataFrame:
        """Stream ``name``'s rows of the capture batch (one partition), read through a slot.
        ``columns``: the signature of its files' columns, when they share one. ``ahead``: a
        capture ahead of its batch, planned over ``frame`` (files already read, whose scan the
        batches re-point) with the slot reading nothing. A stream the plan reads more than once
        is read through a cache: the later batches' scans (:meth:`light_read`) read its files
        without it (``Plans.uncached``), not through a cache builder that would turn each batch's
        rows into column batches and back without keeping them."""
        rows = _rows(frame)
        slot, df = self.slot_frame(frame, rows)
        if ahead:  # (its scan's lineage prepared by the read, for light_read's readThrough)
            slot.readNothing()
        self.streams[name] = slot
        if columns is not None:
            self._scans[name] = (self._helpers.uncached(frame._jdf) or rows, columns)
        return df

    def light_read(self, inputs: dict[str, list[str]], streams: tuple[SourceSchema, ...],
                   specs: Mapping[str, InputSpec]) -> dict[str, int] | None:
        """The rows of each stream in a batch whose files the captured file scans can read as
        they are (whole Parquet files with the capture's columns): no frame is made, the slots
        read them through their scans (:meth:`bind`). None if a file is of another kind (then
        the batch is read the plain way)."""
        rows: dict[str, int] = {}
        scans: dict[str, Any] = {}
        for s in streams:
            names = inputs.get(s.name, [])
            if not names:
                rows[s.name], scans[s.name] = 0, None
                continue
            held = self._scans.get(s.name)
            spec = specs[s.name.lower()]
            paths = [os.path.join(spec.path, n) for n in names]
            if held is None or spec.format != "parquet" or not all(os.path.isfile(p) for p in paths):
                return None
            try:
                if any(check_file(spec, s, p)[0] != held[1] for p in paths):
                    return None
                stats = [os.stat(p) for p in paths]
            except (BadInputError, OSError):  # a bad or vanished file: the plain read reports it
                return None
            parts = self._helpers.rescan(held[0], _array(self._gateway, "java.lang.String", paths),
                                         _array(self._gateway, "long", [st.st_size for st in stats]),
                                         _array(self._gateway, "long", [st.st_mtime_ns // 1_000_000 for st in stats]))
            if parts is None:
                return None
            rows[s.name] = sum(parquet_rows(p) for p in paths)
            scans[s.name] = parts
        self._light = scans
        return rows

    def state(self, name: str, backing: DataFrame, view: Callable[[DataFrame], DataFrame], empty: bool = False) -> DataFrame:
        """State ``name`` before the capture batch, read through a slot: ``backing`` holds its last
        merge's rows, and ``view`` gives the state from a merge's rows (its new rows). A capture in one
        partition (:attr:`single`): a state laid out over several partitions (batch 0's, a large
        batch's) is gathered into one by this batch's job, and the slot has one partition, as the
        state has from this batch on — so the batch after a history can be the capture.
        ``empty``: the slot stands for a state's empty tail (runs.py; ``backing``, its base's
        merge, gives the columns and layout), so it reads nothing at the capture."""
        if self.single and _rows(backing).getNumPartitions() != 1:
            backing = backing.coalesce(1)
        rows = _rows(backing)
        slot, merged = self.slot_frame(backing, None if empty else rows, max(1, rows.getNumPartitions()))
        self.states[name] = slot
        current = view(merged)
        self._templates[name] = (merged, current)
        return current

    def base(self, name: str, frame: DataFrame) -> DataFrame:
        """The base of state ``name`` (runs.py), read through a slot of its own: what a fold makes
        is read by the same plans (:meth:`rebase`). One partition in a capture in one partition."""
        if self.single and _rows(frame).getNumPartitions() != 1:
            frame = frame.coalesce(1)
        rows = _rows(frame)
        slot, df = self.slot_frame(frame, rows, max(1, rows.getNumPartitions()))
        self.bases[name] = slot
        return df

    def rebase(self, name: str, frame: DataFrame) -> bool:
        """Point state ``name``'s base slot at a new base ``frame`` (a fold), its tail at nothing.
        False if the plans cannot read it (laid out in other partitions than the slot's)."""
        slot = self.bases.get(name)
        if slot is None:
            return False
        parts = slot.getNumPartitions()
        if parts == 1 and _rows(frame).getNumPartitions() != 1:
            frame = frame.coalesce(1)
        rows = _rows(frame)
        if rows.getNumPartitions() != parts:
            return False
        slot.read(rows)
        self.kept[name] = -1
        return True

    def merged(self, name: str) -> DataFrame:
        """State ``name``'s last merge as the capture reads it (through its slot)."""
        return self._templates[name][0]

    def keep(self, name: str, df: DataFrame) -> DataFrame:
        """A merge (or temp) of the capture batch, kept once per job: what a lazy checkpoint did."""
        self._look_up(self._executed(df))
        keep = self._keep_class(df._jdf.queryExecution().toRdd())
        keep.keepInto(self._into(name))
        frame = self._frame(keep, df)
        self.keeps[name] = (keep, frame)
        self._plans.append(df._jdf.queryExecution().executedPlan())
        if name in self.states:
            self.executed[name] = df
        return frame

    def _executed(self, df: DataFrame) -> Any:
        """``df``'s executed plan, its shuffles placed with every estimate at most ``SIZE_CAP``
        (``Plans.executed``): a chain of joins over one-partition states stays in their partition."""
        return self._helpers.executed(df._jdf, SIZE_CAP)

    def _look_up(self, plan: Any) -> None:
        """Before ``plan`` (a physical plan of the capture) is first executed: its joins that probe
        a base with the keys of their other side read the base's rows of those keys from an index
        kept across batches, instead of scanning the base (``Plans.lookups``: inner and semi
        shuffled hash joins; the base's rows do not change until a fold, :meth:`rebase`)."""
        if not self.indexed or not self.bases:
            return
        bases = self._gateway.jvm.java.util.ArrayList()
        for slot in self.bases.values():
            bases.add(slot)
        self.lookups += self._helpers.lookups(plan, bases)

    def release(self) -> None:
        """These plans run no more: drop the indexes of their bases from the JVM (nothing to drop
        when the JVM is gone: they went with it)."""
        if not self.bases:
            return
        try:
            self._helpers.dropIndexes(_array(self._gateway, "long", [slot.id() for slot in self.bases.values()]))
        except Exception as e:
            from .failures import lost_jvm

            if lost_jvm(e) is None:
                raise
            log.debug("the bases' indexes were not dropped: Spark's JVM is gone", exc_info=True)

    def outputs(self, stacked: DataFrame) -> pa.Table:
        """The capture batch's stacked outputs: planned once into an RDD of Arrow batches, then
        run like every later batch. Refused plans run once the plain way (their slots and kept
        merges are sound for one job)."""
        if not self.plan_outputs(stacked):
            return stacked.toArrow()
        return self._collect()

    def plan_outputs(self, stacked: DataFrame) -> bool:
        """Plan the stacked outputs into an RDD of Arrow batches, without running it; False if
        the plans cannot be prepared (:attr:`refused` says why)."""
        plan = self._executed(stacked)
        self._plans.append(plan)
        self.refused = self._arrow_schemas(stacked) or self.verify([plan] + self._plans[:-1])
        if self.refused is not None:
            log.info("streamfold: batches are planned one by one (%s)", self.refused)
            return False
        self._look_up(plan)
        self._outputs = stacked._jdf.toArrowBatchRdd()
        if self.clocked:  # (executed now: their values are computed)
            plans = self._gateway.jvm.java.util.ArrayList()
            for each in self._plans:
                plans.add(each)
            self._clocks = self._helpers.clocks(plans, CLOCK_COLUMN)
            if not self._clocks.size():
                self.refused = "the batch time read where a replay could not set it"
                log.info("streamfold: batches are planned one by one (%s)", self.refused)
                return False
        tops = self._gateway.jvm.java.util.ArrayList()
        for rdd in [self._outputs] + [keep for keep, _ in self.keeps.values()]:
            tops.add(rdd)
        self._shuffles = self._helpers.shuffles(tops)
        return True

    def _arrow_schemas(self, stacked: DataFrame) -> str | None:
        """The Arrow schema Spark writes the stacked outputs' batches in (session time zone) and
        the one ``toArrow`` gives (UTC), from the same mapping Spark and PySpark share; or why
        the outputs' columns are not ones that mapping is plain for."""
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import (BinaryType, BooleanType, DateType, DecimalType, NumericType, StringType,
                                       TimestampNTZType, TimestampType)

        plain = (BinaryType, BooleanType, DateType, DecimalType, NumericType, StringType, TimestampNTZType,
                 TimestampType)
        odd = [f"{f.name} {f.dataType.simpleString()}" for f in stacked.schema.fields if not isinstance(f.dataType, plain)]
        if odd:
            return f"an output column of type {odd[0]}"
        large = self.spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
        zone = self.spark.conf.get("spark.sql.session.timeZone", "UTC")
        self._written = to_arrow_schema(stacked.schema, error_on_duplicated_field_names_in_struct=True,
                                        timezone=zone, prefers_large_types=large)
        self._schema = to_arrow_schema(stacked.schema, error_on_duplicated_field_names_in_struct=True,
                                       timezone="UTC", prefers_large_types=large)
        return None

    def verify(self, plans: list[Any]) -> str | None:
        """Why these executed plans cannot run again with other rows in their slots, or None."""
        plans_ = self._helpers
        for plan in plans:
            found = plans_.obstacle(plan)
            if found is not None:
                return f"the plan {found} over a batch's rows"
        if set(self.states) - set(self.executed):
            return "a state read but not merged by the batch"
        for name, slot in self.states.items():  # the next job's slot reads the blocks of this merge
            slots, kept = slot.getNumPartitions(), self.keeps[name][0].getNumPartitions()
            if slots != kept:
                return f"state {name} read in {slots} partition(s) but merged into {kept}"
        return None

    def captured(self) -> None:
        """The capture batch committed: later batches can run the prepared plans."""
        self.ready = self.refused is None
        self._advance()

    def captured_ahead(self) -> None:
        """Captured ahead of its batch, no job run: unless refused, the next batch can run the
        prepared plans, its states read where the capture's slots point (the states the last
        batch committed)."""
        self.ready = self.ahead = self.refused is None

    # -- a batch ---------------------------------------------------------------------------------------
    def bind(self, frames: dict[str, DataFrame]) -> None:
        """Point the slots at this batch: each stream at its rows (``frames``, one partition
        each), each state at the blocks the last job kept; give every merge fresh blocks."""
        light, self._light = self._light, None
        for name, slot in self.streams.items():
            if light is not None:  # read through the captured scan (light_read)
                parts = light[name]
                slot.readNothing() if parts is None else slot.readThrough(self._scans[name][0], parts)
            else:
                slot.read(_rows(frames[name]))
        for name, slot in self.states.items():
            kept = self.kept.get(name)
            if kept is not None:  # (none: the first batch after a capture ahead reads what it points at)
                slot.readBlocks(kept) if kept >= 0 else slot.readNothing()  # -1: a tail just folded
        self._fresh_job()

    def tick(self, micros: int | None) -> None:
        """The batch's time (µs), which the plans' time bounds read (``features/batch_time.py``):
        set in the values the capture's plans computed, before the job."""
        if self._clocks is not None and micros is not None:
            self._helpers.setClocks(self._clocks, micros)

    def _into(self, name: str) -> int:
        """A fresh block id for ``name``'s merge, remembered (:mod:`.storage` measures its blocks)."""
        self.keeping[name] = into = int(self._sc.newRddId())
        return into

    def _fresh_job(self) -> None:
        """Before a job: fresh block ids for the merges, the plans' metrics zeroed, the shuffles
        over slots forgotten."""
        for name, (keep, _) in self.keeps.items():
            keep.keepInto(self._into(name))
        plans = self._helpers
        for plan in self._plans:
            plans.resetMetrics(plan)
        if self._shuffles is not None and len(self._shuffles):
            plans.forgetShuffles(self._sc, self._shuffles)

    def run(self) -> pa.Table:
        """The job: every merge and the stacked outputs, collected as one Arrow table."""
        return self._collect()

    def run_empty(self) -> float:
        """Run the job once over no new rows — each stream's slot reading nothing, each state
        where its slot points — and free what it kept: its seconds, what an incremental batch
        costs at least (its states read and merged, its answer computed; Engine._calibrate)."""
        return self.run_discarded(None)

    def run_discarded(self, frames: Mapping[str, DataFrame] | None) -> float:
        """Run the job once, each stream's slot reading its rows in ``frames`` (one partition
        each; None: nothing), each state where its slot points, and free what it kept: nothing
        it computed is a state or an answer. Its seconds. Over rows the states already hold it
        warms the job (Engine._warm_up): the JVM compiles the paths rows take through it."""
        for name, slot in self.streams.items():
            slot.readNothing() if frames is None else slot.read(_rows(frames[name]))
        self._fresh_job()
        start = time.monotonic()
        try:
            self._collect()
        finally:
            self.failed()  # (nothing it kept is a state: the slots still point where they did)
        return time.monotonic() - start

    def _collect(self) -> pa.Table:
        import pyarrow as pa
        from pyspark.serializers import NoOpSerializer
        from pyspark.util import _load_from_socket

        assert self._schema is not None and self._written is not None
        served = self._python_rdd.collectAndServe(self._outputs)
        with _load_from_socket(served, NoOpSerializer()) as stream:  # type: ignore[attr-defined]
            batches = [pa.ipc.read_record_batch(pa.py_buffer(b), self._written) for b in stream]
        return pa.Table.from_batches(batches, schema=self._written).cast(self._schema)

    def committed(self) -> None:
        """The batch committed: its kept merges are the states the next batch reads."""
        self.ahead = False
        self._advance()

    def _advance(self) -> None:
        plans = self._helpers
        for name, (keep, _) in self.keeps.items():
            if name in self.states:
                self.kept[name] = keep.keptIn()
            else:  # a temp: read by its batch only
                plans.dropBlocks(keep.keptIn())

    def current(self, name: str, rows: int | None) -> tuple[DataFrame, DataFrame]:
        """State ``name`` as the last committed job left it, as frames of their own, for all but
        the prepared plans (a plain batch, inspection): the state, and the merge's rows behind it
        — releasing those (:func:`.state.release`) frees the blocks. Made from the capture's
        frames with their slot swapped for one that always reads these blocks, estimated at
        ``rows`` rows (the merge's, if known): nothing is analysed from SQL again."""
        from pyspark.sql import DataFrame

        at = self.states[name]
        slot = self._slot_class(self._sc, at.getNumPartitions())
        slot.readBlocks(self.keeps[name][0].keptIn())
        plans = self._helpers
        merged, current = self._templates[name]
        size = -1 if rows is None else rows  # planned with its true size (runtime/state.py, next_version)
        return (DataFrame(plans.rebind(current._jdf, at, slot, size), self.spark),
                DataFrame(plans.rebind(merged._jdf, at, slot, size), self.spark))

    def failed(self) -> None:
        """A prepared batch failed: free what its job kept (the states before it stay)."""
        plans = self._helpers
        for keep, _ in self.keeps.values():
            plans.dropBlocks(keep.keptIn())


def _array(gateway: Any, kind: str, values: list) -> Any:
    java = gateway.jvm
    array = gateway.new_array(java.long if kind == "long" else java.java.lang.String, len(values))
    for i, v in enumerate(values):
        array[i] = v
    return array


def _rows(frame: DataFrame) -> Any:
    """The RDD of a one-partition frame's rows, as its physical plan gives them (no job)."""
    return frame._jdf.queryExecution().toRdd()
