"""The change a batch makes to a block's output, as a program: its rows with ``_weight``.

A block nested in another (an aggregate in a subquery, a DISTINCT, …) hands its parent what the
batch changed in its output, as a source hands over new rows. Three forms:

* a per-key answer (one row per key of one state): from the merge of that state, per touched
  key, the new row enters unless the old one is the same, the old one leaves unless the new one
  is the same — map-only;
* any other keyed answer: a over the touched keys after the merge (+1) and before it (−1);
* a DISTINCT: rows whose count crossed zero, +1 when it became positive, −1 when it left.
"""

from __future__ import annotations

from ..ir.expr import Agg, Call, Case, Column, Expr, Literal, and_all
from ..ir.rel import WEIGHT, Aggregate, Field, Filter, Join, JoinKind, Project, Rel, StateScan, StateVersion, Union
from ..ir.types import BIGINT, BOOLEAN, INT
from .model import OLD, TOUCHED
from .terms import MINUS_ONE, ONE, coalesce0, nonzero, or_false, positive, touched, weight


def merged_fields(fields: tuple[Field, ...], keys: tuple[str, ...]) -> tuple[Field, ...]:
    """The columns of a state's merge: the state's, the old values of its non-key columns, touched."""
    old = tuple(Field(OLD + f.name, f.type) for f in fields if f.name not in keys)
    return fields + old + (Field(TOUCHED, INT),)


def flatten_per_key(rel: Rel) -> tuple[StateScan, list[Expr], list[tuple[str, Expr]]]:
    """A row-wise answer as (its state, conditions, output expressions over the state's columns).

    The condition that a row's count is not zero is left out: whoever reads a row of a merge
    tests that first (``_weight <> 0`` after, ``__old::_weight <> 0`` before)."""
    if isinstance(rel, StateScan):
        return rel, [], [(f.name, f.ref()) for f in rel.schema]
    if isinstance(rel, Project):
        state, conds, outputs = flatten_per_key(rel.input)
        mapping = dict(outputs)
        return state, conds, [(n, e.substitute(mapping)) for n, e in rel.exprs]
    if isinstance(rel, Filter):
        state, conds, outputs = flatten_per_key(rel.input)
        cond = rel.condition.substitute(dict(outputs))
        return state, conds + ([] if cond == nonzero(weight()) else [cond]), outputs
    raise TypeError(f"a per-key answer is projections and filters over one state, not {type(rel).__name__}")


def per_key_delta(per_key: Rel, keys: tuple[str, ...], output: tuple[str, ...]) -> Rel:
    """The change of a per-key answer, from its state's merge (no join, no shuffle)."""
    scan, conds, outputs = flatten_per_key(per_key)
    old = {f.name: OLD + f.name for f in scan.fields if f.name not in keys}
    merged = StateScan(scan.state, StateVersion.MERGED, merged_fields(scan.fields, keys))
    shown = [(n, e) for n, e in outputs if n in output]

    def present(over_old: bool) -> Expr:
        exists: Expr = or_false(nonzero(Column(OLD + WEIGHT, BIGINT))) if over_old else nonzero(weight())
        parts = [exists] + [or_false(c.rename(old) if over_old else c) for c in conds]
        cond = and_all(parts)
        assert cond is not None
        return cond

    same = and_all([Call("<=>", (e, e.rename(old)), BOOLEAN) for _, e in shown]) or Literal(True, BOOLEAN)

    def side(over_old: bool) -> Rel:
        keep = and_all([touched(), present(over_old),
                        Call("NOT", (Call("AND", (present(not over_old), same), BOOLEAN),), BOOLEAN)])
        assert keep is not None
        exprs = [(n, e.rename(old) if over_old else e) for n, e in shown]
        return Project(Filter(merged, keep), tuple(exprs) + ((WEIGHT, MINUS_ONE if over_old else ONE),))

    return Union((side(False), side(True)))


