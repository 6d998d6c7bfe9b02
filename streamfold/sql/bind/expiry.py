"""Bind time bounds: ``WHERE ts > current_timestamp() - INTERVAL 1 HOUR`` (also ``>=``, ``now()``,
and the comparison written the other way round), and their form by the day, ``WHERE day >=
current_date() - INTERVAL 7 DAYS`` (also ``date_sub(current_date(), 7)``, ``current_date() - 7``,
``date_add(current_date(), -7)``, ``curdate()``): the batch time's date in the session's time zone
(UTC), less whole days.

A continuous query cannot read the wall clock row by row: two batches would see two clocks, and
a restart a third. So a batch evaluates at one time, the *batch time*, that the runtime chooses
before the batch (never earlier than the batch before's) and records in its commit; the snapshot
is the batch query with ``current_timestamp()`` read as that time (docs/windows.md). A bound is
then a predicate over the clock, :data:`~streamfold.ir.expr.CLOCK_OP`, that the planner keeps
apart from the other filters (``plan/rules_expiry.py``): rows leave it as the clock passes, as
deletions, and leave its state.

The event-time form, ``WHERE ts > max_event_time() - INTERVAL 10 MINUTES``, reads instead the
largest ``ts`` its stream has brought so far (inserted rows; a deletion does not lower it):
Spark's watermark without its delay, which the interval is. Its batch time comes from the
batch's own rows, so a rerun of a batch finds the same time.

Only this monotone form is accepted: a lower bound on the event time that rises with the clock,
so a row that has left never comes back and the rows kept are the rows still inside the bound.
``current_timestamp()`` anywhere else stays ``NONDETERMINISTIC_FUNCTION``.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.expr import CLOCK_COLUMN, CLOCK_OP, CLOCK_VIEW, EVENT_TIME, Call, Expr, Literal, and_all
from ...ir.types import BIGINT, BOOLEAN, DATE, INT, STRING, TIMESTAMP
from ..bind_expr import ExprBinder
from ..scope import Scope
from .context import BindContext, Cte
from ..durations import duration_micros

# The view holds the time as a DECIMAL: Spark's generated code refers to a decimal subquery value
# (it inlines a TIMESTAMP's as a literal), so a batch at a new time reuses the classes compiled
# for the last one instead of generating, compiling and warming new ones, and prepared plans set
# the value in place before each replay (runtime/prepared.py, Plans.setClocks).
_READ = f"timestamp_micros(CAST((SELECT {CLOCK_COLUMN} FROM {CLOCK_VIEW}) AS BIGINT))"
CLOCK = Call(CLOCK_OP, (), TIMESTAMP, _READ)
# the event-time clock: the largest event time the bound's stream has brought so far
EVENT_CLOCK = Call(CLOCK_OP, (Literal(EVENT_TIME, STRING),), TIMESTAMP, _READ)
_OPS = {exp.GT: ">", exp.GTE: ">="}  # ts > now - d; the reversed form `now - d < ts` is read as this
_DAY = 86_400_000_000


def reads_now(node: exp.Expr) -> bool:
    return any(_is_now(n) for n in node.walk())


def bind_where(ctx: BindContext, condition: exp.Expr, scope: Scope, ctes: dict[str, Cte]) -> Expr:
    """A WHERE condition with time bounds among its conjuncts (the others bound as usual)."""
    parts: list[Expr] = []
    for c in _conjuncts(condition):
        bound = _time_bound(ctx, c, scope)
        parts.append(bound if bound is not None
                     else ExprBinder(scope, "WHERE", subquery=ctx.subquery_hook(ctes)).boolean(c))
    out = and_all(parts)
    assert out is not None
    return out


def _conjuncts(node: exp.Expr) -> list[exp.Expr]:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.And):
        return _conjuncts(node.this) + _conjuncts(node.expression)
    return [node]


def _is_now(node: exp.Expr) -> bool:
    return isinstance(node, (exp.CurrentTimestamp, exp.CurrentDate)) or (
        isinstance(node, exp.Anonymous) and node.name.lower() in ("now", EVENT_TIME))


def _interval_text(node: exp.Expr) -> str | None:
    """``INTERVAL 1 HOUR`` as ``1 HOUR``; Spark's ``INTERVAL 1 DAY 2 HOURS`` (an addition of
    intervals to sqlglot) as ``1 DAY 2 HOURS``; None if ``node`` is not an interval."""
    if isinstance(node, exp.Add):
        left, right = _interval_text(node.this), _interval_text(node.expression)
        return None if left is None or right is None else f"{left} {right}"
    if not isinstance(node, exp.Interval):
        return None
    return f"{node.this.name if node.this is not None else ''} {node.unit.name if node.unit else ''}".strip()


def _upper_bound(node: exp.Expr) -> bool:
    """``ts <= now()`` (``<``, or written the other way round) or ``ts BETWEEN … AND now()``."""
    if isinstance(node, exp.Between):
        return reads_now(node.args["high"])
    if isinstance(node, (exp.LT, exp.LTE)):
        return reads_now(node.expression) and not reads_now(node.this)
    if isinstance(node, (exp.GT, exp.GTE)):
        return reads_now(node.this) and not reads_now(node.expression)
    return False


def _time_bound(ctx: BindContext, node: exp.Expr, scope: Scope) -> Expr | None:
    """``ts > now - INTERVAL d`` as the bound's IR; None when ``node`` is not of that form (it
    then reads no clock, or is refused by the expression binder)."""
    if isinstance(node, (exp.GT, exp.GTE)):
        ts_node, limit, op = node.this, node.expression, _OPS[type(node)]
    elif type(node) in (exp.LT, exp.LTE):
        ts_node, limit, op = node.expression, node.this, ">" if isinstance(node, exp.LT) else ">="
    else:
        ts_node = limit = None
    days = _days_back(ctx, limit) if limit is not None else None
    if days is not None:
        return _date_bound(ctx, ts_node, op, days, scope)
    if not (isinstance(limit, exp.Sub) and _is_now(limit.this) and not isinstance(limit.this, exp.CurrentDate)
            and _interval_text(limit.expression) is not None):
        if reads_now(node):  # under OR, NOT, a CASE …, or not a lower bound
            call = next(n for n in node.walk() if _is_now(n))
            name = call.name.lower() if isinstance(call, exp.Anonymous) else (
                "current_date" if isinstance(call, exp.CurrentDate) else "current_timestamp")
            hint = (f"write `day >= {name}() - INTERVAL 7 DAYS`" if isinstance(call, exp.CurrentDate)
                    else f"write `ts > {name}() - INTERVAL 1 HOUR`") + " (or >=) as a conjunct of WHERE"
            if _upper_bound(node):
                hint = (f"an upper bound on an event time by the clock (`ts <= {name}()`, `ts < {name}() - …`, "
                        f"BETWEEN … AND {name}()) lets a row enter only later, as the clock passes it, which is "
                        f"not supported; keep only the lower bound (`ts > {name}() - INTERVAL 1 DAY`) when no "
                        "event time lies in the future")
            raise ctx.err(UnsupportedError, "UNSUPPORTED_TIME_BOUND",
                          f"{name}() may only bound an event time from below, as a conjunct of WHERE", node,
                          hint, construct="time bound")
        return None
    interval = limit.expression
    micros = duration_micros(_interval_text(interval) or "")
    if micros is None or micros < 0:
        raise ctx.err(BindError, "INVALID_TIME_BOUND", f"cannot read the interval `{interval.sql(dialect='spark')}`",
                      limit, "write INTERVAL n UNIT with a unit of fixed length (weeks to microseconds)")
    ts = ExprBinder(scope, "WHERE").bind(ts_node)
    if ts.type != TIMESTAMP:
        raise ctx.err(BindError, "TYPE_MISMATCH", f"a time bound compares a TIMESTAMP, not {ts.type}", ts_node,
                      "CAST it to TIMESTAMP", expected="TIMESTAMP", actual=ts.type.sql())
    clock = EVENT_CLOCK if isinstance(limit.this, exp.Anonymous) and limit.this.name.lower() == EVENT_TIME else CLOCK
    if clock is EVENT_CLOCK and limit.this.expressions:
        raise ctx.err(BindError, "WRONG_ARGUMENTS", f"{EVENT_TIME}() takes no argument: it is the largest value "
                      "of the column it bounds", limit.this, function=EVENT_TIME)
    return Call("time_bound", (ts, clock, Literal(micros, BIGINT)), BOOLEAN,
                f"({{0}} {op} timestamp_micros(unix_micros({{1}}) - {{2}}))")


def _days_back(ctx: BindContext, limit: exp.Expr) -> int | None:
    """The days ``limit`` lies before ``current_date()`` (``current_date() - INTERVAL 7 DAYS``,
    ``- 7``, ``date_sub(current_date(), 7)``, ``date_add(current_date(), -7)``: 7), or None when it
    is not of that form."""
    if isinstance(limit, exp.CurrentDate):
        return 0
    if isinstance(limit, exp.TsOrDsAdd) and isinstance(limit.this, exp.CurrentDate) \
            and (limit.unit is None or limit.unit.name.upper() == "DAY"):
        added = _integer(limit.expression)
        return None if added is None else -added
    if not (isinstance(limit, exp.Sub) and isinstance(limit.this, exp.CurrentDate)):
        return None
    if _integer(limit.expression) is not None:
        return _integer(limit.expression)
    text = _interval_text(limit.expression)
    micros = duration_micros(text) if text is not None else None
    if micros is None or micros % _DAY:
        raise ctx.err(BindError, "INVALID_TIME_BOUND", f"a bound by current_date() goes back whole days, not "
                      f"`{limit.expression.sql(dialect='spark')}`", limit,
                      "write INTERVAL n DAYS (or WEEKS), or bound a TIMESTAMP by current_timestamp()")
    return micros // _DAY


def _integer(node: exp.Expr) -> int | None:
    """An integer constant: a literal, negated or multiplied (sqlglot reads ``date_sub(d, 7)`` as
    ``d + 7 * -1`` days)."""
    if isinstance(node, exp.Paren):
        return _integer(node.this)
    if isinstance(node, exp.Literal) and not node.is_string and node.this.lstrip("-").isdigit():
        return int(node.this)
    if isinstance(node, exp.Neg):
        inner = _integer(node.this)
        return None if inner is None else -inner
    if isinstance(node, exp.Mul):
        left, right = _integer(node.this), _integer(node.expression)
        return None if left is None or right is None else left * right
    return None


def _date_bound(ctx: BindContext, ts_node: exp.Expr, op: str, days: int, scope: Scope) -> Expr:
    """``day > current_date() - days`` over the batch time's date: a DATE column compared with a
    date, a TIMESTAMP with that date's midnight, as Spark compares them."""
    ts = ExprBinder(scope, "WHERE").bind(ts_node)
    if ts.type not in (DATE, TIMESTAMP):
        raise ctx.err(BindError, "TYPE_MISMATCH", f"a bound by current_date() compares a DATE or a TIMESTAMP, not "
                      f"{ts.type}", ts_node, "CAST it to DATE", expected="DATE", actual=ts.type.sql())
    return Call("date_bound", (ts, CLOCK, Literal(days, INT)), BOOLEAN, f"({{0}} {op} date_sub(to_date({{1}}), {{2}}))")
