"""Semi joins from static tables: a stream joined with a filtered static table keeps only the rows that can match.

In an inner join, a row of one input can only reach the output if its join key has a partner in
every input it is equated with. When one of those inputs is static and filtered, the values its
key can take are fixed for the whole run — TPC-H Q17's ``part WHERE p_brand = 'Brand#23' AND
p_container = 'MED BOX'`` leaves 1 part in 1,000 — so every other input equated with it may be
semi-joined with them first (sideways information passing, the static case of magic sets).
The semi join is then pushed down as far as it goes: through projections, filters and DISTINCT,
into the UNION ALL branches, into the side of a join that has the key, and below a GROUP BY on
the key — Q17's correlated ``avg(l_quantity)`` per part, which unnesting computes for every part,
is then computed for the parts the outer query can meet.

Before (Q17, unnested)::

    Join[p.k = l.k, p.k = sq.key0 AND l.q < sq.value](
        Join(Scan lineitem l, Filter[p.brand = …](Scan part p)),
        Project(Aggregate[l2.k AS sq.key0, avg(l2.q)](Scan lineitem l2)))

After::

    Join[…](
        Join(Join semi[l.k = _static0.k](Scan lineitem l, π[p.k](Filter[…](Scan part p))), Filter[…](Scan part p)),
        Project(Aggregate[l2.k AS sq.key0, avg(l2.q)](
            Join semi[l2.k = _static1.k](Scan lineitem l2, π[p.k](Filter[…](Scan part p))))))

A static input counts as filtered when a filter or a semi or anti join restricts its rows, or
when it is equated with one that is (``supplier ⋈ nation ⋈ region WHERE r_name = 'EUROPE'``: the
suppliers are reduced by the nations, the nations by the region, Yannakakis' semi-join pass
over the static inputs). Equalities are followed through equivalence classes, so an input
equated with the static one only through a third input is reduced too. Only ``=`` is followed
(a NULL key never matches, and the semi join drops it as the join would); ``<=>`` is not.

Incrementally the semi join's right side never changes: a batch's rows meet it once
(``rules_matchjoins``), and every state above it — the join inputs, the aggregate of the
subquery — keeps only rows that can matter. A stream that is the body's only changing input
and keeps no state of its own (a scan, filtered or projected) is left alone: the join with the
static input already filters its rows.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..ir.expr import Call, Column, Expr, and_all, conjuncts, or_all
from ..ir.rel import Aggregate, Distinct, Filter, Join, JoinKind, Project, Rel, Scan, Union
from ..ir.types import BOOLEAN

_TREE = (JoinKind.INNER, JoinKind.CROSS)  # the joins of one tree (a comma join is a cross join until its equalities)
# The join kinds a semi join on the left side's columns passes into the left side of.
_LEFT_KEEPING = (JoinKind.INNER, JoinKind.CROSS, JoinKind.LEFT, JoinKind.SEMI, JoinKind.ANTI,
                 JoinKind.NULL_AWARE_ANTI)


def run(rel: Rel) -> Rel:
    return _Pass().visit(rel)


class _Pass:
    def __init__(self) -> None:
        self._memo: dict[Rel, Rel] = {}
        self._names = 0

    def visit(self, rel: Rel) -> Rel:
        if rel not in self._memo:
            self._memo[rel] = self._visit(rel)
        return self._memo[rel]

    def _visit(self, rel: Rel) -> Rel:
        if isinstance(rel, Join) and rel.kind in _TREE:
            leaves, conds = _tree(rel)
            reduced = self._reduce([self.visit(leaf) for leaf in leaves], conds)
            return _rebuild(rel, iter(reduced))
        kids = rel.inputs()
        if not kids:
            return rel
        new = tuple(self.visit(k) for k in kids)
        return rel.with_inputs(new) if new != kids else rel

    # -- one tree of inner joins -------------------------------------------------------------------
    def _reduce(self, leaves: list[Rel], conds: list[Expr]) -> list[Rel]:
        static = [not _reads_stream(leaf) for leaf in leaves]
        if all(static) or not any(static):
            return leaves
        owner = {name: i for i, leaf in enumerate(leaves) for name in leaf.names}
        classes = _Classes()
        for c in conds:
            if isinstance(c, Call) and c.op == "=" and all(isinstance(a, Column) for a in c.args):
                a, b = (x.name for x in c.args)  # type: ignore[attr-defined]
                if a in owner and b in owner and owner[a] != owner[b]:
                    classes.union(a, b)
        shared = _Shared(owner, classes)
        implied = {j: _implied(conds, leaves[j]) for j, s in enumerate(static) if s}
        changing = [i for i, s in enumerate(static) if not s]
        out = list(leaves)
        for i in changing:
            if len(changing) == 1 and not _keeps_state(leaves[i]):
                continue
            for j, s in enumerate(static):
                if not s:
                    continue
                pairs = shared.pairs(i, j)
                if not pairs:
                    continue
                right, selective = self._static_reduced(j, leaves, static, shared, implied, {j})
                if selective:
                    out[i] = self._push(out[i], right, pairs)
        return out

    def _static_reduced(self, j: int, leaves: list[Rel], static: list[bool], shared: _Shared,
                        implied: dict[int, Expr | None], seen: set[int]) -> tuple[Rel, bool]:
        """Static input ``j`` filtered by what the join's conditions imply of it alone and
        semi-joined with the (reduced) static inputs it is equated with, and whether anything
        restricts it."""
        rel = leaves[j]
        selective = _restricts(rel)
        cond = implied[j]
        if cond is not None:
            rel = Filter(rel, cond)
            selective = True
        for k, s in enumerate(static):
            if not s or k in seen:
                continue
            pairs = shared.pairs(j, k)
            if not pairs:
                continue
            seen.add(k)
            other, restricts = self._static_reduced(k, leaves, static, shared, implied, seen)
            if restricts:
                rel = self._wrap(rel, other, pairs)
                selective = True
        return rel, selective

    # -- the semi join, pushed down ----------------------------------------------------------------
    def _push(self, rel: Rel, right: Rel, pairs: list[tuple[str, str]]) -> Rel:
        """``rel`` semi-joined with ``right`` on ``rel.a = right.b`` for each pair (a, b), with the
        semi join as deep in ``rel`` as it can go."""
        if isinstance(rel, Filter):
            return Filter(self._push(rel.input, right, pairs), rel.condition)
        if isinstance(rel, Distinct):
            return Distinct(self._push(rel.input, right, pairs))
        if isinstance(rel, Project):
            inner = _through(dict(rel.exprs), pairs)
            if inner is not None:
                return Project(self._push(rel.input, right, inner), rel.exprs)
        if isinstance(rel, Aggregate) and rel.keys:
            inner = _through(dict(rel.keys), pairs)
            if inner is not None:
                return Aggregate(self._push(rel.input, right, inner), rel.keys, rel.aggs)
        if isinstance(rel, Union):
            items = []
            for item in rel.items:
                names = {f.name: g.name for f, g in zip(rel.schema, item.schema)}
                items.append(self._push(item, right, [(names[a], b) for a, b in pairs]))
            return Union(tuple(items))
        if isinstance(rel, Join):
            cols = {a for a, _ in pairs}
            if cols <= set(rel.left.names) and rel.kind in _LEFT_KEEPING:
                return Join(self._push(rel.left, right, pairs), rel.right, rel.kind, rel.condition)
            if cols <= set(rel.right.names) and rel.kind in (JoinKind.INNER, JoinKind.CROSS, JoinKind.RIGHT):
                return Join(rel.left, self._push(rel.right, right, pairs), rel.kind, rel.condition)
        return self._wrap(rel, right, pairs)

    def _wrap(self, rel: Rel, right: Rel, pairs: list[tuple[str, str]]) -> Rel:
        n = self._names
        self._names += 1
        keys = Project(right, tuple((f"_static{n}.k{k}", right.field(b).ref()) for k, (_, b) in enumerate(pairs)))
        cond = and_all([Call("=", (rel.field(a).ref(), Column(f"_static{n}.k{k}", right.field(b).type)), BOOLEAN)
                        for k, (a, b) in enumerate(pairs)])
        return Join(rel, keys, JoinKind.SEMI, cond)


class _Classes:
    """Union-find over column names: the columns an inner join's equalities make equal."""

    def __init__(self) -> None:
        self._parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        while self._parent.get(x, x) != x:
            x = self._parent[x]
        return x

    def union(self, a: str, b: str) -> None:
        self._parent.setdefault(a, a)
        self._parent.setdefault(b, b)
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self._parent[max(ra, rb)] = min(ra, rb)

    def members(self) -> list[list[str]]:
        """Each class's columns, sorted."""
        out: dict[str, list[str]] = {}
        for x in sorted(self._parent):
            out.setdefault(self.find(x), []).append(x)
        return list(out.values())


