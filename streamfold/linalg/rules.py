"""Equivalence rules (seed 001 Fig. A.2): pairs of equal expressions, neither always better.

Each rule is a small function from a node to the nodes it may be rewritten to; the search
(:mod:`.search`) applies them anywhere in a statement and keeps the cheapest program. A rule
that checks meta-information (squareness, inner dimensions) is a *conditional* rewrite
(§5.3.3). A rule marked ``stable=False`` is algebraically sound but numerically worse: the
search reports what it would have found with it and never chooses it. The thesis's example is
INV-MUL, which turns least squares ``(XᵀX)⁻¹XᵀY`` for a square X into ``X⁻¹Y`` (§5.6.1:
"numerically unstable … analytically equivalent").

The list, with the thesis's names where it has them::

    MULT-ASSOC     (a·b)·c ↔ a·(b·c)
    DISTRIB        a·(b+c) ↔ a·b + a·c,  (a+b)·c ↔ a·c + b·c
    ADD-COMM       a + b → b + a              (the search's cache ignores order and grouping
    ADD-ASSOC      (a+b)+c ↔ a+(b+c)           of sums, so these only enable other rules)
    TRANS-ADD      (a+b)ᵀ ↔ aᵀ + bᵀ
    TRANS-MUL      (a·b)ᵀ ↔ bᵀ·aᵀ
    TRANS-STACK    [a, b]ᵀ ↔ [aᵀ; bᵀ]
    FACTORIZATION  a·b + c·d ↔ [a, c]·[b; d]
    WOODBURY       (a + b·c)⁻¹ → a⁻¹ − a⁻¹·b·(id + c·a⁻¹·b)⁻¹·c·a⁻¹
    INV-TRANS      (aᵀ)⁻¹ ↔ (a⁻¹)ᵀ
    INV-CANCEL     a⁻¹·a → id,  a·a⁻¹ → id
    INV-MUL        (a·b)⁻¹ → b⁻¹·a⁻¹  for square a, b        (unstable: never chosen)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from .ir import Add, Expr, HStack, Identity, Inv, Mul, Scale, Transpose, VStack
from .meta import Inferrer

RuleFn = Callable[[Expr, Inferrer], Iterator[Expr]]


@dataclass(frozen=True)
class Rule:
    name: str
    apply: RuleFn
    stable: bool = True


def mult_assoc(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Mul):
        if isinstance(e.left, Mul):
            yield Mul(e.left.left, Mul(e.left.right, e.right))
        if isinstance(e.right, Mul):
            yield Mul(Mul(e.left, e.right.left), e.right.right)


def _product(e: Expr) -> tuple[float, Expr, Expr] | None:
    """``e`` as ``coef · (left·right)``."""
    if isinstance(e, Mul):
        return 1.0, e.left, e.right
    if isinstance(e, Scale) and isinstance(e.arg, Mul):
        return e.coef, e.arg.left, e.arg.right
    return None


def _scaled(coef: float, e: Expr) -> Expr:
    return e if coef == 1.0 else Scale(coef, e)


def distrib(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Mul):
        if isinstance(e.right, Add):
            yield Add(Mul(e.left, e.right.left), Mul(e.left, e.right.right))
        if isinstance(e.left, Add):
            yield Add(Mul(e.left.left, e.right), Mul(e.left.right, e.right))
    if isinstance(e, Add):
        p, q = _product(e.left), _product(e.right)
        if p is not None and q is not None:
            (cp, a, b), (cq, c, d) = p, q
            if a == c:  # a·b + a·d → a·(b + d)
                yield Mul(a, Add(_scaled(cp, b), _scaled(cq, d)))
            if b == d:  # a·b + c·b → (a + c)·b
                yield Mul(Add(_scaled(cp, a), _scaled(cq, c)), b)


def add_comm(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Add):
        yield Add(e.right, e.left)


def add_assoc(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Add):
        if isinstance(e.left, Add):
            yield Add(e.left.left, Add(e.left.right, e.right))
        if isinstance(e.right, Add):
            yield Add(Add(e.left, e.right.left), e.right.right)


def trans_add(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Transpose) and isinstance(e.arg, Add):
        yield Add(Transpose(e.arg.left), Transpose(e.arg.right))
    if isinstance(e, Add) and isinstance(e.left, Transpose) and isinstance(e.right, Transpose):
        yield Transpose(Add(e.left.arg, e.right.arg))


def trans_mul(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Transpose) and isinstance(e.arg, Mul):
        yield Mul(Transpose(e.arg.right), Transpose(e.arg.left))
    if isinstance(e, Mul) and isinstance(e.left, Transpose) and isinstance(e.right, Transpose):
        yield Transpose(Mul(e.right.arg, e.left.arg))


def trans_stack(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Transpose) and isinstance(e.arg, HStack):
        yield VStack(Transpose(e.arg.left), Transpose(e.arg.right))
    if isinstance(e, Transpose) and isinstance(e.arg, VStack):
        yield HStack(Transpose(e.arg.left), Transpose(e.arg.right))
    if isinstance(e, VStack) and isinstance(e.left, Transpose) and isinstance(e.right, Transpose):
        yield Transpose(HStack(e.left.arg, e.right.arg))


def factorization(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Add):
        p, q = _product(e.left), _product(e.right)
        if p is not None and q is not None:
            (cp, a, b), (cq, c, d) = p, q
            yield Mul(HStack(_scaled(cp, a), _scaled(cq, c)), VStack(b, d))
    if isinstance(e, Mul) and isinstance(e.left, HStack) and isinstance(e.right, VStack):
        a, c, b, d = e.left.left, e.left.right, e.right.left, e.right.right
        if infer(a).cols == infer(b).rows:
            yield Add(Mul(a, b), Mul(c, d))


def woodbury(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Inv) and isinstance(e.arg, Add):
        for m1, low in ((e.arg.left, e.arg.right), (e.arg.right, e.arg.left)):
            if isinstance(low, Mul):
                m2, m3 = low.left, low.right
                k = infer(m2).cols
                a_inv = Inv(m1)
                inner = Inv(Add(Identity(k), Mul(m3, Mul(a_inv, m2))))
                yield Add(a_inv, Scale(-1.0, Mul(Mul(a_inv, m2), Mul(inner, Mul(m3, a_inv)))))


def inv_trans(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Inv) and isinstance(e.arg, Transpose):
        yield Transpose(Inv(e.arg.arg))
    if isinstance(e, Transpose) and isinstance(e.arg, Inv):
        yield Inv(Transpose(e.arg.arg))


def inv_cancel(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Mul):
        if isinstance(e.left, Inv) and e.left.arg == e.right:
            yield Identity(infer(e.right).rows)
        if isinstance(e.right, Inv) and e.right.arg == e.left:
            yield Identity(infer(e.left).rows)


def inv_mul(e: Expr, infer: Inferrer) -> Iterator[Expr]:
    if isinstance(e, Inv) and isinstance(e.arg, Mul):
        a, b = infer(e.arg.left), infer(e.arg.right)
        if a.rows == a.cols and b.rows == b.cols:
            yield Mul(Inv(e.arg.right), Inv(e.arg.left))


RULES: tuple[Rule, ...] = (
    Rule("MULT-ASSOC", mult_assoc),
    Rule("DISTRIB", distrib),
    Rule("ADD-COMM", add_comm),
    Rule("ADD-ASSOC", add_assoc),
    Rule("TRANS-ADD", trans_add),
    Rule("TRANS-MUL", trans_mul),
    Rule("TRANS-STACK", trans_stack),
    Rule("FACTORIZATION", factorization),
    Rule("WOODBURY", woodbury),
    Rule("INV-TRANS", inv_trans),
    Rule("INV-CANCEL", inv_cancel),
    Rule("INV-MUL", inv_mul, stable=False),
)
ARITHMETIC_ONLY = frozenset({"WOODBURY", "INV-TRANS", "INV-CANCEL", "INV-MUL"})
