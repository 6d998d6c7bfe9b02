"""Bind arithmetic: ``+ - * / %``, unary minus, ``DIV``, ``||``, and date arithmetic.

Result types follow Spark's rules (:func:`arithmetic_type`). Dates are Spark's functions, not
operators: ``date ± n`` is ``date_add``/``date_sub``, ``date - date`` is ``datediff``, and
``date ± INTERVAL n unit`` is ``date_add`` (days, weeks) or ``add_months`` (months, years) —
folded to a literal when the date is one. A timestamp (or a date moved by hours, minutes,
seconds, milli- or microseconds, which Spark makes a timestamp) is moved by Spark's own interval
values, ``make_dt_interval`` and ``make_ym_interval``, so the result keeps its time of day and
follows Spark's session time zone as the batch query does.
"""

from __future__ import annotations

import calendar
import datetime as dt

from sqlglot import exp

from ...errors import UnsupportedError
from ...ir.expr import Call, Cast, Expr, Literal, days_added, micros_added
from ...ir.types import BIGINT, DATE, INT, STRING, TIMESTAMP, arithmetic_type
from ..durations import duration_micros
from .context import ExprContext

ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}


def bind_arith(ctx: ExprContext, node: exp.Binary, op: str) -> Expr:
    left_node, right_node = node.this, node.expression
    if isinstance(right_node, exp.Interval) or isinstance(left_node, exp.Interval):
        return _interval_arith(ctx, node, op)
    left, right = ctx.bind(left_node), ctx.bind(right_node)
    if op in "+-" and left.type.name == "DATE" and right.type.is_integral:
        fn = "date_add" if op == "+" else "date_sub"
        return Call(fn, (left, right), DATE, f"{fn}({{0}}, {{1}})")
    if op == "-" and left.type.name == "DATE" and right.type.name == "DATE":
        return Call("datediff", (left, right), INT, "datediff({0}, {1})")
    t = arithmetic_type(op, left.type, right.type)
    if t is None:
        raise ctx.mismatch(
            node, f"cannot apply `{op}` to {left.type} and {right.type}",
            "arithmetic needs numbers; CAST a string column if it holds numbers",
            operator=op, left=left.type.sql(), right=right.type.sql(),
        )
    return Call(op, (left, right), t)


def _interval_arith(ctx: ExprContext, node: exp.Binary, op: str) -> Expr:
    if op not in "+-" or not isinstance(node.expression, exp.Interval):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_EXPRESSION",
                      "only `date ± INTERVAL n unit` is supported", node, construct="interval")
    base = ctx.bind(node.this)
    interval = node.expression
    amount_node = interval.this
    unit = (interval.unit.name if interval.unit is not None else "DAY").upper().rstrip("S")
    try:
        amount = int(amount_node.name if isinstance(amount_node, exp.Literal) else str(amount_node))
    except ValueError:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_EXPRESSION",
                      "an INTERVAL must have a constant whole number", interval, construct="interval") from None
    if op == "-":
        amount = -amount
    if base.type.name not in ("DATE", "TIMESTAMP"):
        raise ctx.mismatch(node, f"cannot add an interval to {base.type}", actual=base.type.sql())
    micros = duration_micros(f"{amount} {unit}") if unit not in ("MONTH", "YEAR") else None
    if unit not in ("MONTH", "YEAR") and micros is None:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_EXPRESSION", f"INTERVAL unit {unit} is not supported",
                      interval, "use YEAR, MONTH, WEEK, DAY, HOUR, MINUTE, SECOND, MILLISECOND or MICROSECOND",
                      construct="interval")
    if base.type.name == "TIMESTAMP" or unit not in ("DAY", "WEEK", "MONTH", "YEAR"):
        return _moved_timestamp(base, micros, amount * (12 if unit == "YEAR" else 1))
    if isinstance(base, Literal) and isinstance(base.value, dt.date):
        return Literal(_shift_date(base.value, amount, unit), DATE)
    if unit in ("DAY", "WEEK"):
        return days_added(base, amount * (7 if unit == "WEEK" else 1))
    months = amount * (12 if unit == "YEAR" else 1)
    return Call("add_months", (base, Literal(months, INT)), DATE, "add_months({0}, {1})")


def _moved_timestamp(base: Expr, micros: int | None, months: int) -> Expr:
    """``base`` (a timestamp, or a date Spark casts to one) moved by ``micros`` microseconds, or by
    ``months`` months when ``micros`` is None, as Spark moves it by an interval value."""
    ts = base if base.type.name == "TIMESTAMP" else Cast(base, TIMESTAMP)
    if micros is None:
        return Call("timestamp_add_months", (ts, Literal(months, INT)), TIMESTAMP, "({0} + make_ym_interval(0, {1}))")
    return micros_added(ts, micros)


def _shift_date(d: dt.date, amount: int, unit: str) -> dt.date:
    if unit in ("DAY", "WEEK"):
        return d + dt.timedelta(days=amount * (7 if unit == "WEEK" else 1))
    months = amount * (12 if unit == "YEAR" else 1)
    month_index = d.month - 1 + months
    year, month = d.year + month_index // 12, month_index % 12 + 1
    return dt.date(year, month, min(d.day, calendar.monthrange(year, month)[1]))


def bind_neg(ctx: ExprContext, node: exp.Neg) -> Expr:
    inner = ctx.bind(node.this)
    if isinstance(inner, Literal) and inner.value is not None and inner.type.is_numeric:
        return Literal(-inner.value, inner.type)
    if not (inner.type.is_numeric or inner.type.is_null):
        raise ctx.mismatch(node, f"cannot negate a value of type {inner.type}", actual=inner.type.sql())
    return Call("neg", (inner,), inner.type)


def bind_int_div(ctx: ExprContext, node: exp.IntDiv) -> Expr:
    left, right = ctx.bind(node.this), ctx.bind(node.expression)
    if not (left.type.is_integral or left.type.is_decimal) or not (right.type.is_integral or right.type.is_decimal):
        raise ctx.mismatch(node, f"DIV needs whole numbers, not {left.type} and {right.type}",
                           left=left.type.sql(), right=right.type.sql())
    return Call("div", (left, right), BIGINT)


def bind_concat(ctx: ExprContext, node: exp.DPipe) -> Expr:
    left, right = ctx.bind(node.this), ctx.bind(node.expression)
    return Call("concat", (left, right), STRING, "concat({0}, {1})")
