"""h and ⊗ over a batch's rows: the steps of the plan's delta program, level by level.

Steps whose inputs are ready run side by side (Spark runs their jobs concurrently); a step is a
temp result, or a state's delta merged into it (``state.py``), or a loop handed to its
interpreter (``loops.py``). A step that reads nothing that changed this batch is skipped: its
state stays as it is, without a job (:func:`reads_nothing_new`). Used by a batch, by a rebuild of
the states from the history, and by the capture of prepared plans ahead of a batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import TYPE_CHECKING

from ..errors import StreamfoldError
from ..ir.rel import DeltaScan, LoopRef, Once, StateScan
from ..plan.model import LOOPS, StateRole, Step, Temp
from .batch import BatchReads, parallel
from .bundle import Bundle
from .checkpoint import batch_name
from .context import RunContext
from .failures import batch_failure
from .sources import empty_frame
from .state import materialize, release
from .views import Views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def apply_h(ctx: RunContext, b: Bundle, batch: int, reads: BatchReads, views: Views, eager: bool,
            temps: list[DataFrame], given: Mapping[str, DataFrame] | None = None, label: str = "",
            guarded: bool = True) -> None:
    """h and ⊗ over a batch's rows, level by level, into ``reads`` (each state's merge and its new
    and delta versions) and ``temps`` (what to release when the batch ends). A state in ``given``
    is not stepped: its merge's result is given (a state kept whole by a rebuild). Each step is a
    point of the controller's (``guarded``) unless the batch is only planned."""
    given = given or {}
    for level in b.levels:
        with ctx.clock.phase("h ⊗ " + " ".join(s.state for s in level)):
            todo = [s for s in level if s.state not in given]
            steps = [partial(_step, ctx, b, batch, s, reads, views, eager, guarded) for s in todo]
            done = parallel(ctx.spark, [partial(ctx.control.guard, batch, f"{label}Δ{s.state}", step)
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
                reads.new[step.state] = b.store.new_view(step.state, df, views)
                reads.deltas[step.state] = b.store.delta_view(step.state, df, views)
                tails = b.store.tail_versions(step.state, df, views)
                if tails is not None:
                    reads.null_free[step.state] = tails
                if step.state not in reads.unchanged:
                    _settle_merge(ctx, b, step.state, df, reads, views, eager, temps)


def _settle_merge(ctx: RunContext, b: Bundle, name: str, merged: DataFrame, reads: BatchReads, views: Views,
                  eager: bool, temps: list[DataFrame]) -> None:
    """For a state kept as a base and a tail, its merge as programs read it — the touched keys,
    added up over both runs (:meth:`.state.StateStore.merged_view`) — computed once per batch
    and kept like a temp result: a per-key change reads it twice (the rows that enter, those
    that leave), and each read would look the base up again. Not computed when nothing reads it."""
    if name not in b.merged_read:
        return
    settled = b.store.merged_view(name, merged, views)
    if settled is None:
        return
    frame = ctx.spark.sql(settled)
    frame = frame.coalesce(1) if reads.single else frame
    kept = materialize(frame, eager) if b.store.keep is None else b.store.keep(f"{name}#merged", frame)
    reads.merged_views[name] = kept
    temps.append(kept)


def _step(ctx: RunContext, b: Bundle, batch: int, step: Step, reads: BatchReads, views: Views,
          eager: bool, shown: bool = True) -> list[tuple[Step | None, DataFrame]]:
    """Run one step of h: a temp result, or a state's delta merged into it (⊗); a loop step
    by its interpreter, which may give the results of its body's steps too, and DataFrames
    to hold (step None). ``shown``: reported as the batch's progress (not when only planned)."""
    if shown:
        ctx.progress(f"batch {batch_name(batch)}: Δ{step.state}")
    if reads_nothing_new(b, batch, step, reads):
        reads.unchanged.add(step.state)
        if isinstance(step, Temp):
            return [(step, empty_frame(ctx.spark, b.temp_schemas[step.state]))]
        return [(step, b.store.unchanged(step.state, views))]
    try:
        if isinstance(step, LOOPS):
            return b.loops[type(step)].run(batch, step, reads, views, eager)
        sql = reads.sql(step.program, views)
        if isinstance(step, Temp):
            temp = ctx.spark.sql(sql)
            temp = temp.coalesce(1) if reads.single else temp
            return [(step, materialize(temp, eager) if b.store.keep is None else b.store.keep(step.state, temp))]
        return [(step, b.store.merge(step.state, sql, views, eager, reads.single))]
    except StreamfoldError:
        raise
    except Exception as e:  # noqa: BLE001 - Spark failures are chained into a BatchError
        raise batch_failure(batch, f"Δ{step.state}", f"computing Δ{step.state}", e, ctx.local, ctx.config.settings) from e


def reads_nothing_new(b: Bundle, batch: int, step: Step, reads: BatchReads) -> bool:
    """Whether nothing ``step`` reads changed this batch, so that its delta is empty: no stream
    it reads as a delta brought rows, and every state it reads at this batch's versions (delta,
    merged, new) was left unchanged. A delta program is a homomorphism of the changes it reads,
    so over none it gives nothing (or rows that merge as the identity): the state stays as it
    is, without a job — a source whose only file came in batch 0, a dimension table given as a
    source, costs no merge per batch. Loops decide for themselves; batch 0 reads ``Once``; a
    capture of prepared plans merges every step. A time bound's live rows read the batch time,
    which moves without any new row: their step always runs (the rows the clock passed leave).
    """
    if batch == 0 or isinstance(step, LOOPS) or reads.merge_all:
        return False
    live = b.store.defs.get(step.state)
    if live is not None and live.role == StateRole.LIVE:
        return False
    for node in step.program.walk():
        if isinstance(node, DeltaScan) and reads.rows.get(b.catalog[node.table].name, 1):
            return False
        if isinstance(node, StateScan) and node.version != "old" and node.state not in reads.unchanged:
            state = b.store.defs.get(node.state)  # None for a temp
            if state is None or not state.static:
                return False
        if isinstance(node, (Once, LoopRef)):  # a static relation's rows as a delta; a loop's
            return False
    return True


def release_batch(views: Views, temps: list[DataFrame], cached: list[DataFrame],
                  merged: Mapping[str, DataFrame] | None, failed: bool = False) -> None:
    """What a batch held: its temp views, temp results, cached input; its merges if it failed.

    ``failed``: the batch is failing with its own error, which must be the one reported — when
    the JVM died of it (an ``OutOfMemoryError`` ends Spark's JVM), releasing fails too, and that
    connection error raised from cleanup replaced the batch's ``BATCH_FAILED`` (issue 59, Q78)."""
    try:
        views.drop()
        for df in temps:
            release(df)
        for df in cached:
            df.unpersist()
        for df in (merged or {}).values():
            release(df)
    except Exception:
        if not failed:
            raise
