"""The Spark back-end: large matrices as row blocks on the executors, thin factors on the driver.

A :class:`DistMatrix` is an RDD with one row block per partition (block i in partition i, so
two matrices of the same shape line up and combine without a shuffle). A matrix smaller than
``local_entries`` stays a NumPy array on the driver: the factors U, V of a delta always do —
their width is the change's rank.

What a trigger program does to a distributed view needs no shuffle (seed 001 §5.6.1: "thin
factors are broadcast"): ``X·U`` maps each block to ``block·U`` and collects the n×k result,
``V·X`` sums ``V[:, rows]·block`` over the blocks, a selector gathers rows or columns, and the
update ``X ⊕= U·V`` maps each block to ``block ⊕ U[rows]·V``, U and V broadcast. Only
re-evaluation multiplies two distributed matrices, by a join on the inner block index and a sum
per result block (a shuffle, as any distributed product).

A transpose is a flag (``Xᵀ·U`` sums ``blockᵀ·U[rows]``); a distributed matrix is transposed for
real (re-blocked, a shuffle) only where an operation needs it. Refused with
``SPARK_UNSUPPORTED``: inverting, or vertically stacking, a matrix too large for the driver.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import LinalgError
from .numpy_backend import NumpyBackend, Selector
from .semiring import Semiring

LOCAL_ENTRIES = 4_000_000  # matrices with fewer entries stay on the driver (32 MB of doubles)
BLOCK_BYTES = 32 << 20  # the size of a row block
THIN = 256  # a matrix with at most this many rows or columns stays on the driver
PANEL_BYTES = 64 << 20  # a column panel of a distributed product's right side, fetched to the driver


@dataclass
class DistMatrix:
    rdd: Any  # RDD[(block index, ndarray)], block i in partition i
    rows: int
    cols: int
    block: int  # rows per block
    transposed: bool = False
    kept: bool = False  # persisted and checkpointed (a view); else computed when read

    @property
    def shape(self) -> tuple[int, int]:
        return (self.cols, self.rows) if self.transposed else (self.rows, self.cols)

    @property
    def blocks(self) -> int:
        return -(-self.rows // self.block)

    @property
    def T(self) -> DistMatrix:  # noqa: N802
        return DistMatrix(self.rdd, self.rows, self.cols, self.block, not self.transposed)


class SparkBackend:
    name = "spark"

    def __init__(self, ring: Semiring, spark: Any, local_entries: int = LOCAL_ENTRIES,
                 block_rows: int | None = None, thin: int = THIN) -> None:
        self.ring = ring
        self.spark = spark
        self.sc = spark.sparkContext
        self.local = NumpyBackend(ring)
        self.local_entries = local_entries
        self.block_rows = block_rows
        self.thin = thin

    # -- shapes and placement ------------------------------------------------------------------------
    def _block(self, cols: int) -> int:
        return self.block_rows or max(1, BLOCK_BYTES // (8 * max(1, cols)))

    def _big(self, rows: int, cols: int) -> bool:
        """Distributed: large, and not a thin factor (a factor's width is a change's rank)."""
        return rows * cols >= self.local_entries and min(rows, cols) > self.thin

    def _persist(self, rdd: Any) -> Any:
        """Keep an RDD (a view): memory or disk, its lineage cut, computed now."""
        from pyspark import StorageLevel

        rdd = rdd.persist(StorageLevel.MEMORY_AND_DISK)
        rdd.localCheckpoint()  # a view replaces its predecessor: no lineage back to it
        rdd.count()
        return rdd

    def generate(self, rows: int, cols: int, make: Any) -> DistMatrix:
        """A distributed matrix made on the executors, block by block: ``make(start, stop)``
        returns rows start..stop (it runs on an executor: it must hold no RDD)."""
        block = self._block(cols)
        nb = -(-rows // block)
        rdd = self.sc.parallelize(range(nb), nb).map(lambda i: (i, make(i * block, min(rows, (i + 1) * block))))
        return DistMatrix(self._persist(rdd), rows, cols, block, kept=True)

    def from_numpy(self, a: np.ndarray) -> Any:
        a = np.asarray(a, dtype=self.ring.dtype)
        if not self._big(*a.shape):
            return self.local.from_numpy(a)
        block = self._block(a.shape[1])
        parts = [(i, a[s:s + block].copy()) for i, s in enumerate(range(0, a.shape[0], block))]
        rdd = self.sc.parallelize(parts, len(parts))
        return DistMatrix(self._persist(rdd), a.shape[0], a.shape[1], block, kept=True)

    def _realize(self, a: DistMatrix) -> DistMatrix:
        """A transposed distributed matrix re-blocked by its own rows (a shuffle)."""
        if not a.transposed:
            return a
        rows, cols = a.shape  # of the transpose
        block = self._block(cols)

        def pieces(item: tuple[int, np.ndarray]) -> list[tuple[int, tuple[int, np.ndarray]]]:
            i, b = item
            t = b.T
            return [(j, (i, t[j * block:(j + 1) * block])) for j in range(-(-rows // block))]

        def assemble(parts: Any) -> np.ndarray:
            return np.hstack([p for _, p in sorted(parts, key=lambda x: x[0])])

        nb = -(-rows // block)
        rdd = a.rdd.flatMap(pieces).groupByKey(nb, lambda i: i).mapValues(assemble)
        return DistMatrix(rdd, rows, cols, block)

    # -- constants -----------------------------------------------------------------------------------
    def zeros(self, rows: int, cols: int) -> Any:
        ring = self.ring
        if not self._big(rows, cols):
            return self.local.zeros(rows, cols)
        return self.generate(rows, cols, lambda s, e: ring.zeros(e - s, cols))

    def identity(self, n: int) -> Any:
        return self.diag(n, self.ring.one)

    def diag(self, n: int, value: float) -> Any:
        ring = self.ring
        if not self._big(n, n):
            return self.local.diag(n, value)

        def make(s: int, e: int) -> np.ndarray:
            b = ring.zeros(e - s, n)
            b[np.arange(e - s), np.arange(s, e)] = ring.coerce(value)
            return b

        return self.generate(n, n, make)

    def fill(self, rows: int, cols: int, value: float) -> Any:
        ring = self.ring
        if not self._big(rows, cols):
            return self.local.fill(rows, cols, value)
        return self.generate(rows, cols, lambda s, e: ring.full(e - s, cols, value))

    # -- operations ----------------------------------------------------------------------------------
    def mul(self, a: Any, b: Any) -> Any:
        da, db = isinstance(a, DistMatrix), isinstance(b, DistMatrix)
        if not da and not db:
            rows, cols = a.shape[0], b.shape[1]
            if self._big(rows, cols):
                return self._outer(self.local.dense(a), b)
            return self.local.mul(a, b)
        if da and not db:
            return self._dist_local(a, b)
        if db and not da:
            return self._local_dist(a, b)
        return self._dist_dist(a, b)

    def _outer(self, u: np.ndarray, v: Any) -> DistMatrix:
        """A product of local factors too large for the driver, made block by block."""
        ring, vv = self.ring, self.sc.broadcast(self.local.dense(v))
        ub = self.sc.broadcast(u)
        return self.generate(u.shape[0], vv.value.shape[1], lambda s, e: ring.matmul(ub.value[s:e], vv.value))

    def _dist_local(self, a: DistMatrix, b: Any) -> Any:
        ring, block = self.ring, a.block
        if not a.transposed:  # (n×p)·(p×k): each block times b
            if isinstance(b, Selector) and not b.transposed:
                rows = b.rows
                return self._collect(a.rdd.mapValues(lambda x: x[:, rows]), a.rows, len(rows))
            bb = self.sc.broadcast(self.local.dense(b))
            out = a.rdd.mapValues(lambda x: ring.matmul(x, bb.value))
            if self._big(a.rows, bb.value.shape[1]):
                return DistMatrix(out, a.rows, bb.value.shape[1], block)
            return self._collect(out, a.rows, bb.value.shape[1])
        # aᵀ·b with a (n×p) by row blocks: Σ blockᵀ·b[rows of the block]
        bd = self.local.dense(b)
        bb = self.sc.broadcast(bd)

        def part(item: tuple[int, np.ndarray]) -> np.ndarray:
            i, x = item
            return ring.matmul(x.T, bb.value[i * block:i * block + x.shape[0]])

        return self._sum(a.rdd.map(part), a.cols, bd.shape[1])

    def _local_dist(self, a: Any, b: DistMatrix) -> Any:
        ring, block = self.ring, b.block
        if b.transposed:  # a·bᵀ = (b·aᵀ)ᵀ
            return self.local.transpose(self._dist_local(b.T, self.local.transpose(a)))
        if isinstance(a, Selector) and a.transposed:  # the rows of b
            wanted = a.rows

            def rows_of(item: tuple[int, np.ndarray]) -> list[tuple[int, np.ndarray]]:
                i, x = item
                here = (wanted >= i * block) & (wanted < i * block + x.shape[0])
                return [(int(k), x[int(r) - i * block]) for k, r in zip(np.flatnonzero(here), wanted[here])]

            got = dict(b.rdd.flatMap(rows_of).collect())
            return np.vstack([got[k] for k in range(len(wanted))]) if wanted.size else self.local.zeros(0, b.cols)
        ad = self.local.dense(a)
        ab = self.sc.broadcast(ad)

        def part(item: tuple[int, np.ndarray]) -> np.ndarray:
            i, x = item
            return ring.matmul(ab.value[:, i * block:i * block + x.shape[0]], x)

        return self._sum(b.rdd.map(part), ad.shape[0], b.cols)

    def _dist_dist(self, a: DistMatrix, b: DistMatrix) -> Any:
        ring = self.ring
        if a.transposed and not b.transposed and a.block == b.block and a.rows == b.rows:
            # aᵀ·b over the same row blocks: Σ blockᵀ·block, no shuffle of the inputs
            rows, cols = a.cols, b.cols
            parts = a.rdd.zip(b.rdd).map(lambda ab: ring.matmul(ab[0][1].T, ab[1][1]))
            if not self._big(rows, cols):
                return self._sum(parts, rows, cols)
            block = self._block(cols)
            nb = -(-rows // block)

            def split(m: np.ndarray) -> list[tuple[int, np.ndarray]]:
                return [(j, m[j * block:(j + 1) * block]) for j in range(nb)]

            out = parts.flatMap(split).reduceByKey(ring.add, nb, lambda i: i)
            return DistMatrix(out, rows, cols, block)
        a, b = self._realize(a), self._realize(b)
        if a.cols != b.rows:
            raise LinalgError(f"internal: product of {a.shape} and {b.shape}", code="INTERNAL")
        return self._panels(a, b)

    def _panels(self, a: DistMatrix, b: DistMatrix) -> DistMatrix:
        """A·B for two distributed matrices, by column panels of B: B is re-blocked by columns
        once (a shuffle of B), then each panel — as large as ``PANEL_BYTES`` — is fetched to the
        driver alone and broadcast; each block of A is multiplied by every panel, the results
        side by side. A is never moved; B moves once; the driver holds one panel at a time."""
        ring, rows = self.ring, b.rows
        width = max(1, min(b.cols, PANEL_BYTES // (8 * max(1, rows))))
        count = -(-b.cols // width)

        def slices(item: tuple[int, np.ndarray]) -> list[tuple[int, tuple[int, np.ndarray]]]:
            i, x = item
            return [(j, (i, x[:, j * width:(j + 1) * width])) for j in range(count)]

        def assemble(parts: Any) -> np.ndarray:
            return np.vstack([x for _, x in sorted(parts, key=lambda p: p[0])])

        by_column = b.rdd.flatMap(slices).groupByKey(count, lambda j: j).mapValues(assemble)
        by_column = self._persist(by_column)
        panels = []
        try:
            for j in range(count):  # one panel on the driver at a time
                panels.append(self.sc.broadcast(self.sc.runJob(by_column, lambda it: [x for _, x in it], [j])[0]))
        finally:
            by_column.unpersist()
        # each block of A is read once and multiplied by every panel (an executor holds them all)
        out = a.rdd.mapValues(lambda x: np.hstack([ring.matmul(x, p.value) for p in panels]))
        result = DistMatrix(self._persist(out), a.rows, b.cols, a.block, kept=True)
        for p in panels:
            p.unpersist()
        return result

    def products(self, x: Any, right: list[Any], left: list[Any]) -> tuple[list[Any], list[Any]]:
        """Thin products with one distributed view in one pass over its blocks: each block gives
        its rows of ``x·[T…]`` and its share of ``[S…]·x`` (summed on the driver)."""
        if not isinstance(x, DistMatrix):
            return self.local.products(self.local.dense(x), right, left)
        x = self._realize(x)
        ring, block = self.ring, x.block
        r = self.sc.broadcast(np.hstack([self.to_numpy(t) for t in right])) if right else None
        s = self.sc.broadcast(np.vstack([self.to_numpy(t) for t in left])) if left else None

        def part(item: tuple[int, np.ndarray]) -> tuple[int, Any, Any]:
            i, b = item
            return (i, None if r is None else ring.matmul(b, r.value),
                    None if s is None else ring.matmul(s.value[:, i * block:i * block + b.shape[0]], b))

        parts = sorted(x.rdd.map(part).collect(), key=lambda p: p[0])
        r_out = np.vstack([p[1] for p in parts]) if r is not None else None
        l_out = None
        for p in parts:
            if p[2] is not None:
                l_out = p[2] if l_out is None else ring.add(l_out, p[2])
        widths = [t.shape[1] for t in right]
        heights = [t.shape[0] for t in left]
        return (list(np.split(r_out, np.cumsum(widths)[:-1], axis=1)) if r_out is not None else [],
                list(np.split(l_out, np.cumsum(heights)[:-1], axis=0)) if l_out is not None else [])

    def _collect(self, rdd: Any, rows: int, cols: int) -> np.ndarray:
        parts = sorted(rdd.collect(), key=lambda kv: kv[0])
        return np.vstack([p for _, p in parts]) if parts else self.local.zeros(rows, cols)

    def _sum(self, rdd: Any, rows: int, cols: int) -> np.ndarray:
        return rdd.treeReduce(self.ring.add)  # type: ignore[no-any-return]

    def add(self, a: Any, b: Any) -> Any:
        ring = self.ring
        da, db = isinstance(a, DistMatrix), isinstance(b, DistMatrix)
        if not da and not db:
            return self.local.add(a, b)
        if da and db:
            a, b = self._realize(a), self._realize(b)
            if a.block != b.block:
                b = self._reblock(b, a.block)
            rdd = a.rdd.zip(b.rdd).map(lambda ab: (ab[0][0], ring.add(ab[0][1], ab[1][1])))
            return DistMatrix(rdd, a.rows, a.cols, a.block)
        dist, loc = (self._realize(a), b) if da else (self._realize(b), a)
        lb, block = self.sc.broadcast(self.local.dense(loc)), dist.block
        rdd = dist.rdd.map(lambda kv: (kv[0], ring.add(kv[1], lb.value[kv[0] * block:kv[0] * block + kv[1].shape[0]])))
        return DistMatrix(rdd, dist.rows, dist.cols, block)

    def _reblock(self, a: DistMatrix, block: int) -> DistMatrix:
        return self._realize(self._realize(a.T).T) if block != a.block else a

    def scale(self, coef: float, a: Any) -> Any:
        if not isinstance(a, DistMatrix):
            return self.local.scale(coef, a)
        ring = self.ring
        rdd = a.rdd.mapValues(lambda x: ring.scale(coef, x))
        return DistMatrix(rdd, a.rows, a.cols, a.block, a.transposed)

    def transpose(self, a: Any) -> Any:
        return a.T

    def inv(self, a: Any) -> Any:
        if isinstance(a, DistMatrix):
            if self._big(*a.shape):
                raise LinalgError(f"the inverse of a distributed {a.shape[0]}×{a.shape[1]} matrix",
                                  code="SPARK_UNSUPPORTED", params={"operation": "inverse", "shape": list(a.shape)},
                                  hint="the Spark back-end inverts matrices that fit the driver (e.g. XᵀX of a tall X); "
                                       "use --backend numpy for this program")
            a = self.to_numpy(a)
        return self.local.inv(a)

    def hstack(self, a: Any, b: Any) -> Any:
        if not isinstance(a, DistMatrix) and not isinstance(b, DistMatrix):
            return self.local.hstack(a, b)
        rows, cols = a.shape[0], a.shape[1] + b.shape[1]
        if not self._big(rows, cols):
            return self.local.hstack(self.to_numpy(a), self.to_numpy(b))
        # block by block: a distributed side as it is, a local side sliced to the block's rows
        base = self._realize(a) if isinstance(a, DistMatrix) else self._realize(b)
        block = base.block
        other = [self._reblock(self._realize(x), block) if isinstance(x, DistMatrix) else
                 self.sc.broadcast(self.local.dense(x)) for x in (a, b)]
        dists = [o for o in other if isinstance(o, DistMatrix)]
        rdd = dists[0].rdd if len(dists) == 1 else dists[0].rdd.zip(dists[1].rdd).map(
            lambda pq: (pq[0][0], (pq[0][1], pq[1][1])))
        sides = [None if isinstance(o, DistMatrix) else o for o in other]

        def join(item: tuple[int, Any]) -> tuple[int, np.ndarray]:
            i, got = item
            parts = list(got) if isinstance(got, tuple) else [got]
            n = parts[0].shape[0]
            return i, np.hstack([parts.pop(0) if side is None else side.value[i * block:i * block + n]
                                 for side in sides])

        return DistMatrix(rdd.map(join), rows, cols, block)

    def vstack(self, a: Any, b: Any) -> Any:
        if not isinstance(a, DistMatrix) and not isinstance(b, DistMatrix):
            return self.local.vstack(a, b)
        rows, cols = a.shape[0] + b.shape[0], a.shape[1]
        if not self._big(rows, cols):
            return self.local.vstack(self.to_numpy(a), self.to_numpy(b))
        block = self._block(cols)
        parts = []  # (first row in the stack, rows of a block) → the stack's blocks, a shuffle
        for m, offset in ((a, 0), (b, a.shape[0])):
            m = self._realize(m) if isinstance(m, DistMatrix) else self.from_numpy(self.local.dense(m))
            if not isinstance(m, DistMatrix):
                m = DistMatrix(self.sc.parallelize([(0, m)], 1), m.shape[0], m.shape[1], m.shape[0])
            src = m.block
            parts.append(m.rdd.map(lambda kv, src=src, offset=offset: (offset + kv[0] * src, kv[1])))

        def pieces(item: tuple[int, np.ndarray]) -> list[tuple[int, tuple[int, np.ndarray]]]:
            start, x = item
            out, r = [], 0
            while r < x.shape[0]:
                target = (start + r) // block
                take = min(x.shape[0] - r, (target + 1) * block - (start + r))
                out.append((target, (start + r, x[r:r + take])))
                r += take
            return out

        def assemble(got: Any) -> np.ndarray:
            return np.vstack([x for _, x in sorted(got, key=lambda p: p[0])])

        nb = -(-rows // block)
        rdd = parts[0].union(parts[1]).flatMap(pieces).groupByKey(nb, lambda i: i).mapValues(assemble)
        return DistMatrix(rdd, rows, cols, block)

    # -- views ---------------------------------------------------------------------------------------
    def update(self, view: Any, u: Any, v: Any) -> Any:
        if not isinstance(view, DistMatrix):
            if v is None and isinstance(u, DistMatrix):
                return self.add(view, u)
            return self.local.update(view, u, v)
        view = self._realize(view)
        ring, block = self.ring, view.block
        if v is None:  # a dense delta
            out = self.materialize(self.add(view, u))
            self.release(view)
            return out
        if isinstance(u, Selector) and not u.transposed:
            rows, vb = u.rows, self.sc.broadcast(self.to_numpy(v))

            def add_rows(item: tuple[int, np.ndarray]) -> tuple[int, np.ndarray]:
                i, x = item
                here = (rows >= i * block) & (rows < i * block + x.shape[0])
                if not here.any():
                    return item
                x = x.copy()
                ring.add_rows(x, rows[here] - i * block, vb.value[here])
                return i, x

            rdd = view.rdd.map(add_rows)
        else:
            # the factors are thin: on the driver (collected, in the rare case they were not)
            ub, vb = self.sc.broadcast(self.to_numpy(u)), self.sc.broadcast(self.to_numpy(v))

            def add_product(item: tuple[int, np.ndarray]) -> tuple[int, np.ndarray]:
                i, x = item
                x = x.copy()
                ring.add_into(x, ub.value[i * block:i * block + x.shape[0]], vb.value)
                return i, x

            rdd = view.rdd.map(add_product)
        out = DistMatrix(self._persist(rdd), view.rows, view.cols, block, kept=True)
        self.release(view)
        return out

    def materialize(self, a: Any) -> Any:
        if isinstance(a, DistMatrix):
            a = self._realize(a)
            if not a.kept:
                a = DistMatrix(self._persist(a.rdd), a.rows, a.cols, a.block, kept=True)
            return a
        if self._big(*a.shape) and not isinstance(a, Selector):
            return self.from_numpy(self.local.dense(a))
        return self.local.materialize(a)

    def thin_products(self) -> Any:
        """The driver's share of a trigger program (factors, k×k inverses): one BLAS thread."""
        return self.local.thin_products()

    def keep(self, a: Any) -> Any:
        """A distributed value computed now and kept: the views it was computed from may go."""
        return self.materialize(a) if isinstance(a, DistMatrix) else a

    def release(self, a: Any) -> None:
        if isinstance(a, DistMatrix):
            a.rdd.unpersist()

    def dense(self, a: Any) -> Any:
        return a if isinstance(a, DistMatrix) else self.local.dense(a)

    def to_numpy(self, a: Any) -> np.ndarray:
        if isinstance(a, DistMatrix):
            out = self._collect(a.rdd, a.rows, a.cols)
            return out.T if a.transposed else out
        return self.local.dense(a)

    def change(self, old: Any, new: Any) -> Any:
        if isinstance(old, DistMatrix) and isinstance(new, DistMatrix):
            ring = self.ring
            rdd = self._realize(old).rdd.zip(self._realize(new).rdd).map(
                lambda ab: (ab[0][0], ring.change(ab[0][1], ab[1][1])))
            return DistMatrix(rdd, new.rows, new.cols, new.block)
        return self.ring.change(self.to_numpy(old), self.to_numpy(new))

    def distance(self, a: Any, b: Any) -> float:
        if isinstance(a, DistMatrix) and isinstance(b, DistMatrix) and self.ring.name == "arithmetic":
            pairs = self._realize(a).rdd.zip(self._realize(b).rdd)
            diff, norm = pairs.map(lambda ab: (float(np.sum((ab[0][1] - ab[1][1]) ** 2)),
                                               float(np.sum(ab[1][1] ** 2)))).reduce(
                lambda x, y: (x[0] + y[0], x[1] + y[1]))
            return float(np.sqrt(diff / norm)) if norm > 0 else float(np.sqrt(diff))
        return self.ring.distance(self.to_numpy(a), self.to_numpy(b))

    # -- files ---------------------------------------------------------------------------------------
    def save(self, a: Any, stem: str) -> None:
        """A local matrix as ``stem.npy``; a distributed one as ``stem/rows-<start>.npy``, written
        by the executors (a path every executor can reach: local mode, or a shared file system)."""
        if not isinstance(a, DistMatrix):
            self.local.save(a, stem)
            return
        a = self._realize(a)
        os.makedirs(stem, exist_ok=True)
        block = a.block

        def write(item: tuple[int, np.ndarray]) -> None:
            i, x = item
            np.save(os.path.join(stem, f"rows-{i * block}.npy"), x)

        a.rdd.foreach(write)

    def load(self, stem: str) -> Any:
        if not os.path.isdir(stem):
            return self.from_numpy(self.local.load(stem)) if self._big(*np.load(stem + ".npy", mmap_mode="r").shape) \
                else self.local.load(stem)
        names = sorted((int(n[5:-4]), n) for n in os.listdir(stem) if n.startswith("rows-") and n.endswith(".npy"))
        first = np.load(os.path.join(stem, names[0][1]), mmap_mode="r")
        block, cols = first.shape
        rows = names[-1][0] + np.load(os.path.join(stem, names[-1][1]), mmap_mode="r").shape[0]
        paths = [os.path.join(stem, n) for _, n in names]
        rdd = self.sc.parallelize(list(enumerate(paths)), len(paths)).mapValues(np.load)
        return DistMatrix(self._persist(rdd), rows, cols, block, kept=True)
