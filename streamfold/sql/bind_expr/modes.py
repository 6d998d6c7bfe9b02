"""Bind ``mode(x, true)`` and ``mode() WITHIN GROUP (ORDER BY x [DESC])``: the group's most frequent
non-NULL value, ties broken by the value (the lowest; with DESC the highest), as Spark does.

The answer depends only on the group's multiset of values and their counts, so it is kept the way
a percentile is (plan/aggregates.py): a multiset state of ``(group, x)`` with each value's count,
exact under deletions, answered by ``min_by`` over the values keyed by ``(−count, x)``. Spark's
``mode(x)`` without ``true`` picks any of the tied values — the order rows were read in decides —
so it is refused (``UNSUPPORTED_AGGREGATE``) with the deterministic spelling. Values of FLOAT and
DOUBLE are refused (the state's grouping makes ``-0.0`` and ``0.0`` one value).
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import UnsupportedError
from ...ir.expr import Expr
from .aggregates import bind_agg, filtered, refuse_inexact
from .context import ExprContext


def mode(node: exp.Expr) -> tuple[exp.Expr, exp.Expr | None, bool] | None:
    """``(x, the FILTER node or None, descending)`` of a ``mode`` call (under FILTER too), or None
    when ``node`` is not one; a ``mode`` without a deterministic order is refused when bound."""
    filter_node = node if isinstance(node, exp.Filter) else None
    call = node.this if filter_node is not None else node
    if isinstance(call, exp.WithinGroup) and isinstance(call.this, exp.Mode):
        order = call.expression
        keys = order.expressions if isinstance(order, exp.Order) else []
        if len(keys) != 1:
            return None
        return keys[0].this, filter_node, bool(keys[0].args.get("desc"))
    if isinstance(call, exp.Mode):
        return call, filter_node, False  # (checked in bind_mode: `true` or refused)
    return None


def bind_mode(ctx: ExprContext, node: exp.Expr, x: exp.Expr, filter_node: exp.Expr | None, desc: bool) -> Expr:
    if isinstance(x, exp.Mode):
        call = x
        deterministic = call.args.get("deterministic")
        if not (isinstance(deterministic, exp.Boolean) and deterministic.this):
            spelled = call.this.sql(dialect="spark") if call.this is not None else "x"
            raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE", "mode(x) picks any of the values tied for most "
                          "frequent: the order Spark reads the rows in decides", call,
                          f"break ties by the value: mode({spelled}, true) (the lowest), or mode() WITHIN GROUP "
                          f"(ORDER BY {spelled} DESC) (the highest)", function="mode")
        x = call.this
    argument = filtered(filter_node, x) if isinstance(filter_node, exp.Filter) else x
    stand_in = bind_agg(ctx, node, "mode_desc" if desc else "mode", argument=argument)
    refuse_inexact(ctx, node, "mode", stand_in.type, "take the mode of a column of a simple type")
    return stand_in
