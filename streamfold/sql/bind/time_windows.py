"""Bind Spark's time windows: ``GROUP BY window(ts, '10 minutes' [, '5 minutes' [, '2 minutes']])``.

Spark's batch query gives a row to every window ``[start, end)`` that holds its event time
``ts``; ``window`` is then a ``STRUCT<start: TIMESTAMP, end: TIMESTAMP>`` the block reads as a
column named ``window`` (``window.start``, ``window.end``), and a row whose ``ts`` is NULL
leaves the block. Spark computes the windows on microseconds since the epoch
(``ResolveTimeWindows``): with ``t = unix_micros(ts)``, the last window that starts at or before
``t`` starts at ``t − pmod(t − startTime, slide)``; a sliding window's row goes to the
``ceil(size / slide)`` windows before it that still hold ``t``.

Here that is stateless relational algebra under the block, so the rest of the compiler needs no
window operator: ``Filter(ts IS NOT NULL)``, for a sliding window an ``Explode`` of the window
numbers ``0 … n−1``, a ``Project`` computing the window's start as a TIMESTAMP column (the end
is the start plus the size) and a ``Filter(start ≤ ts < end)``. Those run on each batch's rows before any state
(seed 004 §3.4 (b): the window is pushed up, past the per-row work), and a GROUP BY on the window
keys its groups by the start column (:func:`window_keys`): a deleted row leaves exactly the
windows it was counted in, because it maps to the same windows again.

sqlglot reads ``window(`` as the WINDOW clause, so the parser sees it renamed
(:mod:`..window_text`).

``session_window`` is bound by :mod:`.session_windows`, with the same STRUCT.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.expr import Call, Column, Expr, Literal, and_all
from ...ir.rel import Explode, Filter, Project, Rel
from ...ir.types import BOOLEAN, INT, TIMESTAMP, DataType, array
from ..bind_expr import ExprBinder
from ..scope import Scope, TimeWindow
from ..durations import duration_micros
from ..window_text import WINDOW_CALL
from .context import BindContext
from .select_list import inside_subquery

WINDOW_TYPE = DataType("STRUCT", params=(("start", TIMESTAMP), ("end", TIMESTAMP)))
@dataclass(frozen=True)
class WindowSpec:
    """A time window's durations, in microseconds."""

    size: int
    slide: int
    offset: int

    @property
    def count(self) -> int:
        """How many windows hold one row (1: tumbling)."""
        return math.ceil(self.size / self.slide)


