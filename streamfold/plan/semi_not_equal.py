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
Both terms read the counts only for the keys they need, looked up and added up per (key,
value): the batch's left rows their keys' counts after the merge; the old left rows of the
touched keys the new counts of those keys beside the old ones (the new less the batch's delta).
So the state is read only by look-ups and its delta, and may be kept as a base and a tail
(``plan/runs.py``): a batch then reads the base's rows of its keys, not a merge of the whole
state. Nothing is recounted against the whole right side, and no left row is re-joined unless
its key was touched. ``N`` and ``C`` are summed together from the looked-up rows of ``C``, per
distinct (key, ``a``) of the left rows (``with_counts``), rather than ``N`` kept as a second
state: one merge per batch instead of two, and one read of each look-up per term.

The rule applies when the condition compares the two sides by equalities (at least one) and
exactly one ``a <> b`` with ``a`` reading only the left side and ``b`` only the right; otherwise
:func:`applies` gives the reason and the general recount (``Matcher.general``) runs.
"""

from __future__ import annotations

from typing import Protocol

from ..ir.expr import Agg, Call, Case, Column, Expr, Literal, and_all
from ..ir.rel import WEIGHT, Aggregate, Field, Filter, Join, JoinKind, Project, Rel, StateScan, StateVersion, Union
from ..ir.types import BIGINT, BOOLEAN
from .context import PlanContext
from .model import OLD, Compiled, Monoid, State, StateColumn, StateRole
from .terms import ONE, ZERO, coalesce0, nonzero, or_false, positive, sum_weights, weight



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
              note=f"matches per key and value of the {m.join.kind} join on <>",
              partition=tuple(knames)),  # looked up by key: the keys met where the rows lie
        Aggregate(Filter(m.right.program, not_null), group, ((WEIGHT, sum_weights()),)))
    kfields = fields[:-1]
    lnames = [f.name for f in m.lfields]
    left_cond = and_all(sp.left)
    guard: Expr = or_false(left_cond) if left_cond is not None else Literal(True, BOOLEAN)

    qkeys = [Field(f"q.{k.name}", k.type) for k in kfields]
    qvalue = Field(f"q.{name}.a", a.type)

    def lookup(keys: Rel, cond: Expr | None) -> Rel:
        """The counts of the keys in ``keys``, added up per key and value (a state kept as a base
        and a tail may hold a key and value in both)."""
        return Aggregate(Join(StateScan(name, StateVersion.NEW, fields + (Field(WEIGHT, BIGINT),)), keys,
                              JoinKind.SEMI, cond),
                         tuple((f.name, f.ref()) for f in fields), ((WEIGHT, sum_weights()),))

    def with_counts(rows: Rel, counts: Rel, cols: tuple[str, ...]) -> Rel:
        """``rows`` with, per row, ``cols`` of ``counts`` added up over its key's values (``n.``,
        N) and over the value ``a`` (``c.``, C): computed per distinct (key, ``a``) of the rows,
        so ``counts`` (one row per key and value) is read once."""
        pairs = Aggregate(rows, tuple((q.name, lx) for q, (lx, _) in zip(qkeys, sp.keys)) + ((qvalue.name, a),), ())
        on = and_all([Call("=", (q.ref(), k.ref()), BOOLEAN) for q, k in zip(qkeys, kfields)])
        assert on is not None
        same = Call("=", (Column(vname, b.type), qvalue.ref()), BOOLEAN)
        sums = tuple((f"n.{c}", Agg("sum", (coalesce0(Column(c, BIGINT)),), False, BIGINT)) for c in cols) + tuple(
            (f"c.{c}", Agg("sum", (Case(((same, coalesce0(Column(c, BIGINT))),), ZERO, BIGINT),), False, BIGINT))
            for c in cols)
        per = Aggregate(Join(pairs, counts, JoinKind.INNER, on), tuple((q.name, q.ref()) for q in qkeys + [qvalue]),
                        sums)
        # Met on the key alone, where both sides already lie hashed: ``a`` is matched to its value
        # by ``>=`` and ``<=`` (the same rows as ``=``, NULL included), which Spark does not take
        # for a join key; with ``=`` it would hash both sides again on (key, ``a``).
        cond = and_all([Call("=", (lx, q.ref()), BOOLEAN) for q, (lx, _) in zip(qkeys, sp.keys)]
                       + [Call(op, (a, qvalue.ref()), BOOLEAN) for op in (">=", "<=")])
        assert cond is not None
        return Join(rows, per, JoinKind.LEFT, cond)

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
    term1 = with_counts(delta, lookup(dkeys, dk_cond), (WEIGHT,))
    term1_w = Call("*", (weight(), indicator(matched(f"n.{WEIGHT}", f"c.{WEIGHT}"))), BIGINT)

    # The old left rows of the keys the batch touched, against those keys' old and new counts:
    # the new counts of every value of a touched key looked up and added up per (key, value), the
    # old ones the new less the batch's delta.
    change = StateScan(name, StateVersion.DELTA, fields + (Field(WEIGHT, BIGINT),))
    tkeys = Aggregate(change, tuple((f"t.{k.name}", k.ref()) for k in kfields), ())
    tk_cond = and_all([Call("=", (k.ref(), Column(f"t.{k.name}", k.type)), BOOLEAN) for k in kfields])
    both = (WEIGHT, OLD + WEIGHT)
    found = lookup(tkeys, tk_cond)
    keyed = tuple((f.name, f.ref()) for f in fields)
    counts = Aggregate(
        Union((Project(found, keyed + ((WEIGHT, weight()), (OLD + WEIGHT, weight()))),
               Project(change, keyed + ((WEIGHT, ZERO), (OLD + WEIGHT, Call("-", (ZERO, weight()), BIGINT)))))),
        keyed, tuple((c, Agg("sum", (Column(c, BIGINT),), False, BIGINT)) for c in both))
    old_left = m.left_old()
    lt_cond = and_all([Call("=", (lx, Column(f"t.{k.name}", k.type)), BOOLEAN) for (lx, _), k in zip(sp.keys, kfields)])
    rows = with_counts(Join(old_left, tkeys, JoinKind.SEMI, lt_cond), counts, both)
    flip = Call("-", (indicator(matched(f"n.{WEIGHT}", f"c.{WEIGHT}")),
                      indicator(matched(f"n.{OLD}{WEIGHT}", f"c.{OLD}{WEIGHT}"))), BIGINT)
    term2_w = Call("*", (weight(), flip), BIGINT)

    parts = tuple(Filter(Project(r, out_cols + ((WEIGHT, w),)), nonzero(weight()))
                  for r, w in ((term1, term1_w), (rows, term2_w)))
    ctx.plan.note(f"{m.join.kind} join on equalities and one <>: matches counted per key and value "
                  "(N(k) − C(k, a)); a batch re-joins only the left rows of the keys it touched")
    return Union(parts)
