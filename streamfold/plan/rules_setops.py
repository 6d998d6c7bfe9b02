"""Rules for set operations: UNION ALL, DISTINCT, INTERSECT and EXCEPT [ALL].

* ``UNION ALL`` — the change of a bag union is the union of its inputs' changes (a static input
  arrives once, with the first batch).
* ``DISTINCT`` — a state counts each row's copies; a batch's change is the rows whose count
  crossed zero (:func:`.changes.distinct_delta`): +1 into the result, −1 out of it.
* ``INTERSECT`` / ``EXCEPT`` [``ALL``] — a state counts each row's copies on the left
  (``left``) and in all (``_weight``); a row appears ``f(l, r)`` times (see :class:`SetOp`), so a
  batch changes a touched row's copies in the result by ``f(new) − f(old)``.
"""

from __future__ import annotations

from ..ir.expr import Agg, Call, Case, Column, Expr
from ..ir.rel import WEIGHT, Aggregate, Distinct, Field, Filter, Project, Rel, SetOp, StateScan, StateVersion, Union
from ..ir.types import BIGINT, BOOLEAN
from .changes import distinct_delta, merged_fields
from .context import PlanContext
from .model import OLD, Compiled, Monoid, State, StateColumn, StateRole
from .terms import ONE, ZERO, coalesce0, nonzero, sum_weights, touched, weight



def union_all(ctx: PlanContext, rel: Rel) -> Compiled:
    assert isinstance(rel, Union)
    compiled = [ctx.compile(item) for item in rel.items]
    return Compiled(Union(tuple(c.delta for c in compiled)), static=False,
                    weighted=any(c.weighted for c in compiled))


def distinct(ctx: PlanContext, rel: Rel) -> Compiled:
    assert isinstance(rel, Distinct)
    state, fields = ctx.bag_state(rel.input, "distinct")
    ctx.plan.note("DISTINCT: a state counts each row; the row is in the result while its count is positive")
    return Compiled(distinct_delta(state, fields), static=False, weighted=True)


def set_op(ctx: PlanContext, rel: Rel) -> Compiled:
    assert isinstance(rel, SetOp)
    left, right = ctx.compile(rel.left), ctx.compile(rel.right)
    cols = [f.name for f in rel.schema]

    def side(c: Compiled, source: Rel, is_left: bool) -> Rel:
        exprs = [(n, f.ref()) for n, f in zip(cols, source.schema)]
        return Project(c.delta, tuple(exprs) + ((WEIGHT, weight()), ("left", weight() if is_left else ZERO)))

    rows = Union((side(left, rel.left, True), side(right, rel.right, False)))
    name = ctx.plan.name(rel.kind.split("_")[0])
    key = tuple(Field(f.name, f.type) for f in rel.schema)
    ctx.plan.add_state(
        State(name, StateRole.COUNTS, key, (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "copies of the row on both sides"),
                                            StateColumn("left", BIGINT, Monoid.SUM, "copies of the row on the left")),
              note=f"{rel.kind.replace('_', ' ').upper()}: copies of each row per side"),
        Aggregate(rows, tuple((n, Column(n, f.type)) for n, f in zip(cols, key)),
                  ((WEIGHT, sum_weights()), ("left", Agg("sum", (Column("left", BIGINT),), False, BIGINT)))))
    fields = key + (Field(WEIGHT, BIGINT), Field("left", BIGINT))
    merged = StateScan(name, StateVersion.MERGED, merged_fields(fields, tuple(cols)))
    change = Call("-", (_copies(rel.kind, weight(), Column("left", BIGINT)),
                        _copies(rel.kind, coalesce0(weight(OLD + WEIGHT)), coalesce0(Column(OLD + "left", BIGINT)))),
                  BIGINT)
    out = Project(Filter(merged, touched()), tuple((n, Column(n, f.type)) for n, f in zip(cols, key))
                  + ((WEIGHT, change),))
    return Compiled(Filter(out, nonzero(weight())), static=False, weighted=True)


def _copies(kind: str, total: Expr, lcount: Expr) -> Expr:
    """How many copies of a row the result has, given its copies in all and on the left."""
    rcount = Call("-", (total, lcount), BIGINT)
    if kind == "intersect":
        cond = Call("AND", (Call(">", (lcount, ZERO), BOOLEAN), Call(">", (rcount, ZERO), BOOLEAN)), BOOLEAN)
        return Case(((cond, ONE),), ZERO, BIGINT)
    if kind == "except":
        cond = Call("AND", (Call(">", (lcount, ZERO), BOOLEAN), Call("=", (rcount, ZERO), BOOLEAN)), BOOLEAN)
        return Case(((cond, ONE),), ZERO, BIGINT)
    if kind == "intersect_all":
        return Call("least", (lcount, rcount), BIGINT, "least({0}, {1})")
    return Call("greatest", (Call("-", (lcount, rcount), BIGINT), ZERO), BIGINT, "greatest({0}, {1})")
