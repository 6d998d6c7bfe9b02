"""Meta-information, inferred bottom-up like types (seed 001 §5.3.4, Figs. 5.9, A.3–A.5).

Every expression has a :class:`Meta`: its dimensions (Fig. 5.9), whether it is symmetric
(Fig. A.3), an upper bound on its rank (Fig. A.5) and its structure (Fig. A.4: zero, identity,
diagonal, or a *selector* — a matrix whose columns are unit vectors, which is what a batch of
row updates factors into: ``ΔX = S·D`` with ``S`` n×k selecting the k rows touched).

The dimension rules are also the type checker: a product whose inner dimensions differ, a sum
of differently shaped matrices, the inverse of a non-square matrix are refused with
``DIMENSION_MISMATCH``/``NOT_SQUARE`` naming both shapes.

**Cost** (Fig. 5.9) counts arithmetic operations: ``add`` r·c, a product (r×m)(m×c) r·m·c, a
stack r·(c₁+c₂), ``diag[n]`` n², ``fill[r,c]`` r·c; beyond the figure, an inverse n³ and a
scaling r·c. Two departures, both because the back-ends work that way: a transpose costs
nothing (BLAS reads a transposed operand in place; the thesis charges r·c), and a product with
a selector costs its output's entries (it gathers rows instead of multiplying). The cost of an
expression counts each distinct subexpression once, as the trigger program computes it once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from ..errors import LinalgError, did_you_mean
from .ir import Add, Diag, Expr, Fill, HStack, Identity, Inv, Let, Mul, Scale, Transpose, Var, VStack, Zeros
from .printer import show

DENSE, ZERO, IDENTITY, DIAGONAL, SELECTOR, SELECTOR_T = "dense", "zero", "identity", "diagonal", "selector", "selector_t"


@dataclass(frozen=True, slots=True)
class Meta:
    rows: int
    cols: int
    symmetric: bool = False
    rank: int = -1  # an upper bound; -1 means min(rows, cols)
    structure: str = DENSE

    def __post_init__(self) -> None:
        if self.rank < 0 or self.rank > min(self.rows, self.cols):
            object.__setattr__(self, "rank", min(self.rows, self.cols))

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    @property
    def entries(self) -> int:
        return self.rows * self.cols

    def describe(self) -> str:
        parts = [f"{self.rows}×{self.cols}"]
        if self.symmetric:
            parts.append("symmetric")
        if self.structure != DENSE:
            parts.append(self.structure)
        if self.rank < min(self.rows, self.cols):
            parts.append(f"rank ≤ {self.rank}")
        return ", ".join(parts)


def shape_text(m: Meta) -> str:
    return f"{m.rows}×{m.cols}"


def _mismatch(what: str, e: Expr, a: Meta, b: Meta, hint: str) -> LinalgError:
    return LinalgError(f"{what}: {shape_text(a)} and {shape_text(b)} in {show(e)}", code="DIMENSION_MISMATCH",
                       params={"operation": type(e).__name__, "left": list(a.shape), "right": list(b.shape),
                               "expression": show(e)}, hint=hint)


class Inferrer:
    """Meta-information of expressions over an environment of named matrices, memoised."""

    def __init__(self, env: Mapping[str, Meta]) -> None:
        self.env = dict(env)
        self._memo: dict[Expr, Meta] = {}

    def bind(self, name: str, meta: Meta) -> None:
        self.env[name] = meta

    def __call__(self, e: Expr) -> Meta:
        got = self._memo.get(e)
        if got is None:
            got = self._infer(e)
            self._memo[e] = got
        return got

    def _infer(self, e: Expr) -> Meta:
        if isinstance(e, Var):
            if e.name not in self.env:
                raise LinalgError(f"unknown matrix {e.name}", code="UNKNOWN_MATRIX", params={"name": e.name},
                                  hint=did_you_mean(e.name, self.env) or "declare it with matrix(name, rows, cols)")
            return self.env[e.name]
        if isinstance(e, Zeros):
            return Meta(e.rows, e.cols, e.rows == e.cols, 0, ZERO)
        if isinstance(e, Identity):
            return Meta(e.n, e.n, True, e.n, IDENTITY)
        if isinstance(e, Fill):
            return Meta(e.rows, e.cols, e.rows == e.cols, 1)
        if isinstance(e, Diag):
            return Meta(e.n, e.n, True, e.n, DIAGONAL)
        if isinstance(e, Add):
            a, b = self(e.left), self(e.right)
            if a.shape != b.shape:
                raise _mismatch("a sum of matrices of different shapes", e, a, b,
                                "both sides of + must have the same rows and columns")
            structure = b.structure if a.structure == ZERO else a.structure if b.structure == ZERO else DENSE
            return Meta(a.rows, a.cols, a.symmetric and b.symmetric, a.rank + b.rank, structure)
        if isinstance(e, Mul):
            a, b = self(e.left), self(e.right)
            if a.cols != b.rows:
                raise _mismatch("a product whose inner dimensions differ", e, a, b,
                                f"the left side has {a.cols} columns, the right {b.rows} rows; "
                                "transpose one side (.T) or check the input's declared shape")
            return Meta(a.rows, b.cols, _symmetric_product(e, a, b), min(a.rank, b.rank), _product_structure(a, b))
        if isinstance(e, Scale):
            return self(e.arg)
        if isinstance(e, Transpose):
            a = self(e.arg)
            flipped = {SELECTOR: SELECTOR_T, SELECTOR_T: SELECTOR}.get(a.structure, a.structure)
            return Meta(a.cols, a.rows, a.symmetric, a.rank, flipped)
        if isinstance(e, Inv):
            a = self(e.arg)
            if a.rows != a.cols:
                raise LinalgError(f"the inverse of a non-square {shape_text(a)} matrix: {show(e)}", code="NOT_SQUARE",
                                  params={"shape": list(a.shape), "expression": show(e)},
                                  hint="only square matrices have an inverse; for least squares invert Xᵀ·X")
            return Meta(a.rows, a.cols, a.symmetric, a.rows,
                        a.structure if a.structure in (IDENTITY, DIAGONAL) else DENSE)
        if isinstance(e, HStack):
            a, b = self(e.left), self(e.right)
            if a.rows != b.rows:
                raise _mismatch("a horizontal stack of matrices with different row counts", e, a, b,
                                "hstack needs the same number of rows on both sides")
            return Meta(a.rows, a.cols + b.cols, False, a.rank + b.rank)
        if isinstance(e, VStack):
            a, b = self(e.left), self(e.right)
            if a.cols != b.cols:
                raise _mismatch("a vertical stack of matrices with different column counts", e, a, b,
                                "vstack needs the same number of columns on both sides")
            return Meta(a.rows + b.rows, a.cols, False, a.rank + b.rank)
        if isinstance(e, Let):
            inner = Inferrer({**self.env, e.name: self(e.value)})
            return inner(e.body)
        raise LinalgError(f"no meta-information rule for {type(e).__name__}", code="INTERNAL")

    # -- cost --------------------------------------------------------------------------------------
    def op_cost(self, e: Expr) -> int:
        """The arithmetic operations of this node alone (its children already computed)."""
        if isinstance(e, (Var, Zeros, Transpose, Identity)):
            return 0
        m = self(e)
        if isinstance(e, (Fill, Diag, Scale, Add)):
            return m.entries
        if isinstance(e, Mul):
            a, b = self(e.left), self(e.right)
            if a.structure in (IDENTITY, ZERO) or b.structure in (IDENTITY, ZERO):
                return 0
            if a.structure in (SELECTOR, SELECTOR_T, DIAGONAL) or b.structure in (SELECTOR, SELECTOR_T, DIAGONAL):
                return m.entries
            return a.rows * a.cols * b.cols
        if isinstance(e, Inv):
            return m.rows ** 3
        if isinstance(e, (HStack, VStack)):
            return m.entries
        return 0

    def cost(self, *exprs: Expr, done: set[Expr] | None = None) -> int:
        """Operations to compute ``exprs``, each distinct subexpression once (and none in ``done``)."""
        seen: set[Expr] = set() if done is None else done
        total = 0
        stack = list(exprs)
        while stack:
            e = stack.pop()
            if e in seen:
                continue
            seen.add(e)
            total += self.op_cost(e)
            stack.extend(e.children())
        return total


def _symmetric_product(e: Mul, a: Meta, b: Meta) -> bool:
    """Aᵀ·A and A·Aᵀ (Gram matrices), and a symmetric matrix times itself (Fig. A.3's mᵏ)."""
    left, right = e.left, e.right
    if isinstance(left, Transpose) and left.arg == right:
        return True
    if isinstance(right, Transpose) and right.arg == left:
        return True
    if left == right and a.symmetric:
        return True
    return (a.structure in (IDENTITY, DIAGONAL) and b.symmetric and b.structure in (IDENTITY, DIAGONAL))


def _product_structure(a: Meta, b: Meta) -> str:
    if a.structure == ZERO or b.structure == ZERO:
        return ZERO
    if a.structure == IDENTITY:
        return b.structure
    if b.structure == IDENTITY:
        return a.structure
    if a.structure == DIAGONAL and b.structure == DIAGONAL:
        return DIAGONAL
    return DENSE


def with_rank(m: Meta, rank: int) -> Meta:
    return replace(m, rank=rank)
