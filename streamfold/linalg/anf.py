"""Administrative normal form (seed 001 §5.3.5, phase 1): one operation per statement.

Every operation gets a name, so every intermediate result becomes a materialised view the
trigger program can update. Operands are *atoms*: names, their transposes (free: BLAS reads a
transposed operand in place, so a transpose is no view of its own) and constants. Equal
operations are named once (common subexpression elimination: the ten ``Xᵀ·Y`` of an unrolled
gradient descent are one view). A statement keeps the name the program gave it; the operations
inside it get ``x0, x1, …``::

    beta := (Xᵀ·X)⁻¹·(Xᵀ·Y)      →      x0 := Xᵀ·X
                                        x1 := x0⁻¹
                                        x2 := Xᵀ·Y
                                        beta := x1·x2
"""

from __future__ import annotations

from dataclasses import dataclass

from .ir import CONSTANTS, Expr, Transpose, Var
from .meta import Inferrer, Meta
from .simplify import Statement, Statements


@dataclass(frozen=True)
class Anf:
    statements: tuple[Statement, ...]
    outputs: tuple[tuple[str, str], ...]  # (output, view or input name)
    inputs: dict[str, Meta]
    metas: dict[str, Meta]  # every input and view

    @property
    def views(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.statements)

    def statement(self, name: str) -> Statement:
        for s in self.statements:
            if s.name == name:
                return s
        raise KeyError(name)


def is_atom(e: Expr) -> bool:
    return isinstance(e, (Var, *CONSTANTS)) or (isinstance(e, Transpose) and isinstance(e.arg, Var))


def to_anf(prog: Statements) -> Anf:
    infer = Inferrer(prog.inputs)
    out: list[Statement] = []
    named: dict[Expr, str] = {}  # an operation → the view that computes it
    alias: dict[str, str] = {}  # a statement equal to an earlier view → that view
    taken = set(prog.inputs) | {s.name for s in prog.statements} | {o for o, _ in prog.outputs}
    counter = iter(range(10**9))

    def fresh() -> str:
        while True:
            name = f"x{next(counter)}"
            if name not in taken:
                taken.add(name)
                return name

    def rename(e: Expr) -> Expr:
        return e.transform(lambda n: Var(alias[n.name]) if isinstance(n, Var) and n.name in alias else None)

    def atom(e: Expr, name: str | None = None) -> Expr:
        """Statements for ``e``'s operations; returns the atom that stands for ``e``."""
        if is_atom(e):
            return e
        op = e.with_children(tuple(atom(k) for k in e.children()))
        if op in named:
            return Var(named[op])
        target = name or fresh()
        named[op] = target
        out.append(Statement(target, op))
        infer.bind(target, infer(op))
        return Var(target)

    for s in prog.statements:
        got = atom(rename(s.expr), s.name)
        if not (isinstance(got, Var) and got.name == s.name):
            if isinstance(got, Var):
                alias[s.name] = got.name
            else:  # the statement is an atom itself (a transpose of a name, a constant)
                out.append(Statement(s.name, got))
                infer.bind(s.name, infer(got))
    outputs = tuple((o, alias.get(v, v)) for o, v in prog.outputs)
    return Anf(tuple(out), outputs, dict(prog.inputs), dict(infer.env))
