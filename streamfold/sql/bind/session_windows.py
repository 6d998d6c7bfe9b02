"""Bind Spark's session windows: ``GROUP BY k, session_window(ts, '5 minutes')``.

Spark gives each row the session ``[ts, ts + gap)`` and, per group of the block's other GROUP BY
keys, merges sessions that overlap or touch (a row whose ``ts`` is at or before the end of the
session so far joins it): a session is a run of events no further apart than the gap, and its
``session_window`` is the STRUCT of its first event's time and its last event's end. A row whose
``ts`` is NULL, or whose end is not after its start (a gap of zero or less, or NULL), leaves the
block. Without an aggregate, each row's ``session_window`` is its own ``[ts, ts + gap)``.

A session depends on every event of its key, so a deleted or late event can merge two sessions
or split one. Here the sessions are window functions over the other keys' rows, ordered by the
event time ``t`` (microseconds) and computed with Spark's own window operator, which the
planner keeps exact under insertions and deletions by recomputing the partitions a batch
touches (:mod:`streamfold.plan.rules_windows`)::

    prev  = max(e) OVER (PARTITION BY keys ORDER BY t RANGE BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
    first = CASE WHEN prev IS NULL OR prev < t THEN t END        -- the row starts a session
    start = max(first) OVER (PARTITION BY keys ORDER BY t)       -- the session it is in
    end   = max(e) OVER (PARTITION BY keys, start)

with ``e`` the row's own end, ``t + gap``. Every frame is a RANGE frame, so rows with the same
event time are peers and the order Spark reads them in cannot change a session. The GROUP BY on
the session keys its groups by the start and end columns. With a time bound
(``WHERE ts > current_timestamp() - INTERVAL 1 HOUR``, :mod:`.expiry`) old events leave the
window's state as deletions, so the state is bounded by the bound; without one, by the events.

The gap is a string (``'5 minutes'``) or, as in Spark, a STRING expression of the row
(``CASE WHEN … THEN '10 minutes' ELSE '1 minute' END``), added to ``ts`` as Spark adds an
interval.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.expr import Call, Case, Column, Expr, Literal
from ...ir.rel import Filter, Project, Rel, SortKey
from ...ir.types import BIGINT, BOOLEAN, STRING, TIMESTAMP
from ...ir.window import Frame, FrameKind, Window, WindowCall
from ..bind_expr import ExprBinder
from ..scope import Scope, TimeWindow
from ..window_text import WINDOW_CALL
from . import grouping_sets
from .context import BindContext
from .grouping import group_items, group_target, has_agg
from .select_list import select_items
from .time_windows import WINDOW_TYPE, block_calls, duration

SESSION_CALL = "session_window"


def session_window(ctx: BindContext, node: exp.Select, rel: Rel, scope: Scope) -> Rel:
    """``rel`` with the block's session window computed on each row (and ``scope`` told of it);
    ``rel`` itself when the block has no ``session_window(…)``."""
    calls = block_calls(node)
    sessions = [c for c in calls if c.name.lower() == SESSION_CALL]
    if not sessions:
        return rel
    first = sessions[0]
    other = next((c for c in calls if c != first), None)
    if other is not None:
        raise ctx.err(UnsupportedError, "MULTIPLE_TIME_WINDOWS", "a query block may use only one time window",
                      other, "write each window in its own query block (Spark refuses it too)",
                      construct=other.name.lower().replace(WINDOW_CALL, "window"))
    args = first.expressions
    if len(args) != 2:
        raise ctx.err(BindError, "WRONG_ARGUMENTS", "session_window takes a time column and a gap: "
                      "session_window(ts, '5 minutes')", first, function=SESSION_CALL)
    binder = ExprBinder(scope, SESSION_CALL)
    ts = binder.bind(args[0])
    if ts.type != TIMESTAMP:
        raise ctx.err(BindError, "TYPE_MISMATCH", f"session_window needs a TIMESTAMP time column, not {ts.type}",
                      args[0], "CAST it to TIMESTAMP", expected="TIMESTAMP", actual=ts.type.sql())
    alias = ctx.unique_alias("_session")
    t = Column(f"{alias}.t", BIGINT)
    e = Column(f"{alias}.e", BIGINT)
    own_end, constant = _own_end(ctx, binder, args[1], ts)
    rel = Filter(rel, Call("IS NOT NULL", (ts,), BOOLEAN))
    rel = Project(rel, _fields(rel) + ((t.name, Call("unix_micros", (ts,), BIGINT, "unix_micros({0})")),
                                       (e.name, own_end)))
    if not constant:  # a gap of zero or less, or NULL, gives no session (Spark drops the row)
        rel = Filter(rel, Call(">", (e, t), BOOLEAN))
    items = select_items(node, scope, {})
    if node.args.get("group") is None and node.args.get("having") is None and not has_agg(items, node):
        # no aggregate: each row's own session, as Spark gives it
        struct = Call("named_struct", (ts, _timestamp(e)), WINDOW_TYPE, "named_struct('start', {0}, 'end', {1})")
        scope.time_window = TimeWindow(SESSION_CALL, struct)
        return rel
    rel, keys = _partition_keys(ctx, node, rel, scope, items, alias)
    prev = Column(f"{alias}.prev", BIGINT)
    starts = Column(f"{alias}.first", BIGINT)
    start = Column(f"{alias}.start", BIGINT)
    end = Column(f"{alias}.end", BIGINT)
    by_time = (SortKey(t),)
    rel = Window(rel, ((prev.name, WindowCall("max", (e,), keys, by_time, Frame(FrameKind.RANGE, None, -1), BIGINT)),))
    starts_here = Call("OR", (Call("IS NULL", (prev,), BOOLEAN), Call("<", (prev, t), BOOLEAN)), BOOLEAN)
    rel = Project(rel, tuple((f.name, f.ref()) for f in rel.schema if f.name != prev.name)
                  + ((starts.name, Case(((starts_here, t),), None, BIGINT)),))
    rel = Window(rel, ((start.name, WindowCall("max", (starts,), keys, by_time, Frame(FrameKind.RANGE, None, 0),
                                               BIGINT)),))
    rel = Window(rel, ((end.name, WindowCall("max", (e,), keys + (start,), (), None, BIGINT)),))
    start_ts = Column(f"{alias}.start_ts", TIMESTAMP)
    end_ts = Column(f"{alias}.end_ts", TIMESTAMP)
    kept = tuple((f.name, f.ref()) for f in rel.schema if not f.name.startswith(f"{alias}."))
    rel = Project(rel, kept + ((start_ts.name, _timestamp(start)), (end_ts.name, _timestamp(end))))
    struct = Call("named_struct", (start_ts, end_ts), WINDOW_TYPE, "named_struct('start', {0}, 'end', {1})")
    scope.time_window = TimeWindow(SESSION_CALL, struct)
    return rel


def _own_end(ctx: BindContext, binder: ExprBinder, gap: exp.Expr, ts: Expr) -> tuple[Expr, bool]:
    """A row's own session end in microseconds, and whether the gap is a constant (then positive)."""
    if isinstance(gap, exp.Literal) and gap.is_string:
        micros = duration(ctx, gap, what="session gap")
        return Call("+", (Call("unix_micros", (ts,), BIGINT, "unix_micros({0})"), Literal(micros, BIGINT)), BIGINT), True
    if isinstance(gap, (exp.Literal, exp.Interval)):
        raise ctx.err(BindError, "INVALID_WINDOW", "a session gap must be a string like '5 minutes'", gap,
                      "write it as a string or a STRING expression of the row (Spark takes no number or INTERVAL "
                      "here)")
    bound = binder.bind(gap)
    if bound.type != STRING:
        raise ctx.err(BindError, "TYPE_MISMATCH", f"a session gap must be a STRING such as '5 minutes', not "
                      f"{bound.type}", gap, "as in Spark: CASE WHEN … THEN '10 minutes' ELSE '1 minute' END",
                      expected="STRING", actual=bound.type.sql())
    # Spark adds the gap to ts as a calendar interval (TimeAdd): the same expression here
    return Call("session_end", (ts, bound), BIGINT, "unix_micros({0} + CAST({1} AS INTERVAL))"), False


