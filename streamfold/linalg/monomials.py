"""Deltas as sums of products, and the cheapest order to multiply a product.

After forward substitution (δy ↦ U_y·V_y) a delta is expanded — DISTRIB and the transpose
rules applied left to right, coefficients pulled out, like terms collected — into a sum of
*monomials* ``c · a₁·a₂·…·a_L`` whose factors are atoms (names, transposed names, constants).
This is the form the thesis's derivation phase leaves each statement in ("a sum of matrix
products", §5.3.5). A transposed atom of a symmetric matrix is the matrix itself.

:func:`chain` chooses the parenthesization of a product by dynamic programming over the cost
model — the optimum of MULT-ASSOC, found without enumerating it. A selector factor is
gathered, not multiplied (see :mod:`.meta`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import Add, Diag, Expr, Fill, Identity, Mul, Scale, Transpose, Var, Zeros
from .meta import DIAGONAL, IDENTITY, SELECTOR, SELECTOR_T, Inferrer, Meta
from .semiring import Semiring
from .simplify import combine


@dataclass(frozen=True, slots=True)
class Monomial:
    coef: float
    atoms: tuple[Expr, ...]


def transpose_atom(a: Expr, infer: Inferrer) -> Expr:
    if isinstance(a, Transpose):
        return a.arg
    if isinstance(a, (Identity, Diag)):
        return a
    if isinstance(a, Fill):
        return Fill(a.cols, a.rows, a.value)
    if isinstance(a, Zeros):
        return Zeros(a.cols, a.rows)
    if infer(a).symmetric:
        return a
    return Transpose(a)


def expand(e: Expr, infer: Inferrer, ring: Semiring) -> list[Monomial]:
    """``e`` as a sum of monomials, like terms collected (their coefficients ⊕-added)."""
    terms = _expand(e, infer, ring)
    out: dict[tuple[Expr, ...], float] = {}
    for t in terms:
        atoms = _drop_identities(t.atoms)
        out[atoms] = t.coef if atoms not in out else _plus(ring, out[atoms], t.coef)
    return [Monomial(c, a) for a, c in out.items() if c != ring.zero]


def _plus(ring: Semiring, a: float, b: float) -> float:
    if ring.name == "tropical":
        return min(a, b)
    if ring.name == "boolean":
        return float(bool(a) or bool(b))
    return a + b


def _drop_identities(atoms: tuple[Expr, ...]) -> tuple[Expr, ...]:
    kept = tuple(a for a in atoms if not isinstance(a, Identity))
    return kept if kept else atoms[:1]


def _expand(e: Expr, infer: Inferrer, ring: Semiring) -> list[Monomial]:
    if isinstance(e, Add):
        return _expand(e.left, infer, ring) + _expand(e.right, infer, ring)
    if isinstance(e, Mul):
        left, right = _expand(e.left, infer, ring), _expand(e.right, infer, ring)
        return [Monomial(combine(ring, a.coef, b.coef), a.atoms + b.atoms) for a in left for b in right]
    if isinstance(e, Scale):
        return [Monomial(combine(ring, e.coef, m.coef), m.atoms) for m in _expand(e.arg, infer, ring)]
    if isinstance(e, Transpose) and not isinstance(e.arg, Var):
        return [Monomial(m.coef, tuple(transpose_atom(a, infer) for a in reversed(m.atoms)))
                for m in _expand(e.arg, infer, ring)]
    if isinstance(e, Zeros):
        return []
    if isinstance(e, Transpose):  # of a name: the name itself if it is symmetric
        return [Monomial(ring.one, (e.arg if infer(e.arg).symmetric else e,))]
    return [Monomial(ring.one, (e,))]


# -- products ---------------------------------------------------------------------------------------
_GATHER = (SELECTOR, SELECTOR_T, DIAGONAL)


def product_cost(a: Meta, b: Meta) -> int:
    if a.structure == IDENTITY or b.structure == IDENTITY:
        return 0
    if a.structure in _GATHER or b.structure in _GATHER:
        return a.rows * b.cols
    return a.rows * a.cols * b.cols


def chain(atoms: tuple[Expr, ...], infer: Inferrer) -> tuple[Expr, int]:
    """The cheapest parenthesization of ``atoms[0]·…·atoms[-1]`` and its cost."""
    n = len(atoms)
    metas = [infer(a) for a in atoms]
    if n == 1:
        return atoms[0], infer.cost(atoms[0])
    # best[i][j]: (cost, split, meta of the product of atoms i..j)
    best: dict[tuple[int, int], tuple[int, int, Meta]] = {}
    for i in range(n):
        best[(i, i)] = (infer.cost(atoms[i]), -1, metas[i])
    for length in range(2, n + 1):
        for i in range(0, n - length + 1):
            j = i + length - 1
            choice: tuple[int, int, Meta] | None = None
            for k in range(i, j):
                lc, _, lm = best[(i, k)]
                rc, _, rm = best[(k + 1, j)]
                cost = lc + rc + product_cost(lm, rm)
                if choice is None or cost < choice[0]:
                    structure = lm.structure if rm.structure == IDENTITY else \
                        rm.structure if lm.structure == IDENTITY else "dense"
                    choice = (cost, k, Meta(lm.rows, rm.cols, structure=structure))
            assert choice is not None
            best[(i, j)] = choice

    def build(i: int, j: int) -> Expr:
        if i == j:
            return atoms[i]
        k = best[(i, j)][1]
        return Mul(build(i, k), build(k + 1, j))

    return build(0, n - 1), best[(0, n - 1)][0]


def term(m: Monomial, infer: Inferrer, ring: Semiring) -> tuple[Expr, int]:
    """A monomial as an expression (its product in the cheapest order, then its coefficient)."""
    e, cost = chain(m.atoms, infer)
    if m.coef != ring.one:
        e = Scale(m.coef, e)
        cost += infer(e).entries
    return e, cost


def total(terms: list[Monomial], infer: Inferrer, ring: Semiring) -> tuple[Expr, int]:
    """A sum of monomials as an expression, and its cost."""
    exprs, cost = [], 0
    for m in terms:
        e, c = term(m, infer, ring)
        exprs.append(e)
        cost += c
    out = exprs[0]
    for e in exprs[1:]:
        out = Add(out, e)
        cost += infer(out).entries
    return out, cost
