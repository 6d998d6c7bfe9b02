"""streamfold.linalg: incremental linear algebra — Lago's factored deltas (seed 001 Ch. 5).

Write a matrix program once; every change to its inputs is kept as a low-rank product U·V and
pushed through the program's views by a derived trigger program, O(k·n²) per batch instead of
re-evaluation's O(n³)::

    from streamfold.linalg import compile_program, inv, matrix, program

    X = matrix("X", 4000, 2000)
    Y = matrix("Y", 4000, 1)
    ols = program({"beta": inv(X.T @ X) @ (X.T @ Y)})
    print(explain(ols))

Semirings: ``"arithmetic"`` (default), ``"boolean"`` (reachability), ``"tropical"`` (min-plus
shortest paths). ``streamfold linalg run`` maintains a program over directories of update
files; see docs/linalg.md.
"""

from __future__ import annotations

from .api import (
    InputDecl, Matrix, Program, diag, fill, hstack, identity, inv, iterate, let, matrix, ones, program, vect, vstack,
    zeros,
)
from .compiler import Compiled, compile_program
from .semiring import SEMIRINGS, Semiring


def explain(prog: Program, rank: int = 1, changes: str = "rows", format: str = "text") -> str:  # noqa: A002
    """The compiler's phases for ``prog`` and its trigger programs (see ``streamfold linalg explain``)."""
    from .explain import STRUCTURES, explain_json, explain_text

    compiled = compile_program(prog)
    structure = STRUCTURES[changes]
    return explain_json(compiled, rank, structure) if format == "json" else explain_text(compiled, rank, structure)


__all__ = [
    "SEMIRINGS", "Compiled", "InputDecl", "Matrix", "Program", "Semiring", "compile_program", "diag", "explain",
    "fill", "hstack", "identity", "inv", "iterate", "let", "matrix", "ones", "program", "vect", "vstack", "zeros",
]
