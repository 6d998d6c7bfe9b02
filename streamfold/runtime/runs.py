"""States kept as a base and a tail: a batch merges into the tail, not into the whole state.

A merge ⊗ (:mod:`.state`) computes every key of ``state UNION ALL Δ`` and keeps the result: each
batch copies the whole state, whatever it touches — for a ``lineitem`` join input of millions
of rows fed a few thousand, most of the batch (docs/journal.md, "TPC-H at SF 1"). A **join input** needs no such copy. Its state is a Z-set read only by the delta
rules of inner joins, which are linear in it: ``ΔR ⋈ (B ⊎ T) = ΔR ⋈ B ⊎ ΔR ⋈ T`` for any split of
the state into two bags whose weights and partial sums add up per key. So such a state is kept
as two runs, both hash-partitioned on its partition key:

* the **base** B — a full version of the state, materialized once and then left alone;
* the **tail** T — the sum, per key, of every delta merged since the base was made.

A batch merges its delta into the tail only (``T ⊗ Δ``: the tail's keys and the batch's, not the
base's), and the state the joins read is ``B UNION ALL T``: a key may have a row in each, and the
joins' outputs carry both, whose weights the aggregates above add up. When the tail has grown
past a fraction of the base (:func:`fold_fraction`) it is **folded** after the batch's commit, in
a job of its own: the tail merged into the base (old values summed over both runs; only the tail
moves), the result the next base, the tail empty. That is the merge-per-level of an LSM tree with
two levels; the fraction trades the tail's growing merge and read cost against the fold's copy
(below). A fold changes no row of the state, so the checkpoint
needs nothing of it, and prepared plans go on: they read the base through a slot of their own,
which the fold points at the new base (:meth:`.prepared.Prepared.rebase`). Their joins that probe
the base with a few keys read its rows of those keys from an index of it kept between batches
(``Plans.lookups``, :mod:`.prepared`), not by a scan; a new base is indexed at its first look-up,
one more pass over it per fold, which the cost below leaves out.

Which states: :func:`candidates` (``plan/runs.py``) — keyed states of sums whose every read is a
side of an inner or cross join, their delta, a look-up of some keys added up per key at once (a
semi join's counts), or their merge on the keys the batch touched (which a batch reads once, its
touched keys looked up in the base and added up with the tail: ``lowering.runs_merged``); not in
plans with loops or join matrices, nor read by the answer. A
candidate's changelog is its delta (new − old per touched key) and it is restored by summing its
logs, so the checkpoint needs no base lookup whichever layout the state had. Runs start after a
batch's commit, so the next batch already merges into the tail — after a history, it can be the
capture of the prepared plans; plans prepared over the whole state end there and are captured
again.

**When, and how large a tail** (:func:`worth_it`, :func:`fold_fraction`). With a base of B rows
and batches that touch d keys each (x = d / B), a tail folded at f · B rows costs, per batch, its
merge — f · B / 2 rows on average — plus the fold's copy of (1 + f) · B rows every f / x batches:
B · (f / 2 + x (1 + f) / f), least at f = √(2x), where it is B · (√(2x) + x). A whole merge costs
B · (1 + x). So runs pay wherever a batch touches less than half the state, and by how much
follows √(2x): a 1 % batch (TPC-H's increments) folds at about 15 % of the base (√0.02 = 0.14, the
floor below), every ~15 batches, and merges a fifth of what whole merges do; a 13 % batch (join-groupby's 40K rows into ~300K) folds at
half the base, every ~4 batches, and merges 56 %. A candidate is kept in runs once it holds
``min_rows`` rows (50,000 by default; below that a whole merge costs milliseconds and the runs' extra fold job is
not worth it) and its last batch touched at most :data:`MAX_TOUCHED` of its keys (the saving above
shrinks to nothing near half; a history or a rebuild, which touched every key, says nothing yet).
Each fold's bound is :func:`fold_fraction` of the batch before it, never below
:data:`MIN_FOLD_FRACTION`. The A/B setting ``runs_fold`` fixes the fraction instead (tests: 0
folds every batch, a large value never); ``runs_min_rows`` is the rows a candidate needs
(``streamfold/settings.py``; the state store is given both).
"""

from __future__ import annotations

import math

from ..plan.runs import candidates

__all__ = ["FOLD_JOB", "MAX_TOUCHED", "MIN_FOLD_FRACTION", "candidates", "fold_fraction", "worth_it"]

MIN_FOLD_FRACTION = 0.15  # the bound of an adaptive fold is never below this
# The Spark job description of a fold (what Spark's UI and the soak's plan count see): a fold is
# maintenance after a batch's commit, not the batch's own plan.
FOLD_JOB = "streamfold: fold the tail of "
MAX_TOUCHED = 0.3  # a state whose batches touch more of its keys than this stays whole


def fold_fraction(base_rows: int, touched: int | None, fixed: float | None = None) -> float:
    """How large the tail of a base of ``base_rows`` rows may grow before it is folded, given the
    keys the last batch touched: √(2x) of the base for batches touching x of it (the module's
    docstring), at least :data:`MIN_FOLD_FRACTION` and at most the base itself; ``fixed`` if given
    (the setting ``runs_fold``)."""
    if fixed is not None:
        return fixed
    if touched is None or base_rows <= 0:
        return MIN_FOLD_FRACTION
    return min(1.0, max(MIN_FOLD_FRACTION, math.sqrt(2.0 * touched / base_rows)))


def worth_it(rows: int, touched: int | None, min_rows: int) -> bool:
    """Whether a candidate of ``rows`` rows, whose last merge touched ``touched`` keys, is worth
    keeping as a base and a tail: ``min_rows`` rows at least (the setting ``runs_min_rows``), and
    its batches touch at most :data:`MAX_TOUCHED` of it (a merge that touched every key — a
    history, a rebuild — says nothing)."""
    if rows < min_rows:
        return False
    return touched is None or touched >= rows or touched <= MAX_TOUCHED * rows
