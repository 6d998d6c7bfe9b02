"""Bind literals and casts, typing constants as Spark does.

A number is INT, then BIGINT, then DECIMAL as its digits need, DOUBLE with an exponent; a string
cast to DATE or TIMESTAMP is read here, into a typed literal, so a bad date is an error before the
query runs (``try_cast`` gives NULL instead).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal, InvalidOperation

from sqlglot import exp

from ...errors import UnsupportedError
from ...ir.expr import Cast, Expr, Literal
from ...ir.types import BIGINT, BOOLEAN, DATE, DOUBLE, INT, NULL, STRING, TIMESTAMP, DataType, decimal, parse_type
from .context import ExprContext


def bind_literal(ctx: ExprContext, node: exp.Literal) -> Expr:
    text = node.this
    if node.is_string:
        return Literal(text, STRING)
    return number_literal(text)


def bind_boolean(ctx: ExprContext, node: exp.Boolean) -> Expr:
    return Literal(bool(node.this), BOOLEAN)


def bind_null(ctx: ExprContext, node: exp.Null) -> Expr:
    return Literal(None, NULL)


def number_literal(text: str) -> Literal:
    """Type a numeric literal as Spark does: INT, then BIGINT, then DECIMAL; exponent means DOUBLE."""
    lowered = text.lower()
    if "e" in lowered:
        return Literal(float(text), DOUBLE)
    if "." not in text:
        value = int(text)
        if -(2**31) <= value < 2**31:
            return Literal(value, INT)
        if -(2**63) <= value < 2**63:
            return Literal(value, BIGINT)
        return Literal(Decimal(text), decimal(len(text.lstrip("-")), 0))
    try:
        d = Decimal(text)
    except InvalidOperation:
        return Literal(float(text), DOUBLE)
    digits = text.lstrip("-").replace(".", "")
    scale = len(text.split(".")[1])
    precision = max(len(digits.lstrip("0")) if digits.strip("0") else 1, scale)
    if precision > 38:
        return Literal(float(text), DOUBLE)
    return Literal(d, decimal(max(precision, 1), scale))


def bind_cast(ctx: ExprContext, node: exp.Cast) -> Expr:
    to = node.args["to"]
    try:
        target = parse_type(to.sql(dialect="spark"))
    except ValueError as e:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_TYPE", str(e), to,
                      "a DECIMAL has at most 38 digits, its scale at most its precision" if "DECIMAL" in str(e)
                      else "cast to a simple type (INT, BIGINT, DOUBLE, DECIMAL(p, s), STRING, DATE, TIMESTAMP, "
                      "BOOLEAN), an ARRAY or a STRUCT", construct="type") from None
    inner_node = node.this
    # try_cast: NULL where the value does not convert. (sqlglot reads Spark's CAST as a TryCast
    # too — without ANSI mode Spark's cast is lenient — and marks only try_cast `safe`.)
    safe = bool(node.args.get("safe"))
    if isinstance(inner_node, exp.Literal) and inner_node.is_string and target.name in ("DATE", "TIMESTAMP"):
        return _typed_literal(ctx, inner_node, target, safe)
    inner = ctx.bind(inner_node)
    return Cast(inner, target, safe=safe)


def _typed_literal(ctx: ExprContext, node: exp.Literal, target: DataType, safe: bool = False) -> Expr:
    text = node.this.strip()
    try:
        if target.name == "DATE":
            return Literal(dt.date.fromisoformat(text), DATE)
        return Literal(dt.datetime.fromisoformat(text), TIMESTAMP)
    except ValueError:
        if safe:
            return Literal(None, target)
        raise ctx.mismatch(node, f"`{text}` is not a valid {target.name.lower()}",
                           "write dates as 'YYYY-MM-DD'", expected=target.sql()) from None
