"""Window functions (OVER): a window's change from the partitions a batch touched.

A window's value for a row depends on every row of its partition, so no monoid merges it: a
row inserted at the top of a partition shifts every rank below it. The rule keeps the window's
input as a bag state — its rows with their multiplicity, keyed by their columns and
hash-partitioned on the PARTITION BY columns — and gives the window's change as Spark's own
window operator over the touched partitions' rows after the merge (+1) minus the same before it
(−1), the touched partitions' rows looked up in the state by a semi join on the partition key
and added up per row (so a large state may be kept as a base and a tail, ``plan/runs.py``)::

    Δ Window(R)  =  Window(σ_touched R') − Window(σ_touched R)       touched = π_partition ΔR

Rows whose value did not change cancel out wherever the change is consumed (an output state, an
aggregate). The window's output is then a relation like any other: the query's answer keeps it
in its output state (so a snapshot reads that state, not the window recomputed), a filter over
it (top-k per group: ``WHERE rn <= k``) keeps k rows per partition, and a join or an aggregate
reads its change. This is Materialize's approach; Feldera and RisingWave work inside a partition
in proportion to the change: here a window of running functions is computed from each touched
partition's first changed row (:mod:`.rules_window_suffix`, tried first), bounded RANGE frames
from the rows near the change (:mod:`.rules_window_range`), a top-k of rows
that are only inserted keeps k rows (:mod:`.rules_topk`), and one over rows that may be deleted
each partition's first rows and a reserve (:mod:`.rules_topk_reserve`). Without a PARTITION BY shared by every
call the window is one partition, recomputed whole (before and after) each batch.

Ties: where ORDER BY does not order a partition's rows totally, Spark numbers tying rows in the
order it happens to read them. Functions whose value depends on that order (row_number, ntile,
lag/lead, first/last/nth_value, an aggregate over a ROWS frame, a sum or average of FLOAT/DOUBLE
values — whose last bits depend on the order of addition, so a partition recomputed in another
order would not cancel its old rows) are refused
(``WINDOW_ORDER_NOT_TOTAL``) unless PARTITION BY and ORDER BY name every column of the window's
input (over a GROUP BY: every group key; a column an inner join's ``a = b`` equates with a named one
counts as named) — then rows that tie are equal, and so is the bag of
answers whatever their order.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import UnsupportedError
from ..ir.expr import Call, Column, Expr, Literal, SubqueryExpr, conjuncts, or_all, reads_clock
from ..ir.printer import display_name
from ..ir.rel import WEIGHT, Aggregate, Expand, Field, Filter, Join, JoinKind, Project, Rel, StateScan, StateVersion, Union
from ..ir.types import BOOLEAN
from ..ir.window import LIMIT_RANK, Window, WindowCall, covered, ties_free
from .context import PlanContext
from .model import Compiled
from .terms import MINUS_ONE, ONE, sum_weights
from .window_keys import _NULL, _VALUE, key_matches, keyed, partition_columns, surrogates, with_surrogates

__all__ = ["KeyedBag", "keyed", "keyed_bag", "look_up", "over_keyed", "partition_columns", "refuse_ties", "signed", "surrogates",
           "touched_keys", "window", "with_surrogates"]


def window(ctx: PlanContext, rel: Rel) -> Compiled:
    """The change of a window's output: its touched partitions recomputed, after minus before."""
    assert isinstance(rel, Window)
    chain = _chain(rel)
    for node in chain.nodes:
        if isinstance(node, Window):
            refuse_ties(node)
    base, part, nullable = keyed(chain.base, chain.part)
    state, fields = ctx.bag_state(base, "win", partition=part or None)
    what = "the window's rows" if chain.windows == 1 else f"the rows under {chain.windows} nested windows"
    if part:
        program = signed(_touched_partitions(chain, state, fields, part, nullable, StateVersion.NEW),
                          _touched_partitions(chain, state, fields, part, nullable, StateVersion.OLD))
        ctx.plan.note(f"OVER: {what} kept in {state}, partitioned on "
                      f"({', '.join(display_name(p) for p in chain.part)}); each batch recomputes the window over the "
                      "partitions it touched, after and before its merge, and hands on the difference")
    else:
        program = signed(chain.over(Expand(StateScan(state, StateVersion.NEW, fields), WEIGHT)),
                          chain.over(Expand(StateScan(state, StateVersion.OLD, fields), WEIGHT)))
        ctx.plan.note(f"OVER: {what} kept in {state}; no PARTITION BY is shared by every call, so the "
                      "window is one partition: each batch recomputes it whole, after and before its merge")
    return Compiled(program, static=False, weighted=True)


