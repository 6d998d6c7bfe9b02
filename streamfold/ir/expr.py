"""Scalar expressions: immutable, typed, compared by value.

A column is referenced by the unique name of a field of the input relation (``x.A`` for column
``A`` of the table aliased ``x``). Operators and functions are one node, :class:`Call`, whose
``op`` is an operator (``+``, ``=``, ``AND``, ``IS NULL`` …) or a function's Spark SQL name;
functions carry a ``template`` (``"substring({0}, {1}, {2})"``) so odd SQL syntax survives.
"""

from __future__ import annotations

import decimal
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .types import BOOLEAN, DATE, INT, DataType


class Expr:
    """Base of scalar expressions."""

    __slots__ = ()
    type: DataType

    def children(self) -> tuple[Expr, ...]:
        return ()

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        assert not children
        return self

    def walk(self) -> Iterator[Expr]:
        """This node and all nodes below it, parents first."""
        yield self
        for child in self.children():
            yield from child.walk()

    def columns(self) -> frozenset[str]:
        """Names of the input columns this expression reads."""
        return frozenset(e.name for e in self.walk() if isinstance(e, Column))

    def transform(self, fn: Callable[[Expr], Expr | None]) -> Expr:
        """Rewrite bottom-up: ``fn`` returns a replacement for a node, or None to keep it."""
        kids = self.children()
        node = self
        if kids:
            new_kids = tuple(k.transform(fn) for k in kids)
            if new_kids != kids:
                node = self.with_children(new_kids)
        replaced = fn(node)
        return node if replaced is None else replaced

    def rename(self, mapping: Mapping[str, str]) -> Expr:
        """Rename column references by ``mapping`` (names absent from it stay)."""
        return self.transform(
            lambda e: Column(mapping[e.name], e.type) if isinstance(e, Column) and e.name in mapping else None
        )

    def substitute(self, mapping: Mapping[str, Expr]) -> Expr:
        """Replace column references by expressions (used to fuse projections)."""
        return self.transform(lambda e: mapping.get(e.name) if isinstance(e, Column) else None)


@dataclass(frozen=True, slots=True)
class Column(Expr):
    name: str
    type: DataType


@dataclass(frozen=True, slots=True)
class Literal(Expr):
    value: Any
    type: DataType


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """An operator or function applied to arguments."""

    op: str
    args: tuple[Expr, ...]
    type: DataType
    template: str | None = None  # for functions: Spark SQL with {0}, {1}… for the arguments

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return Call(self.op, children, self.type, self.template)


@dataclass(frozen=True, slots=True)
class Case(Expr):
    """``CASE WHEN c1 THEN v1 … ELSE d END``; ``default`` None means ELSE NULL."""

    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr | None
    type: DataType

    def children(self) -> tuple[Expr, ...]:
        flat = tuple(e for pair in self.whens for e in pair)
        return flat + ((self.default,) if self.default is not None else ())

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        n = len(self.whens)
        whens = tuple((children[2 * i], children[2 * i + 1]) for i in range(n))
        default = children[2 * n] if self.default is not None else None
        return Case(whens, default, self.type)


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    expr: Expr
    type: DataType
    safe: bool = False  # TRY_CAST: NULL instead of an error

    def children(self) -> tuple[Expr, ...]:
        return (self.expr,)

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return Cast(children[0], self.type, self.safe)


# Operators whose value is NULL whenever an argument is: arithmetic, and the comparisons (not <=>).
ARITHMETIC = frozenset({"+", "-", "*", "/", "%", "neg", "div"})
COMPARISONS = frozenset({"=", "<>", "<", "<=", ">", ">="})

AGGREGATES = frozenset({
    "count", "sum", "avg", "min", "max",
    "stddev", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop",
    # percentile(x, p): Spark's exact percentile (median and percentile_cont bind to it)
    "percentile",
    # collect_set(x), only under sort_array or size (sql/bind_expr/value_sets.py); collect_list(x),
    # only sorted, for listagg … WITHIN GROUP (ORDER BY x) (sql/bind_expr/listagg.py)
    "collect_set", "collect_list",
    # mode(x, true) and mode() WITHIN GROUP (ORDER BY x DESC) (sql/bind_expr/modes.py); min_by and
    # max_by only as their answer over the values' multiset (plan/aggregates.py)
    "mode", "mode_desc", "min_by", "max_by",
    # percentile_disc(p) WITHIN GROUP (ORDER BY x [DESC]) (sql/bind_expr/percentiles.py)
    "percentile_disc", "percentile_disc_desc",
    # bit_and, bit_or, bit_xor of integers, over the values' multiset (plan/aggregates.py)
    "bit_and", "bit_or", "bit_xor",
    # grouping() and grouping_id() under GROUPING SETS, CUBE and ROLLUP: bound as aggregates so
    # the select list lifts them like one, each replaced by its set's constant (sql/bind/grouping_sets.py)
    "grouping", "grouping_id",
})


@dataclass(frozen=True, slots=True)
class Agg(Expr):
    """An aggregate call; only found in :class:`~streamfold.ir.rel.Aggregate` nodes.

    ``count(*)`` is ``Agg("count", (), False, BIGINT)``.
    """

    fn: str
    args: tuple[Expr, ...]
    distinct: bool
    type: DataType

    def __post_init__(self) -> None:
        if self.fn not in AGGREGATES:
            raise ValueError(f"unknown aggregate {self.fn}")

    def children(self) -> tuple[Expr, ...]:
        return self.args

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return Agg(self.fn, children, self.distinct, self.type)


