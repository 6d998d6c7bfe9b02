"""Which states may be kept as a base and a tail (the runtime's ``runs.py`` says how and when).

A state kept so is two bags whose weights and partial sums add up per key: a base left alone and
a tail the batches merge into. A read of it may take that split only where the result does not
depend on how a key's row is split:

* a side of an inner or cross join, as it is, renamed by a projection, or filtered on its key
  columns — the delta rules are linear in it (``ΔR ⋈ (B ⊎ T) = ΔR ⋈ B ⊎ ΔR ⋈ T``): the state's
  *new* or *old* version is read as the two runs, and the aggregates above add their weights up;
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
              if s.role != StateRole.STATIC and s.key and not s.static and not s.keep_empty and not s.appended
              and all(c.monoid == Monoid.SUM for c in s.columns)}
    keys = {s.name: {f.name for f in s.key} for s in plan.states}
    roots = [p for step in plan.init + plan.delta for p in step.reads()]
    answer = plan.answer
    roots += [r for r in (answer.rows, answer.per_key) if r is not None]
    for root in roots:
        for scan, up in _scans(root, ()):
            if scan.state in linear and not _split_read(scan, up, keys[scan.state]):
                linear.discard(scan.state)
    for r in (answer.rows, answer.per_key):  # the answer reads whole rows of what it reads
        if r is not None:
            linear -= {n.state for n in r.walk() if isinstance(n, StateScan)}
    linear -= set(answer.change_states)
    return frozenset(linear)


def _scans(rel: Rel, up: tuple[Rel, ...]) -> Iterator[tuple[StateScan, tuple[Rel, ...]]]:
    """Each state scan under ``rel``, with the nodes above it, nearest first."""
    if isinstance(rel, StateScan):
        yield rel, up
    for child in rel.inputs():
        yield from _scans(child, (rel, *up))


def _split_read(scan: StateScan, up: tuple[Rel, ...], keys: set[str]) -> bool:
    """Whether ``scan`` (below the nodes ``up``) reads the state in a way that does not depend on
    its split into runs; ``keys``: the state's key columns."""
    parent, above = (*up, None, None)[:2]
    if scan.version == StateVersion.DELTA:
        return True
    if scan.version == StateVersion.MERGED:
        return isinstance(parent, Filter) and touched() in conjuncts(parent.condition)
    if isinstance(parent, Filter) and parent.condition.columns() <= keys:
        # a filter on key columns keeps or drops a key's rows in the base and the tail together
        # (the window's NULL partitions, looked up apart: rules_windows, rules_window_suffix)
        grand, great = (*up[1:], None, None)[:2]
        return _summed_lookup(parent, grand, great) or (
            isinstance(grand, Join) and grand.kind in (JoinKind.INNER, JoinKind.CROSS) and parent in (grand.left, grand.right))
    return _join_side(scan, parent, above) or _summed_lookup(scan, parent, above)


def _summed_lookup(read: Rel, parent: Rel | None, above: Rel | None) -> bool:
    """Whether ``read`` (a scan, or a filter over one) is looked up for some keys (the left side
    of a semi join) and the rows found are added up per key at once (an aggregate of sums): a semi
    join's matches for the batch's left rows (rules_matchjoins ``_matched``)."""
    return (isinstance(parent, Join) and parent.kind == JoinKind.SEMI and parent.left is read
            and isinstance(above, Aggregate) and above.input is parent
            and all(a.fn == "sum" and not a.distinct for _, a in above.aggs))


def _join_side(scan: StateScan, parent: Rel | None, above: Rel | None) -> bool:
    """Whether ``scan`` is read as a side of an inner or cross join, as it is or renamed by a
    projection."""
    if isinstance(parent, Join):
        return parent.kind in (JoinKind.INNER, JoinKind.CROSS) and scan in (parent.left, parent.right)
    return (isinstance(parent, Project) and parent.input is scan and isinstance(above, Join)
            and above.kind in (JoinKind.INNER, JoinKind.CROSS) and parent in (above.left, above.right))
