"""Which states may be kept as a base and a tail (the runtime's ``runs.py`` says how and when).

A state kept so is two bags whose weights and partial sums add up per key: a base left alone and
a tail the batches merge into. A read of it may take that split only where the result does not
depend on how a key's row is split:

* a side of an inner or cross join, as it is or renamed by a projection — the delta rules are linear in it
  (``ΔR ⋈ (B ⊎ T) = ΔR ⋈ B ⊎ ΔR ⋈ T``): the state's *new* or *old* version is read as the two
  runs, and the aggregates above add their weights up;
* looked up for some keys — the left side of a semi join — with the rows found added up per key
  at once (an aggregate of sums): a semi join's counts for the batch's left rows, and the counts
  per key and value of one on equalities and one ``<>`` (``semi_not_equal``) for the batch's
  left keys and the touched ones;
* the batch's *delta* of it — the tail's merge changed each touched key by exactly the batch's
  delta, whichever run the key's row is in;
* its *merge*, filtered on the keys the batch touched (``__touched = 1`` among the filter's
  conjuncts): the change of an aggregate read by a per-key answer, the keys whose count crossed
  zero under a semi join, a DISTINCT or a set operation. The runtime gives such a read each
  touched key once, its new and old values added up over the base and the tail
  (``lowering.runs_merged``): the base's rows of those keys only, not the whole state.

Any other read — a semi or anti join's side, a filter on a row's weight, an answer that shows
the state's rows — needs one row per key, and keeps the state whole; so do min/max columns (not
sums), a global aggregate's one row, and plans with loops or join matrices.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..ir.expr import conjuncts
from ..ir.rel import Aggregate, Filter, Join, JoinKind, Project, Rel, StateScan, StateVersion
from .model import LOOPS, IncrementalPlan, Monoid, StateRole
from .terms import touched


def candidates(plan: IncrementalPlan) -> frozenset[str]:
    """The states of ``plan`` that may be kept as a base and a tail (see the module docstring)."""
    if plan.matrices or plan.watched or any(isinstance(s, LOOPS) for s in plan.delta):
        return frozenset()
    linear = {s.name for s in plan.states
              if s.role != StateRole.STATIC and s.key and not s.static and not s.keep_empty
              and all(c.monoid == Monoid.SUM for c in s.columns)}
    keys = {s.name: {f.name for f in s.key} for s in plan.states}
    roots = [p for step in plan.init + plan.delta for p in step.reads()]
    answer = plan.answer
    roots += [r for r in (answer.rows, answer.per_key) if r is not None]
    for root in roots:
        for scan, parent, above in _scans(root, None, None):
            if scan.state in linear and not _split_read(scan, *_past_key_filter(scan, parent, above, root,
                                                                                 keys[scan.state])):
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


def _past_key_filter(scan: StateScan, parent: Rel | None, above: Rel | None, root: Rel,
                     keys: set[str]) -> tuple[Rel | None, Rel | None]:
    """``scan``'s parent and the node above it, past a filter on key columns only (a key's rows
    in the base and the tail are kept or dropped together: the window's NULL partitions, looked
    up apart, ``rules_windows``)."""
    if (isinstance(parent, Filter) and scan.version != StateVersion.MERGED and parent.condition is not None
            and parent.condition.columns() <= keys and above is not None):
        return above, _parent_of(root, above)
    return parent, above


def _parent_of(root: Rel, node: Rel) -> Rel | None:
    for n in root.walk():
        if any(child is node for child in n.inputs()):
            return n
    return None


def _split_read(scan: StateScan, parent: Rel | None, above: Rel | None) -> bool:
    """Whether ``scan`` reads the state in a way that does not depend on its split into runs."""
    if scan.version == StateVersion.DELTA:
        return True
    if scan.version == StateVersion.MERGED:
        return isinstance(parent, Filter) and touched() in conjuncts(parent.condition)
    return _join_side(scan, parent, above) or _summed_lookup(scan, parent, above)


def _summed_lookup(scan: StateScan, parent: Rel | None, above: Rel | None) -> bool:
    """Whether ``scan`` is looked up for some keys (the left side of a semi join) and the rows
    found are added up per key at once (an aggregate of sums): a semi join's matches for the
    batch's left rows (rules_matchjoins ``_matched``)."""
    return (isinstance(parent, Join) and parent.kind == JoinKind.SEMI
            and (parent.left is scan or isinstance(parent.left, Filter) and parent.left.input is scan)
            and isinstance(above, Aggregate) and above.input is parent
            and all(a.fn == "sum" and not a.distinct for _, a in above.aggs))


def _join_side(scan: StateScan, parent: Rel | None, above: Rel | None) -> bool:
    """Whether ``scan`` is read as a side of an inner or cross join, as it is or renamed by a
    projection."""
    if isinstance(parent, Join):
        return parent.kind in (JoinKind.INNER, JoinKind.CROSS) and scan in (parent.left, parent.right)
    return (isinstance(parent, Project) and parent.input is scan and isinstance(above, Join)
            and above.kind in (JoinKind.INNER, JoinKind.CROSS) and parent in (above.left, above.right))
