"""The commit record of a batch (``OUTPUT/commits/<batch>.json``), built in one place.

Every kind of batch — incremental, prepared, recompute, the first of a reconfigured plan —
commits the same core fields; what a feature adds (the strategy and its cost, join matrices,
the prepared plans, a controller's query version) comes in ``extra``, after the core.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from .staged import positions


def commit_record(batch: int, inputs: Mapping[str, list[str]], rows: Mapping[str, int], duration_s: float,
                  snapshot_rows: int, change_rows: int, state_rows: Mapping[str, int], state_bytes: Mapping[str, int],
                  stats: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``inputs``: the files each source's batch applied, in order; ``rows``: the rows each gave;
    ``duration_s``: seconds from the batch's start to now; ``stats``: :func:`.stats.batch_stats`;
    ``state_bytes``: each state's bytes in Spark's block stores, largest first (:mod:`.storage`).
    ``positions``: where a batch took a staged source to (a Delta source's table version)."""
    staged = positions(inputs)
    return {
        "batch": batch, "inputs": dict(inputs), **({"positions": staged} if staged else {}), "duration_s": round(duration_s, 4), "rows": dict(rows),
        "snapshot_rows": snapshot_rows, "change_rows": change_rows, "state_rows": dict(state_rows),
        "state_bytes": dict(state_bytes),
        "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "stats": stats, **extra,
    }


def sources_only_stats(rows: Mapping[str, int]) -> dict[str, Any]:
    """The statistics of a batch that maintained no state (a recompute): its sources' rows."""
    return {"sources": {n: {"rows": r} for n, r in rows.items()}, "states": {}}
