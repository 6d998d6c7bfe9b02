"""States built from the sources' history: h over every file so far as one first batch.

A reconfiguration builds the states of a new plan that it does not keep; the cost model's
rebuild builds again the states a run of recompute batches left stale. Either way the states
enter empty (or, for those a reconfiguration keeps, whole), and the history's rows go through h
as batch 0's would.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .bundle import Bundle
from .context import RunContext
from .state import release
from .steps import apply_h
from .views import Views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def rebuild_states(ctx: RunContext, b: Bundle, batch: int, history: dict[str, list[str]],
                   kept: dict[str, DataFrame]) -> None:
    """The states of ``b`` not in ``kept`` computed from ``history`` (the files of every
    committed batch, per source), the kept states entering whole; the store holds them after."""
    views = Views(ctx.spark, f"rebuild{batch}")
    frames, rows, cached = ctx.control.guard(batch, "rebuild: read", lambda: b.reader.read(history, cache=b.reread))
    reads = b.reads(ctx, frames, rows, True)
    temps: list[DataFrame] = []
    current: dict[str, tuple[DataFrame, DataFrame | None]] = {}
    done = False
    try:
        given = {n: b.store.whole_merge(n, df, views) for n, df in kept.items()}
        apply_h(ctx, b, batch, reads, views, True, temps, given, label="rebuild ")
        for n, df in reads.merged.items():
            new = reads.new[n]
            if n not in kept:
                assert isinstance(new, str)
                current[n] = (b.store.as_frame(new), df)  # analysed before the views are dropped
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
    b.store.replace(current)
    b.store.count_rows()