def keyed_delta(rows: Rel, main: str, keys: tuple[tuple[str, Field], ...]) -> Rel:
    """The change of a keyed answer: a over the touched keys' states after (+1) minus before (−1).

    ``keys`` are the group keys (name, field); the keys of ``main``'s delta are the touched ones.
    """
    main_fields = next(n.fields for n in rows.walk() if isinstance(n, StateScan) and n.state == main)
    delta = StateScan(main, StateVersion.DELTA, main_fields)
    renamed = tuple((f"{n}#t", Column(n, f.type)) for n, f in keys)
    touched = Aggregate(Project(delta, renamed), tuple((n, Column(n, e.type)) for n, e in renamed), ())
    cond = and_all([Call("<=>", (Column(n, f.type), Column(f"{n}#t", f.type)), BOOLEAN) for n, f in keys])
    equal = and_all([Call("=", (Column(n, f.type), Column(f"{n}#t", f.type)), BOOLEAN) for n, f in keys])
    present = and_all([Call("IS NOT NULL", (Column(n, f.type),), BOOLEAN) for n, f in keys])
    assert present is not None
    nulls = Call("NOT", (present,), BOOLEAN)

    def version(v: StateVersion) -> Rel:
        def swap(node: Rel) -> Rel | None:
            # The touched keys' rows: by `=` where no key column is NULL — the state, partitioned on
            # its key, is met where it lies (a join on `<=>` is planned on coalesced keys and
            # shuffled the whole state every batch) — and null-safely among the rows with a NULL.
            if isinstance(node, StateScan) and node.version == StateVersion.NEW:
                scan = StateScan(node.state, v, node.fields)
                return Union((Join(scan, touched, JoinKind.SEMI, equal),
                              Join(Filter(scan, nulls), touched, JoinKind.SEMI, cond)))
            return None

        return rows.transform(swap)

    return _signed(version(StateVersion.NEW), version(StateVersion.OLD))


def global_delta(rows: Rel, state: str, fields: tuple[Field, ...]) -> Rel:
    """The change of a global aggregate's one row: a after the merge (+1) minus before (−1).

    Before the first batch there is no row to take back: the consumers' states start empty,
    as the query over no input at all, and the row enters with the first batch. (Over an
    empty prefix SQL gives the aggregate one row; no snapshot is ever taken there.) The
    aggregate's state keeps its one row from then on, so "before" is read only if it exists.
    """

    def old(node: Rel) -> Rel | None:
        if isinstance(node, StateScan) and node.version == "new":
            return StateScan(node.state, StateVersion.OLD, node.fields)
        return None

    before = rows.transform(old)
    count = Agg("count", (), False, BIGINT)
    existed = Filter(Aggregate(StateScan(state, StateVersion.OLD, fields), (), (("__had", count),)),
                     positive(Column("__had", BIGINT)))
    gated = Project(Join(before, existed, JoinKind.CROSS, None), tuple((f.name, f.ref()) for f in before.schema))
    return _signed(rows, gated)


def distinct_delta(state: str, fields: tuple[Field, ...]) -> Rel:
    """Rows whose count crossed zero this batch: +1 into the answer, −1 out of it."""
    names = tuple(f.name for f in fields if f.name != WEIGHT)
    merged = StateScan(state, StateVersion.MERGED, merged_fields(fields, names))
    now = positive(weight())
    before = positive(coalesce0(weight(OLD + WEIGHT)))
    flipped = and_all([touched(),
                       Call("<>", (now, before), BOOLEAN)])
    assert flipped is not None
    sign = Case(((now, ONE),), MINUS_ONE, BIGINT)
    cols = tuple((n, Column(n, f.type)) for n, f in ((f.name, f) for f in fields) if n != WEIGHT)
    return Project(Filter(merged, flipped), cols + ((WEIGHT, sign),))


def _signed(after: Rel, before: Rel) -> Rel:
    cols = tuple((f.name, f.ref()) for f in after.schema)
    return Union((Project(after, cols + ((WEIGHT, ONE),)), Project(before, cols + ((WEIGHT, MINUS_ONE),))))

