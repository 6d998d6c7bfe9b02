"""Bind window function calls: ``f(args) OVER (PARTITION BY … ORDER BY … [frame])``.

A call becomes a :class:`~streamfold.ir.window.WindowCall` handed to the context's
``on_window`` hook, which returns its stand-in (a column of the block's ``Window`` node). Its
arguments, PARTITION BY and ORDER BY are bound in the clause's own context, so in an aggregate
block ``rank() OVER (ORDER BY sum(amt) DESC)`` reads the aggregate's column, as Spark does.
Supported: ``row_number``, ``rank``, ``dense_rank``, ``percent_rank``, ``cume_dist``, ``ntile``,
``lag``, ``lead``, ``first_value``, ``last_value``, ``nth_value``, and ``sum``, ``count``,
``avg``, ``min``, ``max`` over ROWS and RANGE frames (:mod:`.frames`). Everything else in
an OVER clause — a named window, IGNORE NULLS, DISTINCT, other functions — is refused by code.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.expr import Cast, Expr, Literal
from ...ir.rel import SortKey
from ...ir.types import BIGINT, DOUBLE, INT, DataType
from ...ir.window import WindowCall
from .aggregates import agg_type, boolean_aggregate, boolean_counts
from .covariance import bind_covariance, covariance, sums
from .context import ExprContext
from .frames import bind_frame, int_literal

_RANKING: dict[type, str] = {
    exp.RowNumber: "row_number", exp.Rank: "rank", exp.DenseRank: "dense_rank",
    exp.PercentRank: "percent_rank", exp.CumeDist: "cume_dist", exp.Ntile: "ntile",
}
_VALUES: dict[type, str] = {
    exp.Lag: "lag", exp.Lead: "lead", exp.FirstValue: "first_value", exp.LastValue: "last_value",
    exp.NthValue: "nth_value",
}
_AGGS: dict[type, str] = {exp.Sum: "sum", exp.Count: "count", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}
WINDOW_FUNCTIONS = ("row_number, rank, dense_rank, percent_rank, cume_dist, ntile, lag, lead, first_value, "
                    "last_value, nth_value, sum, count, avg, min, max")


def sort_key(o: exp.Ordered, e: Expr) -> SortKey:
    """An ORDER BY item as a :class:`SortKey`; NULLS FIRST/LAST kept only where written."""
    text = o.sql(dialect="spark").upper()
    explicit = "NULLS FIRST" in text or "NULLS LAST" in text
    return SortKey(e, bool(o.args.get("desc")), o.args.get("nulls_first") if explicit else None)


def bind_window(ctx: ExprContext, node: exp.Window) -> Expr:
    if ctx.on_window is None or ctx.in_agg:
        where = "inside an aggregate" if ctx.in_agg else f"in {ctx.clause}"
        raise ctx.err(UnsupportedError, "UNSUPPORTED_WINDOW", f"a window function (OVER …) is not allowed {where}",
                      node, "compute it in the select list of a subquery and read its column here",
                      construct="window")
    if node.alias or node.args.get("alias"):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_WINDOW", "named windows (OVER w, WINDOW w AS …) are not "
                      "supported", node, "write the window's PARTITION BY and ORDER BY in each OVER", construct="WINDOW")
    func = node.this
    if isinstance(func, (exp.IgnoreNulls, exp.RespectNulls)):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_WINDOW", "IGNORE/RESPECT NULLS is not supported", node,
                      "filter the NULLs out in a subquery, or use min/max over the frame", construct="IGNORE NULLS")
    boolean = boolean_aggregate(func)
    if boolean is not None:  # count_if, bool_or, bool_and: their counts over the same window
        counts = exp.paren(boolean_counts(*boolean), copy=False)  # (a root the counts are replaced under)
        for count in list(counts.find_all(exp.Count)):
            window = node.copy()
            window.set("this", count.copy())
            count.replace(window)
        return ctx.bind(counts.this)
    two = covariance(func)
    if two is not None:  # covariances, regr_*: the counts and sums they are made of, over the same window
        fn, first, second = two
        if first is None or second is None:
            return bind_covariance(ctx, func, fn, first, second)  # its WRONG_ARGUMENTS
        made = exp.paren(sums(ctx, func, fn, first, second), copy=False)
        for agg in list(made.find_all(exp.Count, exp.Sum, exp.Avg)):
            window = node.copy()
            window.set("this", agg.copy())
            agg.replace(window)
        return ctx.bind(made.this)
    partition = tuple(ctx.bind(p) for p in node.args.get("partition_by") or [])
    order_node = node.args.get("order")
    order = tuple(sort_key(o, ctx.bind(o.this)) for o in (order_node.expressions if order_node else []))
    fn, args, ty = _function(ctx, node, func)
    frame = bind_frame(ctx, node, fn, order)
    if fn in ("row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "lag", "lead") and not order:
        raise ctx.err(BindError, "WINDOW_NEEDS_ORDER", f"`{fn}` needs ORDER BY in its OVER clause", node,
                      "add ORDER BY … to the OVER clause (Spark refuses it without one)", function=fn)
    return ctx.on_window(WindowCall(fn, args, partition, order, frame, ty), node)


def _function(ctx: ExprContext, node: exp.Window, func: exp.Expr) -> tuple[str, tuple[Expr, ...], DataType]:
    """The function's name, bound arguments and Spark's result type."""
    if type(func) in _RANKING:
        fn = _RANKING[type(func)]
        if fn != "ntile":
            return fn, (), DOUBLE if fn in ("percent_rank", "cume_dist") else INT
        n = int_literal(ctx, func.this, "ntile's number of buckets", positive=True)
        return fn, (Literal(n, INT),), INT
    if type(func) in _VALUES:
        fn = _VALUES[type(func)]
        x = ctx.bind(func.this)
        if fn in ("lag", "lead"):
            offset = int_literal(ctx, func.args.get("offset"), f"{fn}'s offset") if func.args.get("offset") else 1
            default = func.args.get("default")
            d = ctx.bind(default) if default is not None else Literal(None, x.type)
            if d.type != x.type:
                d = Cast(d, x.type)
            return fn, (x, Literal(offset, INT), d), x.type
        if fn == "nth_value":
            n = int_literal(ctx, func.args.get("offset"), "nth_value's position", positive=True)
            return fn, (x, Literal(n, INT)), x.type
        return fn, (x,), x.type
    if type(func) in _AGGS:
        fn = _AGGS[type(func)]
        inner = func.this
        if isinstance(inner, exp.Distinct):
            raise ctx.err(UnsupportedError, "UNSUPPORTED_WINDOW", f"{fn}(DISTINCT …) OVER … is not supported", node,
                          "count the distinct values per group with GROUP BY and join them back", construct="DISTINCT")
        if inner is None or isinstance(inner, exp.Star):
            if fn != "count":
                raise ctx.err(BindError, "WRONG_ARGUMENTS", f"`{fn}(*)` is not valid", node, function=fn)
            return fn, (), BIGINT
        arg = ctx.bind(inner)
        return fn, (arg,), agg_type(ctx, func, fn, (arg,))
    name = func.sql_name().lower() if isinstance(func, exp.Func) else type(func).__name__
    # Spark's name, not the parser's
    name = {"quantile": "percentile", "arg_max": "max_by", "arg_min": "min_by"}.get(name, name)
    hint = f"supported window functions: {WINDOW_FUNCTIONS}"
    if name in ("percentile", "median", "max_by", "min_by"):
        hint = f"{name} is maintained as an aggregate: compute it per group in a derived table and join it back"
    raise ctx.err(UnsupportedError, "UNSUPPORTED_WINDOW", f"window function `{name}` is not supported", node,
                  hint, construct=name)
