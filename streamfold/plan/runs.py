"""Which states may be kept as a base and a tail (the runtime's ``runs.py`` says how and when).

A join input is a Z-set that the delta rules of inner joins read linearly — ``ΔR ⋈ (B ⊎ T) =
ΔR ⋈ B ⊎ ΔR ⋈ T`` — so it may be held as two bags whose weights and partial sums add up per key.
That holds only if every read of the state is such a join side: a semi or anti join, a filter on
a row's weight, or an answer that shows the state's rows needs one row per key.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..ir.rel import Join, JoinKind, Project, Rel, StateScan
from .model import LOOPS, IncrementalPlan, Monoid, StateRole


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
