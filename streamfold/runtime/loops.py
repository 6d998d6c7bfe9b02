"""The loop interpreters: steps of h whose delta a loop finds, not one statement.

The plan describes three loops (:mod:`streamfold.plan.model`), and each has an interpreter here
behind one interface, :class:`LoopInterpreter`: given the step and what the batch has read so
far, it returns the step's state merged with its delta (and any results it must hold until the
batch ends). The engine's batch loop knows none of them; it looks the interpreter up by the
step's class in :data:`INTERPRETERS`.

* :class:`FixpointLoop` — ``WITH RECURSIVE``: semi-naive rounds until no row is new;
* :class:`ExactIterationLoop` — ``WITH ITERATIVE`` in mode ``EXACT``: the n steps from the start over the
  loop's input states, up to ten nested in one statement, then the new value minus the kept one;
* :class:`DiffusionLoop` — mode ``DIFFUSION`` (seed 000 Algorithm 1): the step's delta plan once
  per round against the states as the batch found them, merged once after the last round.

Every statement comes from :mod:`.lowering`; every intermediate result is checkpointed
(:func:`.state.materialize`) and released when the loop no longer needs it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from ..errors import BatchError
from ..ir.rel import WEIGHT, Expand, LoopRef, Project, Rel, StateScan, Union, written_name
from ..ir.expr import Literal
from ..ir.types import BIGINT
from ..plan.model import FIXPOINT_MAX_ROUNDS, Diffusion, ExactIteration, Fixpoint, Step, Temp
from . import lowering
from .batch import BatchReads, parallel
from .state import StateStore, materialize, release
from .views import Resolve, Views, to_sql

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# What a step yields: its state's merge (Step) or a temp's result, or a DataFrame to hold (None).
Results = list[tuple[Step | None, "DataFrame"]]


@dataclass
class LoopEnv:
    """What every interpreter works with: the session, the states, and ``point(batch, what)`` at
    each round — reported on the progress line, and a point where a pause may take effect."""

    spark: SparkSession
    store: StateStore
    point: Callable[[int, str], None]


class LoopInterpreter(ABC):
    """Runs one kind of loop step in a batch."""

    def __init__(self, env: LoopEnv) -> None:
        self.env = env
        self.spark = env.spark
        self.store = env.store

    @abstractmethod
    def run(self, batch: int, step: Step, reads: BatchReads, views: Views, eager: bool) -> Results:
        """The step's state merged with its delta (the last pair); before it, the results of the
        steps the loop ran itself and DataFrames held until the batch ends (step None)."""


class _DeltaLoop(LoopInterpreter):
    """A loop that finds its state's delta, then merges it like any step's."""

    def run(self, batch: int, step: Step, reads: BatchReads, views: Views, eager: bool) -> Results:
        delta = self.delta(batch, step, reads.resolver(views), reads, views)
        try:
            return [(step, self.store.merge(step.state, lowering.select_all(views.name(delta, "loop")), views, True))]
        finally:
            release(delta)

    @abstractmethod
    def delta(self, batch: int, step: Step, resolve: Resolve, reads: BatchReads, views: Views) -> DataFrame:
        """The loop's change to its state this batch (rows with ``_weight``)."""


