"""Delta derivation (seed 001 Fig. 5.8; §5.3.5, phase 2).

For each statement ``x := op(a, b)`` of the ANF program, in order, the rules give ``δx`` in
terms of the old views and the deltas of the operands, building the map M from a view to its
delta (``None`` for a view whose operands do not change: DELTA-VAR-NEQ and the constants'
rules give zeros, and simplification removes them)::

    DELTA-ADD    δ(a + b)  = δa + δb
    DELTA-MULT   δ(a·b)    = δa·b + a·δb + δa·δb
    DELTA-TRANS  δ(aᵀ)     = (δa)ᵀ
    DELTA-INV    δ(a⁻¹)    = (a + δa)⁻¹ − a⁻¹        (a⁻¹ is the view x itself)
    DELTA-STACK  δ[a, b]   = [δa, δb]                (and δ[a; b] = [δa; δb])
    DELTA-SCALE  δ(k·a)    = k·δa

Every rule holds in any semiring whose ⊗ distributes over ⊕ — only DELTA-INV subtracts, and
the inverse exists only in the arithmetic semiring. A delta refers to its operands' deltas by
the names ``δa``; the factorization phase replaces each by its factored form.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ..errors import LinalgError
from .anf import Anf
from .ir import CONSTANTS, Add, Expr, HStack, Inv, Mul, Scale, Transpose, Var, VStack, Zeros
from .meta import Inferrer
from .printer import show


def delta_name(view: str) -> str:
    return f"δ{view}"


@dataclass(frozen=True)
class Derived:
    """The delta of each view (None: it does not change), in the ANF program's order."""

    deltas: tuple[tuple[str, Expr | None], ...]

    def of(self, view: str) -> Expr | None:
        return dict(self.deltas)[view]


def derive(anf: Anf, changed: Collection[str]) -> Derived:
    """The delta program of ``anf`` when the inputs named in ``changed`` change."""
    moving = set(changed)  # names whose delta is not zero
    out: list[tuple[str, Expr | None]] = []

    def d(e: Expr) -> Expr | None:
        """Δ of an atom: its delta variable, or None."""
        if isinstance(e, Var):
            return Var(delta_name(e.name)) if e.name in moving else None
        if isinstance(e, Transpose):
            inner = d(e.arg)
            return None if inner is None else Transpose(inner)
        if isinstance(e, CONSTANTS):
            return None  # DELTA-VECT, DELTA-DIAG
        raise LinalgError(f"not an atom: {show(e)}", code="INTERNAL")

    infer = Inferrer(anf.metas)

    def zeros_like(e: Expr) -> Expr:
        m = infer(e)
        return Zeros(m.rows, m.cols)

    for s in anf.statements:
        e = s.expr
        delta: Expr | None
        if isinstance(e, Add):
            da, db = d(e.left), d(e.right)
            delta = da if db is None else db if da is None else Add(da, db)
        elif isinstance(e, Mul):
            da, db = d(e.left), d(e.right)
            terms: list[Expr] = []
            if da is not None:
                terms.append(Mul(da, e.right))
            if db is not None:
                terms.append(Mul(e.left, db))
            if da is not None and db is not None:
                terms.append(Mul(da, db))
            delta = _sum(terms)
        elif isinstance(e, Scale):
            da = d(e.arg)
            delta = None if da is None else Scale(e.coef, da)
        elif isinstance(e, Inv):
            da = d(e.arg)
            delta = None if da is None else Add(Inv(Add(e.arg, da)), Scale(-1.0, Var(s.name)))
        elif isinstance(e, (HStack, VStack)):
            da, db = d(e.left), d(e.right)
            delta = None if da is None and db is None else type(e)(
                da if da is not None else zeros_like(e.left), db if db is not None else zeros_like(e.right))
        else:  # an atom bound to a name: a transpose, or a constant
            delta = d(e)
        if delta is not None:
            moving.add(s.name)
        out.append((s.name, delta))
    return Derived(tuple(out))


def _sum(terms: list[Expr]) -> Expr | None:
    if not terms:
        return None
    out = terms[0]
    for t in terms[1:]:
        out = Add(out, t)
    return out