def _partition_keys(ctx: BindContext, node: exp.Select, rel: Rel, scope: Scope, items: list,
                    alias: str) -> tuple[Rel, tuple[Expr, ...]]:
    """The block's other GROUP BY keys as columns of ``rel`` (an expression key computed into one):
    the sessions are kept per key."""
    group = node.args.get("group")
    if grouping_sets.expand(group) is not None:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_CLAUSE", "GROUPING SETS, ROLLUP and CUBE over a session "
                      "window are not maintained", group, construct="session_window",
                      hint="group by the session and the other keys, or write one query per grouping set "
                           "(Spark fails on them too)")
    key_binder = ExprBinder(scope, "GROUP BY")
    keys: list[Expr] = []
    computed: list[tuple[str, Expr]] = []
    for g in group_items(group, items):
        if isinstance(g, Column):
            bound: Expr = g
        else:
            target = group_target(ctx, g, items, scope)
            if any(isinstance(c, exp.Anonymous) and c.name.lower() == SESSION_CALL for c in target.walk()):
                continue
            bound = key_binder.bind(target)
        if isinstance(bound, Column):
            key: Expr = bound
        else:
            key = Column(f"{alias}.k{len(computed)}", bound.type)
            computed.append((key.name, bound))
        if key not in keys:
            keys.append(key)
    if computed:
        rel = Project(rel, _fields(rel) + tuple(computed))
    return rel, tuple(keys)


def _fields(rel: Rel) -> tuple[tuple[str, Expr], ...]:
    return tuple((f.name, f.ref()) for f in rel.schema)


def _timestamp(micros: Expr) -> Expr:
    return Call("timestamp_micros", (micros,), TIMESTAMP, "timestamp_micros({0})")
