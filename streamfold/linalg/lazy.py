"""Views kept as ``base ⊕ U·V`` until a dense update pays: deferred low-rank updates.

Updating an n×n view by a rank-k product streams the whole view through memory twice for
little arithmetic (k·n² operations), and a trigger program's other work is of the same kind: a
few matrix–vector products per view. So a view's pending updates are kept factored, the way the
thesis keeps deltas (a step beyond it: §5.3.5 updates every view each trigger): a view is
``base ⊕ U·V`` with ``U = [U₁, U₂, …]`` and ``V = [V₁; V₂; …]`` the updates since the base.

- A product with a thin operand reads it as it is: ``(B ⊕ U·V)·T = B·T ⊕ U·(V·T)`` and
  ``T·(B ⊕ U·V) = T·B ⊕ (T·U)·V`` (distributivity, so in every semiring).
- A transpose transposes the parts; an update by a selector (rows replaced) goes to the base.
- Anything else (a sum, an inverse, a stack, a dense update, writing the view out) first
  *flushes*: ``B ⊕= U·V``, one product of rank t — after ``max_rank`` pending ranks, a view is
  flushed anyway, so it stays thin to read.

The wrapper works for any back-end: it only calls the back-end's own operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .numpy_backend import Selector

MAX_RANK = 32  # pending rank at which a view is flushed
MIN_ENTRIES = 250_000  # views smaller than this are updated at once (a 500×500 matrix)


@dataclass
class Pending:
    base: Any
    us: list[Any] = field(default_factory=list)
    vs: list[Any] = field(default_factory=list)
    rank: int = 0
    _stacked: tuple[Any, Any] | None = None

    @property
    def shape(self) -> tuple[int, int]:
        return self.base.shape  # type: ignore[no-any-return]


@dataclass
class Transposed:
    """The transpose of a pending view: it reads the view, and flushing it flushes the view
    (the transposed base shares the view's memory, so it must never be updated itself)."""

    of: Pending

    @property
    def shape(self) -> tuple[int, int]:
        rows, cols = self.of.shape
        return (cols, rows)


def _thin(a: Any, limit: int) -> bool:
    return min(a.shape) <= limit


class LazyBackend:
    """Wraps a back-end; views of at least ``min_entries`` entries defer their low-rank updates."""

    def __init__(self, inner: Any, min_entries: int = MIN_ENTRIES, max_rank: int = MAX_RANK) -> None:
        self.inner = inner
        self.ring = inner.ring
        self.name = inner.name
        self.min_entries = min_entries
        self.max_rank = max_rank
        self.flushes = 0

    def __getattr__(self, name: str) -> Any:  # constants and operations that need no special case
        fn = getattr(self.inner, name)

        def flushed(*args: Any) -> Any:
            return fn(*(self.flush(a) if isinstance(a, (Pending, Transposed)) else a for a in args))

        return flushed

    # -- the pending form ----------------------------------------------------------------------------
    def _factors(self, p: Pending) -> tuple[Any, Any]:
        if p._stacked is None:
            u, v = p.us[0], p.vs[0]
            for a, b in zip(p.us[1:], p.vs[1:]):
                u, v = self.inner.hstack(u, a), self.inner.vstack(v, b)
            p._stacked = (u, v)
        return p._stacked

    def _parts(self, a: Pending | Transposed) -> tuple[Any, Any, Any, int]:
        """``(base, U, V, rank)`` with the value ``base ⊕ U·V`` (U, V None when nothing is pending)."""
        if isinstance(a, Transposed):
            base, u, v, rank = self._parts(a.of)
            t = self.inner.transpose
            return t(base), (None if v is None else t(v)), (None if u is None else t(u)), rank
        if not a.rank:
            return a.base, None, None, 0
        u, v = self._factors(a)
        return a.base, u, v, a.rank

    def flush(self, a: Any) -> Any:
        if isinstance(a, Transposed):
            return self.inner.transpose(self.flush(a.of))
        if not isinstance(a, Pending):
            return a
        if a.rank:
            u, v = self._factors(a)
            a.base = self.inner.update(a.base, u, v)
            a.us, a.vs, a.rank, a._stacked = [], [], 0, None
            self.flushes += 1
        return a.base

    # -- operations that read a pending view as it is ------------------------------------------------
    def mul(self, a: Any, b: Any) -> Any:
        inner = self.inner
        lazy_a, lazy_b = isinstance(a, (Pending, Transposed)), isinstance(b, (Pending, Transposed))
        if lazy_a and not lazy_b and _thin(b, self.max_rank) and b.shape[1] <= b.shape[0]:
            base, u, v, rank = self._parts(a)
            if not rank:
                return inner.mul(base, b)
            return inner.add(inner.mul(base, b), inner.mul(u, inner.mul(v, b)))
        if lazy_b and not lazy_a and _thin(a, self.max_rank) and a.shape[0] <= a.shape[1]:
            base, u, v, rank = self._parts(b)
            if not rank:
                return inner.mul(a, base)
            return inner.add(inner.mul(a, base), inner.mul(inner.mul(a, u), v))
        return inner.mul(self.flush(a), self.flush(b))

    def products(self, x: Any, right: list[Any], left: list[Any]) -> tuple[list[Any], list[Any]]:
        """Several thin products with one view in one pass over its base, then each corrected
        by the pending part: ``B·T ⊕ U·(V·T)``, ``S·B ⊕ (S·U)·V``."""
        inner = self.inner
        if not isinstance(x, (Pending, Transposed)):
            return inner.products(x, right, left)  # type: ignore[no-any-return]
        base, u, v, rank = self._parts(x)
        r_out, l_out = inner.products(base, right, left)
        if rank:
            r_out = [inner.add(o, inner.mul(u, inner.mul(v, t))) for o, t in zip(r_out, right)]
            l_out = [inner.add(o, inner.mul(inner.mul(s, u), v)) for o, s in zip(l_out, left)]
        return r_out, l_out

    def transpose(self, a: Any) -> Any:
        if isinstance(a, Pending):
            return Transposed(a)
        if isinstance(a, Transposed):
            return a.of
        return self.inner.transpose(a)

    def update(self, view: Any, u: Any, v: Any) -> Any:
        inner = self.inner
        if isinstance(view, Transposed):
            raise TypeError("a transposed view is never updated")
        if v is None or (isinstance(u, Selector) and not u.transposed) or (isinstance(v, Selector) and v.transposed):
            if isinstance(view, Pending):  # a dense delta, or rows or columns changed: into the base
                view.base = inner.update(view.base, u, v)
                return view
            return inner.update(view, u, v)
        entries = view.shape[0] * view.shape[1]
        if entries < self.min_entries:
            return inner.update(self.flush(view), u, v)
        p = view if isinstance(view, Pending) else Pending(view)
        p.us.append(u)
        p.vs.append(v)
        p.rank += u.shape[1]
        p._stacked = None
        if p.rank >= self.max_rank:
            self.flush(p)
        return p

    def materialize(self, a: Any) -> Any:
        return self.inner.materialize(self.flush(a))

    def to_numpy(self, a: Any) -> Any:
        return self.inner.to_numpy(self.flush(a))

    def dense(self, a: Any) -> Any:
        return self.inner.dense(self.flush(a))
