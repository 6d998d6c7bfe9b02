"""Reconfiguration: another plan made the engine's between two batches (the seam ``control/`` uses).

The new plan applies to the whole of the next batch (no batch runs partly under each). Its states
are kept from the current plan where it names them — whole when their columns are equal, else
carried over to the new columns, a new column at its monoid's identity (a state transformed "from
now on") — and the others are built from the sources' history as batch 0 would build them from
all of it. When only the answer changes (h is the old plan's), the states and the store that holds
them stay, and without a new file the next batch runs no h at all. The next batch commits the new
answer, its changes taken from the last committed snapshot, and — unless every state is kept as it
was — a full copy of the new states; if it fails, the old plan is put back and runs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from ...plan.model import IncrementalPlan
from ..bundle import Bundle
from ..checkpoint import batch_name
from ..context import RunContext
from ..installed import Installed
from ..rebuild import rebuild_states
from ..views import Views


def aligned(plan: IncrementalPlan, current: IncrementalPlan,
            with_mappings: Callable[[IncrementalPlan, dict[str, tuple[int, int]], dict[str, tuple[Any, ...]]],
                                    IncrementalPlan]) -> IncrementalPlan:
    """``plan`` with the current plan's join matrix mappings: its kept states are laid out in
    them (a hashed join switched to a hybrid: as one)."""
    if (plan.matrices or plan.watched) and current.matrices:
        return with_mappings(plan, {m.left: (m.n, m.m) for m in current.matrices},
                             {m.left: m.heavy for m in current.matrices if m.hybrid is not None})
    return plan


def install(ctx: RunContext, old: Bundle, plan: IncrementalPlan, build: Callable[[IncrementalPlan], Bundle],
            batch: int, keep: Mapping[str, str], history: dict[str, list[str]] | None, stale: bool,
            on_failure: Callable[[BaseException], None] | None = None) -> tuple[Bundle, Installed]:
    """The bundle of ``plan`` with its states kept from ``old`` (``keep``: new state → old state)
    or built from ``history`` (the files of every committed batch, per source), and the
    :class:`Installed` that puts ``old`` back if the next batch fails. ``stale``: the old states
    were rebuilt just now (the whole of them is written by the next batch). On failure nothing is
    installed and the new states are freed."""
    same_h = (plan.states, plan.init, plan.delta) == (old.plan.states, old.plan.init, old.plan.delta)
    if same_h:  # only the answer changes: the states, and the store that holds them, stay
        new = old.with_answer(ctx, plan)
    else:
        new = build(plan)
        try:
            views = Views(ctx.spark, f"install{batch}")
            try:
                wholes = {o: old.store.whole(o) for o in keep.values()}  # a state in runs, added up
                kept = {n: (new.store.carried_over(n, wholes[o][0], old.store.schemas[o], views),
                            wholes[o][1], old.store.rows.get(o)) for n, o in keep.items()}
            finally:
                views.drop()
            if history is not None and any(not s.static and s.name not in keep for s in plan.states):
                ctx.progress(f"batch {batch_name(batch)}: rebuilding states from the history")
                rebuild_states(ctx, new, batch, history, {n: df for n, (df, _, _) in kept.items()})
            for n, (df, backing, rows) in kept.items():
                new.store.adopt(n, df, backing, rows)
        except BaseException:
            new.store.release_except(old.store.backings())
            raise
    previous = ctx.output.snapshot_path(batch - 1)
    # The old plan's changelogs restore the new plan's states when it has the same ones, all kept
    # as they were (an answer-only change); otherwise the first batch writes them whole.
    same = same_h or (new.store.durable() == old.store.durable() and set(keep) == set(new.store.durable())
                      and all(keep[n] == n and new.store.schemas[n] == old.store.schemas[n] for n in keep))
    installed = Installed(old, reset=new.output_schema != old.output_schema,
                          before=previous if batch > 0 and os.path.isdir(previous) else None,
                          whole=not same or stale, answer_only=same_h and not stale, on_failure=on_failure)
    return new, installed

