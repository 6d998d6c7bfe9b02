"""Running window functions: a batch recomputes each touched partition from its first changed row.

A running function's value for a row depends only on the rows ordered at or before it:
``row_number``, ``rank``, ``dense_rank``, and ``sum``, ``count``, ``min``, ``max`` over the frame
from the partition's start to the current row (``ROWS`` or ``RANGE``, the default with ORDER BY).
A batch that changes a partition at ORDER BY position ``m`` leaves every row before ``m`` as it
was, so the general rule's recomputation of the whole partition (:mod:`.rules_windows`) is
mostly work whose result cancels. This rule computes the window only over the partition's rows
at or after the first row the batch changed — its *suffix* — and starts it from a *carry*, the
rows before it summed up (Feldera's and RisingWave's running aggregates; seed 004's incremental
window)::

    m_p       = the least ORDER BY first key among the batch's rows of partition p
    prefix_p  = rows of p ordered strictly before m_p       (the same before and after the batch)
    carry_p   = count, distinct keys, sum, count, min, max of prefix_p
    Δ out_p   = F(suffix_p after, carry_p) − F(suffix_p before, carry_p)
    F(S, c)   = Window(S) with rank + c.count, dense_rank + c.distinct, sum + c.sum,
                count + c.count, least(min, c.min), greatest(max, c.max)

Only the first ORDER BY key decides the suffix: the prefix is every row whose first key is
strictly before ``m`` (after it, for DESC; NULLs where ORDER BY puts them), which is a prefix of
the partition's order that holds no row of the batch, so ties never straddle it. A batch that
changes the partition's first row computes the whole partition, as the general rule does.

A batch that only *appends* to a partition — every row it changes ordered strictly after every
row the partition holds (a running sum over time) — has the whole partition before it as the
prefix, so a state ``totals`` keeps each partition's *summary*: its carry over all its rows, its
last first key and whether it holds a NULL one (NULLs last). Such a partition is not read at all:
its carry is its summary before the batch, its suffix the batch's rows. Every touched
partition's summary is then replaced by its carry plus its suffix after the batch, so a batch
reads the partitions it changes inside and the summaries of those it appends to::

    appends_p = no NULL key in the batch's rows of p, m_p after last_p (or p empty), and, where
                NULLs come last, no NULL key in p
    carry_p   = summary_p                         if appends_p, else as above
    summary'_p = carry_p ⊕ totals(suffix_p after)     (dropped when p has no row left)

The carry is computed from exact values (integers, decimals; a count), so ``before`` and
``after`` agree on the rows they share and cancel where the change is consumed. Not handled
here, so left to the general rule: other functions and frames, floating-point and average sums,
a decimal sum whose carry's addition Spark would round (precision 38 with more than 6 decimals),
nested windows, windows whose calls disagree on their PARTITION BY (or partition by an
expression) or on their first ORDER BY key, and dense_ranks over different ORDER BYs.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Agg, Call, Case, Cast, Column, Expr, Literal, SubqueryExpr, and_all, or_all, reads_clock
from ..ir.printer import display_name
from ..ir.rel import (
    WEIGHT, Aggregate, Expand, Explode, Field, Filter, Join, JoinKind, Project, Rel, SortKey, StateScan, StateVersion, Union,
)
from ..ir.types import BIGINT, BOOLEAN, INT, MAX_PRECISION, DataType, arithmetic_type, array, sum_type
from ..ir.window import FrameKind, Window, WindowCall
from . import rules_windows
from .context import PlanContext
from .model import Compiled, Monoid, State, StateColumn, StateRole
from .rules_window_range import near
from .rules_windows import keyed_bag, look_up, once, over_keyed, partition_columns, refuse_ties
from .window_keys import key_matches
from .terms import MINUS_ONE, ONE, ZERO, coalesce0, or_false, sum_weights

_RANKS = frozenset({"row_number", "rank", "dense_rank"})
_RUNNING = frozenset({"sum", "count", "min", "max"})
# the columns the rule adds: the batch's least first key per partition, whether it had a NULL
# one, and the carry (the prefix's row count, distinct keys, and one value per call)
_LEAST, _HAS_NULL, _ROWS, _DISTINCT = "_sfx#least", "_sfx#null", "_sfx#rows", "_sfx#distinct"
_SIGN, _NEW, _OLD = "_sfx#sign", "_sfx#new", "_sfx#old"  # a suffix row: its version, its multiplicity in each
# a partition's summary: its last first ORDER BY key (NULLs aside), whether it has a NULL one, and
# whether the batch only appends to it; the constant key of a window without PARTITION BY
_LAST, _SNULL, _APPEND, _ALL = "_sfx#last", "_sfx#snull", "_sfx#append", "_sfx#all"


def window_rule(ctx: PlanContext, rel: Rel) -> Compiled:
    """A window: running functions from the first changed row (below), bounded RANGE frames from the
    rows near the change (:mod:`.rules_window_range`), else :func:`.rules_windows.window`."""
    return suffix(ctx, rel) or near(ctx, rel) or rules_windows.window(ctx, rel)


def running(window: Window) -> SortKey | None:
    """The first ORDER BY key every call of ``window`` shares when each call is a running function
    this rule computes from its suffix; else None."""
    first: SortKey | None = None
    for _, call in window.calls:
        if not call.order or not _runs(call):
            return None
        key = call.order[0]
        if first is None:
            first = key
        elif (key.expr, key.descending, key.effective_nulls_first) != (
                first.expr, first.descending, first.effective_nulls_first):
            return None
    if first is None or reads_clock(first.expr) or any(isinstance(x, SubqueryExpr) for x in first.expr.walk()):
        return None
    # one partitioning (plain columns) for every call, as the carry is per partition; one ORDER BY
    # for every dense_rank, as the carry counts the distinct keys of one
    part = set(partition_columns(window))
    if any(not all(isinstance(p, Column) for p in call.partition) or {p.name for p in call.partition if
                                                                       isinstance(p, Column)} != part
           for _, call in window.calls):
        return None
    if len({tuple(k.expr for k in call.order) for _, call in window.calls if call.fn == "dense_rank"}) > 1:
        return None
    return first


def _runs(call: WindowCall) -> bool:
    if call.fn in _RANKS:
        return True
    if call.fn not in _RUNNING:
        return False
    frame = call.effective_frame
    if frame.start is not None or frame.end != 0 or frame.kind not in (FrameKind.ROWS, FrameKind.RANGE):
        return False
    if call.fn == "sum":
        t = call.type
        if not (t.is_integral or t.is_decimal):
            return False  # a floating-point sum's last bits depend on the order of addition
        if t.is_decimal and t.precision is not None and t.scale is not None and t.precision >= MAX_PRECISION \
                and t.scale > 6:
            return False  # Spark would round the carry's addition to fewer decimals
    return True


def suffix(ctx: PlanContext, rel: Rel) -> Compiled | None:
    """The change of a window of running functions, each touched partition computed from the first
    row the batch changed (module docstring); None where the window is not one."""
    assert isinstance(rel, Window)
    first = running(rel)
    if first is None or isinstance(rel.input, Window):
        return None
    refuse_ties(rel)
    part = partition_columns(rel)
    # (one partition: a constant key, so that its summary is a row like any partition's)
    bag = keyed_bag(ctx, rel.input, part, _ALL)
    state, fields, key, nullable, on = bag.state, bag.fields, bag.key, bag.nullable, bag.on
    by_name = {f.name: f for f in fields}
    delta = bag.scan(StateVersion.DELTA)
    # (read by the summaries' look-up and joined with what it finds: computed once per batch)
    bounds = once(ctx, "win_bounds", _bounds(delta, key, first))
    weight = Column(WEIGHT, BIGINT)

    # each touched partition's summary before the batch, and whether the batch only appends to it
    summary = ctx.plan.name("totals")
    columns = _summary_columns(rel, first)
    sfields = tuple(by_name[k] for k in key) + tuple(Field(n, t) for n, t in columns)
    # (a row the state keeps as a base and a tail may add up to none: a summary replaced since)
    old = once(ctx, "totals_old", Filter(look_up(summary, sfields + (Field(WEIGHT, BIGINT),), key, nullable,
                                                 StateVersion.OLD, bounds), Call(">", (weight, ZERO), BOOLEAN)))
    parts = once(ctx, "win_parts", Project(
        Join(bounds, old, JoinKind.LEFT, key_matches(on, "t", nullable)),
        tuple((f.name, f.ref()) for f in bounds.schema) + ((_APPEND, _appends(first)),)
        + tuple((n, Column(n, t)) for n, t in columns)))
    appends = Column(_APPEND, BOOLEAN)
    changed = Project(Filter(parts, Call("NOT", (appends,), BOOLEAN)),
                      tuple((f.name, f.ref()) for f in bounds.schema))

    # the rows after the merge of the touched partitions the batch does not only append to, as
    # the state holds them (a row may be in its base and its tail), each joined with its
    # partition's bounds — read once for the prefix and once for the suffix: by `=` on the
    # state's partitioning, where the state lies (prepared plans read the base's rows of the
    # touched keys from an index of it); a NULL in a key column `=` cannot match is joined
    # null-safely apart. A partition the batch appends to is not read: its prefix is all its
    # rows before the batch, summed up in its summary, and its suffix the batch's rows.
    scan = StateScan(state, StateVersion.NEW, fields)
    rows: Rel = Join(scan, changed, JoinKind.INNER, key_matches(on, "t"))
    if nullable:
        with_null = or_all([Call("IS NULL", (Column(k, by_name[k].type),), BOOLEAN) for k in nullable])
        assert with_null is not None
        rows = Union((rows, Join(Filter(scan, with_null), changed, JoinKind.INNER, key_matches(on, "t", key))))
    before_m = _before(first)
    prefix = _carry(rel, first, Filter(rows, before_m), fields, key)
    kept = tuple((f"{k}#c", Column(f"{k}#t", by_name[k].type)) for k in key)
    carry = once(ctx, "win_carry", Union((
        Project(prefix, _keys_of(prefix, kept) + tuple(
            (n, Literal(0, INT) if n == _SNULL else Column(n, t)) for n, t in columns)),
        Project(Filter(parts, appends), kept + tuple((n, Column(n, t)) for n, t in columns)))))
    cols = tuple((f.name, f.ref()) for f in fields if f.name != WEIGHT)
    # each suffix row's multiplicity after the merge and before it (the batch's rows taken back:
    # they all lie in the suffix), then the row once per version, signed +1 after and −1 before:
    # one read of the state gives both versions, and one window partitioned by the sign computes
    # both (a version that holds no copy of the row gives none). Where the batch appends, its
    # rows are the suffix after it, one row each (the state's delta is added up per row), and
    # the version before holds none of them: they go to the window as they are.
    tagged = Join(delta, Project(parts, tuple((f"{k}#t", Column(f"{k}#t", by_name[k].type)) for k in key)
                                 + ((_APPEND, appends),)), JoinKind.INNER, key_matches(on, "t", nullable))
    appended = Project(Filter(tagged, Call("AND", (appends, Call(">", (weight, ZERO), BOOLEAN)), BOOLEAN)),
                       cols + ((WEIGHT, weight),))
    taken_back = Call("*", (weight, MINUS_ONE), BIGINT)
    versions = Union((Project(Filter(rows, Call("NOT", (before_m,), BOOLEAN)), cols + ((_NEW, weight), (_OLD, weight))),
                      Project(Filter(tagged, Call("NOT", (appends,), BOOLEAN)), cols + ((_NEW, ZERO), (_OLD, taken_back)))))
    both = Aggregate(versions, cols, ((_NEW, sum_weights(_NEW)), (_OLD, sum_weights(_OLD))))
    each = Explode(both, Call("array", (Column(_NEW, BIGINT), Column(_OLD, BIGINT)), array(BIGINT), "array({0}, {1})"),
                   WEIGHT, position=_SIGN)
    present = Filter(each, Call(">", (weight, ZERO), BOOLEAN))
    sign = Column(_SIGN, INT)
    # (position 0: after, +1; position 1: before, −1)
    summed = Union((Project(present, cols + ((WEIGHT, weight), (_SIGN, Call("-", (Literal(1, INT), Call(
        "*", (Literal(2, INT), sign), INT)), INT)))), Project(appended, cols + ((WEIGHT, weight), (_SIGN, Literal(1, INT))))))
    with_carry = Join(summed, carry, JoinKind.LEFT, key_matches(on, "c", nullable))
    versioned = Window(with_carry, tuple((n, replace(c, partition=(sign, *c.partition))) for n, c in rel.calls))
    out = over_keyed(versioned, Expand(with_carry, WEIGHT), tuple(f.name for f in with_carry.schema if f.name != WEIGHT))
    change = Project(out, tuple((f.name, f.ref()) for f in rel.input.schema)
                     + tuple((name, _adjusted(name, call, i)) for i, (name, call) in enumerate(rel.calls))
                     + ((WEIGHT, Cast(sign, BIGINT)),))

    # each touched partition's summary after the batch: its carry and its suffix after the batch
    after = Union((Project(Filter(both, Call(">", (Column(_NEW, BIGINT), ZERO), BOOLEAN)), cols + ((WEIGHT, Column(_NEW, BIGINT)),)),
                   appended))
    keys = tuple((f"{k}#c", by_name[k].ref()) for k in key)
    # (each row once, its weight positive: min and max read it as it is, counts and sums weigh it)
    totals = _weighted_carry(rel, first, after, keys, positive=True) \
        if all(_linear(call) or call.fn in ("min", "max") for _, call in rel.calls) \
        else _aggregated(rel, first, Expand(after, WEIGHT), keys)
    if any(call.fn == "dense_rank" for _, call in rel.calls):
        totals = _with_distinct(totals, after, keys, rel)
    new = _merged(rel, first, columns, key, carry, totals)
    scols = tuple((f.name, f.ref()) for f in sfields)
    ctx.plan.add_state(
        State(summary, StateRole.OUTPUT, sfields, (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "multiplicity of the row"),),
              note="each partition's summary: its rows, running values and last ORDER BY key", partition=key),
        Aggregate(Union((Project(new, scols + ((WEIGHT, ONE),)), Project(old, scols + ((WEIGHT, taken_back),)))),
                  scols, ((WEIGHT, sum_weights()),)))

    shown = ", ".join(display_name(p) for p in part) or "one partition"
    by = display_name(first.expr.name) if isinstance(first.expr, Column) else "the first ORDER BY key"
    ctx.plan.note(f"OVER: running functions over the window's rows kept in {state} ({shown}); each batch computes "
                  f"each touched partition from the first row it changed (by {by}, in the window's order), the "
                  "rows before it summed into a carry, after and before its merge, and hands on the difference; "
                  f"a partition the batch only appends to is not read: its carry is its summary in {summary}")
    return Compiled(change, static=False, weighted=True)


def _bounds(delta: Rel, key: tuple[str, ...], first: SortKey) -> Rel:
    """Per touched partition (its key renamed ``<k>#t``): the batch's least first ORDER BY key (the
    greatest, for DESC) and whether one of its rows had a NULL there."""
    k = first.expr
    is_null = Case(((Call("IS NULL", (k,), BOOLEAN), Literal(1, INT)),), Literal(0, INT), INT)
    aggs = ((_LEAST, Agg("max" if first.descending else "min", (k,), False, k.type)),
            (_HAS_NULL, Agg("max", (is_null,), False, INT)))
    return Aggregate(delta, tuple((f"{c}#t", delta.field(c).ref()) for c in key), aggs)


def _appends(first: SortKey) -> Expr:
    """Whether the batch only appends to a partition (its bounds joined with its summary before
    the batch, if it has one): every row it changes is ordered strictly after every row the
    partition holds, so the partition's every row is in the prefix, and its summary the carry."""
    k = first.expr
    least, last = Column(_LEAST, k.type), Column(_LAST, k.type)
    later = Call("OR", (Call("IS NULL", (last,), BOOLEAN),
                        Call("<" if first.descending else ">", (least, last), BOOLEAN)), BOOLEAN)
    cond = Call("AND", (Call("=", (Column(_HAS_NULL, INT), Literal(0, INT)), BOOLEAN), later), BOOLEAN)
    if not first.effective_nulls_first:  # the partition's NULL keys come last: after the batch's rows
        held = Call("coalesce", (Column(_SNULL, INT), Literal(0, INT)), INT, "coalesce({0}, {1})")
        cond = Call("AND", (cond, Call("=", (held, Literal(0, INT)), BOOLEAN)), BOOLEAN)
    return or_false(cond)


