"""A window's frame, ``ROWS|RANGE BETWEEN start AND end``, bound to a :class:`~streamfold.ir.window.Frame`.

A ROWS offset counts rows. A RANGE offset is a distance on the one ORDER BY value, as Spark takes
it: a number over a number; over a DATE a number of days, or an interval of whole days or of
months (``INTERVAL 7 DAYS``, ``INTERVAL 1 MONTH``); over a TIMESTAMP an interval (``INTERVAL 90
MINUTES``, ``INTERVAL '1 02:00:00' DAY TO SECOND``, ``INTERVAL 1 MONTH``). Spark's own checks are
kept: two interval bounds of different types (``INTERVAL 1 DAY … INTERVAL 2 HOURS``), a number
beside an interval, an hour over a DATE or a number over a TIMESTAMP are refused as Spark refuses
them. The frame is maintained like any other: the partitions a batch touched are computed again by
Spark's window operator (``plan/rules_windows.py``), so a frame over time is exact under deletions
and out-of-order rows.
"""

from __future__ import annotations

import re
from decimal import Decimal

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.rel import SortKey
from ...ir.window import AGGREGATES, FRAMELESS, Frame, FrameKind
from ..durations import duration_micros
from .context import ExprContext

# A day-time interval's fields, largest first; a year-month interval's, in months.
_FIELDS = ("DAY", "HOUR", "MINUTE", "SECOND")
_MONTHS = {"YEAR": 12, "MONTH": 1}
_DAY = duration_micros("1 day") or 0


def int_literal(ctx: ExprContext, node: exp.Expr | None, what: str, positive: bool = False) -> int:
    value = node.this if isinstance(node, exp.Literal) and not node.is_string else None
    if value is None or not str(value).lstrip("-").isdigit() or (positive and int(value) <= 0):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_WINDOW", f"{what} must be {'a positive' if positive else 'an'} "
                      "integer literal", node, "write a whole number itself, not an expression or a decimal",
                      construct="window")
    return int(value)


def _number(ctx: ExprContext, node: exp.Expr | None) -> int | Decimal:
    """A RANGE offset over a number: a whole number, or a decimal one (``0.5 PRECEDING``) as Spark takes it."""
    text = str(node.this) if isinstance(node, exp.Literal) and not node.is_string else ""
    if re.fullmatch(r"-?\d+\.\d*|-?\.\d+", text):
        return Decimal(text)
    return int_literal(ctx, node, "a RANGE frame's offset")


