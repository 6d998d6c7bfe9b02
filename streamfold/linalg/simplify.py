"""Simplification (seed 001 Fig. A.1): deterministic rewrites applied wherever they match.

They never grow an expression and are not searched: ``iterate`` unrolls into lets, lets bound
to a name or a constant are inlined and unused ones dropped, ``(mᵀ)ᵀ → m``, ``mᵀ → m`` for a
symmetric m, ``m·zeros → zeros``, ``m + zeros → m``, ``m·id → m``. Beyond the figure: constant
coefficients are folded and pulled out of products (every semiring here is commutative),
``(m⁻¹)⁻¹ → m`` and the transpose of a constant is computed.

A program leaves this phase as *statements*: each let it binds (and each output that is not
a plain name) becomes a named statement over inputs and earlier statements, so that every
later phase works on small expressions::

    iterate[2](A)(acc ⇒ acc·acc)      →      acc1 := A·A
                                             acc2 := acc1·acc1       (result = acc2)
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import LinalgError
from .api import Program
from .ir import (
    Add, Diag, Expr, Fill, Identity, Inv, Iterate, Let, Mul, Scale, Transpose, Var, Zeros, is_constant, substitute,
)
from .meta import ZERO, Inferrer, Meta
from .printer import show
from .semiring import Semiring


@dataclass(frozen=True, slots=True)
class Statement:
    name: str
    expr: Expr


@dataclass(frozen=True)
class Statements:
    """A program as named statements in evaluation order, and which name each output reads."""

    statements: tuple[Statement, ...]
    outputs: tuple[tuple[str, str], ...]  # (output, statement or input name)
    inputs: dict[str, Meta]

    def metas(self) -> dict[str, Meta]:
        infer = Inferrer(self.inputs)
        for s in self.statements:
            infer.bind(s.name, infer(s.expr))
        return infer.env


# -- iterate -----------------------------------------------------------------------------------------
def unroll(e: Expr) -> Expr:
    """ITERATE-UNROLL: ``iterate[n](m)(x ⇒ f)`` → ``let x1 = f[x:=m] in … let xn = f[x:=xn₋₁] in xn``."""

    def rule(node: Expr) -> Expr | None:
        if not isinstance(node, Iterate):
            return None
        cur, lets = node.init, []
        for i in range(1, node.times + 1):
            name = f"{node.var}{i}"
            lets.append((name, substitute(node.body, node.var, cur)))
            cur = Var(name)
        out: Expr = cur
        for name, value in reversed(lets):
            out = Let(name, value, out)
        return out

    return e.transform(rule)


# -- lets into statements ----------------------------------------------------------------------------
def to_statements(prog: Program) -> Statements:
    """Unroll, hoist every let into a named statement (inlining aliases), simplify each."""
    taken = set(prog.input_names) | {n for n, _ in prog.outputs}
    stmts: list[Statement] = []
    inputs = {d.name: d.meta() for d in prog.inputs}
    infer = Inferrer(inputs)

    def fresh(name: str) -> str:
        base, i = name, 2
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        return name

    def emit(name: str, value: Expr) -> Var:
        value = simplify(value, infer, prog.semiring)
        stmts.append(Statement(name, value))
        infer.bind(name, infer(value))
        return Var(name)

    def hoist(e: Expr, scope: dict[str, Expr]) -> Expr:
        if isinstance(e, Var):
            return scope.get(e.name, e)
        if isinstance(e, Let):
            value = simplify(hoist(e.value, scope), infer, prog.semiring)
            bound = value if isinstance(value, Var) or is_constant(value) else emit(fresh(e.name), value)
            return hoist(e.body, {**scope, e.name: bound})
        kids = e.children()
        return e.with_children(tuple(hoist(k, scope) for k in kids)) if kids else e

    outputs = []
    for out, expr in prog.outputs:
        taken.discard(out)
        e = simplify(hoist(unroll(expr), {}), infer, prog.semiring)
        if isinstance(e, Var) and (e.name in inputs or any(s.name == e.name for s in stmts)):
            outputs.append((out, e.name))
            taken.add(out)
        else:
            outputs.append((out, emit(fresh(out), e).name))
    return _live(Statements(tuple(stmts), tuple(outputs), inputs))


def _live(p: Statements) -> Statements:
    """Drop statements no output reads (Fig. A.1's elimination of unused lets)."""
    needed = {name for _, name in p.outputs}
    keep = []
    for s in reversed(p.statements):
        if s.name in needed:
            keep.append(s)
            needed |= {n.name for n in s.expr.walk() if isinstance(n, Var)}
    return Statements(tuple(reversed(keep)), p.outputs, p.inputs)


# -- local rules -------------------------------------------------------------------------------------
def simplify(e: Expr, infer: Inferrer, ring: Semiring) -> Expr:
    """Apply the simplification rules bottom-up until none matches."""
    while True:
        out = e.transform(lambda node: _rule(node, infer, ring))
        if out == e:
            return out
        e = out


def _rule(e: Expr, infer: Inferrer, ring: Semiring) -> Expr | None:
    if isinstance(e, Transpose):
        a = e.arg
        if isinstance(a, Transpose):
            return a.arg
        if isinstance(a, Zeros):
            return Zeros(a.cols, a.rows)
        if isinstance(a, Fill):
            return Fill(a.cols, a.rows, a.value)
        if isinstance(a, (Identity, Diag)):
            return a
        if isinstance(a, Scale):
            return Scale(a.coef, Transpose(a.arg))
        if infer(a).symmetric:
            return a
        return None
    if isinstance(e, Mul):
        ml, mr = infer(e.left), infer(e.right)
        if ml.structure == ZERO or mr.structure == ZERO:
            return Zeros(ml.rows, mr.cols)
        if isinstance(e.left, Identity):
            return e.right
        if isinstance(e.right, Identity):
            return e.left
        if isinstance(e.left, Scale):
            return Scale(e.left.coef, Mul(e.left.arg, e.right))
        if isinstance(e.right, Scale):
            return Scale(e.right.coef, Mul(e.left, e.right.arg))
        return None
    if isinstance(e, Add):
        if infer(e.left).structure == ZERO:
            return e.right
        if infer(e.right).structure == ZERO:
            return e.left
        return None
    if isinstance(e, Scale):
        if e.coef == ring.one:
            return e.arg
        if isinstance(e.arg, Zeros):
            return e.arg
        if e.coef == ring.zero:
            m = infer(e.arg)
            return Zeros(m.rows, m.cols)
        if isinstance(e.arg, Scale):
            return Scale(combine(ring, e.coef, e.arg.coef), e.arg.arg)
        return None
    if isinstance(e, Inv):
        if isinstance(e.arg, Inv):
            return e.arg.arg
        if isinstance(e.arg, Identity):
            return e.arg
        return None
    return None


def combine(ring: Semiring, a: float, b: float) -> float:
    """Two coefficients ⊗-multiplied (× arithmetic, + tropical, ∧ Boolean)."""
    if ring.name == "tropical":
        return a + b
    if ring.name == "boolean":
        return float(bool(a) and bool(b))
    return a * b


# -- semiring checks ---------------------------------------------------------------------------------
def check_semiring(prog: Program) -> None:
    """Refuse what the program's semiring cannot express (inverse; subtraction; scaling)."""
    ring = prog.semiring
    for _, expr in prog.outputs:
        for node in expr.walk():
            if isinstance(node, Inv) and not ring.inverse:
                raise LinalgError(f"the {ring.name} semiring has no matrix inverse: {show(node)}",
                                  code="INVERSE_UNSUPPORTED", params={"semiring": ring.name, "expression": show(node)},
                                  hint="the inverse exists only in the arithmetic semiring (seed 001 §5.3.2)")
            if isinstance(node, Scale) and not ring.negation and node.coef != ring.one:
                code = "SUBTRACTION_UNSUPPORTED" if node.coef < 0 else "SCALE_UNSUPPORTED"
                raise LinalgError(f"the {ring.name} semiring has no {'subtraction' if node.coef < 0 else 'scaling'}: "
                                  f"{show(node)}", code=code, params={"semiring": ring.name, "expression": show(node)},
                                  hint=f"{ring.name} ⊕ has no inverse; write the program with ⊕ (+) and ⊗ (@) only")
            if isinstance(node, (Fill, Diag)) and ring.name == "boolean" and node.value not in (0.0, 1.0):
                raise LinalgError(f"a Boolean constant must be 0 or 1, not {node.value}", code="BAD_CONSTANT",
                                  params={"semiring": ring.name, "value": node.value})
