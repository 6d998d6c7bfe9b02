"""Semi, anti and outer joins: whether a row has a match, maintained incrementally.

A row ``l`` of the left input is in a semi join's output while it has a match in the right
input, in an anti join's while it has none, and an outer join adds the unmatched rows padded
with NULLs to the inner join. With ``m(l)`` the number of matches (a sum of right rows' weights)
and ``M`` whether ``l`` counts as matched, a batch changes the output by::

    Δout = Σ_l  Δw(l)·M_new(l)  +  w_old(l)·(M_new(l) − M_old(l))

— the batch's new left rows against the matches after the batch, and the old left rows whose
match status flipped. With equality keys only, ``m`` depends on the key alone: a state counts the
right rows per key, and its merge shows which keys crossed zero (:func:`_flips`). Other join
predicates (``l2.s <> l1.s``) make ``m`` depend on the row: then ``m`` is recomputed before and
after the batch for the left rows it may have changed. When the right input never changes, all
of this collapses to joining the batch's left rows with it.

``x NOT IN (SELECT y …)`` follows SQL's three-valued rules: no row passes while ``y`` has a
NULL, every row passes while the subquery is empty. Two global counts (rows, NULL rows) decide.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UnsupportedError
from ..ir.expr import Agg, Call, Case, Column, Expr, Literal, and_all, conjuncts
from ..ir.rel import WEIGHT, Aggregate, Field, Filter, Join, JoinKind, Once, Project, Rel, StateScan, StateVersion, Union
from ..ir.types import BIGINT, BOOLEAN
from .changes import merged_fields
from .context import PlanContext
from . import semi_not_equal
from .model import OLD, Compiled, Monoid, State, StateColumn, StateRole
from .terms import MINUS_ONE, ONE, ZERO, coalesce0, nonzero, or_false, positive, sum_weights, touched, weight



@dataclass
class _Split:
    """A join condition taken apart."""

    keys: list[tuple[Expr, Expr]] = field(default_factory=list)  # (left, right) with left = right
    left: list[Expr] = field(default_factory=list)  # read only the left input
    right: list[Expr] = field(default_factory=list)  # read only the right input
    mixed: list[Expr] = field(default_factory=list)  # read both, not an equality of the two


def _split(join: Join) -> _Split:
    sp = _Split()
    lnames, rnames = set(join.left.names), set(join.right.names)
    for c in conjuncts(join.condition):
        cols = c.columns()
        on_l, on_r = bool(cols & lnames), bool(cols & rnames)
        if on_l and not on_r:
            sp.left.append(c)
        elif on_r and not on_l:
            sp.right.append(c)
        elif isinstance(c, Call) and c.op == "=" and on_l and on_r:
            a, b = c.args
            if a.columns() <= lnames and b.columns() <= rnames:
                sp.keys.append((a, b))
            elif b.columns() <= lnames and a.columns() <= rnames:
                sp.keys.append((b, a))
            else:
                sp.mixed.append(c)
        elif on_l or on_r:
            sp.mixed.append(c)
        else:
            sp.left.append(c)  # a constant condition: true or false for every row
    return sp


def match_join(ctx: PlanContext, join: Join) -> Compiled:
    """A semi, anti or outer join's change (see the module docstring)."""
    if join.kind == JoinKind.RIGHT:
        swapped = Join(join.right, join.left, JoinKind.LEFT, join.condition)
        inner = match_join(ctx, swapped)
        return Compiled(_reorder(inner.program, join.names), static=False, weighted=True)
    left, right = ctx.compile(join.left), ctx.compile(join.right)
    if right.static and join.kind in (JoinKind.SEMI, JoinKind.ANTI, JoinKind.NULL_AWARE_ANTI, JoinKind.LEFT):
        # The right input never changes: each batch's left rows meet the same right rows — for a
        # semi or anti join (NOT IN too: its NULLs are distinct rows as well), its distinct rows
        # kept once (the matches, not how many there are).
        rows = right.program
        if join.kind in (JoinKind.SEMI, JoinKind.ANTI, JoinKind.NULL_AWARE_ANTI):
            what = "NOT IN" if join.kind == JoinKind.NULL_AWARE_ANTI else f"{join.kind.value} join"
            rows = ctx.static_rows(rows, f"the static side of a {what}: its distinct rows, which each batch's rows meet")
        joined = Join(left.program, rows, join.kind, join.condition)
        return Compiled(_reorder(joined, join.names), static=False, weighted=left.weighted)
    sp = _split(join)
    m = Matcher(ctx, join, sp, left, right)
    if join.kind == JoinKind.NULL_AWARE_ANTI:
        return Compiled(m.not_in(), static=False, weighted=True)
    if join.kind in (JoinKind.SEMI, JoinKind.ANTI):
        return Compiled(m.semi_anti(anti=join.kind == JoinKind.ANTI), static=False, weighted=True)
    matched = ctx.compile(Join(join.left, join.right, JoinKind.INNER, join.condition)).program
    parts = [_reorder(matched, join.names), m.padded(m.unmatched_left(), "left")]
    if join.kind == JoinKind.FULL:
        mirror = Matcher(ctx, Join(join.right, join.left, JoinKind.LEFT, join.condition), _swap(sp), right, left)
        parts.append(_reorder(mirror.padded(mirror.unmatched_left(), "left"), join.names))
    return Compiled(Union(tuple(parts)), static=False, weighted=True)