@dataclass(frozen=True, slots=True)
class OuterColumn(Expr):
    """A column of an enclosing query, read inside a correlated subquery."""

    name: str
    type: DataType


@dataclass(frozen=True, slots=True)
class LambdaVar(Expr):
    """A parameter of a lambda (``x`` in ``transform(arr, x -> x + 1)``): bound by the call whose
    template names it, never an input column, so passes that rename or place columns pass it by."""

    name: str
    type: DataType


# ``(a, b) IN (SELECT x, y …)``: the left side of a row IN is a Call of this op over its values.
ROW = "row"


@dataclass(frozen=True, slots=True)
class SubqueryExpr(Expr):
    """A subquery used as a value: ``scalar`` (one value), ``exists``, or ``in`` (``arg IN (…)``;
    ``arg`` is a :data:`ROW` call when a row of values is compared with the subquery's columns).

    ``rel`` is the bound subquery; it may read columns of the enclosing query as
    :class:`OuterColumn`. The ``unnest_subqueries`` pass turns every one into a join.
    """

    kind: str
    rel: Any  # a Rel (not imported here: relations are built from expressions)
    arg: Expr | None
    type: DataType

    def children(self) -> tuple[Expr, ...]:
        return (self.arg,) if self.arg is not None else ()

    def with_children(self, children: tuple[Expr, ...]) -> Expr:
        return SubqueryExpr(self.kind, self.rel, children[0] if children else None, self.type)

    def columns(self) -> frozenset[str]:
        """The enclosing query's columns it reads: its argument's and the subquery's outer ones."""
        own = self.arg.columns() if self.arg is not None else frozenset()
        return own | outer_columns(self.rel)


def outer_columns(rel: Any) -> frozenset[str]:
    """Names of the enclosing queries' columns a (sub)query reads.

    A subquery nested in it may read the (sub)query's own columns as outer ones; those are not
    outer here. Field names are unique across a bound query, so a name any node inside defines
    is one of its own.
    """
    read: set[str] = set()
    own: set[str] = set()
    for node in rel.walk():
        own.update(f.name for f in node.schema)
        for e in _node_exprs(node):
            for x in e.walk():
                if isinstance(x, OuterColumn):
                    read.add(x.name)
                elif isinstance(x, SubqueryExpr):
                    read.update(outer_columns(x.rel))
    return frozenset(read - own)


def _node_exprs(node: Any) -> list[Expr]:
    """The expressions a relational node holds (for walking them without knowing its class)."""
    out: list[Expr] = []
    for attr in ("condition", "exprs", "keys", "aggs"):
        value = getattr(node, attr, None)
        if value is None:
            continue
        if isinstance(value, Expr):
            out.append(value)
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Expr):
                    out.append(item[1])
                elif hasattr(item, "expr") and isinstance(item.expr, Expr):
                    out.append(item.expr)
    return out


# -- small constructors used by passes -------------------------------------------------------
TRUE = Literal(True, BOOLEAN)

# The time a batch evaluates at (``current_timestamp()`` in a time bound, docs/windows.md): one
# value per batch, chosen and recorded by the runtime, read by Spark from the one-row view
# CLOCK_VIEW the runtime creates before the batch's programs run.
BY_PAIR_OP = "by_pair"  # max_by/min_by's (ordering, value) pair: sql/bind_expr/extremes.py
CLOCK_OP = "batch_time"
CLOCK_VIEW = "_streamfold_clock"
CLOCK_COLUMN = "_streamfold_now_us"  # its one column: the time in microseconds, a DECIMAL(20,0)
EVENT_TIME = "max_event_time"  # the event-time clock's SQL name, and its CLOCK_OP call's argument


def clock_kind(e: Expr) -> str | None:
    """``"processing"`` or ``"event"`` for an expression reading the batch time, else None."""
    for x in e.walk():
        if isinstance(x, Call) and x.op == CLOCK_OP:
            return "event" if x.args else "processing"
    return None


def reads_clock(e: Expr) -> bool:
    """Whether ``e`` reads the batch's time."""
    return any(isinstance(x, Call) and x.op == CLOCK_OP for x in e.walk())


def conjuncts(e: Expr | None) -> tuple[Expr, ...]:
    """Split a predicate on AND."""
    if e is None:
        return ()
    if isinstance(e, Call) and e.op == "AND":
        return conjuncts(e.args[0]) + conjuncts(e.args[1])
    return (e,)


def and_all(preds: Sequence[Expr]) -> Expr | None:
    """Join predicates with AND; None for none."""
    result: Expr | None = None
    for p in preds:
        result = p if result is None else Call("AND", (result, p), BOOLEAN)
    return result


def or_all(preds: Sequence[Expr]) -> Expr | None:
    """Join predicates with OR; None for none."""
    result: Expr | None = None
    for p in preds:
        result = p if result is None else Call("OR", (result, p), BOOLEAN)
    return result


def call(op: str, *args: Expr, type: DataType) -> Call:
    return Call(op, tuple(args), type)


def days_added(date: Expr, days: int) -> Call:
    """``date_add(date, days)``: a DATE moved by whole days, as Spark moves one."""
    return Call("date_add", (date, Literal(days, INT)), DATE, "date_add({0}, {1})")


def micros_added(ts: Expr, micros: int) -> Call:
    """A TIMESTAMP (or TIMESTAMP_NTZ) moved by ``micros`` microseconds with Spark's own interval
    value, so it follows the session time zone as the batch query does."""
    seconds = Literal(decimal.Decimal(micros).scaleb(-6), DataType("DECIMAL", 18, 6))
    return Call("timestamp_add_time", (ts, seconds), ts.type, "({0} + make_dt_interval(0, 0, 0, {1}))")

