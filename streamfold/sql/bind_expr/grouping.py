"""Bind ``grouping(x)`` and ``grouping_id(x, …)``: which GROUP BY keys a row of a grouping set
rolled up (1) or grouped by (0).

They are handed to the block's ``on_agg`` hook as aggregate calls, so the select list, HAVING and
ORDER BY lift them as they lift an aggregate; the grouping sets' relation
(:mod:`..bind.grouping_sets`) gives each its constant per set. ``grouping_id()`` without
arguments reads every GROUP BY key. Types are Spark's: TINYINT and BIGINT.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError
from ...ir.expr import Agg, Expr
from ...ir.types import BIGINT, TINYINT
from .context import ExprContext


def bind_grouping(ctx: ExprContext, node: exp.Expr) -> Expr:
    fn = "grouping" if isinstance(node, exp.Grouping) else "grouping_id"
    if ctx.on_agg is None or ctx.in_agg:
        raise ctx.err(BindError, "GROUPING_NOT_ALLOWED", f"`{fn}()` is not allowed in {ctx.clause}", node,
                      f"{fn}() goes in the select list, HAVING or ORDER BY of a GROUP BY with GROUPING SETS, "
                      "CUBE or ROLLUP", function=fn, clause=ctx.clause)
    args = list(node.expressions)
    if fn == "grouping" and len(args) != 1:
        raise ctx.err(BindError, "WRONG_ARGUMENTS", "grouping() takes one GROUP BY column", node, function=fn)
    ctx.in_agg = True
    try:
        bound = tuple(ctx.bind(a) for a in args)
    finally:
        ctx.in_agg = False
    return ctx.on_agg(Agg(fn, bound, False, TINYINT if fn == "grouping" else BIGINT), node)