class _Shared:
    """For two inputs of a join tree, the pairs of their columns an equality class makes equal."""

    def __init__(self, owner: dict[str, int], classes: _Classes) -> None:
        self._by_class = classes.members()
        self._owner = owner

    def pairs(self, i: int, j: int) -> list[tuple[str, str]]:
        out = []
        for members in self._by_class:
            mine = [m for m in members if self._owner[m] == i]
            theirs = [m for m in members if self._owner[m] == j]
            if mine and theirs:
                out.append((mine[0], theirs[0]))
        return out


def _tree(join: Join) -> tuple[list[Rel], list[Expr]]:
    """The inputs of a tree of inner joins, left to right, and the conjuncts of its conditions."""
    leaves: list[Rel] = []
    conds: list[Expr] = []

    def go(rel: Rel) -> None:
        if isinstance(rel, Join) and rel.kind in _TREE:
            go(rel.left)
            go(rel.right)
            conds.extend(conjuncts(rel.condition))
        else:
            leaves.append(rel)

    go(join)
    return leaves, conds


def _rebuild(rel: Rel, leaves: Iterator[Rel]) -> Rel:
    if isinstance(rel, Join) and rel.kind in _TREE:
        left = _rebuild(rel.left, leaves)
        right = _rebuild(rel.right, leaves)
        return Join(left, right, rel.kind, rel.condition)
    return next(leaves)