class FixpointLoop(_DeltaLoop):
    """A recursive CTE's change this batch, by semi-naive rounds (see :class:`Fixpoint`)."""

    def delta(self, batch: int, step: Step, resolve: Resolve, reads: BatchReads, views: Views) -> DataFrame:
        assert isinstance(step, Fixpoint)
        fx = step
        cols = [f.name for f in fx.fields]

        def run(rel: Rel, loop: DataFrame | None) -> DataFrame:
            def leaf(node: Rel) -> DataFrame | str:
                if isinstance(node, LoopRef):
                    assert loop is not None
                    return loop
                return resolve(node)
            return self.spark.sql(lowering.fixpoint_rows(cols, to_sql(rel, leaf, views)))

        def keep(df: DataFrame) -> DataFrame:
            kept = materialize(df, True)
            held.append(kept)
            return kept

        held: list[DataFrame] = []
        old = self.spark.sql(lowering.fixpoint_old(cols, views.relation(self.store.current[fx.state],
                                                                        "old_" + fx.state)))
        incremental = fx.incremental and not reads.first
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
                    raise BatchError(f"batch {batch}: the recursive CTE {written_name(fx.loop)} found new rows in "
                                     f"each of {FIXPOINT_MAX_ROUNDS} rounds; its step may generate values without end",
                                     code="NO_FIXPOINT", params={"batch": batch, "rounds": FIXPOINT_MAX_ROUNDS},
                                     hint="bound the step with a WHERE (e.g. WHERE n < 100), or write WITH "
                                          "ITERATIVE … TIMES n for a fixed number of steps")
                self.env.point(batch, f"{fx.state} round {rounds}")
                frontier = keep(run(fx.step, frontier).subtract(total))
                total = keep(total.unionAll(frontier))
                found.append(frontier)
            if incremental:
                delta = found[0]
                for f in found[1:]:
                    delta = delta.unionAll(f)
                out = self.spark.sql(lowering.fixpoint_found(cols, views.name(delta, "fix_new")))
            else:
                added = total.subtract(old).selectExpr("*", lowering.weighted(1))
                removed = old.subtract(total).selectExpr("*", lowering.weighted(-1))
                out = added.unionAll(removed)
            return materialize(out, True)
        finally:
            for df in held:
                release(df)


class ExactIterationLoop(_DeltaLoop):
    """An exact iteration's change this batch (see :class:`ExactIteration`): its steps from the
    start over the inputs' states after the merge — a few steps per statement, each statement
    over the last one's checkpoint — and the last value minus the one kept."""

    def delta(self, batch: int, step: Step, resolve: Resolve, reads: BatchReads, views: Views) -> DataFrame:
        assert isinstance(step, ExactIteration)
        rp = step
        cols = [f.name for f in rp.fields]
        old = views.relation(self.store.current[rp.state], "old_" + rp.state)
        read = {s.lower() for s in rp.streams}
        if not reads.first and not any(n for s, n in reads.rows.items() if s.lower() in read):
            return self.store.empty(rp.state)  # nothing it reads changed: neither does its value

        # What the steps read, expanded from its bag state and checkpointed once for all of them
        # (side by side): with its true size Spark broadcasts it when small, instead of shuffling
        # it every step. In the steps, each is a leaf of the loop's own.
        def input_name(node: Rel) -> str | None:
            if isinstance(node, Expand) and isinstance(node.input, StateScan):
                return f"{rp.loop}/{node.input.state}"
            return None

        needed = {leaf: n for n in rp.step.walk() if (leaf := input_name(n)) is not None}
        inputs: dict[str, DataFrame] = {}

        def checkpointed(node: Rel) -> Rel | None:
            name = input_name(node)
            return None if name is None else LoopRef(name, node.schema)

        def keep(leaf: str) -> DataFrame:
            return materialize(self.spark.sql(to_sql(needed[leaf], resolve, views)), True)

        def sql(rel: Rel, value: DataFrame | str | None) -> str:
            def leaf(node: Rel) -> DataFrame | str:
                if isinstance(node, LoopRef) and node.name in inputs:
                    return inputs[node.name]
                if isinstance(node, LoopRef):
                    assert value is not None
                    return value
                return resolve(node)
            return to_sql(rel, leaf, views)

        name = written_name(rp.loop)
        # A step that reads the loop once nests: up to NESTED_STEPS (plan.model) steps are one
        # statement whose text grows by one step each, and Spark reuses the shuffle of what every
        # step reads alike (docs/journal.md, "Iterations"). A step reading the loop twice would double the
        # text per step: each of its steps is a statement.
        chunk = rp.nested
        value: DataFrame | None = None
        try:
            inputs.update(zip(needed, parallel(self.spark, [partial(keep, n) for n in needed])))
            step_rel = rp.step.transform(checkpointed)  # the start reads its inputs once: as they are
            value = materialize(self.spark.sql(sql(rp.start, None)), True)
            done = 0
            while done < rp.times:
                count = min(chunk, rp.times - done)
                self.env.point(batch, f"{name} steps {done + 1}–{done + count} of {rp.times}"
                               if count > 1 else f"{name} step {done + 1}/{rp.times}")
                text: DataFrame | str = value
                for _ in range(count):
                    text = sql(step_rel, text)
                assert isinstance(text, str)
                previous, value = value, materialize(self.spark.sql(text), True)
                release(previous)
                done += count
            return materialize(self.spark.sql(lowering.exact_change(cols, views.name(value, "value"), old)), True)
        finally:
            release(value)
            for df in inputs.values():
                release(df)


