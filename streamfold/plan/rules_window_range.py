"""Windows over bounded RANGE frames: a batch recomputes only the rows within the frame's reach of its changes.

``sum(v) OVER (PARTITION BY u ORDER BY t RANGE BETWEEN INTERVAL 1 HOUR PRECEDING AND CURRENT
ROW)`` — a rolling sum — gives a row the rows whose ORDER BY value lies within a fixed distance of
its own. With ``r`` the larger of the frame's two offsets, a row at ``v`` reads only rows within
``[v − r, v + r]``, so a changed row at ``x`` changes only the values of rows within ``r`` of ``x``.
Per touched partition, with ``lo``/``hi`` the least and greatest ORDER BY value of the batch's
rows there::

    near_p   = rows of p within [lo − r, hi + r]           (the rows whose value may change)
    read_p   = rows of p within [lo − 2r, hi + 2r]         (every row a near row's frame holds)
    Δ out_p  = σ_near Window(read_p after) − σ_near Window(read_p before)

so the window runs over the rows near the change, not over the whole partition, and the change
handed on holds only the near rows (the general rule, :mod:`.rules_windows`, hands on the whole
partition twice, whose rows cancel where it is consumed). A row with a NULL ORDER BY value has
the NULL rows as its frame, as in Spark: a batch with such a row reads and hands on its
partition's NULL rows too. Without PARTITION BY the window is one partition, keyed by a constant.
Taken for ``sum``, ``count``, ``avg``, ``min`` and ``max`` sharing one ORDER BY column of an
integer, DECIMAL, DATE or TIMESTAMP type, with both offsets finite and not in months (a month has
no one length); the reach is compared in a wide DECIMAL, so no bound overflows. Other windows go
to the general rule.
"""

from __future__ import annotations

import decimal

from ..ir.expr import Agg, Call, Case, Cast, Column, Expr, Literal, and_all, days_added, micros_added
from ..ir.printer import display_name
from ..ir.rel import WEIGHT, Aggregate, Expand, Filter, Join, JoinKind, Project, Rel, StateVersion
from ..ir.types import BOOLEAN, INT, MAX_PRECISION, DataType
from ..ir.window import Window
from .context import PlanContext
from .model import Compiled
from .rules_windows import keyed_bag, look_up, once, over_keyed, partition_columns, refuse_ties, signed
from .terms import or_false
from .window_keys import key_matches

_FUNCTIONS = frozenset({"sum", "count", "avg", "min", "max"})
_LO, _HI, _NULLS, _ALL = "_rng#lo", "_rng#hi", "_rng#null", "_rng#all"


def reach(window: Window) -> tuple[Column, decimal.Decimal] | None:
    """The ORDER BY column every call of ``window`` shares and the frames' largest offset, where
    the rule applies (module docstring); else None."""
    order: Column | None = None
    r = decimal.Decimal(0)
    part = set(partition_columns(window))
    for _, call in window.calls:
        f = call.frame
        if call.fn not in _FUNCTIONS or f is None or f.kind != "range" or f.start is None or f.end is None \
                or f.unit == "month" or len(call.order) != 1 or not isinstance(call.order[0].expr, Column):
            return None
        if {p.name for p in call.partition if isinstance(p, Column)} != part \
                or not all(isinstance(p, Column) for p in call.partition):
            return None
        if order is not None and call.order[0].expr != order:
            return None
        order = call.order[0].expr
        r = max(r, abs(decimal.Decimal(f.start)), abs(decimal.Decimal(f.end)))
    if order is None or not _comparable(order.type):
        return None
    if r != int(r) and (not order.type.is_numeric or -int(r.as_tuple().exponent) > 6):
        return None  # (a decimal offset over a date or a time is Spark's error; finer than 6 places, the step's)
    return order, r


