"""After a batch's commit: the checkpoint compacted, old snapshots pruned, runs started, tails folded.

None of it changes an answer or a state's rows. A compaction writes every state whole every
``--compact-every`` batches (so a restart replays at most that many changelogs) and drops what
came before; a batch that wrote its states whole needs nothing older. A large join input (or
another state read only in ways that can take it) is kept as a base and a tail (``runtime/runs.py``):
its runs start after a commit, so the next batch already merges into the tail, and a tail grown
past its bound is folded into the base, in a job of its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..bundle import Bundle
from ..context import RunContext
from ..emit import emit
from ..outputs import rows_bound
from .. import shape
from ..views import Views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def compact(ctx: RunContext, b: Bundle, batch: int, restated: bool, stale: bool, needed: int | None = None) -> None:
    """The checkpoint after ``batch``'s commit: pruned before it when the batch wrote its states
    whole (``restated``), compacted every ``compact_every`` batches (not when the states are
    ``stale``: a rebuild writes them whole); snapshots before the last ``keep_snapshots`` pruned,
    but none from ``needed`` on (the first batch a sink has not received yet reads its snapshot)."""
    every = ctx.config.compact_every
    if restated:  # the batch wrote every state whole: what came before is not needed
        ctx.checkpoint.prune(batch)
    elif stale:  # no state to compact
        pass
    elif every and (batch + 1) % every == 0 and b.store.durable():
        views = Views(ctx.spark, "compact")
        try:
            # Small states are collected and written by the driver, as a batch's outputs are
            # (a Spark write's fixed cost dominates a small state).
            small = rows_bound(b, b.store.durable()) <= shape.SMALL_ROWS
            emit(ctx.spark.sql(b.store.pack_sql(b.store.current, views)), ctx.checkpoint.base_dir(batch), small)
        finally:
            views.drop()
        ctx.checkpoint.prune(batch)
    keep = ctx.config.keep_snapshots
    if keep:
        ctx.output.prune_snapshots(min(batch - keep + 1, needed if needed is not None else batch))


def fold_tails(ctx: RunContext, b: Bundle, rebase: Callable[[str, DataFrame, bool], None]) -> None:
    """Fold each tail grown past its bound into its base (runs.py): the states' rows do not
    change, so neither does the checkpoint. ``rebase(name, base, nulls_appeared)`` tells the
    prepared plans of the new base (a base that now holds NULL keys cannot be read by plans that
    look keys up with ``=``)."""
    store = b.store
    for name in store.fold_due():
        ctx.progress(f"folding the tail of {name} into its base")
        nulls = store.base_nulls.get(name)
        base = store.fold(name)
        rebase(name, base, bool(store.base_nulls.get(name)) and not nulls)