@dataclass(frozen=True)
class _Chain:
    """A window and the windows under it that one state can serve: ``nodes`` from the top window
    down to the node over ``base`` (windows, and row-wise projections and filters between them),
    ``part`` the partition columns every window's PARTITION BY holds. Each window's partitions
    then lie within one of ``part``'s, so the chain recomputed over the touched ``part``
    partitions of ``base`` gives every row of them exactly — ``session_window``'s three windows,
    or a running sum over a rank, keep their input once, not once per window."""

    nodes: tuple[Rel, ...]
    base: Rel
    part: tuple[str, ...]

    @property
    def windows(self) -> int:
        return sum(isinstance(n, Window) for n in self.nodes)

    def over(self, rows: Rel) -> Rel:
        """The chain over ``rows`` instead of ``base``: ``base``'s columns, and the NULL-free
        key of :func:`keyed` the lowest window partitions by (:func:`over_keyed`)."""
        bottom, *above = reversed(self.nodes)
        assert isinstance(bottom, Window)
        rows = over_keyed(bottom, rows, self.base.names)
        for node in above:
            rows = node.with_inputs((rows,))
        return rows


def over_keyed(window: Window, rows: Rel, names: tuple[str, ...]) -> Rel:
    """``window``'s calls over ``rows``, which may carry a NULL-free key (:func:`keyed`) for
    some partition columns: the calls then partition by the key's two columns instead (the same
    partitions, and the rows' partitioning: Spark needs no exchange before the window), which
    leave after it with every other column not in ``names``."""
    replaced = {n[:-len(_NULL)] for n in rows.names if n.endswith(_NULL)}
    if not replaced:
        return window.with_inputs((rows,))

    def partition(call: WindowCall) -> tuple[Expr, ...]:
        return tuple(k for e in call.partition for k in (
            (Column(e.name + _NULL, BOOLEAN), Column(e.name + _VALUE, e.type))
            if isinstance(e, Column) and e.name in replaced else (e,)))

    out = Window(rows, tuple((n, replace(c, partition=partition(c))) for n, c in window.calls))
    return Project(out, tuple((f.name, f.ref()) for f in out.schema if f.name not in rows.names or f.name in names))


def _chain(top: Window) -> _Chain:
    nodes: list[Rel] = [top]
    part = partition_columns(top)
    node = top.input
    while part:
        between: list[Rel] = []
        below = node
        names = {p: p for p in part}  # a partition column of the windows above → its name here
        while isinstance(below, (Project, Filter)) and _row_wise(below):
            between.append(below)
            names = {p: n for p, n in ((p, _source(below, n)) for p, n in names.items()) if n is not None}
            below = below.input
        if not isinstance(below, Window):
            break
        shared = tuple(n for n in names.values() if n in partition_columns(below))
        if not shared:
            break
        nodes += between + [below]
        part = shared
        node = below.input
    return _Chain(tuple(nodes), node, part)


def _row_wise(node: Project | Filter) -> bool:
    """Whether ``node`` maps each row on its own, the same at every batch (no clock, no subquery)."""
    exprs = [e for _, e in node.exprs] if isinstance(node, Project) else [node.condition]
    return not any(reads_clock(e) or any(isinstance(x, SubqueryExpr) for x in e.walk()) for e in exprs)