def _before(first: SortKey) -> Expr:
    """Whether a row (joined with its partition's bounds) is ordered strictly before every row the
    batch changed in its partition: the prefix, never NULL."""
    k = first.expr
    least = Column(_LEAST, k.type)
    earlier = Call(">" if first.descending else "<", (k, least), BOOLEAN)
    no_null = Call("=", (Column(_HAS_NULL, INT), Literal(0, INT)), BOOLEAN)
    if first.effective_nulls_first:  # a NULL key comes first: before any key but another NULL
        cond = Call("AND", (no_null, Call("OR", (Call("IS NULL", (k,), BOOLEAN), earlier), BOOLEAN)), BOOLEAN)
    else:  # a NULL key comes last: every key precedes the batch's when all of its are NULL
        cond = Call("AND", (Call("IS NOT NULL", (k,), BOOLEAN),
                            Call("OR", (Call("IS NULL", (least,), BOOLEAN), earlier), BOOLEAN)), BOOLEAN)
    return or_false(cond)


def _carry(window: Window, first: SortKey, prefix: Rel, fields: tuple[Field, ...], key: tuple[str, ...]) -> Rel:
    """Per partition with a prefix (its key renamed ``<k>#c``): the prefix's row count, its number of
    distinct ORDER BY keys (for dense_rank), each running call's value over the whole prefix, and
    its last first ORDER BY key.

    ``prefix`` holds the rows as the state keeps them, each with a weight that may be split
    between a base and a tail (or negative in the tail): counts and sums are linear in the
    weights, so they add them up at once (a sum as ``sum(value × weight)``, which Spark types
    exactly for integers and decimals of precision up to 17); a min or max, or a wider decimal
    sum, reads each row's copies once its weights are added up. (Added up at once, the last key
    may be that of a row deleted since: later than the true one, which only makes a later batch
    read a partition it could have appended to.)"""
    by_name = {f.name: f for f in fields}
    keys = tuple((f"{c}#c", Column(c, by_name[c].type)) for c in key)
    if not all(_linear(call) for _, call in window.calls):
        cols = tuple((f.name, f.ref()) for f in fields if f.name != WEIGHT)
        out = _aggregated(window, first, Expand(Aggregate(prefix, cols, ((WEIGHT, sum_weights()),)), WEIGHT), keys)
    else:
        out = _weighted_carry(window, first, prefix, keys)
    if any(call.fn == "dense_rank" for _, call in window.calls):
        out = _with_distinct(out, prefix, keys, window)
    return out