def is_window_call(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.lower() in (WINDOW_CALL, "session_window")


def block_calls(node: exp.Select) -> list[exp.Anonymous]:
    """The window calls of the block (select list, GROUP BY, HAVING, ORDER BY; not its subqueries)."""
    roots: list[exp.Expr] = list(node.expressions)
    for clause in ("group", "having", "order"):
        if node.args.get(clause) is not None:
            roots.append(node.args[clause])
    return [c for r in roots for c in r.find_all(exp.Anonymous) if is_window_call(c) and not inside_subquery(c, r)]


def time_window(ctx: BindContext, node: exp.Select, rel: Rel, scope: Scope) -> Rel:
    """``rel`` with the block's time window computed on each row (and ``scope`` told of it);
    ``rel`` itself when the block has no ``window(…)``."""
    calls = [c for c in block_calls(node) if c.name.lower() == WINDOW_CALL]
    if not calls:
        return rel
    first = calls[0]
    other = next((c for c in calls[1:] if c != first), None)
    if other is not None:
        raise ctx.err(UnsupportedError, "MULTIPLE_TIME_WINDOWS", "a query block may use only one time window",
                      other, "write each window in its own query block (Spark refuses it too)", construct="window")
    args = first.expressions
    if not 2 <= len(args) <= 4:
        raise ctx.err(BindError, "WRONG_ARGUMENTS",
                      "window takes a time column and 1 to 3 durations: window(ts, size[, slide[, start]])",
                      first, function="window")
    ts = ExprBinder(scope, "window").bind(args[0])
    if ts.type != TIMESTAMP:
        raise ctx.err(BindError, "TYPE_MISMATCH", f"window needs a TIMESTAMP time column, not {ts.type}", args[0],
                      "CAST it to TIMESTAMP", expected="TIMESTAMP", actual=ts.type.sql())
    size = duration(ctx, args[1])
    slide = duration(ctx, args[2]) if len(args) > 2 else size
    offset = duration(ctx, args[3], signed=True) if len(args) > 3 else 0
    if slide > size:
        raise ctx.err(BindError, "INVALID_WINDOW", "the slide of a window must not exceed its size", args[2],
                      "a slide longer than the window would skip rows", size=size, slide=slide)
    if abs(offset) >= slide:
        raise ctx.err(BindError, "INVALID_WINDOW", "a window's start offset must be shorter than its slide",
                      args[3], "as in Spark: |start| < slide", slide=slide, start=offset)
    spec = WindowSpec(size, slide, offset)
    alias = ctx.unique_alias("_window")
    rel = Filter(rel, Call("IS NOT NULL", (ts,), BOOLEAN))
    # Spark's last window start at or before ts, stepped back n slides for a sliding window's n-th;
    # `explain` shows it as the call the user wrote (the op is its readable form, ir/printer.py)
    last = f"unix_micros({{0}}) - pmod(unix_micros({{0}}) - {offset}L, {slide}L)"
    shown = "window({0}, " + ", ".join(f"'{a.this}'" if isinstance(a, exp.Literal) and a.is_string
                                        else a.sql(dialect="spark") for a in args[1:]) + ").start"
    if spec.count > 1:
        numbers = tuple(Literal(i, INT) for i in range(spec.count))
        numbers_sql = "array(" + ", ".join("{%d}" % i for i in range(spec.count)) + ")"
        rel = Explode(rel, Call("array", numbers, array(INT), numbers_sql), f"{alias}.n")
        start_ts = Call(shown + "[{1}]", (ts, Column(f"{alias}.n", INT)), TIMESTAMP,
                        f"timestamp_micros({last} - {{1}} * {slide}L)")
    else:
        start_ts = Call(shown, (ts,), TIMESTAMP, f"timestamp_micros({last})")
    start_col = Column(f"{alias}.start", TIMESTAMP)
    rel = Project(rel, tuple((f.name, f.ref()) for f in rel.schema if f.name != f"{alias}.n")
                  + ((start_col.name, start_ts),))
    # the end is the start plus the size, so a GROUP BY on the window keys its groups by the start
    end = Call("window_end", (start_col,), TIMESTAMP, f"timestamp_micros(unix_micros({{0}}) + {size}L)")
    if spec.count > 1:
        held = and_all([Call("<=", (start_col, ts), BOOLEAN), Call("<", (ts, end), BOOLEAN)])
        assert held is not None
        rel = Filter(rel, held)
    struct = Call("named_struct", (start_col, end), WINDOW_TYPE, "named_struct('start', {0}, 'end', {1})")
    scope.time_window = TimeWindow("window", struct)
    return rel


def window_keys(e: Expr) -> tuple[Expr, ...] | None:
    """A GROUP BY key that is the block's window, as the keys to group by: the columns of its
    STRUCT — a time window's start (its end is the start plus the size, so it lifts over the start
    key), a session's start and end; None for any other key."""
    if isinstance(e, Call) and e.op == "named_struct" and e.type == WINDOW_TYPE:
        return tuple(a for a in e.args if isinstance(a, Column))
    return None


def duration(ctx: BindContext, node: exp.Expr, signed: bool = False, what: str = "window duration") -> int:
    """A window's duration in microseconds: a string (``'10 minutes'``, ``'1 hour 30 minutes'``,
    ``'interval 5 seconds'``) or a whole number of microseconds — the literals Spark takes there
    (it refuses an INTERVAL). Months and years are refused, as Spark refuses them (their length
    varies)."""
    number = node.this if isinstance(node, exp.Neg) else node
    if isinstance(number, exp.Literal) and not number.is_string and re.fullmatch(r"\d+", number.this):
        micros = -int(number.this) if number is not node else int(number.this)
        if micros > 0 or signed:
            return micros
        raise ctx.err(BindError, "INVALID_WINDOW", f"a {what} must be positive, not {micros}", node,
                      duration=str(micros))
    if not (isinstance(node, exp.Literal) and node.is_string):
        raise ctx.err(BindError, "INVALID_WINDOW", f"a {what} must be a constant like '10 minutes'", node,
                      "write it as a string ('10 minutes') or a number of microseconds (Spark takes no INTERVAL "
                      "here)")
    text = node.this.strip()
    total = duration_micros(text)
    if total is None:
        raise ctx.err(BindError, "INVALID_WINDOW", f"cannot read the {what} '{text}'", node,
                      "write amounts of weeks, days, hours, minutes, seconds, milliseconds or microseconds "
                      "(months and years vary in length, so Spark refuses them too)", duration=text)
    if total <= 0 and not signed:
        raise ctx.err(BindError, "INVALID_WINDOW", f"a {what} must be positive, not '{text}'", node,
                      duration=text)
    return total