def _swap(sp: _Split) -> _Split:
    return _Split([(b, a) for a, b in sp.keys], list(sp.right), list(sp.left), list(sp.mixed))


def _reorder(rel: Rel, names: tuple[str, ...]) -> Rel:
    """``rel``'s columns in the order ``names`` (then ``_weight``)."""
    have = {f.name: f for f in rel.schema}
    return Project(rel, tuple((n, have[n].ref()) for n in names) + ((WEIGHT, have[WEIGHT].ref()),))


class Matcher:
    def __init__(self, ctx: PlanContext, join: Join, sp: _Split, left: Compiled, right: Compiled) -> None:
        self.ctx = ctx
        self.join = join
        self.sp = sp
        self.left = left
        self.right = right
        self.lfields = join.left.schema
        self._bag: str | None = None

    # -- pieces ----------------------------------------------------------------------------------
    def left_delta(self) -> Rel:
        """The batch's left rows. A changing left side is kept as a bag (:meth:`left_old`), so its
        change is read from the bag's merge rather than computed again: the left's delta
        program (a join's delta rule, another semi join's change; not a filter of the batch's rows,
        which is cheaper read again) is planned once, by the bag,
        not inlined into every term that reads it — in TPC-H Q21 an anti join over a semi join
        over a four-way join otherwise nests the join's delta rule four times in one statement."""
        if self.left.static or not _computes(self.left.program):
            return self.left.delta
        self.left_old()
        assert self._bag is not None
        return Project(StateScan(self._bag, StateVersion.DELTA, self.ctx.plan.fields(self._bag)),
                       tuple((f.name, f.ref()) for f in self.lfields) + ((WEIGHT, weight()),))

    def left_old(self) -> Rel:
        """All left rows before this batch, with their count as ``_weight`` (a static left side
        arrived with batch 0, so before batch 0 it is empty)."""
        if self.left.static:
            if _computes(self.left.program):
                # A join of static tables (TPC-DS Q35's customer ⋈ address ⋈ demographics under
                # EXISTS) is kept once, not joined again every batch to meet the keys it flipped.
                kept = self.ctx.static_bag(self.left.program, f"the static side of a {self.join.kind.value} join: "
                                           "its rows, which the keys a batch flips meet")
                return Once(kept, later=True)
            return Once(self.left.program, later=True)
        if self._bag is None:
            # partitioned on the join's left key columns: the batch's flipped keys join it there
            # (_flips) without moving it
            names = {f.name for f in self.lfields}
            lkeys = tuple(dict.fromkeys(lx.name for lx, _ in self.sp.keys if isinstance(lx, Column) and lx.name in names))
            whole = len(lkeys) == len(self.sp.keys) and lkeys
            self._bag, _ = self.ctx.bag_state(self.join.left, "left", compiled=self.left,
                                              partition=lkeys if whole else None)
        fields = self.ctx.plan.fields(self._bag)
        return Project(StateScan(self._bag, StateVersion.OLD, fields),
                       tuple((f.name, f.ref()) for f in self.lfields) + ((WEIGHT, weight()),))

    def _counts(self) -> tuple[str, tuple[Field, ...]]:
        """A state counting the right rows per key (rows with a NULL key never match)."""
        name = self.ctx.plan.name("matches")
        keys = tuple((f"{name}.k{i}", r) for i, (_, r) in enumerate(self.sp.keys))
        fields = tuple(Field(n, e.type) for n, e in keys)
        rows = self.right.program
        not_null = and_all([Call("IS NOT NULL", (r,), BOOLEAN) for _, r in self.sp.keys] + list(self.sp.right))
        if not_null is not None:
            rows = Filter(rows, not_null)
        program = Aggregate(rows, keys, ((WEIGHT, sum_weights()),))
        self.ctx.plan.add_state(
            State(name, StateRole.COUNTS, fields, (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "number of right rows with the key"),),
                  note=f"matches per key for {self.join.kind} join", keep_empty=not fields),
            program)
        return name, fields + (Field(WEIGHT, BIGINT),)

    def _key_cond(self, keys: tuple[Field, ...]) -> Expr | None:
        return and_all([Call("=", (lx, Column(k.name, k.type)), BOOLEAN) for (lx, _), k in zip(self.sp.keys, keys)])

    def _flips(self, name: str, fields: tuple[Field, ...]) -> Rel:
        """Keys whose count crossed zero this batch, with ``_sign`` +1 (now matched) or −1."""
        keys = fields[:-1]
        merged = StateScan(name, StateVersion.MERGED, merged_fields(fields, tuple(k.name for k in keys)))
        now = positive(weight())
        before = positive(coalesce0(weight(OLD + WEIGHT)))
        crossed = and_all([touched(), Call("<>", (now, before), BOOLEAN)])
        assert crossed is not None
        return Project(Filter(merged, crossed), tuple((k.name, k.ref()) for k in keys)
                       + (("_sign", Case(((now, ONE),), MINUS_ONE, BIGINT)),))

    def _matched(self, name: str, fields: tuple[Field, ...], delta: Rel) -> Rel:
        """The keys of the batch's left rows that have matches after the merge: the counts state
        looked up for those keys only (a semi join with them, the few keys on the small side) and
        added up per key before the ``> 0`` test — one row per key either way, and so whether the
        state is kept whole or as a base and a tail (plan/runs.py), where a key may have a row in
        each. Without the look-up the whole state met the batch's rows in a sort-merge join."""
        keys = fields[:-1]
        dkeys = Aggregate(delta, tuple((f"d.{k.name}", lx) for (lx, _), k in zip(self.sp.keys, keys)), ())
        on = and_all([Call("=", (k.ref(), Column(f"d.{k.name}", k.type)), BOOLEAN) for k in keys])
        looked_up = Join(StateScan(name, StateVersion.NEW, fields), dkeys, JoinKind.SEMI, on)
        summed = Aggregate(looked_up, tuple((k.name, k.ref()) for k in keys), ((WEIGHT, sum_weights()),))
        return Filter(summed, positive(weight()))

    # -- semi and anti joins -------------------------------------------------------------------
    def semi_anti(self, anti: bool) -> Rel:
        if self.sp.mixed:
            found = semi_not_equal.applies(self)
            if isinstance(found, tuple):
                return semi_not_equal.semi_anti(self, anti, *found)
            return self.general(anti, found)
        pl_cond = or_false(_all(self.sp.left)) if self.sp.left else None
        name, fields = self._counts()
        keys = fields[:-1]
        delta = self.left_delta()
        cond = self._key_cond(keys)
        matched = self._matched(name, fields, delta)
        out_cols = tuple((f.name, f.ref()) for f in self.lfields) + ((WEIGHT, weight()),)
        if not anti:
            rows = Filter(delta, pl_cond) if pl_cond is not None else delta
            term1: Rel = Project(Join(rows, matched, JoinKind.SEMI, cond), out_cols)
        else:
            guarded = Filter(delta, pl_cond) if pl_cond is not None else delta
            term1 = Project(Join(guarded, matched, JoinKind.ANTI, cond), out_cols)
            if pl_cond is not None:
                term1 = Union((term1, Project(Filter(delta, Call("NOT", (pl_cond,), BOOLEAN)), out_cols)))
        old = self.left_old()
        if pl_cond is not None:
            old = Filter(old, pl_cond)
        flips = self._flips(name, fields)
        sign: Expr = Column("_sign", BIGINT)
        if anti:
            sign = Call("neg", (sign,), BIGINT)
        term2 = Project(Join(old, flips, JoinKind.INNER, cond), tuple((f.name, f.ref()) for f in self.lfields)
                        + ((WEIGHT, Call("*", (weight(), sign), BIGINT)),))
        return Union((term1, term2))

    def unmatched_left(self) -> Rel:
        """The change to the left rows without a match (the NULL-padded part of a left join)."""
        return self.semi_anti(anti=True)

    def padded(self, rows: Rel, side: str) -> Rel:
        """Rows of one side with the other side's columns NULL (the join's output shape)."""
        exprs: list[tuple[str, Expr]] = [(f.name, f.ref()) for f in self.lfields]
        exprs += [(f.name, Literal(None, f.type)) for f in self.join.right.schema]
        return Project(rows, tuple(exprs) + ((WEIGHT, weight()),))

    # -- x NOT IN (SELECT y …) -------------------------------------------------------------------
    def not_in(self) -> Rel:
        if len(self.sp.keys) != 1 or self.sp.mixed or self.sp.left:
            raise UnsupportedError("NOT IN with a condition beyond one equality is not supported", code="UNSUPPORTED_JOIN",
                                   params={"construct": "NOT IN"}, hint="write NOT EXISTS")
        x, y = self.sp.keys[0]
        name, fields = self._counts()
        totals = self.ctx.plan.name("totals")
        t_fields = (Field(WEIGHT, BIGINT), Field("nulls", BIGINT))
        null_w = Case(((Call("IS NULL", (y,), BOOLEAN), weight()),), ZERO, BIGINT)
        self.ctx.plan.add_state(
            State(totals, StateRole.COUNTS, (), (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "rows of the subquery"),
                                         StateColumn("nulls", BIGINT, Monoid.SUM, "rows whose value is NULL")),
                  note="NOT IN: the subquery's rows and its NULLs", keep_empty=True),
            Aggregate(self.right.program, (), ((WEIGHT, sum_weights()),
                                               ("nulls", Agg("sum", (null_w,), False, BIGINT)))))
        key = fields[0]
        rename_c = ((f"{name}#m", weight()), (key.name, key.ref()))
        rename_t = ((f"{totals}#n", weight()), (f"{totals}#nn", Column("nulls", BIGINT)))

        def passes(m: Expr, n: Expr, nn: Expr) -> Expr:
            empty = Call("=", (coalesce0(n), ZERO), BOOLEAN)
            clear = and_all([Call("IS NOT NULL", (x,), BOOLEAN), Call("=", (coalesce0(m), ZERO), BOOLEAN),
                             Call("=", (coalesce0(nn), ZERO), BOOLEAN)])
            assert clear is not None
            return Call("OR", (empty, clear), BOOLEAN)

        cond = Call("=", (x, key.ref()), BOOLEAN)
        counts_new = Project(StateScan(name, StateVersion.NEW, fields), rename_c)
        totals_new = Project(StateScan(totals, StateVersion.NEW, t_fields), rename_t)
        now = Join(Join(self.left_delta(), counts_new, JoinKind.LEFT, cond), totals_new, JoinKind.CROSS, None)
        out_cols = tuple((f.name, f.ref()) for f in self.lfields)
        m_new, n_new, nn_new = Column(f"{name}#m", BIGINT), Column(f"{totals}#n", BIGINT), Column(f"{totals}#nn", BIGINT)
        term1 = Project(Filter(now, passes(m_new, n_new, nn_new)), out_cols + ((WEIGHT, weight()),))
        counts_m = StateScan(name, StateVersion.MERGED, merged_fields(fields, (key.name,)))
        totals_m = StateScan(totals, StateVersion.MERGED, merged_fields(t_fields, ()))
        cm = Project(counts_m, ((key.name, key.ref()), (f"{name}#m", weight()),
                                (f"{name}#mo", weight(OLD + WEIGHT))))
        tm = Project(totals_m, ((f"{totals}#n", weight()), (f"{totals}#nn", Column("nulls", BIGINT)),
                                (f"{totals}#no", weight(OLD + WEIGHT)), (f"{totals}#nno", Column(OLD + "nulls", BIGINT))))
        both = Join(Join(self.left_old(), cm, JoinKind.LEFT, cond), tm, JoinKind.CROSS, None)
        after = passes(m_new, n_new, nn_new)
        before = passes(Column(f"{name}#mo", BIGINT), Column(f"{totals}#no", BIGINT), Column(f"{totals}#nno", BIGINT))
        flipped = Filter(both, Call("<>", (after, before), BOOLEAN))
        term2 = Project(flipped, out_cols + ((WEIGHT, Call("*", (weight(),
                                                                 Case(((after, ONE),), MINUS_ONE, BIGINT)), BIGINT)),))
        return Union((term1, term2))

    # -- joins whose condition is not only equality keys -------------------------------------------
    def general(self, anti: bool, why: str) -> Rel:
        """``m(l)`` recomputed before and after the batch for the left rows it may have changed:
        the batch's new left rows, and the old ones whose key the batch's right rows touch (when
        :mod:`.semi_not_equal` does not apply, for the reason ``why``)."""
        plan = self.ctx.plan
        lnames = [f.name for f in self.lfields]
        rcols = sorted({c for e in self.sp.mixed for c in e.columns()} & set(self.join.right.names))
        keys = [(f"_r{i}", r) for i, (_, r) in enumerate(self.sp.keys)]
        right_name, right_fields = self.ctx.bag_state(
            Project(self.join.right, tuple(keys) + tuple((c, self.join.right.field(c).ref()) for c in rcols)),
            "right", compiled=_project_compiled(self.right, tuple(keys) + tuple(
                (c, self.join.right.field(c).ref()) for c in rcols)))
        key_cond = and_all([Call("=", (lx, Column(k, r.type)), BOOLEAN) for (lx, _), (k, r) in zip(self.sp.keys, keys)])
        old_left = self.left_old()
        pred = and_all([key_cond] + list(self.sp.mixed) if key_cond is not None else list(self.sp.mixed))
        # The old left rows whose count can change: those matching a right row the batch changed
        # (a theta join's condition, not only its keys: a band touches few left rows).
        changed_right = Project(StateScan(right_name, StateVersion.DELTA, right_fields),
                                tuple((f.name, f.ref()) for f in right_fields if f.name != WEIGHT))
        affected = Aggregate(Union((
            Project(self.left_delta(), tuple((n, Column(n, f.type)) for n, f in zip(lnames, self.lfields))),
            Project(Join(old_left, changed_right, JoinKind.SEMI, pred), tuple((n, Column(n, f.type)) for n, f in zip(lnames, self.lfields))),
        )), tuple((n, Column(n, f.type)) for n, f in zip(lnames, self.lfields)), ())

        def matches(version: StateVersion, tag: str) -> Rel:
            r = Project(StateScan(right_name, version, right_fields),
                        tuple((f.name, f.ref()) for f in right_fields if f.name != WEIGHT) + ((f"{tag}._rw", weight()),))
            joined = Join(affected, r, JoinKind.INNER, pred)
            counted = Aggregate(joined, tuple((f"{tag}.{n}", Column(n, f.type)) for n, f in zip(lnames, self.lfields)),
                                ((f"{tag}.m", Agg("sum", (Column(f"{tag}._rw", BIGINT),), False, BIGINT)),))
            return counted

        def weights(version_rel: Rel, tag: str) -> Rel:
            return Project(version_rel, tuple((f"{tag}.{n}", Column(n, f.type)) for n, f in zip(lnames, self.lfields))
                           + ((f"{tag}.w", weight()),))

        new_left = self._left_new()
        x: Rel = affected
        for side, tag in ((matches(StateVersion.NEW, "mn"), "mn"), (matches(StateVersion.OLD, "mo"), "mo"),
                          (weights(new_left, "wn"), "wn"), (weights(old_left, "wo"), "wo")):
            cond = and_all([Call("<=>", (Column(n, f.type), Column(f"{tag}.{n}", f.type)), BOOLEAN)
                            for n, f in zip(lnames, self.lfields)])
            x = Join(x, side, JoinKind.LEFT, cond)
        guard = or_false(_all(self.sp.left)) if self.sp.left else Literal(True, BOOLEAN)

        def matched(m: Expr) -> Expr:
            return Call("AND", (guard, positive(coalesce0(m))), BOOLEAN)

        def as_count(flag: Expr) -> Expr:
            out = Call("NOT", (flag,), BOOLEAN) if anti else flag
            return Case(((out, ONE),), ZERO, BIGINT)

        change = Call("-", (Call("*", (coalesce0(Column("wn.w", BIGINT)), as_count(matched(Column("mn.m", BIGINT)))), BIGINT),
                           Call("*", (coalesce0(Column("wo.w", BIGINT)), as_count(matched(Column("mo.m", BIGINT)))), BIGINT)),
                      BIGINT)
        out = Project(x, tuple((n, Column(n, f.type)) for n, f in zip(lnames, self.lfields)) + ((WEIGHT, change),))
        plan.note(f"{self.join.kind} join with a non-equality condition: matches are recounted per batch for the "
                  f"left rows the batch may change ({why})")
        return Filter(out, nonzero(weight()))

    def _left_new(self) -> Rel:
        if self.left.static:
            return Project(self.left.program, tuple((f.name, f.ref()) for f in self.lfields) + ((WEIGHT, ONE),))
        self.left_old()
        assert self._bag is not None
        fields = self.ctx.plan.fields(self._bag)
        return Project(StateScan(self._bag, StateVersion.NEW, fields),
                       tuple((f.name, f.ref()) for f in self.lfields) + ((WEIGHT, weight()),))


def _computes(program: Rel) -> bool:
    """Whether a delta program joins, aggregates or unions (more than reading rows kept or given)."""
    return any(isinstance(n, (Join, Aggregate, Union)) for n in program.walk())


def _project_compiled(c: Compiled, exprs: tuple[tuple[str, Expr], ...]) -> Compiled:
    if c.static:
        return Compiled(Project(c.program, exprs), static=True, weighted=False)
    return Compiled(Project(c.program, exprs + ((WEIGHT, weight()),)), static=False, weighted=c.weighted)


def _all(conditions: list[Expr]) -> Expr:
    cond = and_all(conditions)
    assert cond is not None
    return cond
