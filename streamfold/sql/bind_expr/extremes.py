"""Bind ``max_by(x, y)`` and ``min_by(x, y)``: the ``x`` of the row with the largest (smallest) ``y``.

Each is the extreme of a pair, and the pair's first member is what it is ordered by::

    max_by(x, y)  →  max(CASE WHEN y IS NOT NULL THEN named_struct('y', y, 'x', x) END).x
    min_by(x, y)  →  min(…the same pair…).x

so it is kept as ``max`` and ``min`` are (plan/aggregates.py): a partial per group when its input
only grows, the multiset of pairs when rows may be deleted. Rows whose ``y`` is NULL are skipped
and an ``x`` that is NULL is answered, as Spark does. Where several rows share the extreme ``y``,
Spark answers the ``x`` of whichever of them it reads last, so its own answer moves with the order
of the files; here the tie goes to the largest ``x`` (``min_by``: the smallest, NULL first) — one
of the answers Spark can give, and the same one after every batch and every restart. Where ``y``
tells the rows apart (a timestamp, an id), the two are the same answer.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.expr import BY_PAIR_OP, Agg, Call, Expr
from ...ir.types import DataType
from .aggregates import aggregate_allowed, filtered
from .context import ExprContext

EXTREMES: dict[type, str] = {exp.ArgMax: "max", exp.ArgMin: "min"}


def extreme(node: exp.Expr) -> tuple[str, exp.Expr, exp.Expr | None] | None:
    """``(max | min, the call, the FILTER node or None)`` of a ``max_by``/``min_by`` (under FILTER
    too), else None."""
    filter_node = node if isinstance(node, exp.Filter) else None
    call = node.this if filter_node is not None else node
    fn = EXTREMES.get(type(call))
    return (fn, call, filter_node) if fn is not None else None


def bind_extreme(ctx: ExprContext, node: exp.Expr, fn: str, call: exp.Expr, filter_node: exp.Expr | None) -> Expr:
    name = f"{fn}_by"
    x, y = call.this, call.expression
    if x is None or y is None or call.args.get("count") is not None:
        raise ctx.err(BindError, "WRONG_ARGUMENTS", f"`{name}` takes two arguments", node,
                      f"write {name}(x, y): the x of the row with the {'largest' if fn == 'max' else 'smallest'} y",
                      function=name)
    if isinstance(x, exp.Distinct) or isinstance(y, exp.Distinct):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE", f"`{name}(DISTINCT …)` is not supported", node,
                      f"DISTINCT does not change {name}: drop it", function=name)
    aggregate_allowed(ctx, node, name)
    ctx.in_agg = True
    try:
        value = ctx.bind(x)  # a row the FILTER leaves out orders as NULL: skipped
        order = ctx.bind(filtered(filter_node, y) if isinstance(filter_node, exp.Filter) else y)
    finally:
        ctx.in_agg = False
    for side, t in (("value", value.type), ("ordering", order.type)):
        if not t.is_orderable:
            raise ctx.mismatch(node, f"`{name}` cannot order a {side} of type {t}",
                               "take an orderable column, or a field of it", function=name, actual=t.sql())
    pair_type = DataType("STRUCT", params=(("y", order.type), ("x", value.type)))
    pair = Call(BY_PAIR_OP, (order, value), pair_type, "IF({0} IS NULL, NULL, named_struct('y', {0}, 'x', {1}))")
    assert ctx.on_agg is not None  # (aggregate_allowed)
    stand_in = ctx.on_agg(Agg(fn, (pair,), False, pair_type), node)
    return Call("field", (stand_in,), value.type, "{0}.`x`")