def _through(exprs: dict[str, Expr], pairs: list[tuple[str, str]]) -> list[tuple[str, str]] | None:
    """The pairs over a projection's (or grouping's) input, when each column is a plain column there."""
    out = []
    for a, b in pairs:
        e = exprs.get(a)
        if not isinstance(e, Column):
            return None
        out.append((e.name, b))
    return out


def _implied(conds: list[Expr], leaf: Rel) -> Expr | None:
    """What the join's conditions over several inputs imply of ``leaf``'s rows alone: for a
    disjunction each of whose branches has conjuncts reading only ``leaf``, those conjuncts,
    OR-ed (TPC-H Q07's ``(n1 = 'FRANCE' AND n2 = 'GERMANY') OR (n1 = 'GERMANY' AND n2 =
    'FRANCE')`` gives ``n1 = 'FRANCE' OR n1 = 'GERMANY'`` for ``n1``). A row of ``leaf`` that
    fails it fails the condition whatever it is joined with."""
    names = set(leaf.names)
    found: list[Expr] = []
    for c in conds:
        if c.columns() <= names or not (c.columns() & names):
            continue
        branches = _disjuncts(c)
        if len(branches) < 2:
            continue
        parts = []
        for b in branches:
            own = [x for x in conjuncts(b) if x.columns() and x.columns() <= names]
            if not own:
                break
            parts.append(and_all(own))
        else:
            either = or_all([p for p in parts if p is not None])
            assert either is not None
            found.append(either)
    return and_all(found)


def _disjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Call) and e.op == "OR":
        return [d for a in e.args for d in _disjuncts(a)]
    return [e]


def _reads_stream(rel: Rel) -> bool:
    return any(isinstance(n, Scan) and not n.static for n in rel.walk())


def _restricts(rel: Rel) -> bool:
    """Whether a filter, or a semi or anti join, inside ``rel`` drops rows (IS NOT NULL alone does not count)."""
    for n in rel.walk():
        if isinstance(n, Filter) and any(not (isinstance(c, Call) and c.op == "IS NOT NULL")
                                         for c in conjuncts(n.condition)):
            return True
        if isinstance(n, Join) and n.kind in (JoinKind.SEMI, JoinKind.ANTI, JoinKind.NULL_AWARE_ANTI):
            return True
    return False


def _keeps_state(rel: Rel) -> bool:
    """Whether ``rel`` keeps states of its own (an aggregate, DISTINCT, a join…), not just a
    stream's rows filtered and projected."""
    return not all(isinstance(n, (Scan, Filter, Project)) for n in rel.walk())


__all__ = ["run"]
