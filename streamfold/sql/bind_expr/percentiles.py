"""Bind Spark's exact percentiles — ``percentile(x, p)``, ``median(x)`` and
``percentile_cont(p) WITHIN GROUP (ORDER BY x)`` — as one aggregate, ``percentile(x, p)``.

Spark computes the three alike (its plan shows ``percentile(x, p, 1)`` for each): it counts each
distinct value of ``x`` in a group, sorts the values and interpolates linearly at position
``p·(n − 1)``. So the state is the group's multiset of values, the one min and max keep under
deletions (plan/aggregates.py), and the answer is Spark's own ``percentile`` over that multiset
with each value's count as its frequency — the same counts, the same sort, the same arithmetic as
the batch query over the rows, so the same double to the last bit, after deletions as well.

Refused, each with a coded error: a fraction that is not a constant in [0, 1]; several fractions
(an array); a frequency argument; DISTINCT; ``ORDER BY x DESC`` (Spark interpolates from the other
end, which ``1 − p`` ascending matches only up to rounding); non-numeric values.

``percentile_disc(p) WITHIN GROUP (ORDER BY x [DESC])`` keeps the same multiset; Spark has no
frequency argument for it, so its answer walks the group's sorted (value, count) pairs to the
first whose running count reaches ``max(1, ceil(p · n))`` (plan/rules_aggregates.py) — checked
equal to Spark's own over 60 groups, 23 fractions and both orders. ``percentile_approx`` stays
refused by name (aggregates.py).
"""

from __future__ import annotations

from decimal import Decimal

from sqlglot import exp

from ...errors import SqlError, UnsupportedError
from ...ir.expr import Call, Case, Cast, Expr, Literal
from ...ir.types import BOOLEAN, DOUBLE, array
from .aggregates import bind_agg, bind_filter, filtered
from .context import ExprContext

FN = "percentile"


def percentile(node: exp.Expr) -> tuple[exp.Expr, exp.Expr | None, bool] | None:
    """``(x, p, descending)`` when ``node`` is one of the exact percentiles bound here (``p`` None
    for ``median``), else None."""
    if type(node) is exp.Quantile:  # not its subclass ApproxQuantile (percentile_approx): refused by name
        return node.this, node.args.get("quantile"), False
    if type(node) is exp.Median:
        return node.this, None, False
    if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileCont) \
            and node.this.args.get("expression") is None:
        order = node.expression.expressions if isinstance(node.expression, exp.Order) else []
        if len(order) == 1:
            ordered = order[0]
            return ordered.this, node.this.this, bool(ordered.args.get("desc"))
    return None


def percentile_disc(node: exp.Expr) -> tuple[exp.Expr, exp.Expr, bool] | None:
    """``(x, p, descending)`` of ``percentile_disc(p) WITHIN GROUP (ORDER BY x [DESC])``, else None."""
    if isinstance(node, exp.WithinGroup) and isinstance(node.this, exp.PercentileDisc) \
            and node.this.args.get("expression") is None and isinstance(node.expression, exp.Order) \
            and len(node.expression.expressions) == 1:
        ordered = node.expression.expressions[0]
        return ordered.this, node.this.this, bool(ordered.args.get("desc"))
    return None


def bind_percentile_disc(ctx: ExprContext, node: exp.Expr, x: exp.Expr, p: exp.Expr, desc: bool) -> Expr:
    """``percentile_disc(p) WITHIN GROUP (ORDER BY x)``: the first value, in that order, whose
    rows reach ``max(1, ceil(p · n))`` of the group's ``n`` non-NULL rows (a DOUBLE, as in Spark)."""
    name = "percentile_disc"
    if isinstance(p, exp.Array):
        raise _refuse(ctx, node, name, "several percentiles in one call (an array of fractions) are not supported",
                      "one call per fraction")
    fraction = _fraction(ctx, node, name, p)
    return bind_agg(ctx, node, "percentile_disc_desc" if desc else name, argument=x,
                    constants=(Literal(fraction, DOUBLE),))


def bind_filtered(ctx: ExprContext, node: exp.Filter) -> Expr:
    """``percentile(x, p) FILTER (WHERE c)`` is ``percentile(CASE WHEN c THEN x END, p)`` (it skips
    NULLs); any other aggregate's FILTER as :func:`.aggregates.bind_filter` binds it."""
    discrete = percentile_disc(node.this)
    if discrete is not None:
        return bind_percentile_disc(ctx, node.this, filtered(node, discrete[0]), discrete[1], discrete[2])
    quantile = percentile(node.this)
    if quantile is None:
        return bind_filter(ctx, node)
    x, p, desc = quantile
    return bind_percentile(ctx, node.this, filtered(node, x), p, desc)


