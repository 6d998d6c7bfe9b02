"""The matrix-program IR: Lago's core language (seed 001 Fig. 5.4) as immutable nodes.

An expression is a tree of frozen dataclasses compared and hashed by value, so a rewrite can
say ``assert rewritten == Mul(Var("X"), Var("u"))`` and a search can keep visited programs in
a set. Matrix operations are the thesis's: ``Mul`` (·, the semiring's ⊗-product), ``Add``
(⊕), ``Transpose`` (ᵀ), ``Inv`` (⁻¹), ``HStack`` (⇒) and ``VStack`` (⇓, sugar in the thesis,
a node here so that its delta and cost need no transposes), ``Scale`` (k·m, the thesis's
``diag[rows(m)][k]·m``), the constants ``Fill`` (``fill``/``vect``), ``Diag``, and the
semiring's own ``Zeros`` and ``Identity``; ``Let`` and ``Iterate`` bind names.

Every dimension is a concrete integer: a program is compiled for the shapes of its inputs, as
a database plans a query for its relations' cardinalities. Nodes carry no meta-information;
:mod:`.meta` infers it (dimensions, symmetry, rank, structure, cost) bottom-up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields


@dataclass(frozen=True, slots=True)
class Expr:
    """A matrix expression."""

    def children(self) -> tuple[Expr, ...]:
        return tuple(getattr(self, f.name) for f in fields(self) if isinstance(getattr(self, f.name), Expr))

    def with_children(self, kids: tuple[Expr, ...]) -> Expr:
        """This node with its matrix children replaced, in order."""
        values = []
        it = iter(kids)
        for f in fields(self):
            v = getattr(self, f.name)
            values.append(next(it) if isinstance(v, Expr) else v)
        return type(self)(*values)

    def walk(self) -> Iterator[Expr]:
        """This node and every node below it, parents first."""
        yield self
        for c in self.children():
            yield from c.walk()

    def transform(self, fn: Callable[[Expr], Expr | None]) -> Expr:
        """Rebuild bottom-up; ``fn`` returns a replacement for a node, or None to keep it."""
        kids = self.children()
        node = self.with_children(tuple(k.transform(fn) for k in kids)) if kids else self
        out = fn(node)
        return node if out is None else out

    def size(self) -> int:
        return sum(1 for _ in self.walk())


# -- leaves ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Var(Expr):
    """A named matrix: a program input, a let-bound name, a view, or a trigger variable."""

    name: str


@dataclass(frozen=True, slots=True)
class Zeros(Expr):
    """The semiring's zero everywhere (0; false; +∞ under min-plus)."""

    rows: int
    cols: int


@dataclass(frozen=True, slots=True)
class Identity(Expr):
    """The semiring's one on the diagonal and its zero elsewhere (``id[n]``)."""

    n: int


@dataclass(frozen=True, slots=True)
class Fill(Expr):
    """Every entry ``value`` (``fill[r,c](s)``; ``vect[c](s)`` is ``Fill(1, c, s)``)."""

    rows: int
    cols: int
    value: float


@dataclass(frozen=True, slots=True)
class Diag(Expr):
    """``value`` on the diagonal, the semiring's zero elsewhere (``diag[n][s]``)."""

    n: int
    value: float


# -- operations ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Add(Expr):
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Mul(Expr):
    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class Scale(Expr):
    """``coef · arg``: every entry ⊗-multiplied by a constant (−1 gives subtraction)."""

    coef: float
    arg: Expr


@dataclass(frozen=True, slots=True)
class Transpose(Expr):
    arg: Expr


@dataclass(frozen=True, slots=True)
class Inv(Expr):
    arg: Expr


@dataclass(frozen=True, slots=True)
class HStack(Expr):
    """``[left, right]``: the thesis's ⇒."""

    left: Expr
    right: Expr


@dataclass(frozen=True, slots=True)
class VStack(Expr):
    """``[left; right]``: the thesis's ⇓."""

    left: Expr
    right: Expr


# -- binding ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Let(Expr):
    """``let name = value in body``."""

    name: str
    value: Expr
    body: Expr


@dataclass(frozen=True, slots=True)
class Iterate(Expr):
    """``iterate[times](init)(var ⇒ body)``: ``body`` applied ``times`` times, starting at ``init``."""

    times: int
    init: Expr
    var: str
    body: Expr


OPERATIONS: tuple[type[Expr], ...] = (Add, Mul, Scale, Transpose, Inv, HStack, VStack)
CONSTANTS: tuple[type[Expr], ...] = (Zeros, Identity, Fill, Diag)
NODES: tuple[type[Expr], ...] = (Var, *CONSTANTS, *OPERATIONS, Let, Iterate)


def is_constant(e: Expr) -> bool:
    return isinstance(e, CONSTANTS)


def free_vars(e: Expr) -> set[str]:
    """Names ``e`` reads that it does not bind itself."""
    if isinstance(e, Var):
        return {e.name}
    if isinstance(e, Let):
        return free_vars(e.value) | (free_vars(e.body) - {e.name})
    if isinstance(e, Iterate):
        return free_vars(e.init) | (free_vars(e.body) - {e.var})
    out: set[str] = set()
    for c in e.children():
        out |= free_vars(c)
    return out


def substitute(e: Expr, name: str, value: Expr) -> Expr:
    """``e[name := value]``, respecting the scope of inner bindings of the same name."""
    if isinstance(e, Var):
        return value if e.name == name else e
    if isinstance(e, Let):
        body = e.body if e.name == name else substitute(e.body, name, value)
        return Let(e.name, substitute(e.value, name, value), body)
    if isinstance(e, Iterate):
        body = e.body if e.var == name else substitute(e.body, name, value)
        return Iterate(e.times, substitute(e.init, name, value), e.var, body)
    kids = e.children()
    return e.with_children(tuple(substitute(k, name, value) for k in kids)) if kids else e


def occurrences(e: Expr, name: str) -> int:
    """How many times ``e`` reads the free name ``name``."""
    if isinstance(e, Var):
        return int(e.name == name)
    if isinstance(e, Let):
        return occurrences(e.value, name) + (0 if e.name == name else occurrences(e.body, name))
    if isinstance(e, Iterate):
        return occurrences(e.init, name) + (0 if e.var == name else occurrences(e.body, name))
    return sum(occurrences(c, name) for c in e.children())


def neg(e: Expr) -> Expr:
    return Scale(-1.0, e)
