"""Bind ``covar_pop``, ``covar_samp`` and ``corr`` as counts and sums, which are exact under deletions.

Over the rows where both arguments are non-NULL (``n`` of them), with ``X`` and ``Y`` the arguments
as decimals::

    n     = count(CASE WHEN x IS NOT NULL AND y IS NOT NULL THEN 1 END)
    Sx    = sum(CASE WHEN y IS NOT NULL THEN X END)        Sy  = sum(CASE WHEN x IS NOT NULL THEN Y END)
    Sxy   = sum(X * Y)                                     Sxx = sum(CASE WHEN y IS NOT NULL THEN X * X END)
    c     = n·Sxy − Sx·Sy    (n² times the population covariance, exactly)

    covar_pop(x, y)   →  CASE WHEN n = 0 THEN NULL ELSE c / n² END
    covar_samp(x, y)  →  CASE WHEN n <= 1 THEN NULL ELSE c / (n·(n − 1)) END
    corr(x, y)        →  CASE WHEN n <= 1 OR vx = 0 OR vy = 0 THEN NULL ELSE c / sqrt(vx·vy) END
                         (vx = n·Sxx − Sx², vy = n·Syy − Sy², exactly)

Each count and sum is a partial the state keeps (plan/aggregates.py), so nothing new is maintained;
the division happens in the answer, as for ``avg``. These are Spark's values: NULL for no rows, for
one row (the sample forms) and for a correlation with a constant side (Spark divides by zero to
NULL there; DuckDB says NaN). The numerators are computed in DECIMAL, so a constant side gives
exactly 0 — over FLOAT or DOUBLE the same formula would leave a rounding residue where Spark's
answer is NULL, so those arguments (and decimals of more than 3 places, whose products Spark's
decimal arithmetic would round) are refused with a hint to CAST them.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.expr import Expr
from ...ir.types import DataType
from .context import ExprContext

COVARIANCES: dict[type, str] = {exp.CovarPop: "covar_pop", exp.CovarSamp: "covar_samp", exp.Corr: "corr"}
MAX_SCALE = 3  # the products' scale (two arguments') stays within the 6 places Spark's decimal arithmetic keeps


def covariance(node: exp.Expr) -> tuple[str, exp.Expr, exp.Expr] | None:
    """``(name, x, y)`` when ``node`` is one of the aggregates this module binds, else None."""
    fn = COVARIANCES.get(type(node))
    if fn is None:
        return None
    return fn, node.this, node.expression


def bind_covariance(ctx: ExprContext, node: exp.Expr, fn: str, x: exp.Expr, y: exp.Expr) -> Expr:
    if ctx.on_agg is None:
        raise ctx.err(BindError, "AGGREGATE_NOT_ALLOWED", f"aggregate `{fn}` is not allowed in {ctx.clause}", node,
                      "filter groups with HAVING instead of WHERE" if ctx.clause == "WHERE" else None,
                      function=fn, clause=ctx.clause)
    return ctx.bind(sums(ctx, node, fn, x, y))


def sums(ctx: ExprContext, node: exp.Expr, fn: str, x: exp.Expr, y: exp.Expr) -> exp.Expr:
    """``fn(x, y)`` as the expression over counts and sums above (the module docstring)."""
    if isinstance(x, exp.Distinct) or isinstance(y, exp.Distinct):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE", f"`{fn}(DISTINCT …)` is not supported", node,
                      f"compute {fn} over a SELECT DISTINCT in a derived table", function=fn)
    if ctx.in_agg:
        raise ctx.err(BindError, "NESTED_AGGREGATE", f"aggregate `{fn}` inside another aggregate", node,
                      "compute the inner aggregate in a subquery", function=fn)
    ctx.in_agg = True
    try:
        types = [ctx.bind(x).type, ctx.bind(y).type]
    finally:
        ctx.in_agg = False
    for arg, t in zip((x, y), types):
        _check(ctx, node, fn, arg, t)
    wide_x, wide_y = (_exact(arg, t) for arg, t in zip((x, y), types))

    def present(e: exp.Expr) -> exp.Expr:
        return exp.Not(this=exp.Is(this=e.copy(), expression=exp.Null()))

    def when(cond: exp.Expr, value: exp.Expr) -> exp.Expr:
        return exp.Case(ifs=[exp.If(this=cond, true=value)])

    def times(a: exp.Expr, b: exp.Expr) -> exp.Expr:
        return exp.Mul(this=exp.paren(a, copy=False), expression=exp.paren(b, copy=False))

    def minus(a: exp.Expr, b: exp.Expr) -> exp.Expr:
        return exp.Sub(this=a, expression=b)

    def double(e: exp.Expr) -> exp.Expr:
        return exp.cast(exp.paren(e, copy=False), "DOUBLE")

    n = exp.Count(this=when(exp.and_(present(x), present(y)), exp.Literal.number(1)))
    sx = exp.Sum(this=when(present(y), wide_x.copy()))
    sy = exp.Sum(this=when(present(x), wide_y.copy()))
    sxy = exp.Sum(this=times(wide_x.copy(), wide_y.copy()))
    count = exp.cast(n.copy(), "DECIMAL(20, 0)")
    c = minus(times(count.copy(), sxy), times(sx.copy(), sy.copy()))
    nd = double(n.copy())
    if fn == "covar_pop":
        return _unless(exp.EQ(this=n.copy(), expression=exp.Literal.number(0)),
                       exp.Div(this=double(c), expression=times(nd, nd.copy())))
    few = exp.LTE(this=n.copy(), expression=exp.Literal.number(1))
    if fn == "covar_samp":
        return _unless(few, exp.Div(this=double(c), expression=times(nd, minus(nd.copy(), exp.Literal.number(1)))))
    sxx = exp.Sum(this=when(present(y), times(wide_x.copy(), wide_x.copy())))
    syy = exp.Sum(this=when(present(x), times(wide_y.copy(), wide_y.copy())))
    vx = minus(times(count.copy(), sxx), times(sx.copy(), sx.copy()))
    vy = minus(times(count.copy(), syy), times(sy.copy(), sy.copy()))
    constant = exp.or_(few, exp.EQ(this=exp.paren(vx.copy(), copy=False), expression=exp.Literal.number(0)),
                       exp.EQ(this=exp.paren(vy.copy(), copy=False), expression=exp.Literal.number(0)))
    root = exp.Sqrt(this=times(double(vx), double(vy)))
    return _unless(constant, exp.Div(this=double(c), expression=root))


def _unless(cond: exp.Expr, value: exp.Expr) -> exp.Expr:
    return exp.Case(ifs=[exp.If(this=cond, true=exp.Null())], default=value)


def _exact(arg: exp.Expr, t: DataType) -> exp.Expr:
    """The argument as a decimal whose sums and products are exact: integers as DECIMAL(20, 0)."""
    if t.is_decimal:
        return exp.paren(arg.copy(), copy=False)
    return exp.cast(exp.paren(arg.copy(), copy=False), "DECIMAL(20, 0)")


def _check(ctx: ExprContext, node: exp.Expr, fn: str, arg: exp.Expr, t: DataType) -> None:
    text = arg.sql(dialect="spark")
    if t.is_integral or t.is_null or (t.is_decimal and (t.scale or 0) <= MAX_SCALE):
        return
    if t.is_decimal or t.name in ("FLOAT", "DOUBLE"):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE",
                      f"`{fn}` of a {t.sql()} argument (`{text}`) is not maintained exactly: the sums it is computed "
                      "from would round, and a constant side would not come out as Spark's NULL", node,
                      f"CAST the argument to an integer or to DECIMAL(p, s) with s <= {MAX_SCALE}, e.g. "
                      f"{fn}(CAST({text} AS DECIMAL(18, 3)), …): its sums are exact under deletions",
                      function=fn, actual=t.sql())
    raise ctx.mismatch(node, f"`{fn}` needs numbers, but its argument `{text}` is {t}",
                       "CAST the argument to a number", function=fn, actual=t.sql())
