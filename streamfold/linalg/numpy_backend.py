"""The NumPy back-end: matrices that fit one machine, products by BLAS.

Matrices are ``ndarray``s of the semiring's dtype. A batch of row updates arrives as a
:class:`Selector` ``S`` (n×k, ``S[rows[j], j]`` = the semiring's one) times the k changed rows,
and products with a selector are gathers: ``Sᵀ·M = M[rows]``, ``M·S = M[:, rows]``, and the
update ``X ⊕= S·D`` is ``X[rows] ⊕= D`` — O(k·m) instead of O(n·m). A selector meets anything
else (a stack, a sum) as the dense matrix it stands for.

Updates happen in place, a slice of rows at a time (:meth:`Semiring.add_into`), so updating an
n×n view by a rank-k product needs no n×n temporary.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np

from ..errors import BatchError
from .semiring import Semiring

# A k×k capacitance (Woodbury) or a re-evaluated inverse whose condition number passes this is
# refused: the update would make the inverted matrix singular (or nearly: its inverse would
# carry no correct digit).
MAX_CONDITION = 1e12


@dataclass(frozen=True)
class Selector:
    """The n×k matrix with the semiring's one at ``(rows[j], j)`` (``transposed``: its k×n transpose)."""

    rows: np.ndarray
    n: int
    transposed: bool = False

    @property
    def shape(self) -> tuple[int, int]:
        k = len(self.rows)
        return (k, self.n) if self.transposed else (self.n, k)

    @property
    def T(self) -> Selector:  # noqa: N802
        return Selector(self.rows, self.n, not self.transposed)

    def dense(self, ring: Semiring) -> np.ndarray:
        out = ring.zeros(self.n, len(self.rows))
        out[self.rows, np.arange(len(self.rows))] = ring.one
        return out.T if self.transposed else out


