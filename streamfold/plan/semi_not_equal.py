"""A semi or anti join whose condition is equalities and one ``<>``: matches as per-key counts.

``EXISTS (SELECT * FROM R r WHERE r.k = l.k AND r.b <> l.a)`` — TPC-H Q21's "another supplier of
the same order" — has a match for a left row ``l`` when some right row with the same key has a
value ``b`` other than ``l.a``. With

    C(k, v) = Σ weight of right rows with key k and b = v (b and k not NULL, the right-only
              conditions true),
    N(k)    = Σ_v C(k, v),

the number of matches of ``l`` is exactly ``m(l) = N(l.k) − C(l.k, l.a)`` when ``l.a`` is not
NULL, and 0 when it is (``NULL <> b`` is not true) — so ``m`` depends on ``(l.k, l.a)`` only, and
one state keyed by ``(k, b)`` maintains it. A batch changes the join's output by (the same
identity as :mod:`.rules_matchjoins`)::

    Δout = Σ_l  Δw(l)·M_new(l)  +  w_old(l)·(M_new(l) − M_old(l))

where ``M_new(l) − M_old(l)`` can be non-zero only for keys whose counts the batch touched.
Both terms read the counts only for the keys they need: the batch's left rows look up their
keys' counts after the merge; the old left rows of the touched keys read the merge of those
keys (old and new counts side by side). Nothing is recounted against the whole right side, and
no left row is re-joined unless its key was touched. ``N`` is summed from the touched keys'
rows of ``C`` rather than kept as a second state: one merge per batch instead of two.

The rule applies when the condition compares the two sides by equalities (at least one) and
exactly one ``a <> b`` with ``a`` reading only the left side and ``b`` only the right; otherwise
:func:`applies` gives the reason and the general recount (``Matcher.general``) runs.
"""

from __future__ import annotations

from typing import Protocol

from ..ir.expr import Agg, Call, Case, Column, Expr, Literal, and_all
from ..ir.rel import WEIGHT, Aggregate, Field, Filter, Join, JoinKind, Project, Rel, StateScan, StateVersion, Union
from ..ir.types import BIGINT, BOOLEAN
from .changes import merged_fields
from .context import PlanContext
from .model import OLD, Compiled, Monoid, State, StateColumn, StateRole
from .terms import ONE, ZERO, coalesce0, nonzero, or_false, positive, sum_weights, touched, weight



class Split(Protocol):
    """A join condition taken apart (``rules_matchjoins``)."""

    @property
    def keys(self) -> list[tuple[Expr, Expr]]: ...  # (left, right) with left = right

    @property
    def left(self) -> list[Expr]: ...  # read only the left input

    @property
    def right(self) -> list[Expr]: ...  # read only the right input

    @property
    def mixed(self) -> list[Expr]: ...  # read both, not an equality of the two


class Matcher(Protocol):
    """What the rule reads of the semi/anti join being compiled (``rules_matchjoins.Matcher``)."""

    @property
    def ctx(self) -> PlanContext: ...

    @property
    def join(self) -> Join: ...

    @property
    def sp(self) -> Split: ...

    @property
    def right(self) -> Compiled: ...

    @property
    def lfields(self) -> tuple[Field, ...]: ...

    def left_delta(self) -> Rel: ...

    def left_old(self) -> Rel: ...


def applies(m: Matcher) -> tuple[Expr, Expr] | str:
    """``(a, b)`` of the one ``a <> b`` (``a`` over the left side, ``b`` over the right), or why
    the rule does not apply."""
    sp = m.sp
    if not sp.keys:
        return "no equality between the two sides"
    if len(sp.mixed) != 1:
        return f"{len(sp.mixed)} conditions compare the two sides other than by equality"
    c = sp.mixed[0]
    if not (isinstance(c, Call) and c.op == "<>"):
        return "the comparison of the two sides is not <>"
    lnames, rnames = set(m.join.left.names), set(m.join.right.names)
    x, y = c.args
    if x.columns() <= lnames and y.columns() <= rnames:
        return x, y
    if y.columns() <= lnames and x.columns() <= rnames:
        return y, x
    return "a side of the <> reads both inputs"


