"""Independent answers for the iterative queries: what exact mode's snapshots must equal (issue 5).

Each function evaluates, over all data so far, the query that ``examples/`` expresses in SQL —
PageRank (10 steps), k-means (10 Lloyd steps) and transitive closure (``WITH RECURSIVE``) — in
plain NumPy and Python, sharing no code with the compiler, so a test can compare every snapshot
of streamfold's exact mode to it (to 1e-9), and measure the error of the seed's diffusion mode
(000 §2 "Iteration", Algorithm 1) against it. The semantics are spelled out below where SQL
decides them and the textbook algorithm does not: bags, ties, dangling nodes, empty clusters.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np


def pagerank(edges: np.ndarray, steps: int = 10, damping: float = 0.85,
             start: dict[int, float] | None = None) -> dict[int, float]:
    """PageRank after ``steps`` steps from the uniform start, on the bag of edges ``(m, 2)`` (src, dst).

    The nodes are every distinct src and dst value, ``N`` of them; every rank starts at ``1/N``;
    one step is, for every node ``v``::

        rank'(v) = (1 − damping)/N + damping · Σ over edges u→v of rank(u) / outdeg(u)

    * edges are a bag: an edge given twice counts twice, in the sum and in ``outdeg(u)`` (the
      number of edge rows with src ``u``); a self-loop counts like any edge;
    * a node without outgoing edges (dangling) passes its rank to nobody: its mass is lost, not
      redistributed, so the ranks sum to less than 1 when there are such nodes;
    * a node without incoming edges keeps ``(1 − damping)/N``.

    ``start`` warm-starts the steps: a node it has starts at its rank there, the others at ``1/N``
    (what diffusion mode does when a batch reaches every node: see docs/sql.md, Iterations).

    Returns ``{node: rank}`` (float64); an empty graph gives ``{}``.
    """
    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    nodes, index = np.unique(edges, return_inverse=True)
    index = index.reshape(-1, 2)
    n = len(nodes)
    if n == 0:
        return {}
    src, dst = index[:, 0], index[:, 1]
    outdeg = np.bincount(src, minlength=n).astype(np.float64)
    rank = np.full(n, 1.0 / n)
    if start:
        rank = np.array([start.get(int(node), 1.0 / n) for node in nodes], dtype=np.float64)
    for _ in range(steps):
        rank = (1.0 - damping) / n + damping * np.bincount(dst, weights=rank[src] / outdeg[src], minlength=n)
    return {int(node): float(r) for node, r in zip(nodes, rank)}


def kmeans(points: np.ndarray, centroids0: np.ndarray, steps: int = 10) -> np.ndarray:
    """The clusters after ``steps`` Lloyd steps, as rows ``(x0, y0, x, y)`` sorted by ``(x0, y0)``.

    A cluster is identified by the initial centroid ``(x0, y0)`` it descends from (the SQL groups
    by those coordinates, which stay fixed), and ``(x, y)`` is its current centroid. One step:

    * a point belongs to the centroid(s) nearest to it by squared Euclidean distance, computed as
      ``(px − cx)·(px − cx) + (py − cy)·(py − cy)`` in float64. On an exact tie it belongs to
      *every* tied centroid — the SQL keeps a (point, centroid) pair when NOT EXISTS a strictly
      closer centroid — and so counts in each of their means;
    * a cluster's new centroid is the mean of its points, each counted with its multiplicity
      (points are a bag);
    * a cluster with no point disappears: it is not kept, and does not come back.

    Identical rows in ``centroids0`` are one cluster (the identity is the coordinates). With no
    points every cluster disappears after the first step; ``steps=0`` gives ``centroids0`` itself.
    Returns a float64 array of shape ``(k', 4)``, ``k' ≤ k``.
    """
    points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    origin = np.unique(np.asarray(centroids0, dtype=np.float64).reshape(-1, 2), axis=0)  # sorted by (x0, y0)
    current = origin.copy()
    for _ in range(steps):
        if len(current) == 0:
            break
        dx = points[:, None, 0] - current[None, :, 0]
        dy = points[:, None, 1] - current[None, :, 1]
        distance = dx * dx + dy * dy  # (n, k)
        member = distance == distance.min(axis=1, keepdims=True)
        count = member.sum(axis=0)
        total = member.T.astype(np.float64) @ points  # (k, 2): every point's coordinates, per cluster
        alive = count > 0
        origin, current = origin[alive], total[alive] / count[alive, None]
    return np.concatenate([origin, current], axis=1)


def transitive_closure(edges: Iterable[tuple[int, int]] | np.ndarray) -> set[tuple[int, int]]:
    """Every pair ``(a, b)`` with a path of one or more edges from ``a`` to ``b``: set semantics.

    What ``WITH RECURSIVE tc AS (SELECT src, dst FROM edges UNION SELECT tc.src, e.dst FROM tc
    JOIN edges e ON tc.dst = e.src)`` reaches at its fixpoint: repeated edges count once, and
    ``(a, a)`` is in it exactly when ``a`` lies on a cycle (a self-loop included).
    """
    pairs = np.asarray(edges if isinstance(edges, np.ndarray) else list(edges), dtype=np.int64).reshape(-1, 2)
    successors: dict[int, set[int]] = defaultdict(set)
    for src, dst in pairs.tolist():
        successors[src].add(dst)
    closure: set[tuple[int, int]] = set()
    for start in list(successors):
        seen: set[int] = set()
        frontier = list(successors[start])
        while frontier:  # depth-first search from start, over the edges only (start itself is not seen)
            node = frontier.pop()
            if node not in seen:
                seen.add(node)
                frontier.extend(successors.get(node, ()))
        closure.update((start, node) for node in seen)
    return closure