def _aggregated(window: Window, first: SortKey, copies: Rel, keys: tuple[tuple[str, Expr], ...]) -> Rel:
    """Per partition of ``copies`` (a bag, a row per copy): its row count, each running call's
    value over all of it, its last first ORDER BY key and whether one is NULL."""
    aggs = [(_ROWS, Agg("count", (), False, BIGINT))]
    aggs += [(f"_sfx#c{i}", Agg(call.fn, call.args, False, _carried_type(call)))
             for i, (_, call) in enumerate(window.calls) if call.fn in _RUNNING]
    return Aggregate(copies, keys, tuple(aggs) + _ends(first))


def _ends(first: SortKey) -> tuple[tuple[str, Agg], ...]:
    """The last first ORDER BY key of some rows (NULLs aside), and whether one of them is NULL."""
    k = first.expr
    is_null = Case(((Call("IS NULL", (k,), BOOLEAN), Literal(1, INT)),), Literal(0, INT), INT)
    return ((_LAST, Agg("min" if first.descending else "max", (k,), False, k.type)),
            (_SNULL, Agg("max", (is_null,), False, INT)))


def _summary_columns(window: Window, first: SortKey) -> tuple[tuple[str, DataType], ...]:
    """A partition's summary, as its carry gives it: row count, running values, distinct keys,
    last key, a NULL key."""
    cols = [(_ROWS, BIGINT)] + [(f"_sfx#c{i}", _carried_type(call)) for i, (_, call) in enumerate(window.calls)
                                if call.fn in _RUNNING]
    if any(call.fn == "dense_rank" for _, call in window.calls):
        cols.append((_DISTINCT, BIGINT))
    return tuple(cols) + ((_LAST, first.expr.type), (_SNULL, INT))


