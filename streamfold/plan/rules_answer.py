"""The query's answer a (seed 000 §9): everything above the last GROUP BY, over the states.

The top of a query — ORDER BY, LIMIT/OFFSET and the final projection — is peeled off; below it:

* an aggregate (with HAVING and the select list above it, :mod:`.rules_aggregates`): a over its
  states; its changes keyed by the group key (or, for a global aggregate or a LIMIT, the whole
  answer before and after compared);
* a DISTINCT: an output state counts each row; a row is in the answer while its count is
  positive, its changes are the rows whose count crossed zero (keyed by every column);
* joins of global aggregates (one row each, whatever the streams hold) with static relations —
  scalar subqueries over the streams in a query over a dimension, or aggregates side by side —
  are a over the aggregates' states and the static rows, the whole answer compared: the rows of
  the join never change but through those single rows, so no join input is kept and no delta
  join runs;
* rows that a state already keeps as a bag, through projections and filters (a top-k per
  group's kept rows): a reads that state, and its delta so projected and filtered is the
  answer's change;
* anything else: an output state keeps the rows with their multiplicity, and its own delta is
  the answer's change.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import Column
from ..ir.rel import (
    WEIGHT, Aggregate, Distinct, Expand, Filter, Join, Limit, Project, Rel, Sort, SortKey, StateScan, StateVersion,
)
from . import merged_aggregates
from .context import PlanContext, reads_stream
from .model import Answer, ChangeMode, Monoid, StateRole
from .rules_aggregates import aggregate_states



@dataclass
class Top:
    """What sits above the query's rows: ORDER BY, LIMIT/OFFSET and hidden sort columns."""

    rows: Rel
    output: tuple[str, ...]
    order: tuple[SortKey, ...] = ()
    limit: int | None = None
    offset: int = 0

    @property
    def cut(self) -> bool:
        """Whether LIMIT or OFFSET cuts the answer (then it is compared whole)."""
        return self.limit is not None or self.offset > 0


def answer(ctx: PlanContext) -> Answer:
    """The answer function of the query ``ctx`` plans."""
    top = peel(ctx.logical)
    above: list[Rel] = []  # Filter/Project nodes between the rows' top and an Aggregate
    node = top.rows
    while isinstance(node, (Project, Filter)):
        above.append(node)
        node = node.input
    if isinstance(node, Aggregate):
        return _aggregate_query(ctx, node, above, top)
    if isinstance(top.rows, Distinct):
        return _distinct_query(ctx, top.rows, top)
    if _over_global_aggregates(top.rows):
        return _joined_aggregates_query(ctx, top)
    return _plain_query(ctx, top)


def peel(rel: Rel) -> Top:
    """The query's rows and what sits above them."""
    output: tuple[str, ...] | None = None
    if isinstance(rel, Project) and isinstance(rel.input, (Limit, Sort)):
        output = rel.names
        rel = rel.input
    limit, offset = None, 0
    if isinstance(rel, Limit):
        limit, offset = rel.limit, rel.offset
        rel = rel.input
    order: tuple[SortKey, ...] = ()
    if isinstance(rel, Sort):
        order = rel.keys
        rel = rel.input
    return Top(rel, output if output is not None else rel.names, order, limit, offset)


def _aggregate_query(ctx: PlanContext, agg: Aggregate, above: list[Rel], top: Top) -> Answer:
    info = aggregate_states(ctx, agg, above)
    return Answer(
        rows=info.rows, output=top.output, output_names=ctx.bound.output_names, order=top.order,
        limit=top.limit, offset=top.offset,
        changes=ChangeMode.GLOBAL if not info.keys or top.cut else ChangeMode.KEYED,
        change_states=info.states, touched_key=info.key_names, per_key=info.per_key,
    )


def _over_global_aggregates(rel: Rel) -> bool:
    """Whether every part of ``rel`` that reads a stream is a global aggregate under joins,
    filters and projections."""
    if not reads_stream(rel):
        return True
    if isinstance(rel, Aggregate):
        return not rel.keys
    return isinstance(rel, (Join, Filter, Project)) and all(_over_global_aggregates(c) for c in rel.inputs())


