"""Run one incremental plan batch by batch: poll → the batch's shape → run it → commit → after.

The engine receives a compiled plan (:mod:`.query` compiles it) and owns the batch loop. One
batch is one consistent cut across all the query's sources: the driver lists every source once,
records the files in ``offsets/<batch>.json`` before touching them, and applies them all in the
batch. How the batch runs is decided by one pure function over its facts (:func:`.shape.decide`);
the steps of h run level by level (:mod:`.steps`); the outputs are written side by side
(:mod:`.outputs`); the commit record is built in one place (:mod:`.record`). The durable writes
are, in order: offsets → the states' changelog, the snapshot and the changes →
``commits/<batch>.json``; see :mod:`.checkpoint` for why that makes runs restartable.

What rides on a batch is a feature module (:mod:`.features`) that receives what it needs and
returns values: prepared plans, adaptive joins, the strategy of a batch, reconfiguration, the
work after a commit. A controller (:mod:`.hooks`, implemented by :mod:`streamfold.control`)
meets the batch at fixed points: around each step's Spark work, before the commit, after it; and
between batches it may install another plan (:meth:`Engine.install`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import BadInputError, BatchError, StreamfoldError
from ..plan.model import IncrementalPlan
from . import files
from .batch import BatchReads
from .bundle import Bundle, build
from .checkpoint import Checkpoint, OutputDir, batch_name
from .config import BatchResult, QueryConfig
from .context import Clock, RunContext, size_on_disk
from .features.adaptive_joins import AdaptiveJoins, Migration, with_mappings
from .failures import batch_failure, lost_jvm
from .features.executors import ExecutorWatch
from .features.maintenance import MAX_DEFERRED, PostCommit, compact, compaction_due, fold_tails, write_base
from .features.batch_time import BatchTime
from .features.join_order import JoinOrder
from .features.prepared_batches import PreparedBatches
from .features.reconfiguration import aligned, install
from .features.recovery import ATTEMPTS, Recovered, lost_state, lost_what
from .features.sinks import Sinks
from .features.strategies import Strategies, not_maintained
from .hooks import BatchControl, NoControl, Pending, RedoBatch
from .installed import Installed
from .outputs import output_row_bytes, state_rows, write
from .prepared import Prepared
from .profile import Profiler
from .rebuild import rebuild_states
from .record import commit_record
from .session import default_partitions, engine_session, local_heap
from .shape import Facts, ReadShape, captures_ahead, decide, read_shape
from .sources import BAD_FILE_HINT, arrival, files_waiting, list_inputs, still_present, table_paths
from .staged import Stager
from .state import release
from .stats import batch_stats
from .storage import StateBytes
from .steps import apply_h, release_batch
from .strategy import Choice, CostModel
from .views import Views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from .answer import AnswerSql
    from .inputs import BatchReader
    from .profile import Profiler as _Profiler
    from .state import StateStore

log = logging.getLogger("streamfold")


class Engine:
    """An incremental plan bound to its inputs, output and checkpoint, on a Spark session.

    ``spark`` is the caller's session; the engine runs in a session of its own with the
    settings states need (:func:`.session.engine_session`). Under a ``control``, the plan in
    effect after the last committed batch may be another (a reconfiguration): it resumes with that.
    """

    def __init__(self, spark: SparkSession, plan: IncrementalPlan, config: QueryConfig,
                 progress: Callable[[str], None] | None = None, control: BatchControl | None = None) -> None:
        session = engine_session(spark, config.partitions or default_partitions(spark), config.settings)
        specs = {s.name.lower(): s for s in config.inputs}
        _check_inputs(plan, specs)
        self.ctx = ctx = RunContext(
            session, config, specs, OutputDir(config.output), Checkpoint(config.checkpoint_dir),
            control or NoControl(), Clock(Profiler(session) if config.profile else None),
            progress or (lambda msg: None), local=(session.sparkContext.master or "").startswith("local"),
            cores=max(1, session.sparkContext.defaultParallelism), one_partition=config.settings.one_partition)
        ctx.heap = local_heap(session) if ctx.local else 0
        ctx.checkpoint.claim(_identity(plan, specs))  # the checkpoint belongs to the query it was started with
        self.recovery = ctx.checkpoint.recover(ctx.output, [s.name for s in plan.streams])
        last = self.recovery.last_committed
        current = ctx.control.plan_at(last)
        if current is not None:
            _check_inputs(current, specs)
        record = ctx.output.read_commit(last) if last >= 0 else None
        self.watch = None if ctx.local else ExecutorWatch(session, config.settings.executor_wait)
        self.sizes = StateBytes(session)  # each commit records its states' bytes (storage.py)
        self._taking: dict[str, list[str]] = {}  # the files of the batch running (or last run)
        self.post_commit = PostCommit(lambda: files_waiting(self._stream_dirs(), self.consumed, self._taking),
                                      limit=MAX_DEFERRED if config.settings.defer else 0)
        self.installed: Installed | None = None  # a plan installed for the next batch, until it commits
        self._recovered: list[Recovered] = []  # the running batch's recoveries of lost states
        self._outputs_seen: tuple[int, int, int] | None = None
        self.adaptive = AdaptiveJoins(ctx)
        self.prepared = PreparedBatches(ctx)
        self.batch_time = BatchTime(ctx, record)
        # A run that may recompute its first batch declares the states when it first builds them
        self.b = self._build(self.adaptive.switched_plan(current or plan, record),
                             defer=(last < 0 or self.recovery.stale) and config.strategy != "incremental")
        self._restore_states()
        if record is not None:
            self.b = self.adaptive.resumed(self.b, record) or self.b
        self.join_order = JoinOrder(ctx)
        self.b = self.join_order.resumed(self.b, record) or self.b
        self.next_batch = last + 1
        self.consumed = self.recovery.consumed
        self.strategies = Strategies(ctx, self.b.recomputer is not None, self.recovery.stale)
        if last >= 0:
            self.strategies.resume(last)
        self.sinks = Sinks(ctx, self.b.plan, self.b.answer.columns(), last)
        self.sinks.deliver(last)  # what a sink missed before the restart

    # -- what the rest of streamfold reads ------------------------------------------------------
    @property
    def spark(self) -> SparkSession:
        return self.ctx.spark

    @property
    def config(self) -> QueryConfig:
        return self.ctx.config

    @property
    def specs(self) -> dict:
        return self.ctx.specs

    @property
    def output(self) -> OutputDir:
        return self.ctx.output

    @property
    def checkpoint(self) -> Checkpoint:
        return self.ctx.checkpoint

    @property
    def control(self) -> BatchControl:
        return self.ctx.control

    @property
    def profiler(self) -> _Profiler | None:
        return self.ctx.clock.profiler

    @property
    def plan(self) -> IncrementalPlan:
        return self.b.plan

    @property
    def store(self) -> StateStore:
        return self.b.store

    @property
    def answer(self) -> AnswerSql:
        return self.b.answer

    @property
    def reader(self) -> BatchReader:
        return self.b.reader

    @property
    def output_schema(self) -> StructType:
        return self.b.output_schema

    @property
    def cost(self) -> CostModel:
        return self.strategies.cost

    @property
    def stale(self) -> bool:
        """Whether the states were not maintained since a recompute batch (until a rebuild)."""
        return self.strategies.stale

    not_maintained = staticmethod(not_maintained)

    # -- set-up ----------------------------------------------------------------------------------
    def _build(self, plan: IncrementalPlan, defer: bool = False) -> Bundle:
        """A new bundle for ``plan``: its prepared plans start afresh (none captured yet)."""
        b = build(self.ctx, plan, defer)
        self.prepared.reset(b)
        self._outputs_seen = None
        return b

    def _restore_states(self) -> None:
        rec = self.recovery
        if rec.last_committed < 0 or rec.stale:  # stale states are built again, not restored
            return
        self.ctx.progress(f"resuming after batch {batch_name(rec.last_committed)}: loading state")
        checkpoint = self.ctx.checkpoint
        base = [(rec.base, checkpoint.base_dir(rec.base))] if rec.base is not None else []
        base = [(b, p) for b, p in base if os.path.isdir(p)]
        deltas = [(b, p) for b, p in ((b, checkpoint.delta_dir(b)) for b in rec.deltas) if os.path.isdir(p)]
        views = Views(self.ctx.spark, "restore")
        self.batch_time.show_last()  # a time bound's live rows are restored as of it
        try:
            self.b.store.restore(base + deltas, views, based=bool(base))
        finally:
            views.drop()

    def _reload_states(self, batch: int, error: BatchError) -> Recovered:
        """The states as of the last commit, read back from the checkpoint after a state's blocks
        were lost with a worker (:mod:`.features.recovery`); the batch then runs again."""
        began = time.monotonic()
        lost = lost_what(error)
        self.ctx.progress(f"batch {batch_name(batch)}: a state's blocks are gone ({lost}); "
                          "reading the states back from the checkpoint and running the batch again")
        log.warning("batch %s: a state's blocks are gone (%s); reading the states back from the checkpoint",
                    batch_name(batch), lost)
        if self.prepared.plans is not None:
            self.prepared.plans.release()
        self.b.store.close()
        self.recovery = self.ctx.checkpoint.recover(self.ctx.output, [s.name for s in self.b.plan.streams])
        self.recovery.pending = None  # the batch runs again over its own offsets
        self.b = self._build(self.b.plan)
        self._restore_states()
        self.strategies.stale = self.recovery.stale
        return Recovered(len(self._recovered) + 1, lost, time.monotonic() - began)

    def _history(self, inputs: Mapping[str, list[str]] | None = None) -> dict[str, list[str]]:
        """Every file each stream applied so far, in order, and then ``inputs``."""
        return {s.name: sorted(self.consumed.get(s.name, set())) + list((inputs or {}).get(s.name, []))
                for s in self.b.plan.streams}

    # -- polling ---------------------------------------------------------------------------------
    def _stream_dirs(self) -> dict[str, str]:
        return {s.name: self.ctx.specs[s.name.lower()].path for s in self.b.plan.streams}

    def poll(self) -> dict[str, list[str]] | None:
        """The files that appeared since the last batch, per source; None if there are none."""
        specs = self.ctx.specs
        Stager(specs, self.b.plan.streams, self.ctx.config.settings).stage(self.ctx.spark)  # Delta versions as a file
        if self.recovery.pending is not None:
            pending, self.recovery.pending = self.recovery.pending, None
            kept = still_present(pending, lambda s: specs[s.lower()].path, log.warning)
            if any(kept.values()) or not any(pending.values()):
                return kept
            # every file of the interrupted batch is gone: the batch is made of what is there now
        found: dict[str, list[str]] = {}
        for s in self.b.plan.streams:
            seen = self.consumed.setdefault(s.name, set())
            found[s.name] = [n for n in list_inputs(specs[s.name.lower()].path) if n not in seen]
        return found if any(found.values()) else None

    # -- one batch -------------------------------------------------------------------------------
    def expiring(self) -> bool:
        """Whether the clock has passed a live row of a time bound since the last commit: a batch
        without files is due (features/batch_time.py)."""
        return self.installed is None and self.batch_time.passed(self.b, self.ctx.config.trigger)

    def run_batch(self, inputs: dict[str, list[str]], clock_only: bool = False) -> BatchResult | None:
        """Apply one batch; returns None if every file of it was quarantined or skipped. A batch
        without files runs only as a newly installed plan's first, or ``clock_only``: to remove
        the live rows the clock has passed (:meth:`expiring`)."""
        ctx = self.ctx
        batch = self.next_batch
        self._recovered = []
        self.batch_time.clock_only = clock_only
        while True:
            if not any(inputs.values()) and self.installed is None and not clock_only:
                files.remove(ctx.checkpoint.offsets_path(batch))
                return None
            ctx.checkpoint.write_offsets(batch, inputs)
            try:
                result = self._run(batch, inputs)
                break
            except BadInputError as e:
                if ctx.config.on_bad_file != "quarantine":
                    # Nothing of the batch is applied: forget its files, so the rerun the hint
                    # asks for lists the directory again (without the file moved away).
                    files.remove(ctx.checkpoint.offsets_path(batch))
                    e.hint = f"{e.hint}; {BAD_FILE_HINT}" if e.hint else BAD_FILE_HINT
                    raise
                # The batch stops naming the file before it moves: a run killed in between
                # redoes the batch without it (not over a file that is no longer there).
                inputs = self.b.reader.without(e, inputs)
                ctx.checkpoint.write_offsets(batch, inputs)
                self.b.reader.quarantine(e, ctx.output.root, ctx.progress)
            except RedoBatch as redo:  # the controller drops the batch's work: files skipped, or a new plan
                if redo.before is not None:
                    redo.before()
                if redo.inputs is not None:
                    inputs = redo.inputs
            except BatchError as e:
                self.starved(batch, e)
                if self.installed is None and lost_state(e) and len(self._recovered) < ATTEMPTS:
                    try:
                        self._recovered.append(self._reload_states(batch, e))
                    except Exception as again:
                        self.starved(batch, again)
                        raise
                    continue
                if self.installed is None:
                    raise
                # The plan installed for this batch failed on it: the plan before runs it instead.
                installed, self.installed = self.installed, None
                self.b = installed.failed(self.b, e)
                if installed.rebuild:  # the same plan: it would fail again
                    raise
            except Exception as e:
                self.starved(batch, e)
                if lost_jvm(e) is None:
                    raise
                # Spark's JVM is gone (out of memory): whatever call found it gone, the batch failed
                raise batch_failure(batch, "run", "running", e, ctx.local, ctx.config.settings) from e
        for name, names in inputs.items():
            self.consumed.setdefault(name, set()).update(names)
        self.next_batch = batch + 1
        return replace(result, clock_only=True) if clock_only and result is not None else result

    def starved(self, batch: int, error: BaseException) -> None:
        """Raise ``NO_EXECUTORS`` if ``error`` came of the executors' watch giving up (a batch's job,
        or a job between batches: the clock's check, the work after a commit)."""
        starved = self.watch.failure(batch, error) if self.watch is not None else None
        if starved is not None:
            raise starved from error

    def _run(self, batch: int, inputs: dict[str, list[str]]) -> BatchResult:
        start = time.monotonic()
        self.ctx.clock.begin()
        self._taking = inputs
        self.post_commit.batch_started()
        if self.ctx.clock.profiler is not None:  # the wait from its first file's arrival to its start
            self.ctx.clock.profiler.waited(arrival(self._stream_dirs(), inputs))
        installed = self.installed
        self.batch_time.look(self.b.plan, inputs)
        scans = self.prepared.ready and not self.batch_time.reads_rows(self.b.plan)  # rows read by the slots alone
        shape = read_shape(installed is not None, installed is not None and installed.answer_only,
                           any(inputs.values()), scans)
        if installed is not None:
            installed.ran_h = not shape.answer_only
        frames, rows, cached, light = self._read(batch, inputs, shape)
        choice = self.strategies.choose(self.b, batch, rows, installed is not None, self.prepared.usable(), inputs)
        if choice.strategy == "recompute":
            return self._recompute(batch, inputs, rows, cached, start, choice)
        if choice.strategy == "rebuild":
            try:
                self._rebuild_stale(batch)
            except BaseException:
                for df in cached:
                    df.unpersist()
                raise
        return self._incremental(batch, inputs, shape, light, frames, rows, cached, start, choice)

    def _read(self, batch: int, inputs: dict[str, list[str]], shape: ReadShape
              ) -> tuple[dict[str, DataFrame], dict[str, int], list[DataFrame], bool]:
        """The batch's frames, rows, what to unpersist after it, and whether only the rows were
        counted (the prepared plans' file scans read the files: no frames)."""
        b, ctx = self.b, self.ctx
        if shape.answer_only:
            return {}, {s.name: 0 for s in b.plan.streams}, [], False
        if shape.light:
            with ctx.clock.phase("read"):
                assert self.prepared.plans is not None
                light = self.prepared.plans.light_read(inputs, b.plan.streams, ctx.specs)
            if light is not None:
                return {}, light, [], True
        return (*self._read_frames(batch, inputs), False)

    def _read_frames(self, batch: int, inputs: dict[str, list[str]]
                     ) -> tuple[dict[str, DataFrame], dict[str, int], list[DataFrame]]:
        b = self.b
        with self.ctx.clock.phase("read"):
            return self.ctx.control.guard(batch, "read", lambda: b.reader.read(inputs, cache=b.reread))

    def _incremental(self, batch: int, inputs: dict[str, list[str]], read: ReadShape, light: bool,
                     frames: dict[str, DataFrame],
                     rows: dict[str, int], cached: list[DataFrame], start: float, choice: Choice) -> BatchResult:
        """A batch that maintains the states: h and ⊗, the outputs, the commit, the work after it."""
        ctx, clock, control = self.ctx, self.ctx.clock, self.ctx.control
        views = Views(ctx.spark, f"b{batch}")
        self.adaptive.driver.begin()
        restate = False  # the batch writes its states whole (a join switched or migrated)
        hashed: Bundle | None = None  # the bundle before a hashed join became a hybrid this batch
        if self.b.plan.watched and batch > 0 and self.installed is None and choice.strategy == "incremental":
            try:
                with clock.phase("join matrix"):
                    switched = self.adaptive.watch(self.b, batch, views, self._build)
            except BaseException:
                release_batch(views, [], cached, None)
                raise
            if switched is not None:
                hashed, self.b, restate = self.b, switched, True
        b = self.b
        # Large join inputs are kept as a base and a tail (runs.py): their runs start after a
        # commit (maintenance), or here for states restored by a restart.
        reshaped = (batch > 0 and self.installed is None and choice.strategy == "incremental"
                    and not read.answer_only and b.store.start_runs())
        held = sum(r or 0 for r in b.store.rows.values())  # the states' rows before the batch
        before = dict(b.store.rows)  # for the batch's statistics (.stats)
        b.store.touched.clear()
        self.join_order.begin(b)
        shape = decide(Facts(
            batch=batch, rows=sum(rows.values()), held=held,
            states_counted=all(r is not None for r in b.store.rows.values()), strategy=choice.strategy,
            answer_only=read.answer_only, installing=self.installed is not None,
            install_whole=self.installed is not None and self.installed.whole, restate=restate, reshaped=reshaped,
            counts_matrices=AdaptiveJoins.counts_before_outputs(b.plan), outputs_seen=self._outputs_seen,
            one_partition=ctx.one_partition, every_stream=all(rows.get(s.name, 0) for s in b.plan.streams),
            prepared=self.prepared.facts(b), output_row_bytes=output_row_bytes(b), heap=ctx.heap))
        if shape.afresh:
            self.prepared.afresh()
        prepared = self.prepared.plans if shape.mode is not None else None
        if light and shape.mode != "replay":  # the batch is planned after all: its frames
            frames, rows, cached = self._read_frames(batch, inputs)
        if shape.single or shape.mode is not None:  # one partition: of the batch's stage, or of a stream's slot
            frames = {n: df.coalesce(1) for n, df in frames.items()}
        if shape.mode == "capture":
            frames = self.prepared.capture(b, frames, views, inputs, shape.single)
        reads = b.reads(ctx, frames, rows, batch == 0, shape.single)
        reads.merge_all = self.prepared.capturing
        self.batch_time.begin(b.plan, None if read.answer_only else lambda rel: reads.sql(rel, views))
        temps: list[DataFrame] = []
        migration = Migration()
        committed = False
        try:
            if shape.mode == "replay":
                pass  # h, the merges and the outputs are one prepared job: see "answer" below
            elif not read.answer_only:
                try:
                    apply_h(ctx, b, batch, reads, views, shape.eager, temps)
                finally:
                    b.store.keep = None
            adapts = bool(b.plan.matrices) and not read.answer_only and self.installed is None
            if adapts and AdaptiveJoins.counts_before_outputs(b.plan):
                with clock.phase("join matrix"):
                    migration = self.adaptive.adapt(b, batch, reads, views)
                if migration.bundle is not None:
                    self.b, restate = migration.bundle, True
            ctx.progress(f"batch {batch_name(batch)}: answer")
            installed = self.installed
            early = self.sinks.early(batch)  # a two-phase sink starts on the answer once on the driver
            with clock.phase("write"):
                if shape.mode == "replay":
                    snap_rows, change_rows = control.guard(batch, "answer",
                                                           lambda: self.prepared.replay(b, batch, reads, self.batch_time.current, early))
                else:
                    snap_rows, change_rows = control.guard(batch, "answer", lambda: write(
                        ctx, b, batch, reads.merged, reads.new, views, shape.eager, held + sum(rows.values()),
                        restate or (installed is not None and installed.whole), installed, self.prepared.collect(),
                        early))
            b.store.count_rows()
            if adapts and not AdaptiveJoins.counts_before_outputs(b.plan):
                with clock.phase("join matrix"):
                    migration = self.adaptive.adapt_after(b, batch, reads, views,
                                                          self.prepared.kept if prepared is not None else None)
                if migration.bundle is not None:
                    self.b, restate = migration.bundle, True
            b = self.b
            b.store.rows.update(migration.rows)  # the merges' counts were of the states before the migration
            stats = batch_stats(b.plan, rows, before, b.store.rows, b.store.touched)
            extra = control.before_commit(_pending(b, batch, inputs, reads, views, ctx.output))
            self.sinks.prepare(batch)  # unless started early: the sinks' transactions beside the commit
            extra.update(self.strategies.record(choice, rows))
            extra.update(self.adaptive.record(b))
            if not read.answer_only:
                extra.update(self.join_order.observe(b, batch))
            extra.update(self.batch_time.record(b.plan, None if read.answer_only or (light and shape.mode == "replay")
                                                else lambda rel: reads.sql(rel, views)))
            if installed is not None:
                extra["reset"] = installed.reset
            if shape.mode is not None:  # the batch ran plans prepared before it, or prepared them
                extra["prepared"] = shape.mode
            if self._recovered:  # its states were read back from the checkpoint first
                extra["recovered"] = [r.record() for r in self._recovered]
            with clock.part("state bytes"):
                sizes = self.sizes.measure(b.store, {**reads.merged, **migration.states},
                                           prepared.keeping if prepared is not None else {})
            record = commit_record(batch, inputs, rows, time.monotonic() - start, snap_rows, change_rows,
                                   state_rows(b), sizes, stats, extra)
            with clock.phase("commit"):
                ctx.output.commit(batch, record)
            committed = True
            committed_at = time.monotonic()
            current = _next_states(ctx, b, reads, views, migration, prepared, shape.mode)
        except BaseException:
            if not committed:
                self.sinks.abandon()
            if hashed is not None and not committed:  # the switch is undone with the batch
                self.adaptive.undo_switch(self.b, hashed)
                self.b = hashed
            raise
        finally:
            self.prepared.finish(prepared, committed)
            with clock.part("drop views, release"):
                release_batch(views, temps, cached, None if committed else reads.merged, failed=not committed)
        b.store.replace(current)
        if migration.states and self.prepared.plans is not None:  # plans prepared for the old mapping
            self.prepared.afresh()
        reordered = self.join_order.committed(b)
        if reordered is not None:  # a delta term's join order re-planned: its plans are captured anew
            self.b = b = reordered
            if self.prepared.plans is not None:
                self.prepared.afresh()
        if hashed is not None:  # the hashed states the switch replaced
            hashed.store.release_except(b.store.backings())
        installed, self.installed = self.installed, None
        if installed is not None:
            installed.committed(b)
        self.batch_time.committed()
        self.strategies.stale = False
        logged = [t for t in b.store.touched.values() if t is not None]
        self._outputs_seen = (None if len(logged) < len(b.store.touched) else
                              (snap_rows, change_rows + sum(logged), sum(rows.values())))
        self.strategies.observe(batch, choice, rows, committed_at - start, shape.warm)
        control.committed(batch, record)
        with clock.phase("sinks"):
            lags = self.sinks.deliver(batch)
        self._after_commit(b, batch, inputs, rows, choice,
                           restated=(installed is not None and installed.whole) or restate)
        profile = clock.end(batch)
        return BatchResult(batch, inputs, rows, time.monotonic() - start, snap_rows, change_rows, state_rows(b),
                           dict(clock.timings), profile, committed_at, committed_at - start, lags, sizes)

    def _after_commit(self, b: Bundle, batch: int, inputs: dict[str, list[str]], rows: dict[str, int],
                      choice: Choice, restated: bool) -> None:
        """What follows a commit and is not the batch's answer: compaction, runs started and tails
        folded, a recompute measured for the cost model, batch 1's plans prepared ahead."""
        ctx, clock, later = self.ctx, self.ctx.clock, self.post_commit
        stale = self.strategies.stale

        def checkpoint() -> None:  # pruned now; the compaction gives way to a waiting file (maintenance.py)
            compact(ctx, b, batch, restated, stale, self.sinks.needed(), compacts=False)
            if restated or stale:
                later.cancel("compact")
            elif compaction_due(ctx, b, batch, restated, stale) or "compact" in later.due:
                later.offer(batch, "compact", lambda: write_base(ctx, b, batch))

        with clock.phase("compact"):
            ctx.control.guard(batch, "compact", checkpoint)
        if b.store.start_runs():  # the next batch merges into the new runs' tails
            self.prepared.invalidated()
        if b.store.fold_due():  # not deferred: the batches after a fold merge and join a shorter tail
            with clock.phase("fold"):
                ctx.control.guard(batch, "fold", lambda: fold_tails(ctx, b, self.prepared.rebase))
        batch_rows = sum(rows.values())
        if self.strategies.probe is not None:
            # (the files of the batch just committed are added to ``consumed`` once _run returns)
            history = self._history(inputs)
            with clock.phase("probe: recompute measured"):
                later.offer(batch, "probe", lambda: self.strategies.measure_recompute(b, batch, batch_rows, history))
        if captures_ahead(batch, choice.strategy, self.strategies.cost.mode == "recompute", batch_rows):
            with clock.phase("prepare the next batch"):
                self.prepared.prepare_ahead(b, batch, inputs, self._outputs_seen, later.gives_way)
            plans = self.prepared.plans
            if self.strategies.cost.mode == "auto" and b.recomputer is not None and plans is not None and plans.ready:
                with clock.phase("calibrate: an empty increment and a recompute measured"):
                    if not self.strategies.calibrate(b, batch, batch_rows, self._history(inputs), plans.run_empty):
                        self.prepared.afresh()

    def _recompute(self, batch: int, inputs: dict[str, list[str]], rows: dict[str, int], cached: list[DataFrame],
                   start: float, choice: Choice) -> BatchResult:
        """A batch by the recompute strategy: the answer from every file so far, no state written."""
        ctx, clock = self.ctx, self.ctx.clock
        b = self.b
        record, committed_at = self.strategies.recompute(b, batch, inputs, rows, self._history(inputs), cached,
                                                         start, choice)
        self._outputs_seen = None
        ctx.control.committed(batch, record)
        with clock.phase("sinks"):
            lags = self.sinks.deliver(batch)
        with clock.phase("compact"):
            ctx.control.guard(batch, "compact", lambda: compact(ctx, b, batch, False, self.strategies.stale,
                                                                  self.sinks.needed()))
        self.strategies.after_recompute(b, batch, self.post_commit)
        profile = clock.end(batch)
        return BatchResult(batch, inputs, rows, time.monotonic() - start, record["snapshot_rows"],
                           record["change_rows"], {}, dict(clock.timings), profile, committed_at, committed_at - start,
                           lags)

    def _rebuild_stale(self, batch: int) -> None:
        """The cost model's rebuild: the states built again, then the batch runs as a newly
        installed plan's first (its states written whole, its changes from the last snapshot)."""
        old = self.b
        fresh = self._build(old.plan)
        self.installed = self.strategies.rebuild(old, fresh, batch, self._history())
        self.b = fresh

    # -- reconfiguration (the seam for streamfold.control) ---------------------------------------
    def install(self, plan: IncrementalPlan, keep: Mapping[str, str], history: dict[str, list[str]] | None,
                on_failure: Callable[[BaseException], None] | None = None) -> None:
        """Make ``plan`` the engine's from the next batch on (``features/reconfiguration.py``):
        ``keep`` maps states of ``plan`` to states of the current plan whose rows they take; the
        other states are built from ``history`` (the files of every committed batch, per
        source). If the next batch fails, the old plan is put back and runs it (``on_failure`` is
        told why)."""
        if self.installed is not None:
            raise StreamfoldError("internal: a plan is installed already and its batch is not committed",
                                  code="INTERNAL")
        _check_inputs(plan, self.ctx.specs)
        plan = aligned(plan, self.b.plan, with_mappings)
        self.post_commit.batch_started()  # work deferred for the old plan's states is offered again after a commit
        batch = self.next_batch
        stale = self.strategies.stale
        if stale:  # the states a reconfiguration keeps or transforms must be current: built first
            old = self.b
            fresh = self._build(old.plan)
            self.ctx.progress(f"batch {batch_name(batch)}: rebuilding the states from the history")
            try:
                rebuild_states(self.ctx, fresh, batch, self._history(), {})
            except BaseException:
                fresh.store.release_except(old.store.backings())
                raise
            old.store.release_except(fresh.store.backings())
            self.b = fresh
            self.strategies.stale = False
        self.b, self.installed = install(self.ctx, self.b, plan, self._build, batch, keep, history, stale, on_failure)

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
        self.sinks.close()
        if self.prepared.plans is not None:
            self.prepared.plans.release()
        self.b.store.close()
        self.ctx.close()