def _merged(window: Window, first: SortKey, columns: tuple[tuple[str, DataType], ...], key: tuple[str, ...],
            carry: Rel, totals: Rel) -> Rel:
    """Each touched partition's summary after the batch (keyed by its own column names): its carry
    (the prefix, or its summary where the batch appends) and its suffix after the batch, added
    up; a partition left without rows has none."""
    fns = {f"_sfx#c{i}": call.fn for i, (_, call) in enumerate(window.calls)}
    fns.update({_LAST: "min" if first.descending else "max", _SNULL: "max"})
    keys = tuple((f"{k}#c", carry.field(f"{k}#c").ref()) for k in key)
    both = Union(tuple(Project(r, keys + tuple((n, r.field(n).ref()) for n, _ in columns)) for r in (carry, totals)))

    def merge(n: str, t: DataType) -> Agg:
        fn = fns.get(n, "sum")  # (a count, the rows, the distinct keys: added up)
        if fn in ("sum", "count"):
            return Agg("sum", (Column(n, t),), False, sum_type(t))
        return Agg(fn, (Column(n, t),), False, t)

    aggs = tuple((n, merge(n, t)) for n, t in columns)
    added = Aggregate(both, keys, aggs)
    left = Filter(added, Call(">", (coalesce0(Column(_ROWS, sum_type(BIGINT))), ZERO), BOOLEAN))
    return Project(left, tuple((k, Column(f"{k}#c", carry.field(f"{k}#c").type)) for k in key)
                   + tuple((n, _cast(Column(n, added.field(n).type), t)) for n, t in columns))


