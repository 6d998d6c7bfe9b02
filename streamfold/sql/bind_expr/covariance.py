"""Bind ``covar_pop``, ``covar_samp``, ``corr`` and the ``regr_*`` family as counts and sums, which
are exact under deletions.

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

Spark's linear regressions take the dependent variable first, ``regr_…(y, x)``::

    regr_count          →  n
    regr_avgx, _avgy    →  avg(CASE WHEN y IS NOT NULL THEN x END), and of y (Spark's avg, its types)
    regr_sxx, _syy, _sxy →  vx / n, vy / n, c / n                      (NULL if n = 0)
    regr_slope          →  c / vx                                        (NULL if vx = 0)
    regr_intercept      →  (Sy − Sx·c / vx) / n                          (NULL if vx = 0)
    regr_r2             →  1 if vy = 0, else c² / (vx·vy)                (NULL if vx = 0)

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

COVARIANCES: dict[type, str] = {
    exp.CovarPop: "covar_pop", exp.CovarSamp: "covar_samp", exp.Corr: "corr", exp.RegrCount: "regr_count",
    exp.RegrAvgx: "regr_avgx", exp.RegrAvgy: "regr_avgy", exp.RegrSxx: "regr_sxx", exp.RegrSyy: "regr_syy",
    exp.RegrSxy: "regr_sxy", exp.RegrSlope: "regr_slope", exp.RegrIntercept: "regr_intercept", exp.RegrR2: "regr_r2",
}
# the ones that are a count or an average of one side, exact over any numbers (no difference of products)
_PLAIN = frozenset({"regr_count", "regr_avgx", "regr_avgy"})
MAX_SCALE = 3  # the products' scale (two arguments') stays within the 6 places Spark's decimal arithmetic keeps


def covariance(node: exp.Expr) -> tuple[str, exp.Expr | None, exp.Expr | None] | None:
    """``(name, x, y)`` when ``node`` is one of the aggregates this module binds, else None."""
    fn = COVARIANCES.get(type(node))
    if fn is None:
        return None
    return fn, node.this, node.expression


def bind_covariance(ctx: ExprContext, node: exp.Expr, fn: str, x: exp.Expr | None, y: exp.Expr | None) -> Expr:
    if x is None or y is None:
        raise ctx.err(BindError, "WRONG_ARGUMENTS", f"`{fn}` takes two arguments", node,
                      f"write {fn}(y, x): the dependent variable first" if fn.startswith("regr_") else
                      f"write {fn}(x, y)", function=fn)
    if ctx.on_agg is None:
        raise ctx.err(BindError, "AGGREGATE_NOT_ALLOWED", f"aggregate `{fn}` is not allowed in {ctx.clause}", node,
                      "filter groups with HAVING instead of WHERE" if ctx.clause == "WHERE" else None,
                      function=fn, clause=ctx.clause)
    return ctx.bind(sums(ctx, node, fn, x, y))


def sums(ctx: ExprContext, node: exp.Expr, fn: str, first: exp.Expr, second: exp.Expr) -> exp.Expr:
    """``fn(first, second)`` as the expression over counts and sums above (the module docstring)."""
    x, y = (second, first) if fn.startswith("regr_") else (first, second)
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

    def present(e: exp.Expr) -> exp.Expr:
        return exp.Not(this=exp.Is(this=e.copy(), expression=exp.Null()))

    def when(cond: exp.Expr, value: exp.Expr) -> exp.Expr:
        return exp.Case(ifs=[exp.If(this=cond, true=value)])

    n = exp.Count(this=when(exp.and_(present(x), present(y)), exp.Literal.number(1)))
    if fn == "regr_count":
        return n
    if fn in ("regr_avgx", "regr_avgy"):
        return exp.Avg(this=when(present(y), x.copy()) if fn == "regr_avgx" else when(present(x), y.copy()))
    wide_x, wide_y = (_exact(arg, t) for arg, t in zip((x, y), types))

    def times(a: exp.Expr, b: exp.Expr) -> exp.Expr:
        return exp.Mul(this=exp.paren(a, copy=False), expression=exp.paren(b, copy=False))

    def minus(a: exp.Expr, b: exp.Expr) -> exp.Expr:
        return exp.Sub(this=a, expression=b)

    def double(e: exp.Expr) -> exp.Expr:
        return exp.cast(exp.paren(e, copy=False), "DOUBLE")

    sx = exp.Sum(this=when(present(y), wide_x.copy()))
    sy = exp.Sum(this=when(present(x), wide_y.copy()))
    sxy = exp.Sum(this=times(wide_x.copy(), wide_y.copy()))
    count = exp.cast(n.copy(), "DECIMAL(20, 0)")
    c = minus(times(count.copy(), sxy), times(sx.copy(), sy.copy()))
    nd = double(n.copy())
    none = exp.EQ(this=n.copy(), expression=exp.Literal.number(0))
    few = exp.LTE(this=n.copy(), expression=exp.Literal.number(1))
    if fn == "covar_pop":
        return _unless(none, exp.Div(this=double(c), expression=times(nd, nd.copy())))
    if fn == "covar_samp":
        return _unless(few, exp.Div(this=double(c), expression=times(nd, minus(nd.copy(), exp.Literal.number(1)))))
    if fn == "regr_sxy":
        return _unless(none, exp.Div(this=double(c), expression=nd))
    sxx = exp.Sum(this=when(present(y), times(wide_x.copy(), wide_x.copy())))
    vx = minus(times(count.copy(), sxx.copy()), times(sx.copy(), sx.copy()))
    flat_x = exp.or_(none, exp.EQ(this=exp.paren(vx.copy(), copy=False), expression=exp.Literal.number(0)))
    if fn == "regr_sxx":
        return _unless(none, exp.Div(this=double(vx), expression=nd))
    if fn == "regr_slope":
        return _unless(flat_x, exp.Div(this=double(c), expression=double(vx)))
    if fn == "regr_intercept":  # (Sy − slope·Sx) / n, in DOUBLE as Spark computes it
        slope = exp.Div(this=double(c), expression=double(vx.copy()))
        rest = minus(double(sy.copy()), times(slope, double(sx.copy())))
        return _unless(flat_x, exp.Div(this=exp.paren(rest, copy=False), expression=nd))
    syy = exp.Sum(this=when(present(x), times(wide_y.copy(), wide_y.copy())))
    vy = minus(times(count.copy(), syy), times(sy.copy(), sy.copy()))
    flat_y = exp.EQ(this=exp.paren(vy.copy(), copy=False), expression=exp.Literal.number(0))
    if fn == "regr_syy":
        return _unless(none, exp.Div(this=double(vy), expression=nd))
    if fn == "regr_r2":
        r2 = exp.Div(this=times(double(c), double(c.copy())), expression=times(double(vx), double(vy)))
        return _unless(flat_x, exp.Case(ifs=[exp.If(this=flat_y, true=exp.Literal.number(1.0))], default=r2))
    assert fn == "corr", fn
    root = exp.Sqrt(this=times(double(vx), double(vy)))
    return _unless(exp.or_(few, flat_x, flat_y), exp.Div(this=double(c), expression=root))


def _unless(cond: exp.Expr, value: exp.Expr) -> exp.Expr:
    return exp.Case(ifs=[exp.If(this=cond, true=exp.Null())], default=value)


def _exact(arg: exp.Expr, t: DataType) -> exp.Expr:
    """The argument as a decimal whose sums and products are exact: integers as DECIMAL(20, 0)."""
    if t.is_decimal:
        return exp.paren(arg.copy(), copy=False)
    return exp.cast(exp.paren(arg.copy(), copy=False), "DECIMAL(20, 0)")


def _check(ctx: ExprContext, node: exp.Expr, fn: str, arg: exp.Expr, t: DataType) -> None:
    text = arg.sql(dialect="spark")
    if t.is_integral or t.is_null or (t.is_decimal and (t.scale or 0) <= MAX_SCALE) or (fn in _PLAIN and t.is_numeric):
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
