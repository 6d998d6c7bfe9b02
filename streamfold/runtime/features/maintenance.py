"""After a batch's commit: the checkpoint compacted, old snapshots pruned, runs started, tails folded.

None of it changes an answer or a state's rows. A compaction writes every state whole every
``--compact-every`` batches (so a restart replays at most that many changelogs) and drops what
came before; a batch that wrote its states whole needs nothing older. A large join input (or
another state read only in ways that can take it) is kept as a base and a tail (``runtime/runs.py``):
its runs start after a commit, so the next batch already merges into the tail, and a tail grown
past its bound is folded into the base, in a job of its own.

**A waiting file goes first.** The work after a commit that is not needed by the next batch — a
compaction, a recompute measured for the cost model, Python's garbage collection —
runs through :class:`PostCommit` (and the prepared plans' warm-up stops after its first run,
:meth:`PostCommit.gives_way`): when a file is already waiting in a source directory, each piece
is deferred instead, and the next batch starts at once. Deferred work runs after the next
commit that finds no file waiting, or when the poll finds nothing (the run is idle); a piece
deferred :data:`MAX_DEFERRED` times in a row runs regardless, so a stream that never pauses still
bounds the changelogs a restart replays (``--compact-every`` plus that many). A tail's fold does
not give way: it is what makes the batches after it cheaper, and each batch it gave way to would
merge and join a longer tail — under files that keep arriving, more than the fold costs
(docs/benchmarks.md, "Post-commit work gives way to a waiting file").
Deferring changes when the work runs, never what the batches compute or the checkpoint holds
after a commit: a compaction run late writes the states of the batch it runs after.
"""

from __future__ import annotations

from collections import deque
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


MAX_DEFERRED = 10  # times in a row a piece of post-commit work gives way to a waiting file


class PostCommit:
    """The work after a commit that gives way to a file waiting (see the module docstring).

    ``waiting()`` says whether a file the next poll would take is there already. A piece of work
    is offered by name after each commit; deferred, its name stays :attr:`due` until it runs, and
    the next offer (after the next commit, with that batch's states) or :meth:`run_pending` (the
    run idle) runs it. ``events`` keeps the last decisions, ``(batch, "deferred" | "ran", name)``,
    in order (the profile and the tests read them)."""

    def __init__(self, waiting: Callable[[], bool], limit: int = MAX_DEFERRED) -> None:
        self.waiting = waiting
        self.limit = limit
        self.due: dict[str, int] = {}  # work deferred → times in a row
        self._work: dict[str, tuple[int, Callable[[], None]]] = {}  # the last offer of each: its batch, the work
        self.events: deque[tuple[int, str, str]] = deque(maxlen=100)

    def offer(self, batch: int, name: str, work: Callable[[], None]) -> bool:
        """Run ``work`` (after ``batch``'s commit) now, unless a file waits; whether it ran."""
        self._work[name] = (batch, work)
        return self._try(name)

    def _try(self, name: str) -> bool:
        batch, work = self._work[name]
        times = self.due.get(name, 0)
        if times < self.limit and self.waiting():
            self.due[name] = times + 1
            self.events.append((batch, "deferred", name))
            return False
        del self._work[name]
        self.due.pop(name, None)
        work()
        self.events.append((batch, "ran", name))
        return True

    def gives_way(self) -> bool:
        """Whether work that may give way should, now: a file waits (and deferring is on)."""
        return self.limit > 0 and self.waiting()

    def batch_started(self) -> None:
        """A batch starts: the work offered before it was for states it will change; what was
        deferred stays due, to be offered again after its commit."""
        self._work.clear()

    def run_pending(self) -> None:
        """The run is idle: the work deferred since the last commit, until a file arrives."""
        for name in list(self._work):
            if not self._try(name):
                return

    def cancel(self, name: str) -> None:
        """``name`` is no longer needed (a batch wrote every state whole: nothing to compact)."""
        self.due.pop(name, None)
        self._work.pop(name, None)


def compaction_due(ctx: RunContext, b: Bundle, batch: int, restated: bool, stale: bool) -> bool:
    """Whether ``batch``'s commit calls for a compaction (every ``compact_every`` batches, when
    the states are maintained and the batch did not write them whole)."""
    every = ctx.config.compact_every
    return bool(not restated and not stale and every and (batch + 1) % every == 0 and b.store.durable())


def write_base(ctx: RunContext, b: Bundle, batch: int) -> None:
    """Every state as of ``batch`` (the last committed) written whole, and what came before pruned."""
    views = Views(ctx.spark, "compact")
    try:
        # Small states are collected and written by the driver, as a batch's outputs are
        # (a Spark write's fixed cost dominates a small state).
        small = rows_bound(b, b.store.durable()) <= shape.SMALL_ROWS
        emit(ctx.spark.sql(b.store.pack_sql(b.store.current, views)), ctx.checkpoint.base_dir(batch), small)
    finally:
        views.drop()
    ctx.checkpoint.prune(batch)


def compact(ctx: RunContext, b: Bundle, batch: int, restated: bool, stale: bool, needed: int | None = None,
            compacts: bool = True) -> None:
    """The checkpoint after ``batch``'s commit: pruned before it when the batch wrote its states
    whole (``restated``), compacted every ``compact_every`` batches (not when the states are
    ``stale``: a rebuild writes them whole) unless ``compacts`` is False (the caller defers it:
    :class:`PostCommit`); snapshots before the last ``keep_snapshots`` pruned, but none from
    ``needed`` on (the first batch a sink has not received yet reads its snapshot)."""
    if restated:  # the batch wrote every state whole: what came before is not needed
        ctx.checkpoint.prune(batch)
    elif compacts and compaction_due(ctx, b, batch, restated, stale):
        write_base(ctx, b, batch)
    keep = ctx.config.keep_snapshots
    if keep:
        ctx.output.prune_snapshots(min(batch - keep + 1, needed if needed is not None else batch))


def fold_tails(ctx: RunContext, b: Bundle, rebase: Callable[[str, DataFrame, bool], None]) -> None:
    """Fold each tail grown past its bound into its base (runs.py): the states' rows do not
    change, so neither does the checkpoint. ``rebase(name, base, nulls_appeared)`` tells the
    prepared plans of the new base (a base that now holds NULLs in a key column cannot be read by
    plans that look keys up with ``=``, or that read only the tail for rows with such a NULL)."""
    store = b.store
    for name in store.fold_due():
        ctx.progress(f"folding the tail of {name} into its base")
        nulls = store.base_nulls.get(name, frozenset())
        base = store.fold(name)
        rebase(name, base, bool(store.base_nulls.get(name, frozenset()) - nulls))
