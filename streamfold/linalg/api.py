"""The matrix-program API: Lago's language (seed 001 Fig. 5.4, sugar of Fig. 5.5) in Python.

A program is written with ordinary operators over declared inputs and compiled once::

    from streamfold.linalg import inv, matrix, program

    X = matrix("X", 4000, 2000)
    Y = matrix("Y", 4000, 1)
    ols = program({"beta": inv(X.T @ X) @ (X.T @ Y)})

``@`` is the semiring's product, ``+`` its sum, ``-`` and unary ``-`` the arithmetic ones
(refused under a semiring without an additive inverse), ``k * m`` a scaling, ``.T`` the
transpose; :func:`inv`, :func:`hstack`, :func:`vstack`, :func:`identity`, :func:`zeros`,
:func:`fill`, :func:`vect`, :func:`diag`, :func:`let` and :func:`iterate` are the rest of the
language. Nothing is evaluated here: a :class:`Matrix` only wraps an IR expression and the
declarations of the inputs it reads.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Union

from ..errors import LinalgError, UsageError
from .ir import (
    Add, Diag, Expr, Fill, HStack, Identity, Inv, Iterate, Let, Mul, Scale, Transpose, Var, VStack, Zeros,
)
from .meta import Meta
from .semiring import ARITHMETIC, Semiring, semiring as get_semiring

Number = Union[int, float]


@dataclass(frozen=True, slots=True)
class InputDecl:
    """A program input: a matrix of fixed shape that changes by streams of updates."""

    name: str
    rows: int
    cols: int
    symmetric: bool = False

    def meta(self) -> Meta:
        return Meta(self.rows, self.cols, self.symmetric)


class Matrix:
    """A matrix expression under construction (an IR expression and the inputs it reads)."""

    __slots__ = ("expr", "inputs")

    def __init__(self, expr: Expr, inputs: Mapping[str, InputDecl] | None = None) -> None:
        self.expr = expr
        self.inputs: dict[str, InputDecl] = dict(inputs or {})

    # -- operators -------------------------------------------------------------------------------
    def __add__(self, other: Matrix) -> Matrix:
        return _binary(Add, self, other)

    def __sub__(self, other: Matrix) -> Matrix:
        other = _matrix(other)
        return _binary(Add, self, Matrix(Scale(-1.0, other.expr), other.inputs))

    def __matmul__(self, other: Matrix) -> Matrix:
        return _binary(Mul, self, other)

    def __mul__(self, k: Number) -> Matrix:
        if isinstance(k, Matrix):
            raise UsageError("* between two matrices is element-wise, which Lago leaves out", code="ELEMENTWISE",
                             hint="use @ for the matrix product; element-wise products destroy low-rank deltas "
                                  "(seed 001 §5.3.2)")
        return Matrix(Scale(float(k), self.expr), self.inputs)

    __rmul__ = __mul__

    def __neg__(self) -> Matrix:
        return Matrix(Scale(-1.0, self.expr), self.inputs)

    @property
    def T(self) -> Matrix:  # noqa: N802 - NumPy's spelling
        return Matrix(Transpose(self.expr), self.inputs)

    def __repr__(self) -> str:
        from .printer import show

        return f"Matrix({show(self.expr)})"


def _matrix(m: object) -> Matrix:
    if not isinstance(m, Matrix):
        raise UsageError(f"expected a matrix, got {type(m).__name__}", code="NOT_A_MATRIX",
                         hint="build matrices with matrix(name, rows, cols) and the operators on them")
    return m


def _merge(*ms: Matrix) -> dict[str, InputDecl]:
    out: dict[str, InputDecl] = {}
    for m in ms:
        for name, decl in m.inputs.items():
            if name in out and out[name] != decl:
                raise LinalgError(f"input {name} is declared twice with different shapes", code="INPUT_REDECLARED",
                                  params={"name": name}, hint="declare each input once and reuse the Matrix")
            out[name] = decl
    return out


def _binary(node: type, a: Matrix, b: Matrix) -> Matrix:
    a, b = _matrix(a), _matrix(b)
    return Matrix(node(a.expr, b.expr), _merge(a, b))


# -- constructors ----------------------------------------------------------------------------------
def matrix(name: str, rows: int, cols: int, *, symmetric: bool = False) -> Matrix:
    """Declare an input matrix of ``rows`` × ``cols`` (``symmetric`` is meta-information the
    compiler may use: a symmetric matrix's transpose is itself)."""
    if not name.isidentifier():
        raise UsageError(f"matrix name {name!r} is not an identifier", code="BAD_NAME", params={"name": name},
                         hint="use letters, digits and _ (it names a --source)")
    if rows < 1 or cols < 1:
        raise UsageError(f"matrix {name} must have at least one row and column, not {rows}×{cols}",
                         code="BAD_SHAPE", params={"name": name, "rows": rows, "cols": cols})
    if symmetric and rows != cols:
        raise UsageError(f"matrix {name} is {rows}×{cols}, so it cannot be symmetric", code="BAD_SHAPE",
                         params={"name": name, "rows": rows, "cols": cols})
    decl = InputDecl(name, int(rows), int(cols), symmetric)
    return Matrix(Var(name), {name: decl})


def inv(m: Matrix) -> Matrix:
    m = _matrix(m)
    return Matrix(Inv(m.expr), m.inputs)


def hstack(*ms: Matrix) -> Matrix:
    """``[m₁, m₂, …]`` side by side (the thesis's ⇒)."""
    return _stack(HStack, ms)


def vstack(*ms: Matrix) -> Matrix:
    """``[m₁; m₂; …]`` one above the other (the thesis's ⇓)."""
    return _stack(VStack, ms)


def _stack(node: type, ms: tuple[Matrix, ...]) -> Matrix:
    if not ms:
        raise UsageError("stack of no matrices", code="EMPTY_STACK")
    out = _matrix(ms[0])
    for m in ms[1:]:
        out = _binary(node, out, m)
    return out


def identity(n: int) -> Matrix:
    """The semiring's identity ``id[n]``."""
    return Matrix(Identity(n))


def zeros(rows: int, cols: int) -> Matrix:
    """The semiring's zero ``zeros[r,c]``."""
    return Matrix(Zeros(rows, cols))


def fill(rows: int, cols: int, value: Number) -> Matrix:
    return Matrix(Fill(rows, cols, float(value)))


def ones(rows: int, cols: int) -> Matrix:
    return fill(rows, cols, 1)


def vect(cols: int, value: Number) -> Matrix:
    """``vect[c](s)``: a 1×c row of ``value``."""
    return Matrix(Fill(1, cols, float(value)))


def diag(n: int, value: Number) -> Matrix:
    """``diag[n][s]``: ``value`` on the diagonal of an n×n matrix."""
    return Matrix(Diag(n, float(value)))


def let(value: Matrix, body: Callable[[Matrix], Matrix], name: str | None = None) -> Matrix:
    """``let x = value in body(x)``; the name is the lambda's parameter unless given."""
    value = _matrix(value)
    var = name or _param_name(body, "x")
    out = _matrix(body(Matrix(Var(var))))
    return Matrix(Let(var, value.expr, out.expr), _merge(value, out))


def iterate(times: int, init: Matrix, body: Callable[[Matrix], Matrix], name: str | None = None) -> Matrix:
    """``iterate[times](init)(x ⇒ body(x))``: ``body`` applied ``times`` times from ``init``."""
    if times < 0:
        raise UsageError(f"iterate needs 0 or more steps, not {times}", code="BAD_ITERATIONS", params={"times": times})
    init = _matrix(init)
    var = name or _param_name(body, "acc")
    out = _matrix(body(Matrix(Var(var))))
    return Matrix(Iterate(int(times), init.expr, var, out.expr), _merge(init, out))


def _param_name(fn: Callable[..., object], default: str) -> str:
    try:
        params = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return default
    return params[0] if params else default


# -- programs --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Program:
    """Named result matrices over declared inputs, under one semiring."""

    outputs: tuple[tuple[str, Expr], ...]
    inputs: tuple[InputDecl, ...]
    semiring: Semiring = ARITHMETIC

    def input(self, name: str) -> InputDecl:
        for d in self.inputs:
            if d.name == name:
                return d
        raise KeyError(name)

    @property
    def input_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.inputs)


def program(outputs: Matrix | Mapping[str, Matrix], semiring: str | Semiring = "arithmetic") -> Program:
    """A program computing ``outputs`` (one matrix, named ``result``, or a name → matrix mapping)."""
    named = {"result": outputs} if isinstance(outputs, Matrix) else dict(outputs)
    if not named:
        raise UsageError("a program needs at least one output", code="NO_OUTPUT")
    ms = [_matrix(m) for m in named.values()]
    inputs = _merge(*ms)
    for name in named:
        if not name.isidentifier():
            raise UsageError(f"output name {name!r} is not an identifier", code="BAD_NAME", params={"name": name})
        if name in inputs:
            raise UsageError(f"output {name} has the name of an input", code="BAD_NAME", params={"name": name},
                             hint="give the output another name")
    return Program(tuple((n, m.expr) for n, m in named.items()), tuple(inputs[k] for k in sorted(inputs)),
                   get_semiring(semiring))
