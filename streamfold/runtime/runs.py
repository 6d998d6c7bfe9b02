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
in runs once it holds :data:`MIN_ROWS` rows (below that a whole merge costs little); the batch
that starts its runs runs the plain way (its merge takes another shape) and prepared plans are
captured again after it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

from ..ir.rel import Join, JoinKind, Project, Rel, StateScan
from ..plan.model import LOOPS, IncrementalPlan, Monoid, StateRole

# A candidate state is kept in runs from this many rows (``STREAMFOLD_RUNS_MIN_ROWS``; 0: always).
MIN_ROWS = int(os.environ.get("STREAMFOLD_RUNS_MIN_ROWS", "1000000"))
# A tail is folded into its base once it holds more rows than this fraction of the base's.
FOLD_FRACTION = float(os.environ.get("STREAMFOLD_RUNS_FOLD", "0.15"))


def candidates(plan: IncrementalPlan) -> frozenset[str]:
    """The states of ``plan`` that may be kept as a base and a tail (see the module docstring)."""
    if plan.matrices or plan.watched or any(isinstance(s, LOOPS) for s in plan.delta):
        return frozenset()
    linear = {s.name for s in plan.states
              if s.role == StateRole.JOIN_INPUT and s.key and not s.static and not s.keep_empty
              and all(c.monoid == Monoid.SUM for c in s.columns)}
    roots = [p for step in plan.init + plan.delta for p in step.reads()]
    answer = plan.answer
    roots += [r for r in (answer.rows, answer.per_key) if r is not None]
    for root in roots:
        for scan, parent, above in _scans(root, None, None):
            if scan.state in linear and not _join_side(scan, parent, above):
                linear.discard(scan.state)
    for r in (answer.rows, answer.per_key):  # the answer reads whole rows of what it reads
        if r is not None:
            linear -= {n.state for n in r.walk() if isinstance(n, StateScan)}
    linear -= set(answer.change_states)
    return frozenset(linear)


def _scans(rel: Rel, parent: Rel | None, above: Rel | None) -> Iterator[tuple[StateScan, Rel | None, Rel | None]]:
    if isinstance(rel, StateScan):
        yield rel, parent, above
    for child in rel.inputs():
        yield from _scans(child, rel, parent)


def _join_side(scan: StateScan, parent: Rel | None, above: Rel | None) -> bool:
    """Whether ``scan`` is read as a side of an inner or cross join, renamed by a projection."""
    return (isinstance(parent, Project) and parent.input is scan and isinstance(above, Join)
            and above.kind in (JoinKind.INNER, JoinKind.CROSS) and parent in (above.left, above.right))