def _linear(call: WindowCall) -> bool:
    """Whether the call's carry adds up weights: a rank, a count, or a sum whose value times a
    weight Spark types without rounding."""
    if call.fn in ("min", "max"):
        return False
    if call.fn != "sum":
        return True
    t = call.args[0].type
    return t.is_integral or (t.is_decimal and t.precision is not None and t.precision <= 17)


def _weighted_carry(window: Window, first: SortKey, prefix: Rel, keys: tuple[tuple[str, Expr], ...],
                    positive: bool = False) -> Rel:
    """:func:`_carry` of rows whose weights add up (counts and sums of values times weights);
    ``positive``: each row once, with a weight above zero, so a min or max reads it as it is."""
    weight = Column(WEIGHT, BIGINT)

    def live(args: tuple[Expr, ...]) -> Agg:
        alive = and_all([Call("IS NOT NULL", (a,), BOOLEAN) for a in args])
        return sum_weights() if alive is None else Agg("sum", (Case(((alive, weight),), ZERO, BIGINT),), False, BIGINT)

    aggs: list[tuple[str, Agg]] = [(_ROWS, sum_weights())]
    shown: list[tuple[str, Expr]] = [(_ROWS, Column(_ROWS, BIGINT))]
    for i, (_, call) in enumerate(window.calls):
        name = f"_sfx#c{i}"
        if call.fn == "count":
            aggs.append((name, live(call.args)))
            shown.append((name, Column(name, BIGINT)))
        elif call.fn == "sum":
            arg = call.args[0]
            product = Call("*", (arg, weight), _checked(arithmetic_type("*", arg.type, BIGINT)))
            total = Agg("sum", (product,), False, sum_type(product.type))
            aggs += [(name, total), (f"{name}#n", live(call.args))]
            # no live value: NULL, as a sum of none (the weights of values deleted add up to 0)
            alive = Call(">", (Column(f"{name}#n", BIGINT), ZERO), BOOLEAN)
            shown.append((name, Case(((alive, _cast(Column(name, total.type), _carried_type(call))),), None,
                                     _carried_type(call))))
        elif call.fn in ("min", "max"):
            assert positive, "a min or max carry needs each row's copies added up"
            aggs.append((name, Agg(call.fn, call.args, False, call.type)))
            shown.append((name, Column(name, call.type)))
    ends = _ends(first)
    out = Aggregate(prefix, keys, tuple(aggs) + ends)
    return Project(out, _keys_of(out, keys) + tuple(shown) + tuple((n, Column(n, a.type)) for n, a in ends))