def _source(node: Project | Filter, column: str) -> str | None:
    """The input column ``node``'s output ``column`` is, unchanged (renamed at most); None if computed."""
    if isinstance(node, Filter):
        return column
    e = next((e for n, e in node.exprs if n == column), None)
    return e.name if isinstance(e, Column) else None


def _touched_partitions(chain: _Chain, state: str, fields: tuple[Field, ...], part: tuple[str, ...],
                        nullable: tuple[str, ...], version: StateVersion) -> Rel:
    """The window over the rows of the partitions the batch touched (their PARTITION BY values
    are those of the state's delta), in ``version`` of the state (:func:`look_up`)."""
    touched = touched_keys(StateScan(state, StateVersion.DELTA, fields), part)
    return chain.over(Expand(look_up(state, fields, part, nullable, version, touched), WEIGHT))


def touched_keys(rows: Rel, part: tuple[str, ...]) -> Rel:
    """The distinct values of ``rows``' columns ``part``, each column renamed ``<name>#t``."""
    renamed = tuple((f"{p}#t", rows.field(p).ref()) for p in part)
    return Aggregate(Project(rows, renamed), tuple((n, Column(n, e.type)) for n, e in renamed), ())


def look_up(state: str, fields: tuple[Field, ...], part: tuple[str, ...], nullable: tuple[str, ...],
            version: StateVersion, touched: Rel) -> Rel:
    """The rows of ``version`` of a bag state whose ``part`` columns are among ``touched``'s
    (:func:`touched_keys`), with their multiplicity: looked up by a semi join on the partition
    key and added up per row at once, so the state may be kept as a base and a tail
    (plan/runs.py: a look-up added up per key).

    The join compares with ``=``, as the state is hash-partitioned: Spark reads each partition
    where it lies (and prepared plans look its keys up in an index of the base, ``Plans.lookups``),
    where ``<=>`` would make it shuffle the whole state on coalesce(key), isnull(key). A NULL
    partition is a partition, which ``=`` does not match: the rows with a NULL in a ``nullable``
    partition column (one :func:`keyed` could not replace) are looked up null-safely apart."""
    by_name = {f.name: f for f in fields}
    on = tuple(by_name[p] for p in part)
    keys = tuple((f.name, f.ref()) for f in fields if f.name != WEIGHT)

    def summed(rows: Rel) -> Rel:
        return Aggregate(rows, keys, ((WEIGHT, sum_weights()),))

    found = summed(Join(StateScan(state, version, fields), touched, JoinKind.SEMI, key_matches(on, "t")))
    if nullable:  # (added up apart: the rows found by `=` keep the state's partitioning)
        with_null = or_all([Call("IS NULL", (Column(p, by_name[p].type),), BOOLEAN) for p in nullable])
        assert with_null is not None
        found = Union((found, summed(Join(Filter(StateScan(state, version, fields), with_null), touched,
                                          JoinKind.SEMI, key_matches(on, "t", part)))))
    return found


@dataclass(frozen=True)
class KeyedBag:
    """A window's input kept as a bag state hash-partitioned on its PARTITION BY key (:func:`keyed`;
    a constant column ``all`` when there is none, so one partition is looked up like any)."""

    state: str
    fields: tuple[Field, ...]
    key: tuple[str, ...]
    nullable: tuple[str, ...]

    @property
    def on(self) -> tuple[Field, ...]:
        by_name = {f.name: f for f in self.fields}
        return tuple(by_name[k] for k in self.key)

    def scan(self, version: StateVersion) -> StateScan:
        return StateScan(self.state, version, self.fields)


def keyed_bag(ctx: PlanContext, rows: Rel, part: tuple[str, ...], constant: str) -> KeyedBag:
    base, key, nullable = keyed(rows, part)
    if not key:  # one partition: a constant key
        base = Project(base, tuple((f.name, f.ref()) for f in base.schema) + ((constant, Literal(True, BOOLEAN)),))
        key = (constant,)
    state, fields = ctx.bag_state(base, "win", partition=key)
    return KeyedBag(state, fields, key, nullable)