def bind_percentile(ctx: ExprContext, node: exp.Expr, x: exp.Expr, p: exp.Expr | None, desc: bool) -> Expr:
    """``percentile(x, p)`` as an :class:`Agg` handed to the context's aggregate hook."""
    name = "median" if isinstance(node, exp.Median) else "percentile_cont" if desc or isinstance(node, exp.WithinGroup) \
        else FN
    if isinstance(x, exp.Distinct):
        raise _refuse(ctx, node, name, f"{name}(DISTINCT …) is not supported",
                      "a percentile over the distinct values: compute it over a SELECT DISTINCT in a derived table")
    if desc:
        raise _refuse(ctx, node, name, "percentile_cont … WITHIN GROUP (ORDER BY x DESC) is not supported",
                      "order ascending with the complementary fraction: percentile_cont(1 - p) WITHIN GROUP "
                      "(ORDER BY x) (the same value up to the last digit)")
    if _frequency_given(ctx, node, p):
        raise _refuse(ctx, node, name, "percentile with a frequency argument is not supported",
                      "repeat the rows instead, or weight them in a sum")
    if isinstance(p, exp.Array):  # percentile(x, array(p1, p2, …)): one percentile a fraction, as an array
        return _percentiles(ctx, node, name, x, p)
    fraction = 0.5 if p is None else _fraction(ctx, node, name, p)
    return bind_agg(ctx, node, FN, argument=x, constants=(Literal(fraction, DOUBLE),))


def _percentiles(ctx: ExprContext, node: exp.Expr, name: str, x: exp.Expr, fractions: exp.Array) -> Expr:
    """``percentile(x, array(p1, p2, …))``: Spark's ARRAY<DOUBLE> of the percentiles, each kept over
    the one multiset of ``x``; NULL, not an array of NULLs, for a group without a value, as Spark."""
    if not fractions.expressions:
        raise _refuse(ctx, node, name, "an empty array of fractions", "give at least one fraction, e.g. array(0.5)")
    each = [bind_agg(ctx, node, FN, argument=x, constants=(Literal(_fraction(ctx, node, name, f), DOUBLE),))
            for f in fractions.expressions]
    listed = Call("array", tuple(each), array(DOUBLE), "array(" + ", ".join(f"{{{i}}}" for i in range(len(each))) + ")")
    return Case(((Call("IS NULL", (each[0],), BOOLEAN), Literal(None, listed.type)),), listed, listed.type)


def _fraction(ctx: ExprContext, node: exp.Expr, name: str, p: exp.Expr) -> float:
    bound = ctx.bind(p)
    if isinstance(bound, Cast) and bound.type == DOUBLE and isinstance(bound.expr, Literal):
        bound = bound.expr  # 0.5D: the literal as a double, as Spark reads it (float() below)
    value = bound.value if isinstance(bound, Literal) else None
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        raise _refuse(ctx, node, name, f"the fraction of {name} must be a constant number",
                      "write the fraction as a literal between 0 and 1, e.g. 0.5")
    fraction = float(value)
    if not 0.0 <= fraction <= 1.0:
        raise _refuse(ctx, node, name, f"the fraction of {name} must be between 0 and 1, not {value}",
                      "write the fraction as a literal between 0 and 1, e.g. 0.5")
    return fraction


def _frequency_given(ctx: ExprContext, node: exp.Expr, p: exp.Expr | None) -> bool:
    """Whether ``percentile(x, p, frequency)`` was written: the parser keeps only ``x`` and ``p``,
    so the text after ``p`` up to the call's closing parenthesis is read for a third argument."""
    if type(node) is not exp.Quantile or p is None:
        return False
    end = max((m["end"] for n in p.walk() if (m := getattr(n, "_meta", None)) and "end" in m), default=None)
    if end is None:
        return False
    depth = 0
    for ch in ctx.sql[end + 1:]:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                return False
            depth -= 1
        elif ch == "," and depth == 0:
            return True
    return False


def _refuse(ctx: ExprContext, node: exp.Expr, name: str, message: str, hint: str) -> SqlError:
    return ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE", message, node, hint, function=name)