def bind_frame(ctx: ExprContext, node: exp.Window, fn: str, order: tuple[SortKey, ...]) -> Frame | None:
    spec = node.args.get("spec")
    if spec is None:
        return None
    if fn in FRAMELESS:
        raise ctx.err(BindError, "WINDOW_FRAME_NOT_ALLOWED", f"`{fn}` takes no window frame", spec,
                      "remove ROWS/RANGE … from its OVER clause (Spark fixes the frame of ranking and offset "
                      "functions)", function=fn)
    if spec.args.get("exclude") is not None:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_WINDOW", "a frame's EXCLUDE is not Spark SQL", spec,
                      "leave the rows out with a CASE inside the function, or subtract the current row's value",
                      construct="EXCLUDE")
    kind = FrameKind(str(spec.args.get("kind")).lower())
    written: list[str] = []  # the offsets' types: "" a number, else the interval's (Spark's DIFF_TYPES)

    def bound(value: object, side: object, start: bool) -> tuple[int | Decimal | None, str]:
        text = str(value).upper() if not isinstance(value, exp.Expr) else None
        if text == "UNBOUNDED":
            if (str(side).upper() == "FOLLOWING") == start:
                raise ctx.err(BindError, "INVALID_WINDOW_FRAME", "a frame cannot start at UNBOUNDED FOLLOWING or end "
                              "at UNBOUNDED PRECEDING", spec, "write ROWS BETWEEN … PRECEDING AND … FOLLOWING")
            return None, ""
        if text == "CURRENT ROW":
            return 0, ""
        node_ = value if isinstance(value, exp.Expr) else None
        if kind == FrameKind.ROWS and node_ is not None and _is_interval(node_):
            raise ctx.err(BindError, "INVALID_WINDOW_FRAME", "a ROWS frame counts rows, not an interval", spec,
                          "write RANGE BETWEEN INTERVAL … for a span of time, or a number of rows")
        n: int | Decimal
        if kind == FrameKind.RANGE and node_ is not None and _is_interval(node_):
            n, unit, typed = _interval(ctx, node_, spec)
            written.append(typed)
        else:
            n = _number(ctx, node_) if kind == FrameKind.RANGE else int_literal(ctx, node_, "a ROWS frame's offset")
            unit = ""
            written.append("")
        return (-n if str(side).upper() == "PRECEDING" else n), unit

    start, start_unit = bound(spec.args.get("start"), spec.args.get("start_side"), True)
    end_value = spec.args.get("end")
    end, end_unit = bound(end_value, spec.args.get("end_side"), False) if end_value is not None else (0, "")
    if len(set(written)) > 1:
        raise ctx.err(BindError, "INVALID_WINDOW_FRAME", "the frame's two offsets have different types "
                      f"({' and '.join(t or 'a number' for t in written)})", spec,
                      "write both offsets in one unit: BETWEEN INTERVAL 2 DAYS PRECEDING AND INTERVAL 1 DAY FOLLOWING")
    unit = start_unit or end_unit
    if start is not None and end is not None and start > end:
        raise ctx.err(BindError, "INVALID_WINDOW_FRAME", "the window frame starts after it ends", spec,
                      "write the earlier bound first: BETWEEN 2 PRECEDING AND 1 FOLLOWING")
    if kind == FrameKind.RANGE and (start not in (None, 0) or end not in (None, 0)):
        unit = _range_unit(ctx, spec, order, unit, written[0] if written else "")
        if unit == "day":  # whole days over a DATE, as Spark moves a date
            start, end = (None if b is None else int(b) // _DAY for b in (start, end))
    if fn in AGGREGATES and not order and not (start is None and end is None):
        raise ctx.err(BindError, "WINDOW_NEEDS_ORDER", "a window frame other than the whole partition needs ORDER BY",
                      spec, "add ORDER BY … to the OVER clause", function=fn)
    return Frame(kind, start, end, unit)


def _range_unit(ctx: ExprContext, spec: exp.Expr, order: tuple[SortKey, ...], unit: str, typed: str) -> str:
    """The unit of a RANGE frame's offsets ("" a number, "month", "microsecond"; "day" for whole
    days over a DATE), checked against its one ORDER BY value's type as Spark checks it."""
    if len(order) != 1:
        raise ctx.err(BindError, "INVALID_WINDOW_FRAME", "a RANGE frame with an offset needs exactly one ORDER BY "
                      "expression", spec, "use a ROWS frame, or order by one number, date or timestamp")
    by = order[0].expr.type
    if by.is_numeric:
        if unit:
            raise ctx.err(BindError, "INVALID_WINDOW_FRAME", f"a RANGE frame over a number ({by.sql()}) moves by "
                          "a number, not an interval", spec, "write the offset as a number: 3 PRECEDING")
        return ""
    if by.name == "DATE":
        if unit == "microsecond" and typed != "DAY":
            raise ctx.err(BindError, "INVALID_WINDOW_FRAME", "a RANGE frame over a DATE moves by whole days or "
                          "months", spec, "write INTERVAL n DAYS (or a number of days), or order by a TIMESTAMP")
        return "day" if unit == "microsecond" else unit
    if by.name in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        if not unit:
            raise ctx.err(BindError, "INVALID_WINDOW_FRAME", "a RANGE frame over a TIMESTAMP moves by an interval",
                          spec, "write the offset as an interval: INTERVAL 1 HOUR PRECEDING")
        return unit
    raise ctx.err(BindError, "INVALID_WINDOW_FRAME", f"a RANGE frame with an offset cannot order by {by.sql()}",
                  spec, "use a ROWS frame, or order by one number, date or timestamp")


def _is_interval(node: exp.Expr) -> bool:
    return isinstance(node, exp.Interval) or (isinstance(node, exp.Add) and _is_interval(node.this)
                                              and _is_interval(node.expression))


def _interval(ctx: ExprContext, node: exp.Expr, spec: exp.Expr) -> tuple[int, str, str]:
    """An interval offset as (amount, "month" | "microsecond", its type as Spark names it:
    ``DAY``, ``HOUR``, ``DAY TO SECOND``, ``MONTH``…)."""
    parts = _parts(node)
    units = [u for _, u in parts]
    if not all(u in _MONTHS or duration_micros(f"1 {u}") is not None for u in units):  # (a span not read: SPAN)
        raise ctx.err(UnsupportedError, "UNSUPPORTED_WINDOW", f"a frame's interval {node.sql(dialect='spark')} "
                      "is not read", spec, "write it as INTERVAL n UNIT (YEAR, MONTH, WEEK, DAY, HOUR, MINUTE, "
                      "SECOND)", construct="window")
    names = ["DAY" if u == "WEEK" else u for u in units]
    typed = names[0] if len(set(names)) == 1 else f"{names[0]} TO {names[-1]}"
    if all(u in _MONTHS for u in units):
        return sum(_whole(ctx, text, spec) * _MONTHS[u] for text, u in parts), "month", typed
    if any(u in _MONTHS for u in units):
        raise ctx.err(BindError, "INVALID_WINDOW_FRAME", "an interval of months and days has no one length", spec,
                      "write the offset in months, or in days and smaller units")
    micros = sum(duration_micros(f"{_whole(ctx, text, spec)} {u}") or 0 for text, u in parts)
    return micros, "microsecond", typed


def _parts(node: exp.Expr) -> list[tuple[str, str]]:
    """The (amount text, unit) of each interval added up in ``node``; a span's (``'1 02:00'
    DAY TO MINUTE``) fields each as one part."""
    if isinstance(node, exp.Add):
        return _parts(node.this) + _parts(node.expression)
    assert isinstance(node, exp.Interval)
    amount = node.this.name if node.this is not None else ""
    unit = node.args.get("unit")
    if isinstance(unit, exp.IntervalSpan):
        first, last = unit.this.name.upper(), unit.expression.name.upper()
        return _span(amount, first, last)
    name = (unit.name if unit is not None else "DAY").upper()
    name = name[:-1] if name.endswith("S") else name
    return [(amount, name)]


def _span(text: str, first: str, last: str) -> list[tuple[str, str]]:
    """``'1 02:30'`` DAY TO MINUTE as [("1", "DAY"), ("2", "HOUR"), ("30", "MINUTE")]; text that
    cannot be read as one part of unit SPAN (refused by the caller)."""
    order = ["YEAR", "MONTH"] if first in _MONTHS else list(_FIELDS)
    if first not in order or last not in order or order.index(first) > order.index(last):
        return [(text, "SPAN")]
    names = order[order.index(first):order.index(last) + 1]
    sign = "-" if text.strip().startswith("-") else ""
    values = [v for v in re.split(r"[ :\-]", text.strip().lstrip("-")) if v]
    if len(values) != len(names) or not all(v.isdigit() for v in values):
        return [(text, "SPAN")]
    return [(f"{sign}{v}", n) for v, n in zip(values, names)]


def _whole(ctx: ExprContext, text: str, spec: exp.Expr) -> int:
    if not re.fullmatch(r"\s*-?\d+\s*", text):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_WINDOW", f"a frame's interval amount {text!r} must be a whole "
                      "number", spec, "write a whole number of a smaller unit: INTERVAL 90 MINUTES",
                      construct="window")
    return int(text)