def _next_states(ctx: RunContext, b: Bundle, reads: BatchReads, views: Views, migration: Migration,
                 p: Prepared | None, mode: str | None) -> dict[str, tuple[DataFrame, DataFrame | None]]:
    """Each state the next batch reads, through a view of its merge (analysed now, before the
    batch's temp views are dropped) planned with its true size, and the merge behind it; ``p``:
    the prepared plans the batch ran (or captured), which hold the merges' rows."""
    current: dict[str, tuple[DataFrame, DataFrame | None]] = {}
    with ctx.clock.part("next batch's state views"):
        if p is not None:
            p.captured() if mode == "capture" else p.committed()
        for n, df in reads.merged.items():
            if n in migration.states:  # the rows its merge kept were laid out for the old mapping
                current[n] = (b.store.next_version(n, migration.states[n], views), migration.states[n])
                release(p.current(n, None)[1] if p is not None and n in p.states else df)
            elif p is not None and n in p.states:  # its rows as the job kept them
                current[n] = p.current(n, b.store.rows.get(n))
            elif n not in reads.unchanged:
                current[n] = (b.store.next_version(n, df, views), df)
    return current


def _pending(b: Bundle, batch: int, inputs: dict[str, list[str]], reads: BatchReads, views: Views,
             output: OutputDir) -> Pending:
    """The batch as breakpoints and inspection see it before its commit."""
    store = b.store

    def state(name: str) -> DataFrame:
        new = reads.new.get(name)
        if new is None and name in reads.merged:  # a prepared batch: no view of its merge yet
            new = store.new_view(name, reads.merged[name], views)
        return store.settled(name, store.as_frame(new)) if isinstance(new, str) else store.visible(name)

    def touched(name: str) -> DataFrame:
        if name not in reads.merged:  # h did not run (an answer-only reconfiguration): none touched
            return store.empty(name)
        return store.as_frame(store.touched_view(name, reads.merged[name], views))

    return Pending(batch, inputs, dict(reads.rows), output.snapshot_path(batch), output.changes_path(batch),
                   state=state, touched=touched, states=tuple(store.durable()))