class NumpyBackend:
    name = "numpy"

    def __init__(self, ring: Semiring) -> None:
        self.ring = ring

    def dense(self, a: np.ndarray | Selector) -> np.ndarray:
        return a.dense(self.ring) if isinstance(a, Selector) else a

    # -- constants -------------------------------------------------------------------------------
    def zeros(self, rows: int, cols: int) -> np.ndarray:
        return self.ring.zeros(rows, cols)

    def identity(self, n: int) -> np.ndarray:
        return self.ring.identity(n)

    def fill(self, rows: int, cols: int, value: float) -> np.ndarray:
        return self.ring.full(rows, cols, value)

    def diag(self, n: int, value: float) -> np.ndarray:
        return self.ring.diag(n, value)

    # -- operations ------------------------------------------------------------------------------
    def mul(self, a: np.ndarray | Selector, b: np.ndarray | Selector) -> np.ndarray:
        if isinstance(a, Selector) and a.transposed:  # Sᵀ·M: the rows of M
            return self.dense(b)[a.rows]
        if isinstance(b, Selector) and not b.transposed:  # M·S: the columns of M
            return self.dense(a)[:, b.rows]
        return self.ring.matmul(self.dense(a), self.dense(b))

    def add(self, a: np.ndarray | Selector, b: np.ndarray | Selector) -> np.ndarray:
        return self.ring.add(self.dense(a), self.dense(b))

    def scale(self, coef: float, a: np.ndarray | Selector) -> np.ndarray:
        return self.ring.scale(coef, self.dense(a))

    def transpose(self, a: np.ndarray | Selector) -> np.ndarray | Selector:
        return a.T

    def inv(self, a: np.ndarray | Selector) -> np.ndarray:
        m = self.dense(a)
        try:
            out = np.linalg.inv(m)
        except np.linalg.LinAlgError:
            raise _singular(m.shape[0]) from None
        if m.shape[0] <= 64:
            if np.linalg.cond(m) > MAX_CONDITION:
                raise _singular(m.shape[0])
        else:  # a probe instead of an O(n³) condition number: m·(m⁻¹·r) must give r back
            r = np.random.default_rng(0).standard_normal(m.shape[0])
            if np.linalg.norm(m @ (out @ r) - r) > 1e-6 * np.linalg.norm(r):
                raise _singular(m.shape[0])
        return out

    def hstack(self, a: np.ndarray | Selector, b: np.ndarray | Selector) -> np.ndarray:
        return np.hstack([self.dense(a), self.dense(b)])

    def vstack(self, a: np.ndarray | Selector, b: np.ndarray | Selector) -> np.ndarray:
        return np.vstack([self.dense(a), self.dense(b)])

    def products(self, x: np.ndarray, right: list[np.ndarray], left: list[np.ndarray]) -> \
            tuple[list[np.ndarray], list[np.ndarray]]:
        """``x·Tᵢ`` for each right operand and ``Sⱼ·x`` for each left one, reading x once: the
        right operands side by side, the left ones stacked, and x streamed a slice of rows at a
        time when there are both (each slice still in cache for the second product)."""
        ring = self.ring
        r = np.hstack([self.dense(t) for t in right]) if right else None
        s = np.vstack([self.dense(t) for t in left]) if left else None
        if r is not None and s is None:
            r_out, l_out = ring.matmul(x, r), None
        elif s is not None and r is None:
            r_out, l_out = None, ring.matmul(s, x)
        else:
            assert r is not None and s is not None
            step = max(16, (1 << 20) // (8 * max(1, x.shape[1])))  # a slice of about 1 MB: in cache for the second product
            r_out = np.empty((x.shape[0], r.shape[1]), dtype=np.result_type(x, r))
            l_out = None
            for start in range(0, x.shape[0], step):
                part = x[start:start + step]
                r_out[start:start + step] = ring.matmul(part, r)
                piece = ring.matmul(s[:, start:start + step], part)
                l_out = piece if l_out is None else ring.add(l_out, piece)
        return _split(r_out, [t.shape[1] for t in right], axis=1), _split(l_out, [t.shape[0] for t in left], axis=0)

    # -- views -----------------------------------------------------------------------------------
    def update(self, view: np.ndarray, u: np.ndarray | Selector, v: np.ndarray | Selector | None) -> np.ndarray:
        """``view ⊕= u·v`` (``view ⊕= u`` when v is None) in place; returns the view."""
        ring = self.ring
        if v is None:
            dense = self.dense(u)
            if ring.name == "arithmetic":
                view += dense
            else:
                view[...] = ring.add(view, dense)
        elif isinstance(u, Selector) and not u.transposed:
            ring.add_rows(view, u.rows, self.dense(v))
        elif isinstance(v, Selector) and v.transposed:
            ring.add_cols(view, v.rows, self.dense(u))
        else:
            ring.add_into(view, self.dense(u), self.dense(v))
        return view

    def materialize(self, a: np.ndarray | Selector) -> np.ndarray:
        """A view's value: an array that owns its memory (it is updated in place, and a transpose
        or a gather may share memory with another view)."""
        a = self.dense(a)
        if a.base is not None or not a.flags.writeable or not a.flags.c_contiguous:
            return np.array(a, copy=True, order="C")
        return a

    def to_numpy(self, a: np.ndarray | Selector) -> np.ndarray:
        return self.dense(a)

    def from_numpy(self, a: np.ndarray) -> np.ndarray:
        """A value of the back-end's own (a copy: views are updated in place)."""
        return np.array(a, dtype=self.ring.dtype, order="C", copy=True)

    def change(self, old: np.ndarray, new: np.ndarray) -> np.ndarray:
        return self.ring.change(old, new)

    def distance(self, a: np.ndarray, b: np.ndarray) -> float:
        """Relative difference of ``a`` from ``b`` (see :meth:`Semiring.distance`)."""
        return self.ring.distance(self.dense(a), self.dense(b))

    # -- files -----------------------------------------------------------------------------------
    def save(self, a: np.ndarray, stem: str) -> None:
        """Write a value as ``stem.npy`` (the caller publishes the directory it is in)."""
        np.save(stem + ".npy", self.dense(a))

    def load(self, stem: str) -> np.ndarray:
        return np.load(stem + ".npy")

    def thin_products(self) -> AbstractContextManager[object]:
        """The context a trigger program runs in: one BLAS thread. Its products are thin and
        bound by memory, which more threads do not widen; on a busy machine their
        synchronisation made such a product many times slower with two threads than with one
        (docs/journal.md, "Incremental linear algebra")."""
        try:
            from threadpoolctl import threadpool_limits
        except ImportError:  # pragma: no cover - a pinned dependency
            return nullcontext()
        return threadpool_limits(1, user_api="blas")

    def keep(self, a: np.ndarray | Selector) -> np.ndarray | Selector:
        """A value that must outlive the views it was computed from: NumPy's already does."""
        return a

    def release(self, a: object) -> None:
        """Nothing to free: NumPy arrays go with their last reference."""


def _split(a: np.ndarray | None, sizes: list[int], axis: int) -> list[np.ndarray]:
    if a is None:
        return []
    cuts = np.cumsum(sizes)[:-1]
    return list(np.split(a, cuts, axis=axis))


def _singular(n: int) -> BatchError:
    return BatchError(f"a {n}×{n} matrix to invert is singular (or too close to singular to invert exactly)",
                      code="NON_INVERTIBLE_UPDATE", params={"size": n},
                      hint="the inputs make an inverted matrix singular (e.g. XᵀX with fewer independent rows than "
                           "columns); this batch is not applied — fix or drop the files it names")