def _keys_of(rel: Rel, keys: tuple[tuple[str, Expr], ...]) -> tuple[tuple[str, Expr], ...]:
    return tuple((n, rel.field(n).ref()) for n, _ in keys)


def _checked(t: DataType | None) -> DataType:
    assert t is not None
    return t


def _carried_type(call: WindowCall) -> DataType:
    return sum_type(call.args[0].type) if call.fn == "sum" else call.type


def _with_distinct(carry: Rel, prefix: Rel, keys: tuple[tuple[str, Expr], ...], window: Window) -> Rel:
    """``carry`` with the number of distinct ORDER BY keys of each partition's prefix (those whose
    rows' weights add up to more than none)."""
    order = next(call.order for _, call in window.calls if call.fn == "dense_rank")
    grouped = Aggregate(prefix, keys + tuple((f"_sfx#o{j}", k.expr) for j, k in enumerate(order)),
                        ((WEIGHT, sum_weights()),))
    present = Filter(grouped, Call(">", (Column(WEIGHT, BIGINT), ZERO), BOOLEAN))
    counted = Aggregate(present, tuple((f"{n}d", Column(n, e.type)) for n, e in keys),
                        ((_DISTINCT, Agg("count", (), False, BIGINT)),))
    on = and_all([Call("<=>", (Column(n, e.type), Column(f"{n}d", e.type)), BOOLEAN) for n, e in keys])
    joined = Join(carry, counted, JoinKind.LEFT if on is not None else JoinKind.CROSS, on)
    return Project(joined, tuple((f.name, f.ref()) for f in carry.schema)
                   + ((_DISTINCT, coalesce0(Column(_DISTINCT, BIGINT))),))


def _adjusted(name: str, call: WindowCall, i: int) -> Expr:
    """The call's value over the suffix, started from the carry (NULL where a partition has no prefix)."""
    value = Column(name, call.type)
    carried = Column(f"_sfx#c{i}", _carried_type(call))
    if call.fn in _RANKS:
        by = Column(_DISTINCT if call.fn == "dense_rank" else _ROWS, BIGINT)
        return Cast(Call("+", (value, coalesce0(by)), BIGINT), call.type)
    if call.fn == "count":
        return Call("+", (value, coalesce0(carried)), BIGINT)
    if call.fn in ("min", "max"):
        fn = "least" if call.fn == "min" else "greatest"
        return Call(fn, (value, carried), call.type, f"{fn}({{0}}, {{1}})")
    assert call.fn == "sum"
    total = Call("+", (value, carried), _plus_type(call.type))
    return Case(((Call("IS NULL", (carried,), BOOLEAN), value), (Call("IS NULL", (value,), BOOLEAN), carried)),
                _cast(total, call.type), call.type)


def _plus_type(t: DataType) -> DataType:
    return _checked(arithmetic_type("+", t, t))


def _cast(e: Expr, t: DataType) -> Expr:
    return e if e.type == t else Cast(e, t)
