"""Bind Spark's time-zone shifts: ``from_utc_timestamp(ts, tz)`` (and ``ts AT TIME ZONE tz``,
which sqlglot reads as it), ``to_utc_timestamp(ts, tz)`` and ``convert_timezone([from,] to, ts)``.

Each reads its row alone, so it is kept exactly as any expression is. The first two shift a
TIMESTAMP (a DATE or a STRING is cast to one, as Spark casts it) between UTC and a zone's wall
clock and give a TIMESTAMP; ``convert_timezone`` reads a wall clock (a TIMESTAMP is taken as its
wall clock in the session's zone) in ``from`` (the session's zone when left out) and gives the
wall clock in ``to``, a TIMESTAMP_NTZ, as Spark does.
"""

from __future__ import annotations

from sqlglot import exp

from ...ir.expr import Call, Cast, Expr
from ...ir.types import TIMESTAMP, TIMESTAMP_NTZ, DataType
from .context import ExprContext


def bind_time_zone(ctx: ExprContext, node: exp.AtTimeZone | exp.FromTimeZone) -> Expr:
    name = "from_utc_timestamp" if isinstance(node, exp.AtTimeZone) else "to_utc_timestamp"
    ts = _as(ctx, node.this, TIMESTAMP, name)
    zone = _zone(ctx, node.args["zone"], name)
    return Call(name, (ts, zone), TIMESTAMP, f"{name}({{0}}, {{1}})")


def bind_convert_timezone(ctx: ExprContext, node: exp.ConvertTimezone) -> Expr:
    ts = _as(ctx, node.args["timestamp"], TIMESTAMP_NTZ, "convert_timezone")
    target = _zone(ctx, node.args["target_tz"], "convert_timezone")
    source = node.args.get("source_tz")
    if source is None:
        return Call("convert_timezone", (target, ts), TIMESTAMP_NTZ, "convert_timezone({0}, {1})")
    return Call("convert_timezone", (_zone(ctx, source, "convert_timezone"), target, ts), TIMESTAMP_NTZ,
                "convert_timezone({0}, {1}, {2})")


def _as(ctx: ExprContext, node: exp.Expr, t: DataType, name: str) -> Expr:
    inner = node.this if isinstance(node, exp.Cast) and node.to.is_type("timestamp") else node
    value = ctx.bind(inner)
    if value.type == t or value.type.is_null:
        return value
    if not (value.type.is_datetime or value.type.is_string):
        raise ctx.mismatch(node, f"`{name}` shifts a TIMESTAMP, not {value.type}", "pass a TIMESTAMP column",
                           function=name, actual=value.type.sql())
    return Cast(value, t)


def _zone(ctx: ExprContext, node: exp.Expr, name: str) -> Expr:
    zone = ctx.bind(node)
    if not (zone.type.is_string or zone.type.is_null):
        raise ctx.mismatch(node, f"`{name}` needs a time zone's name, not {zone.type}",
                           "name the zone: 'America/New_York', 'UTC' or '+05:30'", function=name,
                           actual=zone.type.sql())
    return zone