def near(ctx: PlanContext, rel: Rel) -> Compiled | None:
    """The change of a window of bounded RANGE frames from the rows near the batch's; None where
    the window is not one (:func:`reach`)."""
    assert isinstance(rel, Window)
    found = reach(rel)
    if found is None or isinstance(rel.input, Window):
        return None
    order, r = found
    refuse_ties(rel)
    part = partition_columns(rel)
    bag = keyed_bag(ctx, rel.input, part, _ALL)
    delta = bag.scan(StateVersion.DELTA)
    is_null = Case(((Call("IS NULL", (order,), BOOLEAN), Literal(1, INT)),), Literal(0, INT), INT)
    ranges = once(ctx, "win_ranges", Aggregate(
        delta, tuple((f"{k}#t", delta.field(k).ref()) for k in bag.key),
        ((_LO, Agg("min", (order,), False, order.type)), (_HI, Agg("max", (order,), False, order.type)),
         (_NULLS, Agg("max", (is_null,), False, INT)))))
    touched = Project(ranges, tuple((f"{k}#t", Column(f"{k}#t", delta.field(k).type)) for k in bag.key))
    names = tuple(f.name for f in rel.schema)

    def version(v: StateVersion) -> Rel:
        rows = look_up(bag.state, bag.fields, bag.key, bag.nullable, v, touched)
        matched = key_matches(bag.on, "t", bag.key)
        assert matched is not None
        with_range = Join(rows, ranges, JoinKind.INNER, Call("AND", (matched, _within(order, 2 * r)), BOOLEAN))
        window = over_keyed(rel, Expand(Project(with_range, tuple((f.name, f.ref()) for f in bag.fields)
                                                + tuple((n, Column(n, t)) for n, t in _range_columns(order))), WEIGHT),
                            rel.input.names + (_LO, _HI, _NULLS))
        return Project(Filter(window, _within(order, r)), tuple((n, window.field(n).ref()) for n in names))

    shown = ", ".join(display_name(p) for p in part) or "one partition"
    ctx.plan.note(f"OVER: bounded RANGE frames over the window's rows kept in {bag.state} ({shown}); each batch "
                  f"recomputes only the rows within the frames' reach of its rows (by {display_name(order.name)}), "
                  "after and before its merge, and hands on the difference")
    return Compiled(signed(version(StateVersion.NEW), version(StateVersion.OLD)), static=False, weighted=True)


def _range_columns(order: Column) -> tuple[tuple[str, DataType], ...]:
    return ((_LO, order.type), (_HI, order.type), (_NULLS, INT))


def _comparable(t: DataType) -> bool:
    """ORDER BY types whose reach is computed exactly: integers, DECIMALs with room for it, dates, times."""
    if t.is_integral or t.name in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ"):
        return True
    return t.is_decimal and t.precision is not None and t.precision <= MAX_PRECISION - 10


def _within(order: Column, distance: decimal.Decimal) -> Expr:
    """Whether a row (joined with its partition's range) lies within ``distance`` of the batch's
    rows there: its value within [lo − distance, hi + distance], or NULL where the batch had a NULL."""
    lo, hi = Column(_LO, order.type), Column(_HI, order.type)
    inside = and_all([Call("IS NOT NULL", (order,), BOOLEAN),
                      Call(">=", (_wide(order), _moved(lo, -distance)), BOOLEAN),
                      Call("<=", (_wide(order), _moved(hi, distance)), BOOLEAN)])
    nulls = Call("AND", (Call("IS NULL", (order,), BOOLEAN), Call("=", (Column(_NULLS, INT), Literal(1, INT)), BOOLEAN)),
                 BOOLEAN)
    assert inside is not None
    return or_false(Call("OR", (inside, nulls), BOOLEAN))


def _wide_type(t: DataType) -> DataType:
    scale = t.scale if t.is_decimal and t.scale is not None else 0
    return DataType("DECIMAL", MAX_PRECISION, max(scale, 6))


def _wide(e: Expr) -> Expr:
    """A number in a DECIMAL wide enough that moving it by the reach cannot overflow; a date or a time as it is."""
    return Cast(e, _wide_type(e.type)) if e.type.is_numeric else e


def _moved(e: Expr, distance: decimal.Decimal) -> Expr:
    """``e`` moved by ``distance``: a number in the wide DECIMAL, a date by days, a time by microseconds."""
    if e.type.name == "DATE":
        return days_added(e, int(distance))
    if e.type.name in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        return micros_added(e, int(distance))
    t = _wide_type(e.type)
    step = Literal(decimal.Decimal(distance), DataType("DECIMAL", 20, 6))
    return Call("+", (Cast(e, t), Cast(step, t)), t)
