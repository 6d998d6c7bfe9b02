"""Run one compiled query batch by batch: read, apply h and ⊗, answer with a, commit.

One batch is one consistent cut across all the query's sources: the driver lists every source
once, records the files in ``offsets/<batch>.json`` before touching them, and applies them all
in the batch. Steps of h whose inputs are ready run together (Spark runs their jobs side by
side). The durable writes are, in order: offsets → the states' changelog, the snapshot and the
changes → ``commits/<batch>.json``; see :mod:`.checkpoint` for why that makes runs restartable.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import BadInputError, BatchError, StreamfoldError, UnsupportedError
from ..ir.rel import WEIGHT, DeltaScan, Expand, LoopRef, Once, Project, Rel, Scan, StateScan, Union
from ..plan import IncrementalPlan, incrementalize
from ..ir.expr import Literal
from ..ir.types import BIGINT
from ..plan.model import FIXPOINT_MAX_ROUNDS, WEIGHT_COLUMN, Diffusion, Fixpoint, Repeat, Step
from ..sql import Catalog, bind
from ..sql.iterate import spark_schema_sql
from . import files
from .answer import AnswerSql
from ..ir.printer import quote
from .checkpoint import Checkpoint, OutputDir, batch_name
from .emit import ONE_TASK_ROWS, SMALL_ROWS, emit, emit_together
from .failures import batch_failure
from .inputs import BatchReader, first_line
from .lower import Resolve, Views, to_sql
from .session import default_partitions, engine_session
from .sources import InputSpec, empty_frame, infer_schema, list_inputs, read_files, spark_struct, table_paths
from .state import StateStore, materialize, release

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger("streamfold")


@dataclass
class QueryConfig:
    """Everything ``streamfold run`` (or :func:`streamfold.start`) is told."""

    sql: str
    sources: list[InputSpec]
    output: str
    tables: list[InputSpec] = field(default_factory=list)
    checkpoint: str | None = None
    trigger: float = 1.0
    until_idle: float | None = None
    partitions: int | None = None
    on_bad_file: str = "stop"  # or "quarantine"
    compact_every: int = 20
    keep_snapshots: int | None = None  # prune older snapshots, keeping this many

    @property
    def checkpoint_dir(self) -> str:
        return self.checkpoint or os.path.join(self.output, "_checkpoint")


@dataclass
class BatchResult:
    batch: int
    inputs: dict[str, list[str]]
    rows: dict[str, int]
    duration_s: float
    snapshot_rows: int
    change_rows: int
    state_rows: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)

    def line(self) -> str:
        ins = "  ".join(f"{n} +{r}" for n, r in self.rows.items())
        states = " · ".join(f"{n} {r}" for n, r in self.state_rows.items())
        return (f"batch {batch_name(self.batch)}  {ins}  │ states {states} │ snapshot {self.snapshot_rows} rows, "
                f"{self.change_rows} changes │ {self.duration_s:.2f} s")


class Engine:
    """A compiled query bound to its inputs, output and checkpoint, on a Spark session."""

    def __init__(self, spark: SparkSession, config: QueryConfig,
                 progress: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.progress = progress or (lambda msg: None)
        self.spark = engine_session(spark, config.partitions or default_partitions(spark))
        self.specs = {s.name.lower(): s for s in config.sources + config.tables}
        self.catalog = Catalog([infer_schema(s, self.spark) for s in config.sources + config.tables])
        self.plan: IncrementalPlan = incrementalize(bind(config.sql, self.catalog))
        self._check_inputs()
        self.output_schema = self._spark_output_schema()
        self.output = OutputDir(config.output)
        self.checkpoint = Checkpoint(config.checkpoint_dir)
        self.checkpoint.claim(self._identity())
        self.store = StateStore(self.spark, self.plan.states)
        self.answer = AnswerSql(self.plan, self.output_schema, self.store)
        self.reader = BatchReader(self.spark, self.plan.streams, self.specs, self.catalog)
        self._tables: dict[str, DataFrame] = {}
        self._timings: dict[str, float] = {}
        self._batch_rows: dict[str, int] = {}  # the rows each source gave the batch being run
        self._unchanged: set[str] = set()  # the states and temps the batch being run leaves as they were
        self._temp_schemas: dict[str, StructType] = {}
        self._cores = max(1, self.spark.sparkContext.defaultParallelism)
        self._local = self.spark.sparkContext.master.startswith("local")  # driver and executor are one JVM
        self._levels = _levels(self.plan.delta)
        self._reread = _read_more_than_once(self.plan.delta)
        self._declare_states()
        self.recovery = self.checkpoint.recover(self.output, [s.name for s in self.plan.streams])
        self._restore_states()
        self.next_batch = self.recovery.last_committed + 1
        self.consumed = self.recovery.consumed

    # -- set-up ----------------------------------------------------------------------------------
    def _check_inputs(self) -> None:
        for s in self.plan.sources:
            spec = self.specs[s.name.lower()]
            if s.static != spec.static:
                raise StreamfoldError(f"{s.name} must be given with {'--table' if s.static else '--source'}",
                                      code="INPUT_KIND", params={"input": s.name})
            if not s.static:
                list_inputs(spec.path)  # SOURCE_NOT_FOUND now rather than at the first poll
        used = {s.name.lower() for s in self.plan.sources}
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

    def _spark_output_schema(self) -> StructType:
        """The names and types Spark gives the batch query: the snapshot's columns."""
        for s in self.catalog.values():
            empty_frame(self.spark, spark_struct(list(s.columns))).createOrReplaceTempView(s.name)
        try:
            schema = self.spark.sql(spark_schema_sql(self.plan.sql)).schema
        except Exception as e:  # noqa: BLE001 - Spark's analysis error, shown to the user
            raise UnsupportedError(f"Spark cannot run this query: {first_line(e)}", code="SPARK_REJECTED",
                                   sql=self.plan.sql, params={"error": first_line(e)},
                                   hint="streamfold answers what the Spark batch query answers; fix it for Spark") from None
        if len(schema.fields) != len(self.plan.answer.output):
            raise StreamfoldError(
                f"internal: Spark sees {len(schema.fields)} output columns, the plan {len(self.plan.answer.output)}",
                code="INTERNAL")
        return schema

    def _declare_states(self) -> None:
        """Fix every state's schema by analysing its program over empty inputs; load static ones."""
        views = Views(self.spark, "setup")
        try:
            frames = {s.name: self.reader.empty_frame(s) for s in self.plan.streams}
            for step in self.plan.init:
                df = self.spark.sql(to_sql(step.program, self._resolver(frames, {}, {}), views))
                self.store.set_static(step.state, materialize(df))
            deltas: dict[str, DataFrame | str] = {}
            merged: dict[str, DataFrame] = {}
            loops: dict[str, DataFrame] = {}

            def declare(step: Step) -> None:
                resolve = self._resolver(frames, deltas, {}, merged, first=True, views=views, loops=loops)
                program = step.program
                loop = step.fixpoint or step.diffusion or step.repeat
                if loop is not None:  # its delta: the rows, counted ±1
                    rows = (loop.base if isinstance(loop, Fixpoint) else loop.start if isinstance(loop, Repeat)
                            else Project(step.program, tuple((f.name, f.ref()) for f in loop.fields)))
                    program = Project(rows, tuple((f.name, f.ref()) for f in loop.fields)
                                      + ((WEIGHT_COLUMN, Literal(1, BIGINT)),))
                if step.diffusion is not None:  # its body reads the loop's change as a stream
                    dx = step.diffusion
                    loops[dx.loop] = empty_frame(self.spark, spark_struct(
                        [(c, f.type.sql()) for c, f in zip(dx.columns, dx.fields)] + [(WEIGHT, "BIGINT")]))
                    for sub in dx.steps:
                        declare(sub)
                df = self.spark.sql(to_sql(program, resolve, views))
                if step.temp:
                    deltas[step.state] = df
                    self._temp_schemas[step.state] = df.schema
                else:
                    self.store.declare(step.state, df.schema)
                    deltas[step.state] = self.store.empty(step.state)
                    merged[step.state] = self.store.merged_shape(step.state, views)

            for step in self.plan.delta:
                declare(step)
        finally:
            views.drop()

    def _restore_states(self) -> None:
        rec = self.recovery
        if rec.last_committed < 0:
            return
        self.progress(f"resuming after batch {batch_name(rec.last_committed)}: loading state")
        logs = [(rec.base, self.checkpoint.base_dir(rec.base))] if rec.base is not None else []
        logs += [(b, self.checkpoint.delta_dir(b)) for b in rec.deltas]
        views = Views(self.spark, "restore")
        try:
            self.store.restore([(b, p) for b, p in logs if os.path.isdir(p)], views)
        finally:
            views.drop()

    # -- leaves ----------------------------------------------------------------------------------
    def _table(self, name: str) -> DataFrame:
        if name not in self._tables:
            spec = self.specs[name.lower()]
            self._tables[name] = read_files(self.spark, spec, self.catalog[name], table_paths(spec.path))
        return self._tables[name]

    def _resolver(self, frames: dict[str, DataFrame], deltas: dict[str, DataFrame | str],
                  new: dict[str, DataFrame | str], merged: dict[str, DataFrame] | None = None,
                  first: bool = False, views: Views | None = None,
                  loops: dict[str, DataFrame] | None = None) -> Resolve:
        """Where a program's leaves come from: this batch's rows, tables, and state versions
        (and, inside a diffusion loop, the round's change of the iteration)."""
        current = self.store.current

        def resolve(rel: Rel) -> DataFrame | str:
            if isinstance(rel, DeltaScan):
                if loops is not None and rel.table in loops:
                    return loops[rel.table]
                return frames[self.catalog[rel.table].name]
            if isinstance(rel, Scan):
                return self._table(self.catalog[rel.table].name)
            if isinstance(rel, StateScan):
                if rel.version == "delta":
                    return deltas[rel.state]
                if rel.version == "merged":
                    assert merged is not None
                    return merged[rel.state]
                if rel.version == "new" and rel.state in new:
                    return new[rel.state]
                return current[rel.state]  # old, or a static state (one version)
            if isinstance(rel, Once):
                assert views is not None
                inner = to_sql(rel.input, resolve, views)
                cols = ", ".join(quote(f.name) for f in rel.input.schema)
                keep = "" if first != rel.later else " WHERE false"
                return f"SELECT {cols}, 1L AS {WEIGHT} FROM (\n{inner}\n) _once{keep}"
            raise TypeError(f"no input for {type(rel).__name__}")

        return resolve

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Time a part of the batch (reported in BatchResult.timings and by ``bench``)."""
        t = time.monotonic()
        try:
            yield
        finally:
            self._timings[name] = self._timings.get(name, 0.0) + time.monotonic() - t

    # -- polling ---------------------------------------------------------------------------------
    def poll(self) -> dict[str, list[str]] | None:
        """The files that appeared since the last batch, per source; None if there are none."""
        if self.recovery.pending is not None:
            pending, self.recovery.pending = self.recovery.pending, None
            return pending
        found: dict[str, list[str]] = {}
        for s in self.plan.streams:
            seen = self.consumed.setdefault(s.name, set())
            found[s.name] = [n for n in list_inputs(self.specs[s.name.lower()].path) if n not in seen]
        return found if any(found.values()) else None

    # -- one batch -------------------------------------------------------------------------------
    def run_batch(self, inputs: dict[str, list[str]]) -> BatchResult | None:
        """Apply one batch; returns None if every file of it was quarantined."""
        batch = self.next_batch
        while True:
            self.checkpoint.write_offsets(batch, inputs)
            try:
                result = self._run(batch, inputs)
                break
            except BadInputError as e:
                if self.config.on_bad_file != "quarantine":
                    raise
                inputs = self.reader.quarantine(e, inputs, self.output.root, self.progress)
                if not any(inputs.values()):
                    files.remove(self.checkpoint.offsets_path(batch))
                    return None
        for name, names in inputs.items():
            self.consumed.setdefault(name, set()).update(names)
        self.next_batch = batch + 1
        return result

    def _run(self, batch: int, inputs: dict[str, list[str]]) -> BatchResult:
        start = time.monotonic()
        self._timings = {}
        views = Views(self.spark, f"b{batch}")
        with self._phase("read"):
            frames, rows, cached = self.reader.read(inputs, cache=self._reread)
        self._batch_rows = rows
        self._unchanged = set()
        merged: dict[str, DataFrame] = {}
        new: dict[str, DataFrame | str] = {}
        deltas: dict[str, DataFrame | str] = {}
        temps: list[DataFrame] = []
        committed = False
        # A small batch over small states runs as one Spark job: merges are checkpointed lazily
        # and computed by the job that writes the outputs. Otherwise (batch 0's history, large
        # states) each merge is its own job and large outputs are written by Spark.
        held = sum(r or 0 for r in self.store.rows.values())  # the states' rows before the batch
        known = held + 4 * sum(rows.values())
        eager = batch == 0 or any(r is None for r in self.store.rows.values()) or known > SMALL_ROWS
        try:
            for level in self._levels:
                with self._phase("h ⊗ " + " ".join(s.state for s in level)):
                    ctx = _Context(frames, deltas, new, merged, batch == 0)
                    done = _parallel([lambda s=s: self._step(batch, s, ctx, views, eager) for s in level])
                for step, df in (pair for results in done for pair in results):
                    if step is None:  # held until the batch ends
                        temps.append(df)
                    elif step.temp:
                        deltas[step.state] = df
                        temps.append(df)
                    else:
                        merged[step.state] = df
                        new[step.state] = self.store.new_view(step.state, df, views)
                        deltas[step.state] = self.store.delta_view(step.state, df, views)
            self.progress(f"batch {batch_name(batch)}: answer")
            with self._phase("write"):
                snap_rows, change_rows = self._write_outputs(batch, merged, new, views, eager,
                                                              held + sum(rows.values()))
            self.store.count_rows()
            duration = time.monotonic() - start
            self.output.commit(batch, {
                "batch": batch, "inputs": inputs, "duration_s": round(duration, 4), "rows": rows,
                "snapshot_rows": snap_rows, "change_rows": change_rows,
                "state_rows": {n: r for n, r in self._state_rows().items()},
                "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            })
            committed = True
            # The next batch reads each state through a view of its merge (analysed now, before
            # the batch's temp views are dropped), planned with its true size.
            current = {n: (self.store.next_version(n, merged[n], views), merged[n])
                       for n in merged if n not in self._unchanged}
        finally:
            views.drop()
            for df in temps:
                release(df)
            for df in cached:
                df.unpersist()
            if not committed:
                for df in merged.values():
                    release(df)
        self.store.replace(current)
        with self._phase("compact"):
            self._after_commit(batch)
        return BatchResult(batch, inputs, rows, time.monotonic() - start, snap_rows, change_rows,
                           self._state_rows(), dict(self._timings))

    def _step(self, batch: int, step: Step, ctx: _Context, views: Views,
              eager: bool) -> list[tuple[Step | None, DataFrame]]:
        """Run one step of h: a temp result, or a state's delta merged into it (⊗). A diffusion
        step gives the results of its body's steps too, and DataFrames to hold (step None)."""
        self.progress(f"batch {batch_name(batch)}: Δ{step.state}")
        resolve = ctx.resolver(self, views)
        if self._reads_nothing_new(batch, step):
            self._unchanged.add(step.state)
            if step.temp:
                return [(step, empty_frame(self.spark, self._temp_schemas[step.state]))]
            return [(step, self.store.unchanged(step.state, views))]
        try:
            loop = step.fixpoint or step.repeat
            if loop is not None:  # a loop finds the delta
                delta = (self._fixpoint(batch, step, loop, resolve, views) if isinstance(loop, Fixpoint)
                         else self._repeat(batch, step, loop, resolve, views))
                try:
                    return [(step, self.store.merge(step.state, f"SELECT * FROM {views.name(delta, 'loop')}",
                                                    views, True))]
                finally:
                    release(delta)
            if step.diffusion is not None:
                return self._diffusion(batch, step, step.diffusion, ctx, views, eager)
            sql = to_sql(step.program, resolve, views)
            if step.temp:
                return [(step, materialize(self.spark.sql(sql), eager))]
            return [(step, self.store.merge(step.state, sql, views, eager))]
        except StreamfoldError:
            raise
        except Exception as e:  # noqa: BLE001 - Spark failures are chained into a BatchError
            raise batch_failure(batch, f"Δ{step.state}", f"computing Δ{step.state}", e, self._local) from e

    def _reads_nothing_new(self, batch: int, step: Step) -> bool:
        """Whether nothing ``step`` reads changed this batch, so that its delta is empty: no stream
        it reads as a delta brought rows, and every state it reads at this batch's versions (delta,
        merged, new) was left unchanged. A delta program is a homomorphism of the changes it reads,
        so over none it gives nothing (or rows that merge as the identity): the state stays as it
        is, without a job — a source whose only file came in batch 0, a dimension table given as a
        source, costs no merge per batch. Loops decide for themselves; batch 0 reads ``Once``.
        """
        if batch == 0 or step.fixpoint or step.repeat or step.diffusion:
            return False
        for node in step.program.walk():
            if isinstance(node, DeltaScan) and self._batch_rows.get(self.catalog[node.table].name, 1):
                return False
            if isinstance(node, StateScan) and node.version != "old" and node.state not in self._unchanged:
                state = self.store.defs.get(node.state)  # None for a temp
                if state is None or not state.static:
                    return False
            if isinstance(node, (Once, LoopRef)):
                return False
        return True

    def _fixpoint(self, batch: int, step: Step, fx: Fixpoint, resolve: Resolve, views: Views) -> DataFrame:
        """A recursive CTE's change this batch, by semi-naive rounds (see :class:`Fixpoint`)."""
        cols = ", ".join(quote(f.name) for f in fx.fields)
        state = step.state

        def run(rel: Rel, loop: DataFrame | None) -> DataFrame:
            def leaf(node: Rel) -> DataFrame | str:
                if isinstance(node, LoopRef):
                    assert loop is not None
                    return loop
                return resolve(node)
            return self.spark.sql(f"SELECT DISTINCT {cols} FROM (\n{to_sql(rel, leaf, views)}\n) _r")

        def keep(df: DataFrame) -> DataFrame:
            kept = materialize(df, True)
            held.append(kept)
            return kept

        held: list[DataFrame] = []
        old = self.spark.sql(f"SELECT {cols} FROM {views.relation(self.store.current[state], 'old_' + state)} _o")
        incremental = fx.incremental and batch > 0
        try:
            if incremental:
                seed = run(Union(fx.seeds), old)
                frontier = keep(seed.subtract(old))
                total = keep(old.unionAll(frontier))
            else:
                frontier = keep(run(fx.base, None))
                total = frontier
            found = [frontier]
            rounds = 0
            while not frontier.isEmpty():
                rounds += 1
                if rounds > FIXPOINT_MAX_ROUNDS:
                    raise BatchError(f"batch {batch}: the recursive CTE {fx.loop.split('#')[0]} found new rows in "
                                     f"each of {FIXPOINT_MAX_ROUNDS} rounds; its step may generate values without end",
                                     code="NO_FIXPOINT", params={"batch": batch, "rounds": FIXPOINT_MAX_ROUNDS},
                                     hint="bound the step with a WHERE (e.g. WHERE n < 100), or write WITH "
                                          "ITERATIVE … TIMES n for a fixed number of steps")
                self.progress(f"batch {batch_name(batch)}: {state} round {rounds}")
                frontier = keep(run(fx.step, frontier).subtract(total))
                total = keep(total.unionAll(frontier))
                found.append(frontier)
            if incremental:
                delta = found[0]
                for f in found[1:]:
                    delta = delta.unionAll(f)
                out = self.spark.sql(f"SELECT {cols}, 1L AS {WEIGHT_COLUMN} FROM {views.name(delta, 'fix_new')} _d")
            else:
                added = total.subtract(old).selectExpr("*", f"1L AS {WEIGHT_COLUMN}")
                removed = old.subtract(total).selectExpr("*", f"-1L AS {WEIGHT_COLUMN}")
                out = added.unionAll(removed)
            return materialize(out, True)
        finally:
            for df in held:
                release(df)

    def _repeat(self, batch: int, step: Step, rp: Repeat, resolve: Resolve, views: Views) -> DataFrame:
        """An exact iteration's change this batch (see :class:`Repeat`): its steps from the start
        over the inputs' states after the merge — a few steps per statement, each statement over
        the last one's checkpoint — and the last value minus the one kept."""
        cols = ", ".join(quote(f.name) for f in rp.fields)
        old = views.relation(self.store.current[step.state], "old_" + step.state)
        read = {s.lower() for s in rp.streams}
        if batch > 0 and not any(n for s, n in self._batch_rows.items() if s.lower() in read):
            return self.store.empty(step.state)  # nothing it reads changed: neither does its value

        # What the steps read, expanded from its bag state and checkpointed once for all of them
        # (side by side): with its true size Spark broadcasts it when small, instead of shuffling
        # it every step. In the steps, each is a leaf of the loop's own.
        def input_name(node: Rel) -> str | None:
            if isinstance(node, Expand) and isinstance(node.input, StateScan):
                return f"{rp.loop}/{node.input.state}"
            return None

        reads = {leaf: n for n in rp.step.walk() if (leaf := input_name(n)) is not None}
        inputs: dict[str, DataFrame] = {}

        def checkpointed(node: Rel) -> Rel | None:
            name = input_name(node)
            return None if name is None else LoopRef(name, node.schema)

        def keep(leaf: str) -> DataFrame:
            return materialize(self.spark.sql(to_sql(reads[leaf], resolve, views)), True)

        def sql(rel: Rel, value: DataFrame | str | None) -> str:
            def leaf(node: Rel) -> DataFrame | str:
                if isinstance(node, LoopRef) and node.name in inputs:
                    return inputs[node.name]
                if isinstance(node, LoopRef):
                    assert value is not None
                    return value
                return resolve(node)
            return to_sql(rel, leaf, views)

        name = rp.loop.split("#")[0]
        # A step that reads the loop once nests: up to NESTED_STEPS (plan.model) steps are one
        # statement whose text grows by one step each, and Spark reuses the shuffle of what every
        # step reads alike (10 PageRank steps over 50K edges: 2.1 s as one statement, 3.5 s as
        # ten). A step reading the loop twice would double the text per step: each of its steps
        # is a statement.
        chunk = rp.nested
        value: DataFrame | None = None
        try:
            inputs.update(zip(reads, _parallel([partial(keep, n) for n in reads])))
            step_rel = rp.step.transform(checkpointed)  # the start reads its inputs once: as they are
            value = materialize(self.spark.sql(sql(rp.start, None)), True)
            done = 0
            while done < rp.times:
                count = min(chunk, rp.times - done)
                self.progress(f"batch {batch_name(batch)}: {name} steps {done + 1}–{done + count} of {rp.times}"
                              if count > 1 else f"batch {batch_name(batch)}: {name} step {done + 1}/{rp.times}")
                text: DataFrame | str = value
                for _ in range(count):
                    text = sql(step_rel, text)
                previous, value = value, materialize(self.spark.sql(_text(text)), True)
                release(previous)
                done += count
            change = (f"SELECT {cols}, sum(_c) AS {quote(WEIGHT_COLUMN)} FROM (\n"
                      f"SELECT {cols}, 1L AS _c FROM {views.name(value, 'value')}\nUNION ALL\n"
                      f"SELECT {cols}, -{quote(WEIGHT_COLUMN)} AS _c FROM {old} _o\n) _v "
                      f"GROUP BY {cols} HAVING sum(_c) <> 0")
            return materialize(self.spark.sql(change), True)
        finally:
            release(value)
            for df in inputs.values():
                release(df)

    def _body(self, dx: Diffusion, ctx: _Context, loop: DataFrame, views: Views,
              commit: bool) -> tuple[list[tuple[Step, DataFrame]], Resolve]:
        """One pass of a diffusion loop's body with ``loop`` as the iteration's change: each
        state's merge (computed by the first job that reads it unless ``commit``), and a
        resolver over the results for the step's output."""
        inner = _Context(ctx.frames, dict(ctx.deltas), dict(ctx.new), dict(ctx.merged), ctx.first,
                         {**ctx.loops, dx.loop: loop})
        out: list[tuple[Step, DataFrame]] = []
        for sub in dx.steps:
            sql = to_sql(sub.program, inner.resolver(self, views), views)
            if sub.temp:
                df = materialize(self.spark.sql(sql), commit)
                inner.deltas[sub.state] = df
            else:
                df = self.store.merge(sub.state, sql, views, commit)
                inner.merged[sub.state] = df
                inner.new[sub.state] = self.store.new_view(sub.state, df, views)
                inner.deltas[sub.state] = self.store.delta_view(sub.state, df, views)
            out.append((sub, df))
        return out, inner.resolver(self, views)

    def _diffusion(self, batch: int, step: Step, dx: Diffusion, ctx: _Context, views: Views,
                   eager: bool) -> list[tuple[Step | None, DataFrame]]:
        """An iteration in diffusion mode (seed 000 Algorithm 1; see :class:`Diffusion`)."""
        state, loop = step.state, dx.loop.split("#")[0]
        fields = [quote(f.name) for f in dx.fields]
        cols = [quote(c) for c in dx.columns]
        key = [quote(k) for k in dx.key]
        old = views.relation(self.store.current[state], "old_" + state)
        check = (f"CASE WHEN __w = 1 AND count(*) OVER (PARTITION BY {', '.join(key)}) = 1 THEN 1L "
                 f"ELSE raise_error('DIFFUSION_KEY: two rows of {loop} have the same KEY') END")

        def consolidated(rows: str) -> str:  # a change's rows, each with its net count
            return (f"SELECT {', '.join(fields)}, sum({quote(WEIGHT)}) AS __w FROM (\n{rows}\n) _d "
                    f"GROUP BY {', '.join(fields)} HAVING sum({quote(WEIGHT)}) <> 0")

        def change(rows: str) -> str:  # ΔX: the new rows of the keys ΔY touches, replacing their old rows
            on = " AND ".join(f"_o.{k} <=> _k.{k}" for k in key)
            return (f"WITH _c AS ({consolidated(rows)})\n"
                    f"SELECT {', '.join(f'{f} AS {c}' for f, c in zip(fields, cols))}, {check} AS {quote(WEIGHT)} "
                    f"FROM _c WHERE __w > 0\nUNION ALL\n"
                    f"SELECT {', '.join(f'_o.{f} AS {c}' for f, c in zip(fields, cols))}, -1L AS {quote(WEIGHT)} "
                    f"FROM {old} _o LEFT SEMI JOIN (SELECT DISTINCT {', '.join(key)} FROM _c) _k ON {on}")

        def start(rows: str) -> str:  # ΔX₀: the start's rows for keys the iteration does not have
            on = " AND ".join(f"_o.{k} <=> _n.{k}" for k in key)
            return (f"SELECT {', '.join(f'_n.{f} AS {c}' for f, c in zip(fields, cols))}, "
                    f"{check} AS {quote(WEIGHT)} "
                    f"FROM ({consolidated(rows)}) _n LEFT ANTI JOIN {old} _o ON {on} WHERE _n.__w > 0")

        held: list[DataFrame] = []

        def run(sql: str) -> DataFrame:
            try:
                df = materialize(self.spark.sql(sql), True)
            except Exception as e:  # noqa: BLE001 - a broken KEY is the user's; anything else is chained
                if "DIFFUSION_KEY" in str(e):
                    raise BatchError(f"batch {batch}: two rows of the iteration {loop} have the same KEY "
                                     f"({', '.join(dx.key_names)})", code="DIFFUSION_KEY",
                                     params={"batch": batch, "loop": loop},
                                     hint="MODE DIFFUSION needs a KEY that names one row of each step's result; "
                                          "add the missing columns to KEY (…), or use MODE EXACT") from None
                raise
            held.append(df)
            return df

        delta = run(start(to_sql(dx.start, ctx.resolver(self, views), views)))
        for i in range(1, dx.times + 1):
            self.progress(f"batch {batch_name(batch)}: {loop} diffusion round {i}/{dx.times}")
            body, resolve = self._body(dx, ctx, delta, views, commit=False)
            delta = run(change(to_sql(dx.output, resolve, views)))
            for _, df in body:
                release(df)
        body, _ = self._body(dx, ctx, delta, views, commit=eager)
        out: list[tuple[Step | None, DataFrame]] = [(None, df) for df in held]
        out += body
        merged = self.store.merge(state, f"SELECT {', '.join(f'{c} AS {f}' for c, f in zip(cols, fields))}, "
                                         f"{quote(WEIGHT)} AS {quote(WEIGHT_COLUMN)} FROM {views.name(delta, 'dx')}",
                                  views, True)
        return out + [(step, merged)]

    def _write_outputs(self, batch: int, merged: dict[str, DataFrame], new: dict[str, DataFrame | str],
                       views: Views, eager: bool, lazy_reads: int) -> tuple[int, int]:
        """The changelog, snapshot and changes of the batch, written side by side.

        ``lazy_reads`` bounds what the job reads when the merges are lazy (the states before the
        batch and its rows); eager merges are read from their checkpoints."""
        states: dict[str, DataFrame | str] = {**self.store.current, **new}
        durable = self.store.durable()
        try:
            snapshot = self.answer.snapshot(states, views)
            changes = self.answer.changes(batch == 0, merged, states, dict(self.store.current), views)
            logs = {n: self.store.log_view(n, merged[n], views) for n in durable}
            log = self.store.pack_sql(logs, views) if durable else None
            outputs = [(snapshot, self.output.snapshot_path(batch)), (changes, self.output.changes_path(batch))]
            if log is not None:
                outputs.append((log, self.checkpoint.delta_dir(batch)))
            # The merges' row counts bound every output: the snapshot by the answer's states, the
            # changes and changelog by the keys touched. Small ones are collected and written here.
            if eager:
                self.store.count_rows()
            bound = self._rows_bound(merged)
            if not eager or bound <= SMALL_ROWS:
                schemas = [self.answer.columns(), self.answer.columns(weight=True)]
                if log is not None:
                    schemas.append(self.store.pack_columns())
                reads = bound if eager else lazy_reads
                tasks = 1 if reads <= ONE_TASK_ROWS else None if self.plan.answer.order else self._cores
                written = emit_together(self.spark, [(sql, target, cols)
                                                     for (sql, target), cols in zip(outputs, schemas)], tasks)
            else:
                ordered = bool(self.plan.answer.order)
                written = [emit(self.spark.sql(outputs[0][0]), outputs[0][1], False, ordered=ordered)]
                written += _parallel([lambda sql=sql, target=target: emit(self.spark.sql(sql), target, False)
                                      for sql, target in outputs[1:]])
        except Exception as e:  # noqa: BLE001
            raise batch_failure(batch, "write", "writing its answer", e, self._local) from e
        return written[0], written[1]

    def _rows_bound(self, names: Iterable[str]) -> int:
        """The rows of these states, a count not yet known taken as more than SMALL_ROWS."""
        return sum(r if r is not None else SMALL_ROWS + 1 for r in (self.store.rows.get(n) for n in names))

    def _state_rows(self) -> dict[str, int]:
        return {n: r for n, r in self.store.rows.items() if r is not None and not self.store.defs[n].static}

    def _after_commit(self, batch: int) -> None:
        every = self.config.compact_every
        if every and (batch + 1) % every == 0 and self.store.durable():
            views = Views(self.spark, "compact")
            try:
                # Small states are collected and written by the driver (as a batch's outputs are):
                # 0.88 s → 0.1 s for a 10,000-key groupBy state.
                small = self._rows_bound(self.store.durable()) <= SMALL_ROWS
                emit(self.spark.sql(self.store.pack_sql(self.store.current, views)),
                     self.checkpoint.base_dir(batch), small)
            finally:
                views.drop()
            self.checkpoint.prune(batch)
        keep = self.config.keep_snapshots
        if keep:
            for b in range(0, batch - keep + 1):
                files.remove(self.output.snapshot_path(b))

    def close(self) -> None:
        self.store.close()
        self._tables.clear()


@dataclass
class _Context:
    """What a batch's programs read: the batch's rows, and the state versions stepped so far."""

    frames: dict[str, DataFrame]
    deltas: dict[str, DataFrame | str]
    new: dict[str, DataFrame | str]
    merged: dict[str, DataFrame]
    first: bool
    loops: dict[str, DataFrame] = field(default_factory=dict)

    def resolver(self, engine: Engine, views: Views) -> Resolve:
        return engine._resolver(self.frames, self.deltas, self.new, self.merged, first=self.first, views=views,
                                loops=self.loops)


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
        if step.diffusion is not None:
            return True  # a diffusion loop reads the batch's rows in every round
        for n in step.program.walk():
            if isinstance(n, DeltaScan):
                if n.table.lower() in seen:
                    return True
                seen.add(n.table.lower())
    return False


def _parallel(jobs: list[Callable[[], Any]]) -> list[Any]:
    """Run independent Spark jobs side by side (Spark schedules concurrent jobs); results in order."""
    if len(jobs) <= 1:
        return [job() for job in jobs]
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [pool.submit(job) for job in jobs]
        return [f.result() for f in futures]


def _text(value: DataFrame | str) -> str:
    assert isinstance(value, str)
    return value


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)