def _check_inputs(plan: IncrementalPlan, specs: Mapping[str, Any]) -> None:
    for s in plan.sources:
        spec = specs[s.name.lower()]
        if s.static != spec.static:
            raise StreamfoldError(f"{s.name} must be given with {'--table' if s.static else '--source'}",
                                  code="INPUT_KIND", params={"input": s.name})
        if not s.static:
            if spec.origin is not None:  # a staged source: its directory is the checkpoint's
                os.makedirs(spec.path, exist_ok=True)
            list_inputs(spec.path)  # SOURCE_NOT_FOUND now rather than at the first poll
    used = {s.name.lower() for s in plan.sources}
    for name, spec in specs.items():
        if name not in used:
            log.warning("input %s is not used by the query", spec.name)


def _identity(plan: IncrementalPlan, specs: Mapping[str, Any]) -> dict[str, Any]:
    """What makes the checkpoint this query's: the query, its inputs' schemas, its tables' files."""
    tables = {}
    for s in plan.tables:
        paths = table_paths(specs[s.name.lower()].path)
        tables[s.name] = [(os.path.basename(p), size_on_disk(p), int(os.path.getmtime(p))) for p in paths]
    return {
        "sql": plan.sql.strip(),
        "sources": {s.name: {"columns": [[c, t.sql()] for c, t in s.columns], "deletions": s.weighted,
                             "static": s.static} for s in plan.sources},
        "tables": tables,
    }