def once(ctx: PlanContext, base: str, rel: Rel) -> Rel:
    """``rel`` computed once per batch (a temp result), read as its name."""
    return StateScan(ctx.plan.add_temp(base, rel), StateVersion.DELTA, rel.schema)


def signed(after: Rel, before: Rel) -> Rel:
    """``after`` with weight +1 and ``before`` with −1."""
    cols = tuple((f.name, f.ref()) for f in after.schema)
    return Union((Project(after, cols + ((WEIGHT, ONE),)), Project(before, cols + ((WEIGHT, MINUS_ONE),))))


def _equal_columns(rel: Rel) -> tuple[tuple[str, str], ...]:
    """Pairs of columns equal in every row of ``rel``: the ``a = b`` conjuncts of the filters and
    inner joins it is made of (``T JOIN U ON T.g = U.k``: a row's ``U.k`` is its ``T.g``)."""
    pairs: list[tuple[str, str]] = []
    nodes = [rel]
    while nodes:
        node = nodes.pop()
        condition = None
        if isinstance(node, Filter):
            condition, nodes = node.condition, nodes + [node.input]
        elif isinstance(node, Join) and node.kind in (JoinKind.INNER, JoinKind.CROSS):
            condition, nodes = node.condition, nodes + [node.left, node.right]
        for c in conjuncts(condition) if condition is not None else ():
            if isinstance(c, Call) and c.op == "=" and all(isinstance(a, Column) for a in c.args):
                left, right = c.args
                assert isinstance(left, Column) and isinstance(right, Column)
                pairs.append((left.name, right.name))
    return tuple(pairs)


def refuse_ties(rel: Window) -> None:
    """Refuse a call whose value depends on the order among rows tying on its ORDER BY."""
    columns = rel.input.names
    node = rel.input
    while isinstance(node, Filter):
        node = node.input
    if isinstance(node, Aggregate):
        columns = tuple(n for n, _ in node.keys)  # an aggregate's rows differ in their group key
    equal = _equal_columns(rel.input)
    for name, call in rel.calls:
        if call.order_sensitive and not ties_free(call, columns, equal):
            keyed = covered(call, equal)
            missing = [display_name(c).split(".", 1)[-1] for c in columns if c not in keyed]
            if name.startswith(LIMIT_RANK):  # a LIMIT inside a subquery (passes.nested_limits)
                raise UnsupportedError(
                    "a subquery's ORDER BY leaves ties at its LIMIT: which tying rows it keeps depends on the order "
                    "Spark happens to read them in", code="LIMIT_ORDER_NOT_TOTAL",
                    params={"construct": "LIMIT", "columns": missing},
                    hint=f"add tie-breakers to the subquery's ORDER BY (e.g. {', '.join(missing)}) so that rows tie "
                         "only when they are equal")
            if call.float_sum:
                raise UnsupportedError(
                    f"{call.fn} of floating-point values over rows in no total order: its last digits depend on the "
                    "order Spark happens to add tying rows in", code="WINDOW_ORDER_NOT_TOTAL",
                    params={"function": call.fn, "columns": missing},
                    hint="CAST the argument to DECIMAL, whose sums are exact in any order, or order the window by "
                         f"every column it reads (add {', '.join(missing)})")
            raise UnsupportedError(
                f"{call.fn} over an ORDER BY that leaves ties: its value depends on the order Spark happens to "
                "read tying rows in", code="WINDOW_ORDER_NOT_TOTAL",
                params={"function": call.fn, "columns": missing},
                hint=f"add a tie-breaker to the OVER clause's ORDER BY (e.g. {', '.join(missing)}) so that rows tie "
                     "only when they are equal; rank, dense_rank, percent_rank, cume_dist and RANGE frames need none")
