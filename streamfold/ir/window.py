"""Window functions: ``f(args) OVER (PARTITION BY … ORDER BY … [frame])`` and the node computing them.

A :class:`WindowCall` is one call with its window; it is found only in a :class:`Window` node,
whose output is its input's columns followed by one column per call (as Spark's ``Window``
operator). The binder puts a block's calls in one node between its rows (FROM … WHERE, or the
GROUP BY with HAVING) and its select list::

    Project(select list) ← Window(rows, (_win0, rank() OVER (ORDER BY _agg0 DESC))) ← Filter? ← Aggregate

Whether a call's value depends on the order among rows that tie on ORDER BY
(:func:`order_sensitive`) is a property of the function and its frame, decided here so the
planner can refuse what Spark would answer arbitrarily.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum

from .expr import Column, Expr
from .rel import Field, Rel, SortKey
from .types import DataType

# The prefix of the row number a LIMIT inside a subquery becomes (``passes.nested_limits``).
LIMIT_RANK = "_limit_rank"
RANKING = frozenset({"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile"})
OFFSETS = frozenset({"lag", "lead"})
VALUES = frozenset({"first_value", "last_value", "nth_value"})
AGGREGATES = frozenset({"sum", "count", "avg", "min", "max"})
FUNCTIONS = RANKING | OFFSETS | VALUES | AGGREGATES
# Functions whose value is never NULL (a count, a rank).
_NOT_NULL = frozenset({"row_number", "rank", "dense_rank", "percent_rank", "cume_dist", "ntile", "count"})
# Functions that take no frame: Spark fixes theirs.
FRAMELESS = RANKING | OFFSETS


class FrameKind(StrEnum):
    ROWS = "rows"
    RANGE = "range"


# The unit of a RANGE frame's offsets over a DATE or TIMESTAMP, and how Spark writes one.
INTERVAL_UNITS = {"day": "DAY", "month": "MONTH", "microsecond": "MICROSECOND"}
_TIME_UNITS = (("DAY", 86_400_000_000), ("HOUR", 3_600_000_000), ("MINUTE", 60_000_000), ("SECOND", 1_000_000),
               ("MICROSECOND", 1))


@dataclass(frozen=True, slots=True)
class Frame:
    """``ROWS|RANGE BETWEEN start AND end``: a bound is an offset from the current row (negative
    precedes it, 0 is CURRENT ROW, positive follows it), None is UNBOUNDED (PRECEDING for the
    start, FOLLOWING for the end). ``unit``: "" counts rows (ROWS) or the ORDER BY number (RANGE);
    a RANGE frame over a DATE or TIMESTAMP written with intervals counts "day", "month" or
    "microsecond" (printed back as intervals of that unit, so both bounds have one type)."""

    kind: FrameKind
    start: int | Decimal | None
    end: int | Decimal | None
    unit: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", FrameKind(self.kind))
        if self.start is not None and self.end is not None and self.start > self.end:
            raise ValueError("window frame starts after it ends")
        if self.unit and (self.unit not in INTERVAL_UNITS or self.kind != FrameKind.RANGE):
            raise ValueError(f"a {self.kind} frame cannot count {self.unit!r}")

    @property
    def whole(self) -> bool:
        """Whether the frame is the whole partition."""
        return self.start is None and self.end is None

    def sql(self) -> str:
        name, size = INTERVAL_UNITS.get(self.unit, ""), 1
        if self.unit == "microsecond":  # the largest unit both offsets are whole numbers of
            offsets = [abs(int(b)) for b in (self.start, self.end) if b]
            name, size = next((n, u) for n, u in _TIME_UNITS if all(b % u == 0 for b in offsets))

        def bound(b: int | Decimal | None, unbounded: str) -> str:
            if b is None:
                return f"UNBOUNDED {unbounded}"
            if b == 0:
                return "CURRENT ROW"
            amount = f"INTERVAL '{abs(int(b)) // size}' {name}" if self.unit else str(abs(b))
            return f"{amount} {'PRECEDING' if b < 0 else 'FOLLOWING'}"

        return f"{self.kind.upper()} BETWEEN {bound(self.start, 'PRECEDING')} AND {bound(self.end, 'FOLLOWING')}"


@dataclass(frozen=True, slots=True)
class WindowCall(Expr):
    """One window function call. ``frame`` None is Spark's default: the partition up to the last
    row tying with the current one when ordered (RANGE UNBOUNDED PRECEDING … CURRENT ROW),
    else the whole partition; ranking and offset functions take none."""

    fn: str
    args: tuple[Expr, ...]
    partition: tuple[Expr, ...]
    order: tuple[SortKey, ...]
    frame: Frame | None
    type: DataType

    def __post_init__(self) -> None:
        if self.fn not in FUNCTIONS:
            raise ValueError(f"unknown window function {self.fn}")
        if self.fn in FRAMELESS and self.frame is not None:
            raise ValueError(f"{self.fn} takes no window frame")

    def children(self) -> tuple[Expr, ...]:
        return self.args + self.partition + tuple(k.expr for k in self.order)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        a, p = len(self.args), len(self.partition)
        order = tuple(SortKey(e, k.descending, k.nulls_first) for e, k in zip(children[a + p:], self.order))
        return WindowCall(self.fn, children[:a], children[a:a + p], order, self.frame, self.type)

    @property
    def effective_frame(self) -> Frame:
        """The frame the function is computed over (Spark's default where none is written)."""
        if self.frame is not None:
            return self.frame
        if self.fn in FRAMELESS:
            return Frame(FrameKind.ROWS, None, 0)
        return Frame(FrameKind.RANGE, None, 0) if self.order else Frame(FrameKind.ROWS, None, None)

    @property
    def order_sensitive(self) -> bool:
        """Whether the value depends on the order among rows tying on ORDER BY: row_number, ntile,
        lag/lead and first/last/nth_value pick a row among ties; an aggregate over a ROWS frame
        that is not the whole partition counts rows, not peers. rank, dense_rank, percent_rank,
        cume_dist and RANGE frames treat ties as peers. A floating-point sum depends on the order it
        adds the rows in, whatever its frame."""
        if self.fn in ("row_number", "ntile") or self.fn in OFFSETS or self.fn in VALUES:
            return True
        if self.float_sum:
            return True
        if self.fn in AGGREGATES:
            f = self.effective_frame
            return f.kind == FrameKind.ROWS and not f.whole
        return False

    @property
    def float_sum(self) -> bool:
        """A sum or average of FLOAT/DOUBLE values: its last bits depend on the order the rows are
        added in, so a partition recomputed in another order would not cancel its old rows."""
        return self.fn in ("sum", "avg") and self.args[0].type.name in ("FLOAT", "DOUBLE")

    @property
    def nullable(self) -> bool:
        return self.fn not in _NOT_NULL


def ties_free(call: WindowCall, columns: tuple[str, ...], equal: tuple[tuple[str, str], ...] = ()) -> bool:
    """Whether rows with ``columns`` tie on the call's PARTITION BY and ORDER BY only when they are
    equal in every one of ``columns`` (so the order among ties cannot change the answer's bag).
    ``equal``: pairs of columns equal in every row (an inner join's ``a = b``), so either covers
    the other."""
    return set(columns) <= covered(call, equal)


def covered(call: WindowCall, equal: tuple[tuple[str, str], ...] = ()) -> set[str]:
    """The columns the call's PARTITION BY and ORDER BY name, and those ``equal`` to one of them."""
    keyed = {e.name for e in call.partition if isinstance(e, Column)}
    keyed |= {k.expr.name for k in call.order if isinstance(k.expr, Column)}
    grown = True
    while grown:
        more = {b for a, b in equal if a in keyed} | {a for a, b in equal if b in keyed}
        grown = not more <= keyed
        keyed |= more
    return keyed


@dataclass(frozen=True, slots=True)
class Window(Rel):
    """The input's rows, each with the value of every call (``calls``: output name, call)."""

    input: Rel
    calls: tuple[tuple[str, WindowCall], ...]
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.calls:
            raise ValueError("Window needs at least one call")
        missing = set().union(*(c.columns() for _, c in self.calls)) - set(self.input.names)
        if missing:
            raise ValueError(f"Window reads {sorted(missing)} which its input lacks")
        self._set_schema(self.input.schema + tuple(Field(n, c.type, c.nullable) for n, c in self.calls))

    def inputs(self) -> tuple[Rel, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Window(inputs[0], self.calls)