def semi_anti(m: Matcher, anti: bool, a: Expr, b: Expr) -> Rel:
    """The change of the semi (or anti) join ``m.join`` (see the module docstring)."""
    ctx, sp = m.ctx, m.sp
    name = ctx.plan.name("pairs")
    knames = [f"{name}.k{i}" for i in range(len(sp.keys))]
    vname = f"{name}.v"
    group = tuple((n, r) for n, (_, r) in zip(knames, sp.keys)) + ((vname, b),)
    fields = tuple(Field(n, e.type) for n, e in group)
    not_null = and_all([Call("IS NOT NULL", (e,), BOOLEAN) for _, e in group] + list(sp.right))
    assert not_null is not None
    ctx.plan.add_state(
        State(name, StateRole.COUNTS, fields,
              (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "number of right rows with the key and the value"),),
              note=f"matches per key and value of the {m.join.kind} join on <>"),
        Aggregate(Filter(m.right.program, not_null), group, ((WEIGHT, sum_weights()),)))
    kfields = fields[:-1]
    lnames = [f.name for f in m.lfields]
    left_cond = and_all(sp.left)
    guard: Expr = or_false(left_cond) if left_cond is not None else Literal(True, BOOLEAN)

    def on_keys(prefix: str) -> Expr:
        cond = and_all([Call("=", (lx, Column(f"{prefix}{k.name}", k.type)), BOOLEAN)
                        for (lx, _), k in zip(sp.keys, kfields)])
        assert cond is not None
        return cond

    def totals(counts: Rel, prefix: str, cols: tuple[str, ...]) -> Rel:
        """Per key, the sum of ``cols`` over the values (``N`` from the rows of ``C``)."""
        return Aggregate(counts, tuple((f"{prefix}{k.name}", k.ref()) for k in kfields),
                         tuple((f"{prefix}{c}", Agg("sum", (coalesce0(Column(c, BIGINT)),), False, BIGINT))
                               for c in cols))

    def value(counts: Rel, prefix: str, cols: tuple[str, ...]) -> Rel:
        return Project(counts, tuple((f"{prefix}{f.name}", f.ref()) for f in fields)
                       + tuple((f"{prefix}{c}", Column(c, BIGINT)) for c in cols))

    def on_value(prefix: str) -> Expr:
        cond = and_all([on_keys(prefix), Call("=", (a, Column(f"{prefix}{vname}", b.type)), BOOLEAN)])
        assert cond is not None
        return cond

    def matched(total: str, same: str) -> Expr:
        """Whether the row has a match: ``a`` not NULL and N − C > 0 (then the guard)."""
        m_ = Call("-", (coalesce0(Column(total, BIGINT)), coalesce0(Column(same, BIGINT))), BIGINT)
        has = and_all([guard, Call("IS NOT NULL", (a,), BOOLEAN), positive(m_)])
        assert has is not None
        return Call("NOT", (has,), BOOLEAN) if anti else has

    def indicator(flag: Expr) -> Expr:
        return Case(((flag, ONE),), ZERO, BIGINT)

    out_cols = tuple((n, Column(n, f.type)) for n, f in zip(lnames, m.lfields))

    # The batch's left rows, against the counts of their keys after the merge.
    delta = m.left_delta()
    dkeys = Aggregate(delta, tuple((f"d.{k.name}", lx) for (lx, _), k in zip(sp.keys, kfields)), ())
    dk_cond = and_all([Call("=", (k.ref(), Column(f"d.{k.name}", k.type)), BOOLEAN) for k in kfields])
    new_counts = Join(StateScan(name, StateVersion.NEW, fields + (Field(WEIGHT, BIGINT),)), dkeys,
                      JoinKind.SEMI, dk_cond)
    term1 = Join(Join(delta, totals(new_counts, "n.", (WEIGHT,)), JoinKind.LEFT, on_keys("n.")),
                 value(new_counts, "c.", (WEIGHT,)), JoinKind.LEFT, on_value("c."))
    term1_w = Call("*", (weight(), indicator(matched(f"n.{WEIGHT}", f"c.{WEIGHT}"))), BIGINT)

    # The old left rows of the keys the batch touched, against those keys' old and new counts.
    mfields = merged_fields(fields + (Field(WEIGHT, BIGINT),), tuple(f.name for f in fields))
    merged = StateScan(name, StateVersion.MERGED, mfields)
    tkeys = Aggregate(Filter(merged, touched()), tuple((f"t.{k.name}", k.ref()) for k in kfields), ())
    tk_cond = and_all([Call("=", (k.ref(), Column(f"t.{k.name}", k.type)), BOOLEAN) for k in kfields])
    counts = Join(merged, tkeys, JoinKind.SEMI, tk_cond)
    both = (WEIGHT, OLD + WEIGHT)
    old_left = m.left_old()
    lt_cond = and_all([Call("=", (lx, Column(f"t.{k.name}", k.type)), BOOLEAN) for (lx, _), k in zip(sp.keys, kfields)])
    rows = Join(Join(Join(old_left, tkeys, JoinKind.SEMI, lt_cond), totals(counts, "n.", both), JoinKind.LEFT,
                     on_keys("n.")),
                value(counts, "c.", both), JoinKind.LEFT, on_value("c."))
    flip = Call("-", (indicator(matched(f"n.{WEIGHT}", f"c.{WEIGHT}")),
                      indicator(matched(f"n.{OLD}{WEIGHT}", f"c.{OLD}{WEIGHT}"))), BIGINT)
    term2_w = Call("*", (weight(), flip), BIGINT)

    parts = tuple(Filter(Project(r, out_cols + ((WEIGHT, w),)), nonzero(weight()))
                  for r, w in ((term1, term1_w), (rows, term2_w)))
    ctx.plan.note(f"{m.join.kind} join on equalities and one <>: matches counted per key and value "
                  "(N(k) − C(k, a)); a batch re-joins only the left rows of the keys it touched")
    return Union(parts)
