"""States kept as a base and a tail: a batch merges into the tail, not into the whole state.

A merge ⊗ (:mod:`.state`) computes every key of ``state UNION ALL Δ`` and keeps the result: each
batch copies the whole state, whatever it touches — 0.8–2 µs per row of state at TPC-H SF 1
(docs/benchmarks.md, "TPC-H at SF 1"), seconds per batch for a 6M-row ``lineitem`` join input
fed 60K rows. A **join input** needs no such copy. Its state is a Z-set read only by the delta
rules of inner joins, which are linear in it: ``ΔR ⋈ (B ⊎ T) = ΔR ⋈ B ⊎ ΔR ⋈ T`` for any split of
the state into two bags whose weights and partial sums add up per key. So such a state is kept
as two runs, both hash-partitioned on its partition key:

* the **base** B — a full version of the state, materialized once and then left alone;
* the **tail** T — the sum, per key, of every delta merged since the base was made.

A batch merges its delta into the tail only (``T ⊗ Δ``: the tail's keys and the batch's, not the
base's), and the state the joins read is ``B UNION ALL T``: a key may have a row in each, and the
joins' outputs carry both, whose weights the aggregates above add up. When the tail has grown
past :data:`FOLD_FRACTION` of the base it is **folded** after the batch's commit, in a job of its
own: the tail merged into the base (old values summed over both runs; only the tail moves), the
result the next base, the tail empty. That is the merge-per-level of an LSM tree with two levels;
the fraction trades the tail's growing merge and read cost against the fold's copy (with
increments of 1 % of the state, a fold every ~15 batches copies about a seventh as much as a
merge of the whole state in every batch). A fold changes no row of the state, so the checkpoint
needs nothing of it, and prepared plans go on: they read the base through a slot of their own,
which the fold points at the new base (:meth:`.prepared.Prepared.rebase`).

Which states: :func:`candidates` — join inputs (sums only, keyed) whose every read is a side of
an inner or cross join; not in plans with loops or join matrices, nor read by the answer. A
candidate's changelog is its delta (new − old per touched key) and it is restored by summing its
logs, so the checkpoint needs no base lookup whichever layout the state had. A candidate is kept
in runs once it holds :data:`MIN_ROWS` rows (below that a whole merge costs little) and its
batches touch few enough of its keys that a fold is :data:`FOLDS_APART` batches away or more
(:func:`worth_it`: where each batch is a large part of the state, the tail is as large as the
copy it saves). Runs start after a batch's commit, so the next batch already merges into the
tail — after a history, it can be the capture of the prepared plans; plans prepared over the
whole state end there and are captured again.
"""

from __future__ import annotations

import os

from ..plan.runs import candidates

__all__ = ["FOLD_FRACTION", "MIN_ROWS", "candidates"]

# A candidate state is kept in runs from this many rows (``STREAMFOLD_RUNS_MIN_ROWS``; 0: always).
MIN_ROWS = int(os.environ.get("STREAMFOLD_RUNS_MIN_ROWS", "1000000"))
# A tail is folded into its base once it holds more rows than this fraction of the base's.
FOLD_FRACTION = float(os.environ.get("STREAMFOLD_RUNS_FOLD", "0.15"))
# A state whose last batch touched more than this fraction of FOLD_FRACTION of its keys would
# fold every few batches: it stays whole (join-groupby's 40K-row increments on 100K–500K rows).
FOLDS_APART = 4


def worth_it(rows: int, touched: int | None) -> bool:
    """Whether a candidate of ``rows`` rows, whose last merge touched ``touched`` keys, is worth
    keeping as a base and a tail: large, and its tail would take :data:`FOLDS_APART` batches or
    more to reach a fold (a merge that touched every key — a history, a rebuild — says nothing)."""
    if rows < MIN_ROWS:
        return False
    return touched is None or touched >= rows or touched * FOLDS_APART <= FOLD_FRACTION * rows
