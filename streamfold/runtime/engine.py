"""Run one incremental plan batch by batch: read, apply h and ⊗, answer with a, commit.

The engine receives a compiled plan (:mod:`.query` compiles it) and owns the batch loop. One
batch is one consistent cut across all the query's sources: the driver lists every source once,
records the files in ``offsets/<batch>.json`` before touching them, and applies them all in the
batch. Steps of h whose inputs are ready run together (Spark runs their jobs side by side); a
step whose delta a loop finds is handed to its interpreter (:mod:`.loops`). The durable writes
are, in order: offsets → the states' changelog, the snapshot and the changes →
``commits/<batch>.json``; see :mod:`.checkpoint` for why that makes runs restartable.

A controller (:mod:`.hooks`, implemented by :mod:`streamfold.control`) meets the batch at fixed
points: around each step's Spark work, before the commit, after it. Between batches it may
install another plan (:meth:`Engine.install`, a reconfiguration): the next batch is the new
plan's first, and commits its answer's changes from the last committed snapshot. When only the
answer changed (h is the old plan's) and no file came, that batch reads nothing and runs no h:
it answers over the kept states and writes an empty changelog.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import BadInputError, BatchError, CheckpointError, StreamfoldError, UnsupportedError
from ..ir.rel import DeltaScan, LoopRef, Once, StateScan
from ..ir.printer import quote
from ..plan.matrix import best_mapping, heavy_keys
from ..plan.model import LOOPS, Diffusion, IncrementalPlan, JoinMatrix, SkewWatch, Step, Temp
from ..sql import Catalog
from ..sql.bind import check_output_names
from ..sql.iterate import spark_schema_sql
from . import files, lowering
from .answer import AnswerSql
from .batch import BatchReads, parallel
from .checkpoint import Checkpoint, OutputDir, batch_name
from .config import BatchResult, QueryConfig
from .emit import ONE_TASK_ROWS, SMALL_ROWS, emit, emit_together, stacked_frame, write_parts
from .failures import batch_failure
from .hooks import BatchControl, NoControl, Pending, RedoBatch
from .inputs import BatchReader, first_line
from .lowering import Columns, HybridLayout
from .profile import Profiler
from .loops import INTERPRETERS, LoopEnv, LoopInterpreter, declared_rows, loop_change_columns
from .matrices import MatrixDriver
from .prepared import Prepared
from .session import default_partitions, engine_session
from .sources import (BAD_FILE_HINT, check_file, empty_frame, list_inputs, read_files, spark_struct,
                      still_present, table_paths)
from .state import StateStore, materialize, release
from .recompute import Recomputer
from .runs import candidates
from .stats import batch_stats
from .strategy import WINDOW, Choice, CostModel
from .views import Views, output_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger("streamfold")

# A hybrid equi-join's heavy keys, at most (each is a literal in its plan).
MAX_HEAVY_KEYS = 64
# Small batches over small states run in one partition (state.py); STREAMFOLD_ONE_PARTITION=0
# turns that off (for A/B measurements).
_ONE_PARTITION = os.environ.get("STREAMFOLD_ONE_PARTITION", "1") != "0"
# Batch 1's plans are captured ahead of it (Engine._prepare_ahead) only after a history of at
# least this many rows. The capture ahead moves batch 1's planning (about a second) off batch 1;
# it adds work where batch 1 then lacks a stream's rows (the plans are given up and the first
# batch that fits captures again) — common where sources trickle in, and in the differential
# tests' random splits (tests/runtime/test_differential.py: 563 s with it, 512 and 438 s without, stop 43).
# After a small history batch 1 captures as before; after a large one (make demo's 1M and 200K
# rows, TPC-H's) planning is what batch 1 would otherwise cost beyond a recompute.
AHEAD_MIN_ROWS = 100_000
# The plans captured ahead are over one partition only if the history's states leave this share
# of ONE_TASK_ROWS free for batch 1's rows, which are not known yet: plans over one partition
# cannot run a batch that does not fit one task (batch 1 is then planned, batch 2 captures: stop
# 48, docs/benchmarks.md), while hash-partitioned plans run a small batch too (stop 51: the
# Table 4.1 joins at SF 0.05, 50K-row increments over states of 60–100K rows).
AHEAD_ROOM = 0.5
# … and run once over at most this many of each stream's history rows, the result discarded, so
# the JVM has compiled the paths rows take through the plans before batch 1 runs them
# (Engine._warm_up; docs/benchmarks.md, stop 43).
WARM_ROWS = 10_000


# Prepared plans are tried for plans of at most this many states. A capture plans the whole batch
# as one physical plan; for an unrolled three-step PageRank (32 states) that plan was refused (an
# exchange over the batch's rows) and, worse, left Spark's SQL listener minutes behind: its
# appStatus queue filled and dropped events, so the status store (profiles, waterfalls) missed
# jobs for the rest of the JVM's life (docs/benchmarks.md, "Prepared plans"). Not understood yet;
# the workloads prepared plans are measured on have one to six states. Static states (a static
# table's side of a join, computed once) are not merged by a batch and do not count: TPC-H Q08
# (3 states merged per batch, 6 static) and Q02 (6 and 6) were planned batch by batch for them.
PREPARED_MAX_STATES = 8


class Engine:
    """An incremental plan bound to its inputs, output and checkpoint, on a Spark session.

    ``spark`` is the caller's session; the engine runs in a session of its own with the
    settings states need (:func:`.session.engine_session`). Under a ``control``, the plan in
    effect after the last committed batch may be another (a reconfiguration): it resumes with that.
    """

    def __init__(self, spark: SparkSession, plan: IncrementalPlan, config: QueryConfig,
                 progress: Callable[[str], None] | None = None, control: BatchControl | None = None) -> None:
        self.config = config
        self.plan = plan
        self.progress = progress or (lambda msg: None)
        self.control: BatchControl = control or NoControl()
        self.spark = engine_session(spark, config.partitions or default_partitions(spark))
        self.specs = {s.name.lower(): s for s in config.inputs}
        self._check_inputs(plan)
        self.output = OutputDir(config.output)
        self.checkpoint = Checkpoint(config.checkpoint_dir)
        self.checkpoint.claim(self._identity())  # the checkpoint belongs to the query it was started with
        self.recovery = self.checkpoint.recover(self.output, [s.name for s in plan.streams])
        self._tables: dict[str, DataFrame] = {}
        self._timings: dict[str, float] = {}
        self.profiler = Profiler(self.spark) if config.profile else None
        self._cores = max(1, self.spark.sparkContext.defaultParallelism)
        self._local = (self.spark.sparkContext.master or "").startswith("local")  # driver and executor: one JVM
        self._boundary: Installed | None = None  # a plan installed for the next batch, until it commits
        current = self.control.plan_at(self.recovery.last_committed)
        if current is not None:
            self._check_inputs(current)
        self.matrices = MatrixDriver(epsilon=config.matrix_epsilon)
        self._setup(self._switched_joins(current or plan))
        self._restore_states()
        self._restate = False  # this batch writes every state whole (a join matrix migrated)
        self._migrated_rows: dict[str, int] = {}
        if (self.plan.matrices or self.plan.watched) and self.recovery.last_committed >= 0:
            mappings, heavy = self.matrices.resume(self.output.read_commit(self.recovery.last_committed))
            if mappings and (mappings != {m.left: (m.n, m.m) for m in self.plan.matrices}
                             or heavy != {m.left: m.heavy for m in self.plan.matrices if m.hybrid is not None}):
                self._replan(mappings, heavy)
        self.next_batch = self.recovery.last_committed + 1
        self.consumed = self.recovery.consumed
        self._stale = self.recovery.stale  # the states were not maintained since a recompute batch
        self.cost = CostModel(config.strategy if self._recomputer is not None else "incremental")
        self._history_rows = 0  # rows of every committed batch
        self._probe: Choice | None = None  # a recompute to measure after the batch's commit
        if self.recovery.last_committed >= 0:
            self._resume_cost()

    def _switched_joins(self, plan: IncrementalPlan) -> IncrementalPlan:
        """``plan`` with the hashed equi-joins that became hybrids (``matrix_equi="auto"``) by the
        last committed batch planned as those hybrids, as its states were committed. A plan
        without a join matrix the last commit has (a run resumed with another ``matrix_equi``)
        could not read the committed states: refused."""
        if self.recovery.last_committed < 0:
            return plan
        entries = self.output.read_commit(self.recovery.last_committed).get("matrix") or {}
        if any(w.left in entries for w in plan.watched):
            plan = _with_mappings(plan, {n: (int(e["mapping"][0]), int(e["mapping"][1])) for n, e in entries.items()},
                                  {n: tuple(e["heavy"]) for n, e in entries.items() if "heavy" in e})
        missing = sorted(set(entries) - {m.left for m in plan.matrices})
        if missing:
            raise CheckpointError(
                f"checkpoint {self.checkpoint.root} keeps join {', '.join(missing)} over a join matrix, which this "
                f"run's equi-join partitioning ({plan.policy.equi}) does not plan", code="CHECKPOINT_MISMATCH",
                params={"path": self.checkpoint.root, "differences": [f"join matrix {n}" for n in missing]},
                hint="resume with the --equi-joins (matrix_equi) the run was started with")
        return plan

    def _setup(self, plan: IncrementalPlan) -> None:
        """Make ``plan`` the engine's: its output schema, empty states, answer, reader, loops."""
        self.plan = plan
        self.catalog = Catalog(plan.sources)
        self.output_schema = spark_output_schema(self.spark, plan, self.catalog)
        self.store = StateStore(self.spark, plan.states, candidates(plan))
        self.store.part = self._part
        self.answer = AnswerSql(plan, self.output_schema, self.store)
        self.reader = BatchReader(self.spark, plan.streams, self.specs, self.catalog, plan.stream_columns())
        self.loops: dict[type, LoopInterpreter] = {
            kind: interpreter(LoopEnv(self.spark, self.store, self._point)) for kind, interpreter in INTERPRETERS.items()}
        self._levels = _levels(plan.delta)
        self._reread = _read_more_than_once(plan.delta)
        self._temp_schemas: dict[str, StructType] = {}  # filled by _declare_states
        self._recomputer = self._recomputer_for(plan)
        # The states and temps the batch being run leaves as they were (none known for a new plan,
        # whose states a rebuild computes).
        self._unchanged: set[str] = set()
        # The last incremental batch's outputs: (snapshot rows, changes + changelog rows, input
        # rows), what the next batch's outputs are estimated from (:meth:`_outputs_estimate`).
        self._outputs_seen: tuple[int, int, int] | None = None
        self._declare_states()
        # Warm small batches run plans built once (prepared.py), where the plan allows.
        self.prepared: Prepared | None = Prepared(self.spark) if self._preparable(plan) else None
        self._capturing = False

    def _preparable(self, plan: IncrementalPlan) -> bool:
        """Whether a batch of ``plan`` could run prepared plans: no loops (their rounds are
        planned as they go), no hybrid or watched equi-join (decided on before the outputs, by
        jobs of their own; a join matrix's migration, decided after them, plans afresh), Parquet
        streams (other formats are checked by a job of their own), few states (see
        ``PREPARED_MAX_STATES``)."""
        return (Prepared.available(self.spark) and not plan.watched
                and not any(mx.hybrid is not None for mx in plan.matrices)
                and sum(not s.static for s in plan.states) <= PREPARED_MAX_STATES
                and not any(isinstance(s, LOOPS) for s in plan.delta)
                and all(self.specs[s.name.lower()].format == "parquet" for s in plan.streams))

    def _prepared_mode(self, batch: int, choice: Choice, rows: Mapping[str, int], single: bool, eager: bool,
                       answer_only: bool) -> str | None:
        """How this batch uses prepared plans: "replay" (run them), "capture" (plan this batch so
        that later ones can), or None (the plain way: a large batch, batch 0, a new plan, …)."""
        p = self.prepared
        if p is None or p.refused is not None:
            return None
        # A batch's streams are read as one partition each (a slot of one), so their rows must fit
        # one task; the states may be one partition (``single``) or hash-partitioned. Plans over
        # one partition run only batches that fit one task; plans over hash-partitioned states
        # run any batch (one that would fit one partition too: its states stay partitioned), so
        # states that shrink, or a capture ahead that leaves room to grow, keep replaying.
        if (batch == 0 or sum(rows.values()) > ONE_TASK_ROWS or eager or answer_only or self._boundary is not None
                or self._restate or choice.strategy != "incremental" or (p.ready and p.single and not single)):
            if p.ready or p.keeps:  # its states are handed over as frames: the next capture starts afresh
                self._prepare_afresh()
            return None
        # A capture merges every state, as every replay then does; a state whose streams bring no
        # rows is otherwise left as it is, without a job. So the capture waits for a batch with
        # rows from every stream: a dimension given as a source (its one file in batch 0) is then
        # never merged again, and its query runs batch by batch as before prepared plans. Plans
        # captured ahead of their first batch (_prepare_ahead) are given up on the same grounds.
        every = all(rows.get(s.name, 0) for s in self.plan.streams)
        if p.ready and p.ahead and not every:
            self._prepare_afresh()
            return None
        if p.ready:
            return "replay"
        if not every or not self._capturable():
            return None
        p.single = single  # states still hash-partitioned (batch 0's) are gathered by the capture
        return "capture"

    def _capturable(self) -> bool:
        """Whether every state is held as a merge's rows, which a capture reads through slots."""
        for n in self.store.durable():
            backing = self.store.backing(n)  # (a state in runs with an empty tail: its base's merge)
            # not a merge's rows (restored, new), or the merge of another definition of the state (a
            # "from now on" reconfiguration transforms the state it had: its merge lacks the new columns)
            if (backing is None or "__touched" not in backing.columns
                    or not set(self.store.schemas[n].fieldNames()) <= set(backing.columns)):
                return False
        return True

    def _recomputer_for(self, plan: IncrementalPlan) -> Recomputer | None:
        """The batch query as Spark runs it from scratch (the recompute strategy), where there is
        one: not for iterations (their loops are interpreted) nor join matrices (their mapping is
        state)."""
        if plan.matrices or any(isinstance(s, LOOPS) for s in plan.delta):
            return None
        return Recomputer(self.spark, plan, spark_schema_sql(plan.sql), self.specs, self.catalog)

    # -- set-up ----------------------------------------------------------------------------------
    def _check_inputs(self, plan: IncrementalPlan) -> None:
        for s in plan.sources:
            spec = self.specs[s.name.lower()]
            if s.static != spec.static:
                raise StreamfoldError(f"{s.name} must be given with {'--table' if s.static else '--source'}",
                                      code="INPUT_KIND", params={"input": s.name})
            if not s.static:
                list_inputs(spec.path)  # SOURCE_NOT_FOUND now rather than at the first poll
        used = {s.name.lower() for s in plan.sources}
        for name, spec in self.specs.items():
            if name not in used:
                log.warning("input %s is not used by the query", spec.name)

    def _identity(self) -> dict[str, Any]:
        """What makes the checkpoint this query's: the query, its inputs' schemas, its tables' files."""
        tables = {}
        for s in self.plan.tables:
            paths = table_paths(self.specs[s.name.lower()].path)
            tables[s.name] = [(os.path.basename(p), _size(p), int(os.path.getmtime(p))) for p in paths]
        return {
            "sql": self.plan.sql.strip(),
            "sources": {s.name: {"columns": [[c, t.sql()] for c, t in s.columns], "deletions": s.weighted,
                                 "static": s.static} for s in self.plan.sources},
            "tables": tables,
        }

    def _reads(self, frames: dict[str, DataFrame], rows: dict[str, int], first: bool,
               single: bool = False) -> BatchReads:
        return BatchReads(self.catalog, self._table, self.store.current, frames, rows, first, single)

    def _declare_states(self) -> None:
        """Fix every state's schema by analysing its program over empty inputs; load static ones."""
        views = Views(self.spark, "setup")
        try:
            frames = {s.name: self.reader.empty_frame(s) for s in self.plan.streams}
            for step in self.plan.init:
                df = self.spark.sql(self._reads(frames, {}, True).sql(step.program, views))
                self.store.set_static(step.state, materialize(df))
            reads = self._reads(frames, {}, True)

            def declare(step: Step) -> None:
                program = declared_rows(step) if isinstance(step, LOOPS) else step.program
                if isinstance(step, Diffusion):  # its body reads the loop's change as a stream
                    reads.loops[step.loop] = empty_frame(self.spark, spark_struct(loop_change_columns(step)))
                    for sub in step.steps:
                        declare(sub)
                df = self.spark.sql(reads.sql(program, views))
                if isinstance(step, Temp):
                    reads.deltas[step.state] = df
                    self._temp_schemas[step.state] = df.schema
                else:
                    self.store.declare(step.state, df.schema)
                    reads.deltas[step.state] = self.store.empty(step.state)
                    reads.merged[step.state] = self.store.merged_shape(step.state, views)

            for step in self.plan.delta:
                declare(step)
        finally:
            views.drop()

    def _restore_states(self) -> None:
        rec = self.recovery
        if rec.last_committed < 0 or rec.stale:  # stale states are built again, not restored
            return
        self.progress(f"resuming after batch {batch_name(rec.last_committed)}: loading state")
        logs = [(rec.base, self.checkpoint.base_dir(rec.base))] if rec.base is not None else []
        logs += [(b, self.checkpoint.delta_dir(b)) for b in rec.deltas]
        views = Views(self.spark, "restore")
        try:
            self.store.restore([(b, p) for b, p in logs if os.path.isdir(p)], views)
        finally:
            views.drop()

    def _table(self, name: str) -> DataFrame:
        if name not in self._tables:
            spec = self.specs[name.lower()]
            self._tables[name] = read_files(self.spark, spec, self.catalog[name], table_paths(spec.path))
        return self._tables[name]

    def _point(self, batch: int, step: str) -> None:
        """A point inside a step (a loop's round): reported, and one where a pause may take effect."""
        self.progress(f"batch {batch_name(batch)}: {step}")
        self.control.step(batch, step)

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Time a part of the batch (reported in BatchResult.timings and by ``bench``)."""
        t = time.monotonic()
        try:
            with self._part(name):
                yield
        finally:
            self._timings[name] = self._timings.get(name, 0.0) + time.monotonic() - t

    def _part(self, name: str) -> AbstractContextManager[None]:
        """A span of the batch's waterfall only (a phase, or a part of one), when profiling."""
        return self.profiler.phase(name) if self.profiler is not None else nullcontext()

    # -- polling ---------------------------------------------------------------------------------
    def poll(self) -> dict[str, list[str]] | None:
        """The files that appeared since the last batch, per source; None if there are none."""
        if self.recovery.pending is not None:
            pending, self.recovery.pending = self.recovery.pending, None
            kept = still_present(pending, lambda s: self.specs[s.lower()].path, log.warning)
            if any(kept.values()) or not any(pending.values()):
                return kept
            # every file of the interrupted batch is gone: the batch is made of what is there now
        found: dict[str, list[str]] = {}
        for s in self.plan.streams:
            seen = self.consumed.setdefault(s.name, set())
            found[s.name] = [n for n in list_inputs(self.specs[s.name.lower()].path) if n not in seen]
        return found if any(found.values()) else None

    # -- one batch -------------------------------------------------------------------------------
    def run_batch(self, inputs: dict[str, list[str]]) -> BatchResult | None:
        """Apply one batch; returns None if every file of it was quarantined or skipped. A batch
        without files runs only as a newly installed plan's first."""
        batch = self.next_batch
        while True:
            if not any(inputs.values()) and self._boundary is None:
                files.remove(self.checkpoint.offsets_path(batch))
                return None
            self.checkpoint.write_offsets(batch, inputs)
            try:
                result = self._run(batch, inputs)
                break
            except BadInputError as e:
                if self.config.on_bad_file != "quarantine":
                    # Nothing of the batch is applied: forget its files, so the rerun the hint
                    # asks for lists the directory again (without the file moved away).
                    files.remove(self.checkpoint.offsets_path(batch))
                    e.hint = f"{e.hint}; {BAD_FILE_HINT}" if e.hint else BAD_FILE_HINT
                    raise
                # The batch stops naming the file before it moves: a run killed in between
                # redoes the batch without it (not over a file that is no longer there).
                inputs = self.reader.without(e, inputs)
                self.checkpoint.write_offsets(batch, inputs)
                self.reader.quarantine(e, self.output.root, self.progress)
            except RedoBatch as redo:  # the controller drops the batch's work: files skipped, or a new plan
                if redo.before is not None:
                    redo.before()
                if redo.inputs is not None:
                    inputs = redo.inputs
            except BatchError as e:
                if self._boundary is None:
                    raise
                # The plan installed for this batch failed on it: the plan before runs it instead.
                boundary, self._boundary = self._boundary, None
                boundary.fail(self, e)
                if boundary.rebuild:  # the same plan: it would fail again
                    raise
        for name, names in inputs.items():
            self.consumed.setdefault(name, set()).update(names)
        self.next_batch = batch + 1
        return result

    def _run(self, batch: int, inputs: dict[str, list[str]]) -> BatchResult:
        start = time.monotonic()
        self._timings = {}
        if self.profiler is not None:
            self.profiler.begin()
        views = Views(self.spark, f"b{batch}")
        # A newly installed plan that changes only the answer, with no new files: h would merge
        # nothing into the kept states, so it does not run; the batch commits the new answer over
        # them (and an empty changelog, so the checkpoint has every batch).
        answer_only = self._boundary is not None and self._boundary.answer_only and not any(inputs.values())
        if self._boundary is not None:
            self._boundary.ran_h = not answer_only
        frames: dict[str, DataFrame]
        cached: list[DataFrame]
        light: dict[str, int] | None = None  # rows only: the prepared plans' scans read the files
        if self.prepared is not None and self.prepared.ready and not answer_only and self._boundary is None:
            with self._phase("read"):
                light = self.prepared.light_read(inputs, self.plan.streams, self.specs)
        if answer_only:
            frames, rows, cached = {}, {s.name: 0 for s in self.plan.streams}, []
        elif light is not None:
            frames, rows, cached = {}, light, []
        else:
            with self._phase("read"):
                frames, rows, cached = self.control.guard(batch, "read",
                                                          lambda: self.reader.read(inputs, cache=self._reread))
        choice = self._choose(batch, rows)
        if choice.strategy == "recompute":
            return self._recompute_batch(batch, inputs, rows, cached, start, choice)
        if choice.strategy == "rebuild":
            try:
                self._rebuild_stale(batch)
            except BaseException:
                for df in cached:
                    df.unpersist()
                raise
        self._restate = False
        self.matrices.begin()
        self._unchanged = set()
        temps: list[DataFrame] = []
        committed = False
        hashed: _Bundle | None = None  # the plan before a hashed join became a hybrid this batch
        if self.plan.watched and batch > 0 and self._boundary is None and choice.strategy == "incremental":
            try:
                with self._phase("join matrix"):
                    hashed = self._watch(batch, views)
            except BaseException:
                self._release(views, [], cached, None)
                raise
        # A small batch over small states runs as one Spark job: merges are checkpointed lazily
        # and computed by the job that writes the outputs. Otherwise (batch 0's history, large
        # states) each merge is its own job and large outputs are written by Spark. When all it
        # reads is within one task's rows, the batch's rows and its merges are one partition, and
        # that job is one stage without a shuffle (state.py).
        # Large join inputs are kept as a base and a tail (runs.py): their runs start after a
        # commit (_start_runs), or here for states restored by a restart.
        reshaped = (batch > 0 and self._boundary is None and choice.strategy == "incremental" and not answer_only
                    and self.store.start_runs())
        held = sum(r or 0 for r in self.store.rows.values())  # the states' rows before the batch
        before = dict(self.store.rows)  # for the batch's statistics (.stats)
        self.store.touched.clear()
        # A batch that may write its states whole (a reconfiguration's restate, a rebuild, a
        # hybrid join matrix migrating or switching) logs all their rows; another join matrix's
        # migration writes them after the outputs, in a job of its own (_adapt_after).
        whole = (self._restate or self._counts_matrices() or choice.strategy == "rebuild"
                 or (self._boundary is not None and self._boundary.whole))
        known = self._outputs_estimate(held, sum(rows.values()), whole)
        eager = batch == 0 or any(r is None for r in self.store.rows.values()) or known > SMALL_ROWS
        single = not eager and _ONE_PARTITION and held + sum(rows.values()) <= ONE_TASK_ROWS
        mode = self._prepared_mode(batch, choice, rows, single, eager, answer_only or reshaped)
        prepared = self.prepared if mode is not None else None
        # The first replay of plans captured ahead costs more than the next ones: the JIT
        # compilation of the paths its rows take (TPC-H SF 1, Q07: 1.71 s, then 1.49, 1.10), less
        # since the warm-up (_warm_up) but not nothing (stop 43: Q17 1.19× a recompute, then
        # 0.83×): the cost model does not take it for what a warm batch costs (strategy.py).
        warm = mode == "replay" and prepared is not None and not prepared.ahead
        if light is not None and mode != "replay":  # the batch is planned after all: its frames
            with self._phase("read"):
                frames, rows, cached = self.control.guard(batch, "read",
                                                          lambda: self.reader.read(inputs, cache=self._reread))
        if single or mode is not None:  # one partition: of the batch's stage, or of a stream's slot
            frames = {n: df.coalesce(1) for n, df in frames.items()}
        if mode == "capture":
            frames = self._capture(frames, views, inputs)
        reads = self._reads(frames, rows, batch == 0, single)
        try:
            if mode == "replay":
                pass  # h, the merges and the outputs are one prepared job: see "answer" below
            elif not answer_only:
                try:
                    self._apply_h(batch, reads, views, eager, temps)
                finally:
                    self.store.keep = None
            migrated: dict[str, DataFrame] = {}
            adapts = bool(self.plan.matrices) and not answer_only and self._boundary is None
            if adapts and self._counts_matrices():
                with self._phase("join matrix"):
                    migrated = self._adapt(batch, reads, views)
            self.progress(f"batch {batch_name(batch)}: answer")
            with self._phase("write"):
                if mode == "replay":
                    snap_rows, change_rows = self.control.guard(batch, "answer", lambda: self._replay(batch, reads))
                else:
                    snap_rows, change_rows = self.control.guard(
                        batch, "answer", lambda: self._write_outputs(batch, reads.merged, reads.new, views, eager,
                                                                     held + sum(rows.values())))
            self.store.count_rows()
            if adapts and not self._counts_matrices():
                with self._phase("join matrix"):
                    migrated = self._adapt_after(batch, reads, views, prepared)
            for n in migrated:  # the merges' counts were of the states before the migration
                self.store.rows[n] = self._migrated_rows[n]
            stats = batch_stats(self.plan, rows, before, self.store.rows, self.store.touched)
            extra = self.control.before_commit(self._pending(batch, inputs, reads, views))
            extra.update(self._cost_record(choice, rows))
            if self.plan.matrices:
                extra["matrix"] = self.matrices.record(self.plan, self.store.rows)
            if self.plan.watched:
                extra["partitioning"] = self.matrices.record_watched(self.plan)
            if self._boundary is not None:
                extra["reset"] = self._boundary.reset
            if mode is not None:  # the batch ran plans prepared before it, or prepared them
                extra["prepared"] = mode
            duration = time.monotonic() - start
            record = {
                "batch": batch, "inputs": inputs, "duration_s": round(duration, 4), "rows": rows,
                "snapshot_rows": snap_rows, "change_rows": change_rows,
                "state_rows": {n: r for n, r in self._state_rows().items()},
                "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "stats": stats, **extra,
            }
            with self._phase("commit"):
                self.output.commit(batch, record)
            committed = True
            committed_at = time.monotonic()
            # The next batch reads each state through a view of its merge (analysed now, before
            # the batch's temp views are dropped), planned with its true size.
            current: dict[str, tuple[DataFrame, DataFrame | None]] = {}
            with self._part("next batch's state views"):
                if prepared is not None:
                    prepared.captured() if mode == "capture" else prepared.committed()
                for n, df in reads.merged.items():
                    if n in migrated:  # the rows its merge kept were laid out for the old mapping
                        current[n] = (self.store.next_version(n, migrated[n], views), migrated[n])
                        release(prepared.current(n, None)[1] if prepared is not None and n in prepared.states else df)
                    elif prepared is not None and n in prepared.states:  # its rows as the job kept them
                        current[n] = prepared.current(n, self.store.rows.get(n))
                    elif n not in self._unchanged:
                        current[n] = (self.store.next_version(n, df, views), df)
        except BaseException:
            if hashed is not None and not committed:  # the switch is undone with the batch
                self.store.release_except(hashed.store.backings())
                hashed.restore(self)
                self.matrices.unswitch()
            if prepared is not None and not committed:  # the next batch plans afresh
                prepared.failed()
                if prepared.refused is None:
                    prepared.release()
                self.prepared = Prepared(self.spark) if prepared.refused is None else prepared
            raise
        finally:
            if self._capturing and prepared is not None:
                prepared.planned()
            self._capturing = False
            with self._part("drop views, release"):
                self._release(views, temps, cached, None if committed else reads.merged)
        self.store.replace(current)
        if migrated and self.prepared is not None:  # plans prepared for the old mapping
            self._prepare_afresh()
        if hashed is not None:  # the hashed states the switch replaced
            hashed.store.release_except(self.store.backings())
        boundary, self._boundary = self._boundary, None
        if boundary is not None:
            boundary.committed(self)
        self._stale = False
        logged = [t for t in self.store.touched.values() if t is not None]
        self._outputs_seen = (None if len(logged) < len(self.store.touched) else
                              (snap_rows, change_rows + sum(logged), sum(rows.values())))
        self._observe(batch, choice, rows, committed_at - start, warm)
        self.control.committed(batch, record)
        with self._phase("compact"):
            restated = (boundary is not None and boundary.whole) or self._restate
            self.control.guard(batch, "compact", lambda: self._after_commit(batch, restated))
        # (the batch's states are written whole; plans captured ahead of the next batch, below,
        # log its touched keys only)
        self._restate = False
        if not self._stale and choice.strategy != "recompute":
            self._start_runs()
            if self.store.fold_due():
                with self._phase("fold"):
                    self.control.guard(batch, "fold", self._fold_tails)
        if self._probe is not None:
            with self._phase("probe: recompute measured"):
                self._measure_recompute(batch, sum(rows.values()), inputs)
        if (batch == 0 and choice.strategy == "incremental" and self.cost.mode != "recompute"
                and sum(rows.values()) >= AHEAD_MIN_ROWS):
            with self._phase("prepare the next batch"):
                self._prepare_ahead(batch, inputs)
            if self.cost.mode == "auto" and self._recomputer is not None and self.prepared is not None \
                    and self.prepared.ready:
                with self._phase("calibrate: an empty increment and a recompute measured"):
                    self._calibrate(batch, sum(rows.values()), inputs)
        profile = self.profiler.end(batch) if self.profiler is not None else None
        return BatchResult(batch, inputs, rows, time.monotonic() - start, snap_rows, change_rows,
                           self._state_rows(), dict(self._timings), profile, committed_at, committed_at - start)

    def _capture(self, frames: dict[str, DataFrame], views: Views, inputs: dict[str, list[str]],
                 ahead: bool = False) -> dict[str, DataFrame]:
        """Plan this batch over slots (prepared.py): its streams' rows and its states are read
        through them, and its merges are kept per job. Returns the batch's frames so read.
        ``ahead``: planned before the batch (:meth:`_prepare_ahead`), its streams' slots empty."""
        p = self.prepared
        assert p is not None
        store = self.store
        for n in store.durable():
            backing = store.backing(n)
            assert backing is not None  # (_prepared_mode)
            empty = False
            if n in store.bases:  # runs.py: the base read through a slot of its own, re-pointed by a fold
                base, held = store.bases[n]
                store.bases[n] = (p.base(n, base), held)
                # an empty tail: a slot that reads nothing, laid out as the base's merge (its backing)
                empty = store.tails[n] is None
            store.current[n] = p.state(n, backing, partial(self._new_rows, n, views), empty)
            if n in store.bases:
                store.tails[n] = p.merged(n)
        self.store.keep = p.keep
        self._capturing = True
        p.plan_without_broadcasts(self._broadcast_statics())
        return {n: p.stream(n, df, self._file_columns(n, inputs.get(n, [])), ahead) for n, df in frames.items()}

    def _broadcast_statics(self) -> frozenset[str]:
        """The static states a capture broadcasts into the joins that read them: those within
        Spark's broadcast threshold by their size estimate (their true rows, ``_with_size``)."""
        limit = int(self.spark._jsparkSession.sessionState().conf().autoBroadcastJoinThreshold())
        if limit <= 0:
            return frozenset()
        found = set()
        for name, d in self.store.defs.items():
            if d.static:
                size = self.store.current[name]._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
                if int(size if isinstance(size, int) else size.toString()) <= limit:
                    found.add(name)
        return frozenset(found)

    def _prepare_ahead(self, batch: int, inputs: dict[str, list[str]]) -> None:
        """After batch ``batch``'s commit (the history's), capture the next batch's plans ahead of
        it, so that it is already a replay: without this the first increment plans every merge
        and the outputs, builds the prepared plans and generates their code, and cost more than
        a recompute on most TPC-H queries at SF 1 (docs/benchmarks.md, stop 42). The capture is
        planned over the states as committed and each stream's last file of the batch (for its
        columns and its scan, which later batches re-point), its streams' slots reading nothing;
        no job runs, nothing is written, and the store is left as it was. The next batch runs the
        plans if it fits them as a capture would have (_prepared_mode), else plans afresh."""
        p = self.prepared
        if (p is None or p.refused is not None or p.ready or p.keeps or self._boundary is not None or self._stale
                or any(r is None for r in self.store.rows.values()) or not self._capturable()):
            return
        held = sum(r or 0 for r in self.store.rows.values())
        if self._outputs_estimate(held, 0, False) > SMALL_ROWS:  # the next batch is planned eagerly
            return
        self.progress(f"batch {batch_name(batch)}: preparing the next batch's plans")
        # over one partition only if the states leave AHEAD_ROOM of one task's rows to the next
        # batch; else hash-partitioned, which runs a batch of any size (_prepared_mode)
        p.single = _ONE_PARTITION and held <= (1 - AHEAD_ROOM) * ONE_TASK_ROWS
        views = Views(self.spark, f"ahead{batch + 1}")
        temps: list[DataFrame] = []
        put_back = self.store.hold()
        timings, self._timings = self._timings, {}
        last = {s.name: inputs[s.name][-1:] for s in self.plan.streams if inputs.get(s.name)}
        cached: list[DataFrame] = []
        try:  # (after the commit: nothing here may fail the batch)
            frames, _, cached = self.reader.read(last, cache=self._reread)
            frames = self._capture({n: df.coalesce(1) for n, df in frames.items()}, views, last, ahead=True)
            reads = self._reads(frames, {s.name: 0 for s in self.plan.streams}, False, p.single)
            self._apply_h(batch + 1, reads, views, False, temps, guarded=False)
            self.store.keep = None
            outputs = self._outputs_sql(batch + 1, reads.merged, reads.new, views)
            stacked = stacked_frame(self.spark, [(sql, cols) for sql, _, cols in outputs], self._tasks(held),
                                    bool(self.plan.answer.order))
            p.plan_outputs(stacked)
            p.captured_ahead()
            if p.ready:
                self._warm_up(batch, p, last)
        except Exception as e:  # noqa: BLE001 - the next batch plans afresh
            log.info("streamfold: the next batch's plans were not prepared ahead (%s)", first_line(e))
            self._prepare_afresh()
        finally:
            p.planned()
            self._capturing = False
            put_back()
            self._timings = timings
            self._release(views, temps, cached, None)

    def _warm_up(self, batch: int, p: Prepared, inputs: dict[str, list[str]]) -> None:
        """Run the plans captured ahead once over a sample of the history's rows (WARM_ROWS of
        each stream's last file), keeping nothing: the first replay otherwise pays the JIT
        compilation of every path rows take through the job — joins probed, aggregates merged —
        on top of the batch (TPC-H SF 1: Q04's batch 1 1.53 s, then 1.28, 1.06, 0.80 s;
        docs/benchmarks.md, stop 42). Rows the states already hold: what the job computes from
        them is wrong and is dropped (no answer, no state), as an empty run's is."""
        sample = self.reader.sample(inputs, WARM_ROWS)
        if sample is None:  # (not Parquet: the first replay warms them)
            return
        self.progress(f"batch {batch_name(batch)}: warming the next batch's plans")
        began = time.monotonic()
        p.run_discarded(sample)
        log.info("streamfold: batch %s: the next batch's plans warmed in %.2f s", batch_name(batch),
                 time.monotonic() - began)

    def _calibrate(self, batch: int, batch_rows: int, inputs: dict[str, list[str]]) -> None:
        """Under ``--strategy auto``, after the history's commit and the capture ahead: the
        prepared plans run once over no rows — what an incremental batch costs at least — and a
        recompute measured (the probe the first incremental batch would otherwise be followed
        by). When even an increment of no rows costs more than a recompute, batch 1 is already a
        recompute (docs/strategy.md): a query whose increments cost several recomputes (TPC-H
        SF 1: Q21's 14 s against 4.8 s) no longer pays two of them to learn it. A first run in
        this JVM pays code generation and JIT compilation that later ones do not: each is run
        again when it decides the choice, and the lesser time kept."""
        p = self.prepared
        assert p is not None
        self.progress(f"batch {batch_name(batch)}: measuring an empty increment and a recompute (cost model)")
        try:
            floor = p.run_empty()
            self.cost.observe_floor(floor)
            self._measure_recompute(batch, batch_rows, inputs)
            recompute = self.cost.predicted("recompute", 0, self._history_rows)
            if recompute is not None and floor > recompute:
                self.cost.observe_floor(min(floor, p.run_empty()))
        except Exception as e:  # noqa: BLE001 - then the first increments are measured as before
            log.info("streamfold: the cost model was not calibrated after the history (%s)", first_line(e))
            self._prepare_afresh()

    def _file_columns(self, stream: str, names: list[str]) -> tuple | None:
        """The columns the files of ``stream`` share (what a prepared file scan reads), or None."""
        spec = self.specs[stream.lower()]
        sigs = {check_file(spec, self.catalog[stream], os.path.join(spec.path, n))[0] for n in names}
        return sigs.pop() if len(sigs) == 1 and spec.format == "parquet" else None

    def _new_rows(self, name: str, views: Views, merged: DataFrame) -> DataFrame:
        return self.store.as_frame(self.store.new_view(name, merged, views))

    def _replay(self, batch: int, reads: BatchReads) -> tuple[int, int]:
        """A batch run by the prepared plans: slots pointed at its rows and the kept states, one
        job for every merge and the outputs, its parts written (as :meth:`_write_outputs` does)."""
        p = self.prepared
        assert p is not None
        try:
            with self._part("prepared: point the slots"):
                p.bind(reads.frames)
            with self._part("prepared: the job + Arrow"):
                table = p.run()
            parts = [(self.output.snapshot_path(batch), self.answer.columns()),
                     (self.output.changes_path(batch), self.answer.columns(weight=True))]
            if self.store.durable():
                parts.append((self.checkpoint.delta_dir(batch), self.store.pack_columns()))
            with self._part("write files"):
                written = write_parts(table, parts)
        except Exception as e:  # noqa: BLE001
            raise batch_failure(batch, "write", "writing its answer", e, self._local) from e
        for name, (_, frame) in p.keeps.items():
            if name in p.states:
                reads.merged[name] = frame
        self.store.executed(p.executed)
        return written[0], written[1]

    @staticmethod
    def _release(views: Views, temps: list[DataFrame], cached: list[DataFrame],
                 merged: dict[str, DataFrame] | None) -> None:
        """What a batch held: its temp views, temp results, cached input; its merges if it failed."""
        views.drop()
        for df in temps:
            release(df)
        for df in cached:
            df.unpersist()
        for df in (merged or {}).values():
            release(df)

    def _apply_h(self, batch: int, reads: BatchReads, views: Views, eager: bool, temps: list[DataFrame],
                 given: Mapping[str, DataFrame] | None = None, label: str = "", guarded: bool = True) -> None:
        """h and ⊗ over a batch's rows, level by level, into ``reads`` (each state's merge and its
        new and delta versions) and ``temps`` (what to release when the batch ends). A state in
        ``given`` is not stepped: its merge's result is given (a state kept whole by a rebuild).
        Each step is a point of the controller's (``guarded``) unless the batch is only planned."""
        given = given or {}
        for level in self._levels:
            with self._phase("h ⊗ " + " ".join(s.state for s in level)):
                todo = [s for s in level if s.state not in given]
                steps = [partial(self._step, batch, s, reads, views, eager, guarded) for s in todo]
                done = parallel(self.spark, [partial(self.control.guard, batch, f"{label}Δ{s.state}", step)
                                             if guarded else step for s, step in zip(todo, steps)])
            results = [(s, given[s.state]) for s in level if s.state in given]
            for step, df in results + [pair for r in done for pair in r]:
                if step is None:  # held until the batch ends
                    temps.append(df)
                elif isinstance(step, Temp):
                    reads.deltas[step.state] = df
                    temps.append(df)
                else:
                    reads.merged[step.state] = df
                    reads.new[step.state] = self.store.new_view(step.state, df, views)
                    reads.deltas[step.state] = self.store.delta_view(step.state, df, views)
                    if step.state not in self._unchanged:
                        self._settle_merge(step.state, df, reads, views, eager, temps)

    def _settle_merge(self, name: str, merged: DataFrame, reads: BatchReads, views: Views, eager: bool,
                      temps: list[DataFrame]) -> None:
        """For a state kept as a base and a tail, its merge as programs read it — the touched keys,
        added up over both runs (:meth:`.state.StateStore.merged_view`) — computed once per batch
        and kept like a temp result: a per-key change reads it twice (the rows that enter, those
        that leave), and each read would look the base up again."""
        settled = self.store.merged_view(name, merged, views)
        if settled is None:
            return
        frame = self.spark.sql(settled)
        frame = frame.coalesce(1) if reads.single else frame
        kept = materialize(frame, eager) if self.store.keep is None else self.store.keep(f"{name}#merged", frame)
        reads.merged_views[name] = kept
        temps.append(kept)

    def _pending(self, batch: int, inputs: dict[str, list[str]], reads: BatchReads, views: Views) -> Pending:
        """The batch as breakpoints and inspection see it before its commit."""

        def state(name: str) -> DataFrame:
            new = reads.new.get(name)
            if new is None and name in reads.merged:  # a prepared batch: no view of its merge yet
                new = self.store.new_view(name, reads.merged[name], views)
            return self.store.settled(name, self.store.as_frame(new)) if isinstance(new, str) else self.store.visible(name)

        def touched(name: str) -> DataFrame:
            if name not in reads.merged:  # h did not run (an answer-only reconfiguration): none touched
                return self.store.empty(name)
            return self.store.as_frame(self.store.touched_view(name, reads.merged[name], views))

        return Pending(batch, inputs, dict(reads.rows), self.output.snapshot_path(batch),
                       self.output.changes_path(batch), state=state, touched=touched,
                       states=tuple(self.store.durable()))

    def _step(self, batch: int, step: Step, reads: BatchReads, views: Views,
              eager: bool, shown: bool = True) -> list[tuple[Step | None, DataFrame]]:
        """Run one step of h: a temp result, or a state's delta merged into it (⊗); a loop step
        by its interpreter, which may give the results of its body's steps too, and DataFrames
        to hold (step None). ``shown``: reported as the batch's progress (not when only planned)."""
        if shown:
            self.progress(f"batch {batch_name(batch)}: Δ{step.state}")
        if self._reads_nothing_new(batch, step, reads):
            self._unchanged.add(step.state)
            if isinstance(step, Temp):
                return [(step, empty_frame(self.spark, self._temp_schemas[step.state]))]
            return [(step, self.store.unchanged(step.state, views))]
        try:
            if isinstance(step, LOOPS):
                return self.loops[type(step)].run(batch, step, reads, views, eager)
            sql = reads.sql(step.program, views)
            if isinstance(step, Temp):
                temp = self.spark.sql(sql)
                temp = temp.coalesce(1) if reads.single else temp
                return [(step, materialize(temp, eager) if self.store.keep is None else self.store.keep(step.state, temp))]
            return [(step, self.store.merge(step.state, sql, views, eager, reads.single))]
        except StreamfoldError:
            raise
        except Exception as e:  # noqa: BLE001 - Spark failures are chained into a BatchError
            raise batch_failure(batch, f"Δ{step.state}", f"computing Δ{step.state}", e, self._local) from e

    def _reads_nothing_new(self, batch: int, step: Step, reads: BatchReads) -> bool:
        """Whether nothing ``step`` reads changed this batch, so that its delta is empty: no stream
        it reads as a delta brought rows, and every state it reads at this batch's versions (delta,
        merged, new) was left unchanged. A delta program is a homomorphism of the changes it reads,
        so over none it gives nothing (or rows that merge as the identity): the state stays as it
        is, without a job — a source whose only file came in batch 0, a dimension table given as a
        source, costs no merge per batch. Loops decide for themselves; batch 0 reads ``Once``.
        """
        if batch == 0 or isinstance(step, LOOPS) or self._capturing:  # prepared plans merge every step
            return False
        for node in step.program.walk():
            if isinstance(node, DeltaScan) and reads.rows.get(self.catalog[node.table].name, 1):
                return False
            if isinstance(node, StateScan) and node.version != "old" and node.state not in self._unchanged:
                state = self.store.defs.get(node.state)  # None for a temp
                if state is None or not state.static:
                    return False
            if isinstance(node, (Once, LoopRef)):  # a static relation's rows as a delta; a loop's
                return False
        return True

    def _write_outputs(self, batch: int, merged: dict[str, DataFrame], new: dict[str, DataFrame | str],
                       views: Views, eager: bool, lazy_reads: int) -> tuple[int, int]:
        """The changelog, snapshot and changes of the batch, written side by side.

        ``lazy_reads`` bounds what the job reads when the merges are lazy (the states before the
        batch and its rows); eager merges are read from their checkpoints."""
        durable = self.store.durable()
        boundary = self._boundary
        whole = self._restate or (boundary is not None and boundary.whole)
        try:
            outputs = self._outputs_sql(batch, merged, new, views)
            # The merges' row counts bound every output: the snapshot by the answer's states, the
            # changes and changelog by the keys touched. Small ones are collected and written here.
            if eager:
                self.store.count_rows()
            bound = self._rows_bound(merged if not whole and (boundary is None or merged) else durable)
            ordered = bool(self.plan.answer.order)
            if not eager or bound <= SMALL_ROWS:
                collect = self.prepared.outputs if self._capturing and self.prepared is not None else None
                written = emit_together(self.spark, [(sql, target, cols) for sql, target, cols in outputs],
                                        self._tasks(bound if eager else lazy_reads), self._part, collect, ordered)
            else:
                written = [emit(self.spark.sql(outputs[0][0]), outputs[0][1], False, ordered=ordered)]
                written += parallel(self.spark, [partial(self._emit, sql, target) for sql, target, _ in outputs[1:]])
        except Exception as e:  # noqa: BLE001
            raise batch_failure(batch, "write", "writing its answer", e, self._local) from e
        return written[0], written[1]

    def _outputs_sql(self, batch: int, merged: dict[str, DataFrame], new: dict[str, DataFrame | str],
                     views: Views) -> list[tuple[str, str, Columns]]:
        """The batch's outputs as (SQL, target directory, (column, Spark type) pairs): its
        snapshot, its changes and, for a plan with states, its changelog."""
        states: dict[str, DataFrame | str] = {**self.store.current, **new}
        durable = self.store.durable()
        boundary = self._boundary
        whole = self._restate or (boundary is not None and boundary.whole)
        with self._part("outputs' SQL (views)"):
            snapshot = self.answer.snapshot(states, views)
            if boundary is None:
                changes = self.answer.changes(batch == 0, merged, states, dict(self.store.current), views)
            else:  # a newly installed plan's first batch: its changes from the old plan's last answer
                changes = self.answer.changes_between(snapshot, boundary.before_answer(self.spark, states, views),
                                                      views)
            logs: dict[str, DataFrame | str]
            if boundary is not None and not merged and not whole:  # h did not run: no state changed
                logs = {n: self.store.empty(n) for n in durable}
                log_dir = self.checkpoint.delta_dir(batch)
            elif not whole:
                logs = {n: self.store.log_view(n, merged[n], views) for n in durable}
                log_dir = self.checkpoint.delta_dir(batch)
            else:  # its states whole: a restart restores them without the old plan's changelogs
                logs = {n: states[n] for n in durable}
                log_dir = self.checkpoint.base_dir(batch)
            outputs: list[tuple[str, str, Columns]] = [
                (snapshot, self.output.snapshot_path(batch), self.answer.columns()),
                (changes, self.output.changes_path(batch), self.answer.columns(weight=True))]
            if durable:
                outputs.append((self.store.pack_sql(logs, views), log_dir, self.store.pack_columns()))
        return outputs

    def _tasks(self, reads: int) -> int:
        """The tasks of the job that collects a batch's outputs, which reads ``reads`` rows."""
        return 1 if reads <= ONE_TASK_ROWS else self._cores

    def _emit(self, sql: str, target: str) -> int:
        return emit(self.spark.sql(sql), target, False)

    def _outputs_estimate(self, held: int, rows: int, whole: bool) -> int:
        """The rows this batch's outputs (snapshot, changes, changelog) are expected to hold, which
        decides whether its merges are lazy and its outputs collected (under ``SMALL_ROWS``) or
        each merge a job and each output written by Spark.

        The last batch's snapshot, and its changes and changelog scaled by the ratio of input
        rows, plus four rows per input row; without a last batch to go by, or when the batch may
        write its states ``whole``, all the states' rows (``held``). The states' own size is not what the outputs hold: a 700K-row join input
        touched by 40K rows logs 40K rows, and counting it whole sent join-groupby's batches the
        plain way, several times slower, once its states held ~700K rows (its 16th increment,
        docs/benchmarks.md)."""
        seen = self._outputs_seen
        if seen is None or whole:
            return held + 4 * rows
        snapshot, changed, before = seen
        return snapshot + -(-changed * rows // max(before, 1)) + 4 * rows

    def _rows_bound(self, names: Iterable[str]) -> int:
        """The rows of these states, a count not yet known taken as more than SMALL_ROWS."""
        return sum(r if r is not None else SMALL_ROWS + 1 for r in (self.store.rows.get(n) for n in names))

    def _state_rows(self) -> dict[str, int]:
        return {n: r for n, r in self.store.rows.items() if r is not None and not self.store.defs[n].static}

    def _after_commit(self, batch: int, restated: bool = False) -> None:
        every = self.config.compact_every
        if restated:  # the batch wrote every state whole: what came before is not needed
            self.checkpoint.prune(batch)
        elif self._stale:  # no state to compact: a rebuild writes them whole
            pass
        elif every and (batch + 1) % every == 0 and self.store.durable():
            views = Views(self.spark, "compact")
            try:
                # Small states are collected and written by the driver, as a batch's outputs are
                # (a Spark write's fixed cost dominates a small state: docs/benchmarks.md).
                small = self._rows_bound(self.store.durable()) <= SMALL_ROWS
                emit(self.spark.sql(self.store.pack_sql(self.store.current, views)),
                     self.checkpoint.base_dir(batch), small)
            finally:
                views.drop()
            self.checkpoint.prune(batch)
        keep = self.config.keep_snapshots
        if keep:
            self.output.prune_snapshots(batch - keep + 1)

    def _start_runs(self) -> None:
        """After a batch's commit: start the runs of the states grown large enough (runs.py), so
        that the next batch already merges into their tails — after a history, the next batch can
        be the capture of the prepared plans. Plans prepared over their whole states end here."""
        if self.store.start_runs():
            p = self.prepared
            if p is not None and (p.ready or p.keeps):
                self._prepare_afresh()

    def _fold_tails(self) -> None:
        """Fold each tail grown past its bound into its base (runs.py), after the batch's commit:
        the states' rows do not change, so neither does the checkpoint. Prepared plans read the
        new base through their slot for it (or, if it cannot take it, the next batch captures
        again)."""
        for name in self.store.fold_due():
            self.progress(f"folding the tail of {name} into its base")
            nulls = self.store.base_nulls.get(name)
            base = self.store.fold(name)
            p = self.prepared
            # plans that look touched keys up in a base without NULL keys cannot read one with
            # them (lowering.runs_merged): the next batch captures again
            if p is not None and (p.ready or p.keeps) and ((self.store.base_nulls.get(name) and not nulls)
                                                            or not p.rebase(name, base)):
                self._prepare_afresh()

    # -- the strategy of a batch (runtime/strategy.py) ------------------------------------------
    def _choose(self, batch: int, rows: Mapping[str, int]) -> Choice:
        if batch == 0:
            return Choice("incremental", "batch 0 builds the states")
        if self._boundary is not None:
            return Choice("incremental", "the first batch of a reconfigured plan")
        if self._recomputer is None:
            return Choice("incremental", "this plan cannot be recomputed from scratch (iteration or join matrix)")
        preparable = self.prepared is not None and self.prepared.refused is None
        choice = self.cost.choose(self._stale, sum(rows.values()), self._history_rows, preparable)
        if self._stale and choice.strategy == "incremental":  # stale states are never merged into
            return Choice("rebuild", choice.reason, choice.estimates, choice.probe)
        if not self._stale and choice.strategy == "rebuild":  # nothing to rebuild
            return Choice("incremental", choice.reason, choice.estimates, choice.probe)
        return choice

    def _cost_record(self, choice: Choice, rows: Mapping[str, int]) -> dict[str, Any]:
        """The commit's ``strategy``, its ``cost`` (why, and the estimates) and the history's rows."""
        record: dict[str, Any] = {"strategy": choice.strategy, "history_rows": self._history_rows + sum(rows.values())}
        if self.cost.mode != "incremental" or choice.strategy != "incremental":
            record["cost"] = choice.record()
        return record

    def _observe(self, batch: int, choice: Choice, rows: Mapping[str, int], seconds: float, warm: bool = False) -> None:
        batch_rows = sum(rows.values())
        self._history_rows += batch_rows
        self.cost.observe(choice.strategy, batch == 0, batch_rows, self._history_rows, seconds, warm)
        self._probe = choice if choice.probe else None

    def _resume_cost(self) -> None:
        """The history's rows and the cost model's calibration, from the last commits."""
        last = self.recovery.last_committed
        # The last batches, and batch 0 (a build: the per-row rate that predicts recomputes and
        # rebuilds); without it a restart after batch 2 × WINDOW left the model nothing to predict
        # a recompute with, and --strategy auto stayed incremental for the rest of the run.
        window = range(max(0, last - 2 * WINDOW), last + 1)
        records = [self.output.read_commit(b) for b in ([0] if window.start > 0 else []) + list(window)]
        if "history_rows" in records[-1]:
            self._history_rows = int(records[-1]["history_rows"])
        else:  # written by a streamfold without strategies: every batch's rows
            self._history_rows = sum(sum(self.output.read_commit(b).get("rows", {}).values()) for b in range(last + 1))
        self.cost.resume(records)

    def _measure_recompute(self, batch: int, batch_rows: int, inputs: dict[str, list[str]]) -> None:
        """A probe after the batch's commit: what a recompute batch computes — the query over
        every file so far, and its changes from the snapshot just committed — written nowhere.
        A first run in this JVM pays code generation and JIT compilation that later ones do not:
        when it is dearer than an incremental batch (when it matters), it is measured once more
        and the lesser time kept."""
        assert self._recomputer is not None
        # (the files of the batch just committed are added to ``consumed`` once _run returns)
        history = {s.name: sorted(self.consumed.get(s.name, set()) | set(inputs.get(s.name, [])))
                   for s in self.plan.streams}
        self.progress(f"batch {batch_name(batch)}: measuring a recompute (cost model)")
        outputs = partial(self._probe_outputs, batch)
        seconds = self._recomputer.measure(history, outputs)
        incremental = self.cost.predicted("incremental", batch_rows, self._history_rows)
        if incremental is not None and seconds > incremental:
            seconds = min(seconds, self._recomputer.measure(history, outputs))
        # A recompute batch also lists its files and commits, as the batch just measured did: its
        # own times for those. Not its "write" phase: in an incremental batch that is the job
        # that runs h, the merges and the outputs (up to the whole batch), which counted as the
        # recompute's too made every recompute look as dear as an incremental batch (TPC-H SF 1:
        # Q08 predicted at 15.5 s where Spark recomputes it in 2.4 s; docs/benchmarks.md).
        around = sum(self._timings.get(p, 0.0) for p in ("read", "commit"))
        self.cost.observe("probe", False, 0, self._history_rows, seconds + around)

    def _probe_outputs(self, batch: int, answer: DataFrame) -> None:
        """What a recompute batch does with its answer, into a scratch directory: the answer
        kept, the snapshot and its changes from batch ``batch``'s snapshot written."""
        views = Views(answer.sparkSession, f"p{batch}")
        held = materialize(answer)
        try:
            with tempfile.TemporaryDirectory(prefix="streamfold-probe-") as scratch:
                self._write_recomputed(batch, held, views, self.output.snapshot_path(batch),
                                       (os.path.join(scratch, "snapshot"), os.path.join(scratch, "changes")))
        finally:
            views.drop()
            release(held)

    def _rebuild_all(self, batch: int) -> _Bundle:
        """The plan's states, not maintained since a recompute, built again from every file before
        the batch (in a new store; the bundle before is returned, or put back on failure)."""
        old = _Bundle.of(self)
        history = {s.name: sorted(self.consumed.get(s.name, set())) for s in self.plan.streams}
        self.progress(f"batch {batch_name(batch)}: rebuilding the states from the history")
        try:
            self._setup(self.plan)
            self._rebuild(batch, history, {})
        except BaseException:
            if self.store is not old.store:
                self.store.release_except(old.store.backings())
            old.restore(self)
            raise
        return old

    def _rebuild_stale(self, batch: int) -> None:
        """The cost model's rebuild: the states built again, then the batch runs as a newly
        installed plan's first (its states written whole, its changes from the last snapshot)."""
        old = self._rebuild_all(batch)
        previous = self.output.snapshot_path(batch - 1)
        self._boundary = Installed(old, reset=False, before=previous if os.path.isdir(previous) else None,
                                   whole=True, rebuild=True)

    def _recompute_batch(self, batch: int, inputs: dict[str, list[str]], rows: dict[str, int],
                         cached: list[DataFrame], start: float, choice: Choice) -> BatchResult:
        """The batch by the recompute strategy: the answer from every file so far, its changes from
        the last snapshot; no state is written, and the states are stale from here on."""
        assert self._recomputer is not None
        views = Views(self._recomputer.spark, f"b{batch}")
        held: DataFrame | None = None
        try:
            with self._phase("recompute"):
                history = {s.name: sorted(self.consumed.get(s.name, set())) + list(inputs.get(s.name, []))
                           for s in self.plan.streams}
                recomputer = self._recomputer
                assert recomputer is not None
                cached += self.control.guard(batch, "recompute: read", lambda: recomputer.register(history))
                held = self.control.guard(batch, "answer", lambda: materialize(recomputer.answer()))
            with self._phase("write"):
                snap_rows, change_rows = self._write_recomputed(
                    batch, held, views, self.output.snapshot_path(batch - 1),
                    (self.output.snapshot_path(batch), self.output.changes_path(batch)))
            pending = Pending(batch, inputs, dict(rows), self.output.snapshot_path(batch),
                              self.output.changes_path(batch), state=self.not_maintained,
                              touched=self.not_maintained, states=())
            extra = self.control.before_commit(pending)
            extra.update(self._cost_record(choice, rows))
            record = {
                "batch": batch, "inputs": inputs, "duration_s": round(time.monotonic() - start, 4), "rows": rows,
                "snapshot_rows": snap_rows, "change_rows": change_rows, "state_rows": {},
                "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "stats": {"sources": {n: {"rows": r} for n, r in rows.items()}, "states": {}}, **extra,
            }
            with self._phase("commit"):
                self.output.commit(batch, record)
            committed_at = time.monotonic()
        finally:
            views.drop()
            for df in cached:
                df.unpersist()
            if held is not None:
                release(held)
        self._stale = True
        self._outputs_seen = None
        self._observe(batch, choice, rows, committed_at - start)
        self.control.committed(batch, record)
        with self._phase("compact"):
            self.control.guard(batch, "compact", lambda: self._after_commit(batch))
        profile = self.profiler.end(batch) if self.profiler is not None else None
        return BatchResult(batch, inputs, rows, time.monotonic() - start, snap_rows, change_rows, {},
                           dict(self._timings), profile, committed_at, committed_at - start)

    def _write_recomputed(self, batch: int, answer: DataFrame, views: Views, previous: str,
                          paths: tuple[str, str]) -> tuple[int, int]:
        """The snapshot (``answer``, computed) and its changes from the snapshot at ``previous``,
        written to ``paths`` (snapshot, changes)."""
        spark = answer.sparkSession
        before = spark.read.schema(self.output_schema).parquet(previous) if os.path.isdir(previous) else None
        snapshot = f"SELECT * FROM {views.name(answer, 'recomputed')}"
        changes = self.answer.changes_between(snapshot, before, views)
        # The answer is computed (its adaptive plan ran as one job per stage); the outputs over it
        # are one job of their own as the engine's are, without adaptive execution.
        spark.conf.set("spark.sql.adaptive.enabled", "false")
        try:
            rows = output_rows(answer)
            if rows is not None and rows <= SMALL_ROWS:
                outputs = [(snapshot, paths[0], self.answer.columns()),
                           (changes, paths[1], self.answer.columns(weight=True))]
                written = emit_together(spark, outputs, 1 if rows <= ONE_TASK_ROWS else None, self._part)
            else:
                written = [emit(answer, paths[0], False, ordered=bool(self.plan.answer.order)),
                           emit(spark.sql(changes), paths[1], False)]
        except Exception as e:  # noqa: BLE001
            raise batch_failure(batch, "write", "writing its answer", e, self._local) from e
        finally:
            spark.conf.set("spark.sql.adaptive.enabled", "true")
        return written[0], written[1]

    @property
    def stale(self) -> bool:
        """Whether the states were not maintained since a recompute batch (until a rebuild)."""
        return self._stale

    @staticmethod
    def not_maintained(name: str) -> DataFrame:
        raise StreamfoldError(f"state {name} is not maintained: this batch recomputed the answer from scratch",
                              code="STATE_NOT_MAINTAINED", params={"state": name},
                              hint="states are kept while the cost model chooses incremental batches "
                                   "(--strategy incremental keeps them always)")

    # -- join matrices (runtime/matrices.py) ------------------------------------------------------
    def _counts_matrices(self) -> bool:
        """Whether the plan's join matrices are decided on before the batch's outputs, from
        counted sizes (a hybrid's: :meth:`_adapt`), not after them from the merges' counts."""
        return any(mx.hybrid is not None for mx in self.plan.matrices)

    def _adapt(self, batch: int, reads: BatchReads, views: Views) -> dict[str, DataFrame]:
        """Algorithm 2 after the batch's merges, for a plan with a hybrid equi-join, before its
        outputs: each join matrix whose inputs grew enough moves to its best mapping for their
        sizes now — and a hybrid to the heavy keys of their frequencies now — its states
        replicated anew (returned, by name, to be the states after the batch), the plan compiled
        for it. The batch then writes every state whole, so the migration commits with it
        (killed before, it is decided again). A hybrid keeps its light keys' rows once, so its
        sizes are counted (one job): plans without one decide after the outputs instead, from
        the merges' own counts (:meth:`_adapt_after`)."""
        sizes = self._matrix_sizes(reads, views)
        moves = self.matrices.plan(self.plan, sizes)
        heavy: dict[str, tuple[Any, ...]] = {}
        frequencies: dict[str, dict[Any, tuple[int, int]]] = {}
        for mx in self.plan.matrices:
            if mx.hybrid is not None and mx.left in self.matrices.triggered:
                r, s = sizes[mx.left]
                frequencies[mx.left] = self._key_frequencies(mx, reads, views, (r + s) / mx.cells)
                chosen = heavy_keys(frequencies[mx.left], r, s, mx.cells)
                if chosen != mx.heavy:
                    heavy[mx.left] = chosen
                    self.matrices.heavy_from[mx.left] = mx.heavy
        return self._migrate(batch, reads, views, moves, heavy, frequencies)

    def _adapt_after(self, batch: int, reads: BatchReads, views: Views,
                     prepared: Prepared | None) -> dict[str, DataFrame]:
        """Algorithm 2 after the batch's outputs, for a plan whose join matrices keep every row
        as often (no hybrid): |R| and |S| are the merges' own row counts over the copies each row
        has (a left row in m cells, a right row in n), so no job counts them. Each matrix that
        moves has its states replicated anew (returned, by name) and the plan is compiled for
        it; every state is then written whole into the batch's base (``base-<batch>``, which a
        restore takes over the changelog the outputs wrote beside it), so the migration commits
        with the batch: killed before the commit, the rerun restores the old mapping's states
        and decides the same migration from the same sizes. After a batch of ``prepared`` plans,
        the states are the rows its job kept; the plans are prepared afresh after the commit."""
        rows = self.store.rows
        if all(rows.get(mx.left) is not None and rows.get(mx.right) is not None for mx in self.plan.matrices):
            sizes = {mx.left: (int(rows[mx.left] or 0) // mx.m, int(rows[mx.right] or 0) // mx.n)
                     for mx in self.plan.matrices}
        else:  # a merge whose count Spark did not report: count the states
            sizes = self._matrix_sizes(reads, views)
        moves = self.matrices.plan(self.plan, sizes)
        if not moves:
            return {}
        for n in self.store.durable():  # each state after the batch, as the next one would read it
            if n in reads.new:
                continue
            if prepared is not None and n in prepared.states:
                reads.new[n] = prepared.current(n, rows.get(n))[0]
            elif n in reads.merged:
                reads.new[n] = self.store.next_version(n, reads.merged[n], views)
        migrated = self._migrate(batch, reads, views, moves, {}, {})
        states: dict[str, DataFrame | str] = {**self.store.current, **reads.new}
        durable = self.store.durable()
        try:
            with self._part("states written whole"):
                emit(self.spark.sql(self.store.pack_sql({n: states[n] for n in durable}, views)),
                     self.checkpoint.base_dir(batch), False)
        except Exception as e:  # noqa: BLE001 - Spark failures are chained into a BatchError
            raise batch_failure(batch, "migrate", "writing a join matrix's migrated states", e, self._local) from e
        return migrated

    def _migrate(self, batch: int, reads: BatchReads, views: Views, moves: dict[str, tuple[int, int]],
                 heavy: dict[str, tuple[Any, ...]], frequencies: dict[str, dict[Any, tuple[int, int]]]
                 ) -> dict[str, DataFrame]:
        """The states of each join matrix that moves (``moves``: its new mapping) or takes other
        heavy keys (``heavy``) replicated anew from their rows after the batch's merges (returned,
        by name, as a merge's rows; their new rows put in ``reads.new``), and the plan compiled
        for the new layouts."""
        if not moves and not heavy:
            return {}
        self.progress(f"batch {batch_name(batch)}: join matrix " + ", ".join(
            [f"{name} {old} → {new}" for name, (old, new) in self.matrices.migrated.items()]
            + [f"{name} heavy keys {list(keys)}" for name, keys in heavy.items()]))
        migrated: dict[str, DataFrame] = {}
        try:
            for mx in self.plan.matrices:
                if mx.left not in moves and mx.left not in heavy:
                    continue
                r, s = self.matrices.sizes[mx.left]
                n, m = moves.get(mx.left, (mx.n, mx.m))
                for side, name in ((0, mx.left), (1, mx.right)):
                    layouts = None
                    copies = m if side == 0 else n
                    rows = (r if side == 0 else s) * copies
                    if mx.hybrid is not None:
                        new_heavy = heavy.get(mx.left, mx.heavy)
                        layouts = (HybridLayout(mx.hybrid[side], mx.heavy, mx.cells),
                                   HybridLayout(mx.hybrid[side], new_heavy, mx.cells))
                        rows_of_heavy = sum(frequencies[mx.left][k][side] for k in new_heavy)
                        rows = (r if side == 0 else s) + rows_of_heavy * (copies - 1)
                    source = views.relation(reads.new[name], f"migrate_{name}") + " _new"
                    sql = lowering.migrate(self.store.table(name), source, side, (mx.n, mx.m), (n, m), layouts)
                    # kept as the rows of a merge that touched nothing, as a merge's result is
                    # kept: the next batch can capture prepared plans over it (Engine._capturable)
                    migrated[name] = materialize(self.spark.sql(lowering.unchanged(self.store.table(name),
                                                                                   f"(\n{sql}\n) _moved")))
                    reads.new[name] = self._new_rows(name, views, migrated[name])  # its state's columns
                    self._migrated_rows[name] = rows
        except Exception as e:  # noqa: BLE001 - Spark failures are chained into a BatchError
            for df in migrated.values():
                release(df)
            raise batch_failure(batch, "migrate", "migrating a join matrix", e, self._local) from e
        self._replan({**{m.left: (m.n, m.m) for m in self.plan.matrices}, **moves},
                     {**{m.left: m.heavy for m in self.plan.matrices if m.hybrid is not None}, **heavy})
        self._restate = True
        return migrated

    def _watch(self, batch: int, views: Views) -> _Bundle | None:
        """``matrix_equi="auto"`` before the batch's h (:mod:`.matrices`): each watched hash join
        whose inputs grew by ε since its last check has its rows per key counted over the
        committed states; one with a key above a joiner's fair share becomes a hybrid — the plan
        compiled again with its heavy keys and the mapping of least ILF, its two states laid out
        anew — and the batch writes every state whole. Returns the engine's plan before, to put
        back if the batch fails (None: nothing switched)."""
        due = self.matrices.due(self.plan, self.store.rows)
        if not due:
            return None
        switch: dict[str, tuple[SkewWatch, tuple[int, int], dict[Any, tuple[int, int]]]] = {}
        for w in due:
            sizes = self._watched_sizes(w, views)
            frequencies = self._hashed_frequencies(w, views)
            top = max(frequencies.items(), key=lambda kv: kv[1][0] + kv[1][1], default=None)
            heavy = heavy_keys(frequencies, sizes[0], sizes[1], w.cells)
            self.matrices.checked(w, sizes, (top[0], top[1][0] + top[1][1]) if top is not None else None, heavy)
            if heavy:
                switch[w.left] = (w, sizes, frequencies)
        if not switch:
            return None
        mappings = {m.left: (m.n, m.m) for m in self.plan.matrices}
        heavy_of = {m.left: m.heavy for m in self.plan.matrices if m.hybrid is not None}
        for left, (w, (r, s), _) in switch.items():
            best = best_mapping(r, s, w.cells)
            mappings[left] = (best.n, best.m)
            heavy_of[left] = tuple(self.matrices.checks[left]["heavy"])
        plan = _with_mappings(self.plan, mappings, heavy_of)
        self.progress(f"batch {batch_name(batch)}: " + ", ".join(
            f"{left} ⋈ {w.right} skewed (heavy keys {list(heavy_of[left])}): hash join → hybrid {mappings[left]}"
            for left, (w, _, _) in switch.items()))
        old = _Bundle.of(self)
        laid: set[str] = set()
        try:
            self._setup(plan)
            for mx in plan.matrices:
                if mx.left not in switch or mx.hybrid is None:
                    continue
                w, (r, s), frequencies = switch[mx.left]
                for side, name in ((0, mx.left), (1, mx.right)):
                    layout = HybridLayout(mx.hybrid[side], mx.heavy, mx.cells)
                    source = views.relation(old.store.current[name], f"switch_{name}") + " _hashed"
                    sql = lowering.migrate(self.store.table(name), source, side, None, (mx.n, mx.m), (layout, layout))
                    laid_out = materialize(self.spark.sql(sql))
                    copies = mx.m if side == 0 else mx.n
                    rows = (r if side == 0 else s) + sum(frequencies[k][side] for k in mx.heavy) * (copies - 1)
                    self.store.adopt(name, laid_out, laid_out, rows)
                    laid.add(name)
                self.matrices.switched(w, batch, (r, s))
            for name in self.store.durable():
                if name not in laid:
                    assert self.store.schemas[name] == old.store.schemas[name], name
                    self.store.adopt(name, old.store.current[name], old.store.backing(name), old.store.rows.get(name))
        except BaseException as e:
            self.store.release_except(old.store.backings())
            old.restore(self)
            self.matrices.unswitch()
            if isinstance(e, StreamfoldError) or not isinstance(e, Exception):
                raise
            raise batch_failure(batch, "migrate", "making a skewed hash join a hybrid", e, self._local) from e
        self._restate = True
        return old

    def _watched_sizes(self, w: SkewWatch, views: Views) -> tuple[int, int]:
        """A watched join's |R| and |S| as committed: its states' rows (counted if unknown)."""
        r, s = self.store.rows.get(w.left), self.store.rows.get(w.right)
        if r is not None and s is not None:
            return r, s
        a, b = (views.relation(self.store.current[n], f"size_{n}") for n in (w.left, w.right))
        row = self.spark.sql(f"SELECT (SELECT count(*) FROM {a}) AS r, (SELECT count(*) FROM {b}) AS s").collect()[0]
        return int(row[0]), int(row[1])

    def _hashed_frequencies(self, w: SkewWatch, views: Views) -> dict[Any, tuple[int, int]]:
        """A watched join's rows per key on each side (each row kept once), for its keys with the
        most rows: all of those above a joiner's fair share (fewer than J), in one job."""
        parts = []
        for side, name in ((0, w.left), (1, w.right)):
            relation = views.relation(self.store.current[name], f"keys_{name}")
            counts = "count(*) AS ra, 0L AS sb" if side == 0 else "0L AS ra, count(*) AS sb"
            parts.append(f"SELECT {quote(w.keys[side])} AS k, {counts} FROM {relation} _k{side} GROUP BY 1")
        sql = (f"SELECT k, sum(ra) AS r, sum(sb) AS s FROM ({' UNION ALL '.join(parts)}) _keys GROUP BY k "
               f"ORDER BY sum(ra) + sum(sb) DESC LIMIT {min(MAX_HEAVY_KEYS, w.cells)}")
        return {row[0]: (int(row[1]), int(row[2])) for row in self.spark.sql(sql).collect()}

    def _matrix_sizes(self, reads: BatchReads, views: Views) -> dict[str, tuple[int, int]]:
        """Per join matrix (by its left state), |R| and |S| after the batch's merges — one copy of
        each row (a left row is kept m times, a right row n times; a hybrid's light key's row
        once) — in one job."""
        items = []
        for i, mx in enumerate(self.plan.matrices):
            for side, name in ((0, mx.left), (1, mx.right)):
                relation = views.relation(reads.new.get(name, self.store.current[name]), f"count_{name}")
                if mx.hybrid is None:  # every row kept as often: count them all
                    items.append(f"(SELECT count(*) DIV {mx.m if side == 0 else mx.n} FROM {relation} _c{i}_{side})")
                    continue
                layout = HybridLayout(mx.hybrid[side], mx.heavy, mx.cells)
                keep = lowering.canonical(self.store.table(name), side, mx.m, layout)
                items.append(f"(SELECT count(*) FROM {relation} _c{i}_{side} WHERE {keep})")
        row = self.spark.sql("SELECT " + ", ".join(f"{x} AS c{k}" for k, x in enumerate(items))).collect()[0]
        return {mx.left: (int(row[2 * i]), int(row[2 * i + 1])) for i, mx in enumerate(self.plan.matrices)}

    def _key_frequencies(self, mx: JoinMatrix, reads: BatchReads, views: Views,
                         above: float) -> dict[Any, tuple[int, int]]:
        """A hybrid equi-join's rows per key on each side (one copy of each row), for the keys
        with more than ``above`` rows in all (the candidates for heavy keys)."""
        assert mx.hybrid is not None
        parts = []
        for side, name in ((0, mx.left), (1, mx.right)):
            relation = views.relation(reads.new.get(name, self.store.current[name]), f"keys_{name}")
            layout = HybridLayout(mx.hybrid[side], mx.heavy, mx.cells)
            keep = lowering.canonical(self.store.table(name), side, mx.m, layout)
            counts = ("count(*) AS ra, 0L AS sb" if side == 0 else "0L AS ra, count(*) AS sb")
            parts.append(f"SELECT {quote(mx.hybrid[side])} AS k, {counts} FROM {relation} _k{side} WHERE {keep} GROUP BY 1")
        sql = (f"SELECT k, sum(ra) AS r, sum(sb) AS s FROM ({' UNION ALL '.join(parts)}) _keys GROUP BY k "
               f"HAVING sum(ra) + sum(sb) > {float(above)!r} ORDER BY sum(ra) + sum(sb) DESC LIMIT {MAX_HEAVY_KEYS}")
        return {row[0]: (int(row[1]), int(row[2])) for row in self.spark.sql(sql).collect()}

    def _replan(self, mappings: dict[str, tuple[int, int]], heavy: dict[str, tuple[Any, ...]] | None = None) -> None:
        """The plan compiled again with these join matrix mappings (and hybrids' heavy keys, else
        the current ones): the same states, other programs."""
        if heavy is None:
            heavy = {m.left: m.heavy for m in self.plan.matrices if m.hybrid is not None}
        plan = _with_mappings(self.plan, mappings, heavy)
        assert plan.states == self.plan.states and plan.answer == self.plan.answer
        self.plan = plan
        self._levels = _levels(plan.delta)
        self._reread = _read_more_than_once(plan.delta)

    # -- reconfiguration (the seam for streamfold.control) ---------------------------------------
    def install(self, plan: IncrementalPlan, keep: Mapping[str, str], history: dict[str, list[str]] | None,
                on_failure: Callable[[BaseException], None] | None = None) -> None:
        """Make ``plan`` the engine's from the next batch on: a reconfiguration, applied between two
        batches to the whole plan (no batch runs partly under each).

        ``keep`` maps states of ``plan`` to states of the current plan whose rows they take —
        whole when their columns are equal, else carried over to the new columns, a new column
        at its monoid's identity (a state transformed "from now on"). The other states start
        empty and, given ``history`` (the files of every committed batch, per source), are built
        from it as batch 0 would build them from all of it. The next batch commits the new
        answer, its changes taken from the last committed snapshot, and — unless every state is
        kept as it was — a full copy of the new states; if it fails, the old plan is put back
        and runs it (``on_failure`` is told why).
        """
        if self._boundary is not None:
            raise StreamfoldError("internal: a plan is installed already and its batch is not committed",
                                  code="INTERNAL")
        self._check_inputs(plan)
        # a join matrix's kept states are in its current mapping (a hashed join switched to a hybrid: as one)
        if (plan.matrices or plan.watched) and self.plan.matrices:
            plan = _with_mappings(plan, {m.left: (m.n, m.m) for m in self.plan.matrices},
                                  {m.left: m.heavy for m in self.plan.matrices if m.hybrid is not None})
        batch = self.next_batch
        stale = self._stale
        if stale:  # the states a reconfiguration keeps or transforms must be current: built first
            before_rebuild = self._rebuild_all(batch)
            before_rebuild.store.release_except(self.store.backings())
            self._stale = False
        old = _Bundle.of(self)
        same_h = (plan.states, plan.init, plan.delta) == (old.plan.states, old.plan.init, old.plan.delta)
        try:
            if same_h:  # only the answer changes: the states, and the store that holds them, stay
                self.plan, self.output_schema = plan, spark_output_schema(self.spark, plan, self.catalog)
                self.answer = AnswerSql(plan, self.output_schema, self.store)
                self._recomputer = self._recomputer_for(plan)
            else:
                self._setup(plan)
                views = Views(self.spark, f"install{batch}")
                try:
                    wholes = {o: old.store.whole(o) for o in keep.values()}  # a state in runs, added up
                    kept = {n: (self.store.carried_over(n, wholes[o][0], old.store.schemas[o], views),
                                wholes[o][1], old.store.rows.get(o)) for n, o in keep.items()}
                finally:
                    views.drop()
                if history is not None and any(not s.static and s.name not in keep for s in plan.states):
                    self.progress(f"batch {batch_name(batch)}: rebuilding states from the history")
                    self._rebuild(batch, history, {n: df for n, (df, _, _) in kept.items()})
                for n, (df, backing, rows) in kept.items():
                    self.store.adopt(n, df, backing, rows)
        except BaseException:
            if self.store is not old.store:
                self.store.release_except(old.store.backings())
            old.restore(self)
            raise
        previous = self.output.snapshot_path(batch - 1)
        # The old plan's changelogs restore the new plan's states when it has the same ones, all
        # kept as they were (an answer-only change); otherwise the first batch writes them whole.
        same = same_h or (self.store.durable() == old.store.durable() and set(keep) == set(self.store.durable())
                          and all(keep[n] == n and self.store.schemas[n] == old.store.schemas[n] for n in keep))
        self._boundary = Installed(old, reset=self.output_schema != old.output_schema,
                                   before=previous if batch > 0 and os.path.isdir(previous) else None,
                                   whole=not same or stale, answer_only=same_h and not stale, on_failure=on_failure)

    def _rebuild(self, batch: int, history: dict[str, list[str]], kept: dict[str, DataFrame]) -> None:
        """The states of a newly installed plan that it does not keep, from the sources' history:
        h over all of it as one first batch against empty states, the kept states entering whole."""
        views = Views(self.spark, f"rebuild{batch}")
        frames, rows, cached = self.control.guard(batch, "rebuild: read",
                                                  lambda: self.reader.read(history, cache=self._reread))
        reads = self._reads(frames, rows, True)
        temps: list[DataFrame] = []
        current: dict[str, tuple[DataFrame, DataFrame | None]] = {}
        done = False
        try:
            given = {n: self.store.whole_merge(n, df, views) for n, df in kept.items()}
            self._apply_h(batch, reads, views, True, temps, given, label="rebuild ")
            for n, df in reads.merged.items():
                new = reads.new[n]
                if n not in kept:
                    assert isinstance(new, str)
                    current[n] = (self.store.as_frame(new), df)  # analysed before the views are dropped
            done = True
        finally:
            views.drop()
            for df in temps:
                release(df)
            for df in cached:
                df.unpersist()
            if not done:
                for n, df in reads.merged.items():
                    if n not in kept:
                        release(df)
        self.store.replace(current)
        self.store.count_rows()

    def _prepare_afresh(self) -> None:
        """The next batch that can captures its plans anew; the indexes of the old ones' bases
        are dropped from the JVM (prepared.py, Plans.lookups)."""
        if self.prepared is not None:
            self.prepared.release()
        self.prepared = Prepared(self.spark)

    def close(self) -> None:
        if self.prepared is not None:
            self.prepared.release()
        self.store.close()
        self._tables.clear()


def _with_mappings(plan: IncrementalPlan, mappings: dict[str, tuple[int, int]],
                   heavy: dict[str, tuple[Any, ...]] | None = None) -> IncrementalPlan:
    """``plan`` compiled again with these join matrix mappings and hybrids' heavy keys (by left
    state; others ignored)."""
    from ..plan import incrementalize
    from ..sql import bind

    return incrementalize(bind(plan.sql, Catalog(plan.sources)), mappings, plan.policy, heavy)


def _levels(steps: tuple[Step, ...]) -> list[list[Step]]:
    """Steps grouped so that each reads only what earlier groups produce this batch."""
    level_of: dict[str, int] = {}
    levels: list[list[Step]] = []
    for step in steps:
        needs = {n.state for r in step.reads() for n in r.walk()
                 if isinstance(n, StateScan) and n.version in ("new", "delta", "merged") and n.state in level_of}
        level = 1 + max((level_of[n] for n in needs), default=-1)
        level_of[step.state] = level
        while len(levels) <= level:
            levels.append([])
        levels[level].append(step)
    return levels


def _read_more_than_once(steps: tuple[Step, ...]) -> bool:
    """Whether some source's batch rows are read by more than one scan (then they are cached)."""
    seen: set[str] = set()
    for step in steps:
        if isinstance(step, Diffusion):
            return True  # a diffusion loop reads the batch's rows in every round
        for n in step.program.walk():
            if isinstance(n, DeltaScan):
                if n.table.lower() in seen:
                    return True
                seen.add(n.table.lower())
    return False


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


@dataclass
class _Bundle:
    """Everything of the engine that follows from its plan (swapped whole by a reconfiguration)."""

    plan: IncrementalPlan
    catalog: Catalog
    output_schema: StructType
    store: StateStore
    answer: AnswerSql
    reader: BatchReader
    loops: dict[type, LoopInterpreter]
    levels: list[list[Step]]
    reread: bool
    recomputer: Recomputer | None

    @classmethod
    def of(cls, engine: Engine) -> _Bundle:
        return cls(engine.plan, engine.catalog, engine.output_schema, engine.store, engine.answer, engine.reader,
                   engine.loops, engine._levels, engine._reread, engine._recomputer)

    def restore(self, engine: Engine) -> None:
        engine.plan, engine.catalog, engine.output_schema = self.plan, self.catalog, self.output_schema
        engine.store, engine.answer, engine.reader, engine.loops = self.store, self.answer, self.reader, self.loops
        engine._levels, engine._reread, engine._recomputer = self.levels, self.reread, self.recomputer


@dataclass
class Installed:
    """A plan installed by :meth:`Engine.install` whose first batch is not committed yet."""

    old: _Bundle  # the plan before, put back if the new one fails on its first batch
    reset: bool  # the answer's columns changed: its first changes are all of its rows
    before: str | None  # the last committed snapshot, the changes' starting point
    whole: bool  # its first batch writes the states whole (they are not the old plan's)
    answer_only: bool = False  # h is the old plan's: without new files its first batch runs no h
    on_failure: Callable[[BaseException], None] | None = None
    ran_h: bool = True  # whether its first batch ran h (set by the batch)
    rebuild: bool = False  # the same plan, its stale states rebuilt (the cost model's rebuild)

    def before_answer(self, spark: SparkSession, states: Mapping[str, DataFrame | str],
                      views: Views) -> DataFrame | str | None:
        """The answer the first batch's changes start from (None: from nothing). When h did not
        run (an answer-only change, no new file), the states are those the last snapshot was
        computed from, so the old plan's answer over them is that snapshot — computed where the
        states lie, in the job that writes the batch, rather than read back and shuffled against
        the new answer. Otherwise the last snapshot is read back (its columns known: no job to
        infer them)."""
        if self.before is None or self.reset:
            return None
        if self.answer_only and not self.ran_h:
            return lowering.subquery(self.old.answer.snapshot(states, views))
        return spark.read.schema(self.old.output_schema).parquet(self.before)

    def committed(self, engine: Engine) -> None:
        """The first batch is committed: free the old plan's states the new one does not use."""
        self.old.store.release_except(engine.store.backings())

    def fail(self, engine: Engine, error: BaseException) -> None:
        engine.store.release_except(self.old.store.backings())
        self.old.restore(engine)
        if self.on_failure is not None:
            self.on_failure(error)


def spark_output_schema(spark: SparkSession, plan: IncrementalPlan, catalog: Catalog) -> StructType:
    """The names and types Spark gives the batch query (the snapshot's columns), found by
    analysing it over empty views of its inputs in ``spark`` (those views are left in it)."""
    for s in catalog.values():
        empty_frame(spark, spark_struct(list(s.columns))).createOrReplaceTempView(s.name)
    try:
        schema = spark.sql(spark_schema_sql(plan.sql)).schema
    except Exception as e:  # noqa: BLE001 - Spark's analysis error, shown to the user
        raise UnsupportedError(f"Spark cannot run this query: {first_line(e)}", code="SPARK_REJECTED",
                               sql=plan.sql, params={"error": first_line(e)},
                               hint="streamfold answers what the Spark batch query answers; fix it for Spark") from None
    check_output_names(schema.names, plan.sql)
    if len(schema.fields) != len(plan.answer.output):
        raise StreamfoldError(
            f"internal: Spark sees {len(schema.fields)} output columns, the plan {len(plan.answer.output)}",
            code="INTERNAL")
    return schema
