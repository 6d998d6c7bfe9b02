"""Factorization (seed 001 §5.3.5, phase 3): every delta as U·V, its rank tracked.

Statement by statement, each ``δy`` the delta reads is replaced by its factored form
``U_y·V_y`` (forward substitution; the input's is the batch's ``U_X·V_X``), the delta is
expanded to a sum of monomials (:mod:`.monomials`), and the search picks the cheapest way to
write that sum as ``U·V``. The candidates are exactly the programs the equivalence rules reach
from the sum — grouped, not enumerated tree by tree as the thesis's breadth-first search does:

- every **partition** of the monomials into groups (FACTORIZATION stacks the groups:
  ``p₁q₁ + p₂q₂ = [p₁, p₂]·[q₁; q₂]``, the rank the sum of the groups' inner dimensions);
- per group, a monomial **split** at an inner dimension, or a common **prefix** or **suffix**
  factored out of all its monomials (DISTRIB right to left: ``u·a + u·b = u·(a + b)``), which
  keeps the rank of the group at one inner dimension;
- per product, its cheapest order (MULT-ASSOC, by dynamic programming);
- the **dense** delta (no factorization), which wins once the rank is not low.

The cost of a candidate is the operations computing U and V plus the view's update
``x ⊕= U·V`` (rows·cols·rank): a higher rank costs here and in every later statement.

Two statements are special: the inverse ``x := a⁻¹`` whose delta is ``(a + U·V)⁻¹ − x``,
rewritten by WOODBURY into ``U_x = x·U``, ``V_x = −(id + V·x·U)⁻¹·V·x`` — only a k×k matrix is
inverted — unless re-inverting is cheaper (a delta of high rank); and the stacks, whose factors
stack block-wise (``[U_aV_a, U_bV_b] = [U_a, U_b]·[[V_a, 0]; [0, V_b]]``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..errors import LinalgError
from .anf import Anf
from .derive import Derived, delta_name
from .ir import Add, Expr, HStack, Identity, Inv, Mul, Scale, Transpose, Var, VStack, Zeros
from .meta import Inferrer, Meta
from .monomials import Monomial, chain, expand, total
from .semiring import Semiring
from .simplify import Statement, simplify
from .trigger import Change, Factored, Trigger, d_name, u_name, v_name

EXHAUSTIVE = 7  # monomials up to which every partition is tried (Bell(7) = 877); beyond, greedy merging


class _Phase:
    def __init__(self, anf: Anf, ring: Semiring, changes: tuple[Change, ...]) -> None:
        self.anf = anf
        self.ring = ring
        self.infer = Inferrer(anf.metas)
        self.lets: list[Statement] = []
        self.factored: dict[str, Factored] = {}
        self.unit = _downstream(anf)
        for c in changes:
            mu, mv = c.factor_metas(anf.metas[c.input])
            self.infer.bind(u_name(c.input), mu)
            self.infer.bind(v_name(c.input), mv)
            m = anf.metas[c.input]
            self.factored[c.input] = Factored(c.input, u_name(c.input), v_name(c.input), c.rank, (), 0,
                                              _update_cost(m, c.rank, c.structure), 0)

    def let(self, name: str, e: Expr) -> Var:
        e = simplify(e, self.infer, self.ring)
        if isinstance(e, Var):  # a delta passed on as it is (δ(x + id) = δx) needs no statement
            return e
        self.lets.append(Statement(name, e))
        self.infer.bind(name, self.infer(e))
        return Var(name)

    def substituted(self, delta: Expr) -> Expr:
        """``delta`` with every ``δy`` replaced by ``U_y·V_y`` (or ``D_y``)."""
        by_delta = {delta_name(v): f for v, f in self.factored.items()}

        def sub(n: Expr) -> Expr | None:
            if isinstance(n, Var) and n.name in by_delta:
                f = by_delta[n.name]
                return Var(f.u) if f.v is None else Mul(Var(f.u), Var(f.v))
            return None

        return simplify(delta.transform(sub), self.infer, self.ring)

    # -- one statement -----------------------------------------------------------------------------
    def statement(self, view: str, delta: Expr) -> None:
        expr = self.anf.statement(view).expr
        meta = self.anf.metas[view]
        reeval = self.infer.op_cost(expr)
        if isinstance(expr, Inv):
            self.factored[view] = self._inverse(view, expr, meta, reeval)
        elif isinstance(expr, (HStack, VStack)):
            self.factored[view] = self._stack(view, expr, meta, reeval)
        else:
            self.factored[view] = self._general(view, self.substituted(delta), meta, reeval)

    def _general(self, view: str, delta: Expr, meta: Meta, reeval: int) -> Factored:
        monos = expand(delta, self.infer, self.ring)
        if not monos:
            raise LinalgError(f"internal: the delta of {view} vanished", code="INTERNAL")
        groups, cost, rank = self._best_partition(monos, meta, self.unit[view])
        dense_expr, dense_cost = total(monos, self.infer, self.ring)
        full = min(meta.rows, meta.cols)
        # Both sides charge what their rank costs the statements that read this delta.
        if dense_cost + meta.entries + full * self.unit[view] <= cost + rank * self.unit[view] or rank >= full:
            d = self.let(d_name(view), dense_expr)
            rules = ("MULT-ASSOC",) if any(len(m.atoms) > 2 for m in monos) else ()
            return Factored(view, d.name, None, min(meta.rows, meta.cols), rules, dense_cost, meta.entries,
                            reeval)
        us, vs, used = [], [], set()
        for left, right, _ in groups:
            us.append(total(list(left), self.infer, self.ring)[0])
            vs.append(total(list(right), self.infer, self.ring)[0])
            if len(left) > 1 or len(right) > 1:
                used.add("DISTRIB")
            if any(len(m.atoms) > 2 for m in left + right):
                used.add("MULT-ASSOC")
        if len(groups) > 1:
            used.add("FACTORIZATION")
        u_expr, v_expr = us[0], vs[0]
        for u, v in zip(us[1:], vs[1:]):
            u_expr, v_expr = HStack(u_expr, u), VStack(v_expr, v)
        u = self.let(u_name(view), u_expr)
        v = self.let(v_name(view), v_expr)
        spent = self.infer.cost(u_expr, v_expr)
        return Factored(view, u.name, v.name, rank, tuple(sorted(used)), spent,
                        _update_cost(meta, rank, "dense"), reeval)

    def _best_partition(self, monos: list[Monomial], meta: Meta, unit: int) -> tuple[list[_Group], int, int]:
        """The cheapest partition (its groups, cost with the update, rank), ranks charged ``unit`` each
        for what they cost downstream."""
        memo: dict[tuple[int, ...], tuple[_Group, int]] = {}

        def block_best(block: tuple[int, ...]) -> tuple[_Group, int] | None:
            if block not in memo:
                best = None
                for g in _group_options([monos[i] for i in block], self.infer, self.ring.one):
                    c = self._group_cost(g, meta)
                    if best is None or (c, g[2]) < (best[1], best[0][2]):
                        best = (g, c)
                if best is None:
                    return None
                memo[block] = best
            return memo[block]

        candidates = _partitions(list(range(len(monos)))) if len(monos) <= EXHAUSTIVE else _greedy(len(monos))
        choice: tuple[int, int, list[_Group]] | None = None
        for partition in candidates:
            groups, cost, ok = [], 0, True
            for block in partition:
                got = block_best(tuple(block))
                if got is None:
                    ok = False
                    break
                groups.append(got[0])
                cost += got[1]
            if not ok:
                continue
            rank = sum(g[2] for g in groups)
            cost += rank * unit
            if choice is None or (cost, rank) < (choice[0], choice[1]):
                choice = (cost, rank, groups)
        assert choice is not None
        return choice[2], choice[0] - choice[1] * unit, choice[1]

    def _group_cost(self, g: _Group, meta: Meta) -> int:
        left, right, inner = g
        return (total(list(left), self.infer, self.ring)[1] + total(list(right), self.infer, self.ring)[1]
                + meta.entries * inner)

    def _delta_of(self, atom: Expr) -> _Delta | None:
        """The factored delta of an operand (a name or a transposed name), as expressions."""
        if isinstance(atom, Var) and atom.name in self.factored:
            f = self.factored[atom.name]
            return _Delta(Var(f.u), None if f.v is None else Var(f.v), f.rank)
        if isinstance(atom, Transpose) and isinstance(atom.arg, Var) and atom.arg.name in self.factored:
            f = self.factored[atom.arg.name]
            if f.v is None:
                return _Delta(Transpose(Var(f.u)), None, f.rank)
            return _Delta(Transpose(Var(f.v)), Transpose(Var(f.u)), f.rank)  # (U·V)ᵀ = Vᵀ·Uᵀ
        return None

    def _inverse(self, view: str, expr: Inv, meta: Meta, reeval: int) -> Factored:
        arg = expr.arg
        inner = self._delta_of(arg)
        if inner is None:
            raise LinalgError(f"internal: the inverse {view} changes but its operand has no delta", code="INTERNAL")
        x = Var(view)
        if inner.v is not None:
            k, u, v = inner.rank, inner.u, inner.v
            mark = len(self.lets)
            w = self.let(f"W_{view}", Mul(x, u))
            c = self.let(f"C_{view}", Scale(-1.0, Inv(Add(Identity(k), Mul(v, w)))))
            vx, _ = chain((c, v, x), self.infer)
            vv = self.let(v_name(view), vx)
            spent = self.infer.cost(*(s.expr for s in self.lets[mark:]))
            wood_update = _update_cost(meta, k, "dense")
            reinvert = meta.rows ** 3 + meta.entries * (k + 2)
            if spent + wood_update < reinvert + meta.entries:
                return Factored(view, w.name, vv.name, k, ("WOODBURY",), spent, wood_update, reeval)
            del self.lets[mark:]
            new_arg: Expr = Add(arg, Mul(u, v))
        else:
            new_arg = Add(arg, inner.u)
        d = self.let(d_name(view), Add(Inv(new_arg), Scale(-1.0, x)))
        return Factored(view, d.name, None, meta.rows, (), self.infer.cost(self.lets[-1].expr), meta.entries, reeval)

    def _stack(self, view: str, expr: HStack | VStack, meta: Meta, reeval: int) -> Factored:
        ma, mb = self.infer(expr.left), self.infer(expr.right)
        da, db = self._delta_of(expr.left), self._delta_of(expr.right)
        if (da is not None and da.v is None) or (db is not None and db.v is None):  # a dense side: dense
            parts = [Zeros(m.rows, m.cols) if d is None else d.u if d.v is None else Mul(d.u, d.v)
                     for m, d in ((ma, da), (mb, db))]
            d_expr = type(expr)(parts[0], parts[1])
            d = self.let(d_name(view), d_expr)
            return Factored(view, d.name, None, min(meta.rows, meta.cols), (), self.infer.cost(d_expr),
                            meta.entries, reeval)
        ka, kb = (da.rank if da else 0), (db.rank if db else 0)
        u_expr: Expr
        v_expr: Expr
        if isinstance(expr, HStack):  # [UaVa, UbVb] = [Ua, Ub]·[[Va, 0]; [0, Vb]]
            us = [d.u for d in (da, db) if d is not None]
            rows: list[Expr] = []
            if da is not None and da.v is not None:
                rows.append(HStack(da.v, Zeros(ka, mb.cols)))
            if db is not None and db.v is not None:
                rows.append(HStack(Zeros(kb, ma.cols), db.v))
            u_expr = us[0] if len(us) == 1 else HStack(us[0], us[1])
            v_expr = rows[0] if len(rows) == 1 else VStack(rows[0], rows[1])
        else:  # [UaVa; UbVb] = [[Ua, 0]; [0, Ub]]·[Va; Vb]
            cols = []
            if da is not None:
                cols.append(VStack(da.u, Zeros(mb.rows, ka)))
            if db is not None:
                cols.append(VStack(Zeros(ma.rows, kb), db.u))
            vs = [d.v for d in (da, db) if d is not None and d.v is not None]
            u_expr = cols[0] if len(cols) == 1 else HStack(cols[0], cols[1])
            v_expr = vs[0] if len(vs) == 1 else VStack(vs[0], vs[1])
        u = self.let(u_name(view), u_expr)
        v = self.let(v_name(view), v_expr)
        return Factored(view, u.name, v.name, ka + kb, ("FACTORIZATION",), self.infer.cost(u_expr, v_expr),
                        _update_cost(meta, ka + kb, "dense"), reeval)


@dataclass(frozen=True)
class _Delta:
    u: Expr
    v: Expr | None  # None: ``u`` is the whole (dense) delta
    rank: int


_Group = tuple[tuple[Monomial, ...], tuple[Monomial, ...], int]  # (P side, Q side, inner dimension)


def _group_options(block: list[Monomial], infer: Inferrer, unit: float) -> Iterator[_Group]:
    """The ways to write a group of monomials as one product P·Q."""
    first = block[0]
    if len(block) == 1:
        atoms = first.atoms
        for s in range(1, len(atoms)):
            yield ((Monomial(unit, atoms[:s]),), (Monomial(first.coef, atoms[s:]),), infer(atoms[s]).rows)
        m = infer(atoms[0]), infer(atoms[-1])
        yield ((Monomial(unit, (Identity(m[0].rows),)),), (first,), m[0].rows)
        yield ((first,), (Monomial(unit, (Identity(m[1].cols),)),), m[1].cols)
        return
    shortest = min(len(m.atoms) for m in block)
    for s in range(1, shortest + 1):  # a common prefix
        head = first.atoms[:s]
        if any(m.atoms[:s] != head for m in block):
            break
        dim = infer(head[-1]).cols
        yield ((Monomial(unit, head),), tuple(Monomial(m.coef, m.atoms[s:] or (Identity(dim),)) for m in block), dim)
    for s in range(1, shortest + 1):  # a common suffix
        tail = first.atoms[-s:]
        if any(m.atoms[-s:] != tail for m in block):
            break
        dim = infer(tail[0]).rows
        yield (tuple(Monomial(m.coef, m.atoms[:-s] or (Identity(dim),)) for m in block), (Monomial(unit, tail),), dim)


def _partitions(items: list[int]) -> Iterator[list[list[int]]]:
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for p in _partitions(rest):
        yield [[first]] + p
        for i in range(len(p)):
            yield p[:i] + [[first] + p[i]] + p[i + 1:]


def _greedy(n: int) -> Iterator[list[list[int]]]:
    """For many monomials: each alone, and neighbours paired (a bounded, not exhaustive, choice)."""
    yield [[i] for i in range(n)]
    yield [[i, i + 1] for i in range(0, n - 1, 2)] + ([[n - 1]] if n % 2 else [])


def _downstream(anf: Anf) -> dict[str, int]:
    """What one unit of rank in a view's delta costs the statements that read it (and theirs):
    a product ``x·b`` multiplies ``V_x·b`` (cols(x)·cols(b) per unit), an inverse applies
    Woodbury (about 3·n² per unit), and every view the rank reaches is updated (its entries)."""
    unit: dict[str, int] = {}
    for s in reversed(anf.statements):
        unit.setdefault(s.name, 0)
        e, m = s.expr, anf.metas[s.name]
        here = m.entries + unit[s.name]
        reads: list[tuple[str, int]] = []
        if isinstance(e, Mul):
            for side, other in ((e.left, e.right), (e.right, e.left)):
                name = _name(side)
                if name is not None:
                    om = Inferrer(anf.metas)(other)
                    reads.append((name, here + om.entries))
        elif isinstance(e, Inv):
            name = _name(e.arg)
            if name is not None:
                reads.append((name, here + 2 * m.entries))
        else:
            reads.extend((name, here) for k in e.children() if (name := _name(k)) is not None)
        for name, cost in reads:
            unit[name] = unit.get(name, 0) + cost
    return unit


def _name(e: Expr) -> str | None:
    if isinstance(e, Var):
        return e.name
    if isinstance(e, Transpose) and isinstance(e.arg, Var):
        return e.arg.name
    return None


def _update_cost(meta: Meta, rank: int, structure: str) -> int:
    if structure in ("selector", "selector_t"):
        return rank * (meta.cols if structure == "selector" else meta.rows)
    return meta.entries * rank


def factorize(anf: Anf, derived: Derived, ring: Semiring, changes: tuple[Change, ...],
              reeval_cost: int) -> Trigger:
    """The trigger program for ``changes``: factored deltas of every changed view."""
    phase = _Phase(anf, ring, changes)
    for view, delta in derived.deltas:
        if delta is not None:
            phase.statement(view, delta)
    factored = tuple(phase.factored.values())
    cost = sum(f.cost + f.update_cost for f in factored)
    metas: Mapping[str, Meta] = {s.name: phase.infer.env[s.name] for s in phase.lets}
    return Trigger(changes, tuple(phase.lets), factored, dict(metas), cost, reeval_cost)
