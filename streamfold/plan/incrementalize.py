"""Incrementalization (seed 000 §7–§9): a normalized query in, an :class:`IncrementalPlan` out.

The steps, in the seed's terms:

1. *Lineage injection* (Alg. 2). Each join input is kept as a state keyed by its lineage
   (:mod:`.joins`): the join keys, plus what the query needs of it above the join.
2. *Monoid inference* (Fig. 2). Every state column carries the monoid that merges it: counts
   and sums ``+``, insert-only min/max ``min``/``max``. Aggregates that are not homomorphisms
   are split (:mod:`.aggregates`): ``avg`` into ``(sum, count)``, DISTINCT into a multiset.
3. *Split q = a ∘ h* (§9). Everything above the last GROUP BY — the division of avg, HAVING,
   the select list, ORDER BY, LIMIT — moves to the answer function a (:mod:`.rules_answer`).
4. *Merge ⊗*. Each state merges with its delta as a full outer join on its key, combining
   columns by their monoids (the runtime does it: ``runtime/lowering.py``).

Composition, beyond the seed: every relation compiles to a *delta program* — the rows a batch
adds to it, with their ``_weight`` (negative for rows it removes). One rule per kind of node
gives it (:data:`RULES`, in the modules ``rules_*.py``), seeing the planner only through
:class:`.context.PlanContext`: a source's delta is the batch's new rows; a filter or projection
applies to the delta; a join follows the delta rule over its inputs' states; an aggregate or
DISTINCT nested in a bigger query keeps its own states and hands on the change of its output
(:mod:`.changes`). So any of them can be the input of a join, of another aggregate, or of the
query's answer. A node with no rule is refused by name (:func:`refusal`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import UnsupportedError
from ..ir.rel import (
    Aggregate, DeltaScan, Distinct, Expand, Explode, Filter, Iterate, Join, Limit, LoopRef, Once, Project, Recursive,
    Rel, Scan, SetOp, Sort, StateScan, Union,
)
from ..ir.window import Window
from ..passes import normalize
from ..sql.bind import BoundQuery
from . import (
    rules_aggregates, rules_expiry, rules_joins, rules_linear, rules_loops, rules_setops, rules_topk, rules_window_suffix,
)
from .context import PlanContext, Rule, reads_stream
from .joins import delta_joins
from .matrix import DEFAULT_POLICY, MatrixPolicy
from .model import Compiled, IncrementalPlan
from .rules_answer import answer

# The rule for each kind of logical node: how a batch changes it.
RULES: dict[type[Rel], Rule] = {
    Scan: rules_linear.scan,
    Sort: rules_linear.sort,
    Explode: rules_linear.explode,
    Project: rules_joins.body,
    Filter: rules_topk.filter_rule,
    Join: rules_joins.join,
    Aggregate: rules_aggregates.aggregate,
    Union: rules_setops.union_all,
    Distinct: rules_setops.distinct,
    SetOp: rules_setops.set_op,
    Recursive: rules_loops.recursive,
    Iterate: rules_loops.iterate,
    Window: rules_window_suffix.window_rule,
}


def _internal(rel: Rel) -> UnsupportedError:
    return UnsupportedError(f"internal: {type(rel).__name__} is a node of incremental programs, not of a query",
                            code="INTERNAL", params={"construct": type(rel).__name__})


# The nodes no rule handles, each with the error that refuses it.
REFUSED: dict[type[Rel], Callable[[Rel], UnsupportedError]] = {
    # the outermost LIMIT is part of the answer (rules_answer), not a rule; every other one is a
    # row number by then (passes.nested_limits)
    Limit: _internal, DeltaScan: _internal, StateScan: _internal, Once: _internal, Expand: _internal,
    LoopRef: _internal,  # a loop's rules replace it before compiling what reads it
}


def incrementalize(bound: BoundQuery, mappings: dict[str, tuple[int, int]] | None = None,
                   policy: MatrixPolicy = DEFAULT_POLICY, heavy: dict[str, tuple[Any, ...]] | None = None
                   ) -> IncrementalPlan:
    """Compile a bound query into its incremental plan, or refuse with a coded error.

    ``mappings`` gives join matrices an (n, m) mapping other than the one they start with
    (keyed by :attr:`JoinMatrix.left`): the runtime re-plans with them when it migrates.
    ``policy`` says which joins go over a join matrix, of how many cells, starting how; ``heavy``
    gives a hybrid equi-join's heavy keys (by left state), which the runtime picks. (A query's
    :class:`~.compilation.Compilation` runs the two halves, :func:`normalized` and
    :func:`plan_normalized`, keeping the first for re-plans.)"""
    return plan_normalized(bound, normalized(bound), mappings, policy, heavy)


def normalized(bound: BoundQuery, push_down_groups: bool = True) -> Rel:
    """The bound query normalized (:func:`..passes.normalize`); a pass's refusal (a subquery it
    cannot unnest) shows the query."""
    try:
        return normalize(bound.rel, push_down_groups=push_down_groups)
    except UnsupportedError as e:
        raise e.with_sql(bound.sql) from None


def plan_normalized(bound: BoundQuery, logical: Rel, mappings: dict[str, tuple[int, int]] | None = None,
                    policy: MatrixPolicy = DEFAULT_POLICY, heavy: dict[str, tuple[Any, ...]] | None = None,
                    orders: dict[str, tuple[str, ...]] | None = None) -> IncrementalPlan:
    """The incremental plan of ``bound`` from its normalized form ``logical`` (see
    :func:`incrementalize`); ``orders``: the join order of delta terms the runtime re-planned
    (by start state, :class:`.model.DeltaJoin`)."""
    try:
        return _plan(bound, logical, mappings, policy, heavy, orders)
    except UnsupportedError as e:
        raise e.with_sql(bound.sql) from None


def dispatch(ctx: PlanContext, rel: Rel) -> Compiled:
    """Apply the rule for ``rel``'s kind of node (the context calls it for every relation that
    reads a stream); a node without one is refused."""
    rule = RULES.get(type(rel))
    if rule is None:
        raise refusal(rel)
    return rule(ctx, rel)


def refusal(rel: Rel) -> UnsupportedError:
    """The coded error for a node no rule handles."""
    refuse = REFUSED.get(type(rel))
    if refuse is not None:
        return refuse(rel)
    return UnsupportedError(f"no incremental rule for {type(rel).__name__}", code="UNSUPPORTED",
                            params={"construct": type(rel).__name__})


def _plan(bound: BoundQuery, logical: Rel, mappings: dict[str, tuple[int, int]] | None,
          policy: MatrixPolicy, heavy: dict[str, tuple[Any, ...]] | None = None,
          orders: dict[str, tuple[str, ...]] | None = None) -> IncrementalPlan:
    if not reads_stream(logical):
        raise UnsupportedError("the query reads no stream source, so its answer never changes", code="NO_STREAM",
                               params={}, hint="give at least one input with --source (static inputs use --table)")
    ctx = PlanContext(bound, logical, dispatch, mappings, policy, heavy, orders)
    a = answer(ctx)
    rules_expiry.check_answer(a.rows)
    used = {s.table.lower() for s in logical.walk() if isinstance(s, Scan)}
    sources = tuple(s for s in bound.catalog.values() if s.name.lower() in used)
    p = ctx.plan
    return IncrementalPlan(sql=bound.sql, sources=sources, logical=logical, states=tuple(p.states),
                           init=tuple(p.init), delta=tuple(p.delta), answer=a, notes=tuple(p.notes),
                           matrices=tuple(p.matrices), policy=policy, watched=tuple(p.watched),
                           late=tuple(p.late), expiring=tuple(p.expiring), event_time=p.event_time,
                           late_margin=p.late_margin,
                           delta_joins=delta_joins(p.delta_joins, p.delta),
                           orders=tuple(sorted((s, o) for d in p.delta_joins for s, o in d.terms
                                               if p.orders.get(s) == o)))