def _joined_aggregates_query(ctx: PlanContext, top: Top) -> Answer:
    states: list[str] = []
    merged = merged_aggregates.merge([n for n in top.rows.walk() if isinstance(n, Aggregate) and reads_stream(n)])
    rows_of: dict[Aggregate, Rel] = {}

    def aggregate_rows(agg: Aggregate) -> Rel:
        if agg not in rows_of:
            info = aggregate_states(ctx, agg, [])
            states.extend(info.states)
            rows_of[agg] = info.rows
        return rows_of[agg]

    def over_states(rel: Rel) -> Rel:
        if not reads_stream(rel):
            return ctx.static_bag(rel, "a static side of a join with global aggregates, read by a")
        if isinstance(rel, Aggregate):
            if rel in merged:
                one, names = merged[rel]
                return merged_aggregates.column_of(one, names, rel, aggregate_rows(one))
            return aggregate_rows(rel)
        return rel.with_inputs(tuple(over_states(c) for c in rel.inputs()))

    rows = over_states(top.rows)
    ctx.plan.note("a join of global aggregates (one row each) and static relations: a joins the aggregates' "
                  "states, no join input is kept, the whole answer is compared before and after each batch")
    if merged:
        ctx.plan.note(f"{len(merged)} global aggregates of {len(set(m for m, _ in merged.values()))} source(s), "
                      "each under its own WHERE, kept as one aggregate per source: a filter moved into the "
                      "arguments (agg(x) over σp(S) = agg(CASE WHEN p THEN x END) over S)")
    return Answer(rows=rows, output=top.output, output_names=ctx.bound.output_names, order=top.order,
                  limit=top.limit, offset=top.offset, changes=ChangeMode.GLOBAL, change_states=tuple(states))


def _plain_query(ctx: PlanContext, top: Top) -> Answer:
    compiled = ctx.compile(top.rows)
    kept = _kept_bag(ctx, compiled.program)
    if kept is not None:
        state, rows = kept
        ctx.plan.note(f"the answer's rows are {state}'s, through projections and filters: no state of their own")
        return Answer(rows=rows, output=top.output, output_names=ctx.bound.output_names, order=top.order,
                      limit=top.limit, offset=top.offset, changes=ChangeMode.GLOBAL if top.cut else ChangeMode.DELTA,
                      change_states=(state,), change_rows=None if top.cut else compiled.program)
    state, fields = ctx.bag_state(top.rows, "out", compiled)
    return Answer(
        rows=Expand(StateScan(state, StateVersion.NEW, fields), WEIGHT), output=top.output, output_names=ctx.bound.output_names,
        order=top.order, limit=top.limit, offset=top.offset,
        changes=ChangeMode.GLOBAL if top.cut else ChangeMode.DELTA, change_states=(state,),
    )


def _kept_bag(ctx: PlanContext, program: Rel) -> tuple[str, Rel] | None:
    """When a batch's rows of the query (``program``) are the delta of a state that keeps a bag
    of rows (each row and its multiplicity, merged by adding up), through projections and
    filters that do not read ``_weight``: that state, and the query's rows over its new version
    the same way — the state already holds the answer, so it needs no output state of its own
    (a top-k per group's kept rows, :mod:`.rules_topk`)."""
    chain: list[Project | Filter] = []
    node = program
    while isinstance(node, (Project, Filter)):
        chain.append(node)
        node = node.input
    if not (isinstance(node, StateScan) and node.version == StateVersion.DELTA):
        return None
    state = ctx.plan.state(node.state)
    if (state.role is not StateRole.OUTPUT or state.kept_while is not None or state.keep_empty or state.static
            or [(c.name, c.monoid) for c in state.columns] != [(WEIGHT, Monoid.SUM)]):
        return None
    rows: Rel = Expand(StateScan(node.state, StateVersion.NEW, node.fields), WEIGHT)
    weight = WEIGHT  # the multiplicity's name, as the projections pass it on
    for each in reversed(chain):
        if isinstance(each, Filter):
            if weight in each.condition.columns():
                return None
            rows = Filter(rows, each.condition)
            continue
        passed = [n for n, e in each.exprs if isinstance(e, Column) and e.name == weight]
        exprs = tuple((n, e) for n, e in each.exprs if n not in passed)
        if len(passed) != 1 or any(weight in e.columns() for _, e in exprs):
            return None
        weight = passed[0]
        rows = Project(rows, exprs)
    return (node.state, rows) if weight == WEIGHT else None


def _distinct_query(ctx: PlanContext, rows: Distinct, top: Top) -> Answer:
    state, fields = ctx.bag_state(rows.input, "out")
    names = [f.name for f in fields if f.name != WEIGHT]
    result = Project(StateScan(state, StateVersion.NEW, fields), tuple((n, Column(n, f.type)) for n, f in zip(names, fields)))
    ctx.plan.note("DISTINCT: the output state counts each row; a row is in the answer while its count is positive")
    return Answer(
        rows=result, output=top.output, output_names=ctx.bound.output_names, order=top.order,
        limit=top.limit, offset=top.offset, changes=ChangeMode.GLOBAL if top.cut else ChangeMode.KEYED,
        change_states=(state,), touched_key=tuple(names), per_key=result,
    )
