"""Spark's average of decimals from a sum and a count, shared by the answer of a maintained
aggregate (plan/aggregates.py) and the roll-up of grouping sets (sql/bind/grouping_sets.py)."""

from __future__ import annotations

from decimal import Decimal

from .expr import Call, Case, Cast, Expr, Literal
from .types import BOOLEAN, DataType, avg_type, decimal, sum_type


def decimal_average(total: Expr, count: Expr, arg_t: DataType) -> Expr:
    """Spark's avg of a decimal(p, s): the sum divided by the count, rounded once to the avg
    type decimal(p + 4, s + 4).

    Spark divides exactly and rounds to the result's scale. A SQL division of the sum, typed
    decimal(q, s), by the count keeps max(38 − (q − s), 6) decimals (the precision-loss rule),
    which is the s + 4 needed while q ≤ 34: the sum is cast to decimal(min(p + 10, 34), s). A
    sum too large for 34 digits (p > 24 and a sum past 10^(34 − s)) is divided as
    decimal(38, s), which keeps fewer decimals than Spark's."""
    assert arg_t.precision is not None and arg_t.scale is not None
    t = avg_type(arg_t)
    n = Cast(count, decimal(20, 0))
    narrow_t = decimal(min(arg_t.precision + 10, 34), arg_t.scale)
    narrow = Cast(Call("/", (Cast(total, narrow_t), n), t), t)
    if narrow_t == sum_type(arg_t):
        return narrow
    wide = Cast(Call("/", (Cast(total, sum_type(arg_t)), n), t), t)
    bound = Literal(Decimal(10) ** (34 - arg_t.scale), decimal(35 - arg_t.scale, 0))
    fits = Call("<", (Call("abs", (total,), total.type, "abs({0})"), bound), BOOLEAN)
    return Case(((fits, narrow),), wide, t)