class DiffusionLoop(LoopInterpreter):
    """An iteration in diffusion mode (seed 000 Algorithm 1; see :class:`Diffusion`)."""

    def run(self, batch: int, step: Step, reads: BatchReads, views: Views, eager: bool) -> Results:
        assert isinstance(step, Diffusion)
        dx = step
        loop = written_name(dx.loop)
        text = lowering.DiffusionLowering(loop, tuple(f.name for f in dx.fields), dx.columns, dx.key,
                                          views.relation(self.store.current[dx.state], "old_" + dx.state))
        held: list[DataFrame] = []

        def run(sql: str) -> DataFrame:
            try:
                df = materialize(self.spark.sql(sql), True)
            except Exception as e:  # noqa: BLE001 - a broken KEY is the user's; anything else is chained
                if lowering.DIFFUSION_KEY in str(e):
                    raise BatchError(f"batch {batch}: two rows of the iteration {loop} have the same KEY "
                                     f"({', '.join(dx.key_names)})", code="DIFFUSION_KEY",
                                     params={"batch": batch, "loop": loop},
                                     hint="MODE DIFFUSION needs a KEY that names one row of each step's result; "
                                          "add the missing columns to KEY (…), or use MODE EXACT") from None
                raise
            held.append(df)
            return df

        delta = run(text.start(reads.sql(dx.start, views)))
        for i in range(1, dx.times + 1):
            self.env.point(batch, f"{loop} diffusion round {i}/{dx.times}")
            body, inner = self._body(dx, reads, delta, views, commit=False)
            delta = run(text.change(inner.sql(dx.output, views)))
            for _, df in body:
                release(df)
        body, _ = self._body(dx, reads, delta, views, commit=eager)
        out: Results = [(None, df) for df in held]
        out += body
        merged = self.store.merge(dx.state, text.merged(views.name(delta, "dx")), views, True)
        return out + [(step, merged)]

    def _body(self, dx: Diffusion, reads: BatchReads, change: DataFrame, views: Views,
              commit: bool) -> tuple[Results, BatchReads]:
        """One pass of the loop's body with ``change`` as the iteration's change: each state's
        merge (computed by the first job that reads it unless ``commit``), and what the step's
        output reads after it."""
        inner = reads.with_loop(dx.loop, change)
        out: Results = []
        for sub in dx.steps:
            sql = inner.sql(sub.program, views)
            if isinstance(sub, Temp):
                df = materialize(self.spark.sql(sql), commit)
                inner.deltas[sub.state] = df
            else:
                df = self.store.merge(sub.state, sql, views, commit)
                inner.merged[sub.state] = df
                inner.new[sub.state] = self.store.new_view(sub.state, df, views)
                inner.deltas[sub.state] = self.store.delta_view(sub.state, df, views)
            out.append((sub, df))
        return out, inner


INTERPRETERS: dict[type, type[LoopInterpreter]] = {
    Fixpoint: FixpointLoop, ExactIteration: ExactIterationLoop, Diffusion: DiffusionLoop,
}


def declared_rows(step: Fixpoint | ExactIteration | Diffusion) -> Rel:
    """A program with the columns of a loop step's delta (its rows, each counted 1), for fixing
    the state's schema before batch 0."""
    rows: Rel
    if isinstance(step, Fixpoint):
        rows = step.base
    elif isinstance(step, ExactIteration):
        rows = step.start
    else:
        rows = Project(step.program, tuple((f.name, f.ref()) for f in step.fields))
    return Project(rows, tuple((f.name, f.ref()) for f in step.fields) + ((WEIGHT, Literal(1, BIGINT)),))


def loop_change_columns(dx: Diffusion) -> list[tuple[str, str]]:
    """The columns (name, type) of a diffusion loop's change, as its body reads it as a stream."""
    return [(c, f.type.sql()) for c, f in zip(dx.columns, dx.fields)] + [(WEIGHT, "BIGINT")]
