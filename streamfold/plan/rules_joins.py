"""Rules for join bodies: trees of inner joins, filters and projections (seed 000 §8).

A body (:mod:`.body`) is the seed's coGroup tree: its inputs, the equality edges between them,
the predicates on one input and the residual ones. Its change is the delta rule over the inputs'
states, each pre-aggregated on its lineage (:class:`.joins.JoinTerms`)::

    Δ(R₁⋈…⋈Rₙ) = Σᵢ R₁'⋈…⋈Rᵢ₋₁'⋈ΔRᵢ⋈Rᵢ₊₁⋈…⋈Rₙ       (primes: after this batch's merge)

A filter or a projection over a single input is a body of one input: the filter and the
projection of the input's change. Semi, anti and outer joins are the match joins of
:mod:`.rules_matchjoins`.
"""

from __future__ import annotations

from ..ir.expr import Column
from ..ir.rel import WEIGHT, Join, JoinKind, Project, Rel
from .body import Body
from .context import PlanContext
from .joins import JoinTerms
from .model import Compiled
from .rules_matchjoins import match_join
from .terms import weight


def body(ctx: PlanContext, rel: Rel) -> Compiled:
    """A join body's change: its output columns and the weight of each changed row."""
    b, mapping = ctx.body(rel)
    outputs = [(n, mapping[n]) for n in rel.names]
    terms = JoinTerms(ctx.plan, b)
    terms.inject([e for _, e in outputs], [])
    rows = terms.terms([], [(n, terms.over(e)) for n, e in outputs], [])
    note_joins(ctx, b)
    program = Project(rows, tuple((n, Column(n, e.type)) for n, e in outputs) + ((WEIGHT, weight()),))
    return Compiled(program, static=False, weighted=b.deletions)


def join(ctx: PlanContext, rel: Rel) -> Compiled:
    """An inner join or cross product is a body; semi, anti and outer joins match rows."""
    assert isinstance(rel, Join)
    if rel.kind in (JoinKind.INNER, JoinKind.CROSS):
        return body(ctx, rel)
    return match_join(ctx, rel)


def note_joins(ctx: PlanContext, b: Body) -> None:
    """The notes ``explain`` shows for a body: the delta rule, and deletions."""
    if len(b.streams) > 1:
        ctx.plan.note("join of streams: each side is kept pre-aggregated on its lineage; a batch joins "
                      "its delta with the other sides (Δ(R⋈S) = ΔR⋈S + R'⋈ΔS), exact also for "
                      "many-to-many joins")
    if b.deletions:
        ctx.plan.note("inputs carry _weight, so rows may be deleted: every state counts rows and drops "
                      "a key when its count reaches zero")
