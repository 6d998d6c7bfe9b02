"""Semirings for ⊕ and ⊗ (seed 001 §5.3.2, Figs. 5.6–5.7), with their NumPy kernels.

The delta rules only use that ⊗ distributes over ⊕ and that ⊕ is associative and commutative,
so one trigger program serves every semiring: a view is updated as ``X ← X ⊕ U⊗V``. What a
semiring lacks is refused, never approximated:

- **arithmetic** ⟨ℝ, +, ×⟩: everything, including subtraction, deletions (negative changes)
  and the inverse (maintained with Woodbury's formula).
- **boolean** ⟨{0,1}, ∨, ∧⟩: k-hop reachability. No additive inverse, so no deletions and no
  subtraction; no inverse. Exact: no rounding, no drift.
- **tropical** ⟨ℝ∪{+∞}, min, +⟩: k-hop shortest paths. An update can only lower a distance
  (⊕ is min); raising one is a deletion and is refused; no inverse.

Kernels: arithmetic and Boolean products are BLAS products (Boolean through float32, exact for
inner dimensions below 2²⁴); the min-plus product loops over the smallest of the three
dimensions with vectorised ``np.minimum`` (there is no BLAS for it — the thesis found the same,
§5.6.2), so a thin factor costs O(k·n²) like any other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UsageError

_CHUNK = 512  # rows per slice of an in-place update (its temporary stays in cache)
_THIN = 32


@dataclass(frozen=True)
class Semiring:
    name: str
    zero: float
    one: float
    negation: bool  # ⊕ has an inverse: subtraction, deletions
    inverse: bool  # the matrix inverse is defined (and maintained by Woodbury)
    exact: bool  # results carry no rounding error, so no drift

    @property
    def dtype(self) -> type:
        return np.float64

    # -- constructors ----------------------------------------------------------------------------
    def zeros(self, rows: int, cols: int) -> np.ndarray:
        return np.full((rows, cols), self.zero, dtype=self.dtype)

    def identity(self, n: int) -> np.ndarray:
        out = self.zeros(n, n)
        np.fill_diagonal(out, self.one)
        return out

    def full(self, rows: int, cols: int, value: float) -> np.ndarray:
        return np.full((rows, cols), self.coerce(value), dtype=self.dtype)

    def diag(self, n: int, value: float) -> np.ndarray:
        out = self.zeros(n, n)
        np.fill_diagonal(out, self.coerce(value))
        return out

    def coerce(self, value: float) -> float:
        return float(value)

    # -- operations ------------------------------------------------------------------------------
    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return a + b

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if a.shape[0] <= _THIN < a.shape[1] and b.shape[1] > _THIN:
            # A few rows times a large matrix: OpenBLAS threads this shape badly (measured many
            # times slower than the same product transposed, with two threads on a busy machine).
            return (b.T @ a.T).T
        return a @ b

    def scale(self, coef: float, a: np.ndarray) -> np.ndarray:
        return coef * a

    def add_into(self, target: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
        """``target ⊕= u⊗v`` in place, a slice of rows at a time (no n×m temporary)."""
        for start in range(0, target.shape[0], _CHUNK):
            stop = min(target.shape[0], start + _CHUNK)
            target[start:stop] += u[start:stop] @ v

    def add_rows(self, target: np.ndarray, rows: np.ndarray, v: np.ndarray) -> None:
        """``target[rows] ⊕= v``: the update by a selector factor (rows distinct)."""
        target[rows] += v

    def add_cols(self, target: np.ndarray, cols: np.ndarray, u: np.ndarray) -> None:
        target[:, cols] += u

    def change(self, old: np.ndarray, new: np.ndarray) -> np.ndarray:
        """A D with ``old ⊕ D = new`` (new − old; under an idempotent ⊕, new where it differs)."""
        return new - old

    def distance(self, a: np.ndarray, b: np.ndarray) -> float:
        """Relative difference of ``a`` from the reference ``b`` (Frobenius norms)."""
        scale = float(np.linalg.norm(b))
        diff = float(np.linalg.norm(a - b))
        return diff / scale if scale > 0 else diff


class _Boolean(Semiring):
    @property
    def dtype(self) -> type:
        return np.bool_

    def coerce(self, value: float) -> float:
        return bool(value)  # type: ignore[return-value]

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.logical_or(a, b)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (a.astype(np.float32) @ b.astype(np.float32)) > 0

    def scale(self, coef: float, a: np.ndarray) -> np.ndarray:
        return a.copy() if coef else np.zeros_like(a)

    def add_into(self, target: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
        vf = v.astype(np.float32)
        for start in range(0, target.shape[0], _CHUNK):
            stop = min(target.shape[0], start + _CHUNK)
            target[start:stop] |= (u[start:stop].astype(np.float32) @ vf) > 0

    def add_rows(self, target: np.ndarray, rows: np.ndarray, v: np.ndarray) -> None:
        target[rows] |= v

    def add_cols(self, target: np.ndarray, cols: np.ndarray, u: np.ndarray) -> None:
        target[:, cols] |= u

    def change(self, old: np.ndarray, new: np.ndarray) -> np.ndarray:
        return new & ~old

    def distance(self, a: np.ndarray, b: np.ndarray) -> float:
        return float(np.count_nonzero(a != b)) / max(1, b.size)


class _Tropical(Semiring):
    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.minimum(a, b)

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return minplus(a, b)

    def scale(self, coef: float, a: np.ndarray) -> np.ndarray:
        return a + coef

    def add_into(self, target: np.ndarray, u: np.ndarray, v: np.ndarray) -> None:
        for start in range(0, target.shape[0], _CHUNK):
            stop = min(target.shape[0], start + _CHUNK)
            np.minimum(target[start:stop], minplus(u[start:stop], v), out=target[start:stop])

    def add_rows(self, target: np.ndarray, rows: np.ndarray, v: np.ndarray) -> None:
        target[rows] = np.minimum(target[rows], v)

    def add_cols(self, target: np.ndarray, cols: np.ndarray, u: np.ndarray) -> None:
        target[:, cols] = np.minimum(target[:, cols], u)

    def change(self, old: np.ndarray, new: np.ndarray) -> np.ndarray:
        return np.where(new < old, new, np.inf)

    def distance(self, a: np.ndarray, b: np.ndarray) -> float:
        fa, fb = np.isfinite(a), np.isfinite(b)
        if not np.array_equal(fa, fb):
            return float("inf")
        return Semiring.distance(self, np.where(fa, a, 0.0), np.where(fb, b, 0.0))


def minplus(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The min-plus product: ``out[i,j] = min_l a[i,l] + b[l,j]``, looping over the smallest dimension."""
    r, m = a.shape
    c = b.shape[1]
    if m == 0:
        return np.full((r, c), np.inf)
    if m <= min(r, c):
        out = a[:, :1] + b[:1, :]
        tmp = np.empty_like(out)
        for k in range(1, m):
            np.add(a[:, k:k + 1], b[k:k + 1, :], out=tmp)
            np.minimum(out, tmp, out=out)
        return out
    if c <= r:
        out = np.empty((r, c))
        for j in range(c):
            out[:, j] = (a + b[:, j][None, :]).min(axis=1)
        return out
    out = np.empty((r, c))
    for i in range(r):
        out[i, :] = (a[i, :][:, None] + b).min(axis=0)
    return out


ARITHMETIC = Semiring("arithmetic", 0.0, 1.0, negation=True, inverse=True, exact=False)
BOOLEAN = _Boolean("boolean", 0.0, 1.0, negation=False, inverse=False, exact=True)
TROPICAL = _Tropical("tropical", float("inf"), 0.0, negation=False, inverse=False, exact=False)
SEMIRINGS: dict[str, Semiring] = {s.name: s for s in (ARITHMETIC, BOOLEAN, TROPICAL)}


def semiring(name: str | Semiring) -> Semiring:
    if isinstance(name, Semiring):
        return name
    try:
        return SEMIRINGS[name.lower()]
    except KeyError:
        raise UsageError(f"unknown semiring {name!r}", code="UNKNOWN_SEMIRING", params={"semiring": name},
                         hint=f"use one of {', '.join(SEMIRINGS)}") from None
