"""The iterative workloads' generators and their independent answers (NumPy only, no Spark).

The references are what exact mode's snapshots are compared to, so they are checked here against
hand-computed cases and against a naive loop written straight from the definitions.
"""

from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamfold.bench.iterative import (
    SQUARE_CENTRES,
    kmeans_initial_centroids,
    kmeans_points,
    kmeans_stream,
    rmat_edges,
    rmat_stream,
)
from streamfold.bench.data import write_edges, write_points, write_stream
from streamfold.bench.reference import kmeans, pagerank, transitive_closure

# -- R-MAT ---------------------------------------------------------------------------------------


def _distinct(edges: np.ndarray) -> int:
    return len({tuple(e) for e in edges.tolist()})


@pytest.mark.parametrize("n_nodes, n_edges", [(1000, 8000), (1024, 5000), (30, 870), (2, 2)])
def test_rmat_edges_are_exactly_n_distinct_edges_in_range(n_nodes, n_edges):
    edges = rmat_edges(n_nodes, n_edges, seed=7)
    assert edges.shape == (n_edges, 2) and edges.dtype == np.int64
    assert edges.min() >= 0 and edges.max() < n_nodes
    assert not (edges[:, 0] == edges[:, 1]).any()
    assert _distinct(edges) == n_edges


def test_rmat_edges_are_deterministic_in_the_seed():
    assert np.array_equal(rmat_edges(500, 3000, seed=1), rmat_edges(500, 3000, seed=1))
    assert not np.array_equal(rmat_edges(500, 3000, seed=1), rmat_edges(500, 3000, seed=2))


def test_rmat_edges_follow_the_quadrant_probabilities_and_are_skewed():
    edges = rmat_edges(1 << 12, 40_000, seed=3)  # a power of two: nothing rejected for its range
    top = 1 << 11
    # The first level's quadrant: the source's top bit is 0 with a + b, the destination's with a + c.
    assert abs((edges[:, 0] < top).mean() - 0.55) < 0.02
    assert abs((edges[:, 1] < top).mean() - 0.55) < 0.02
    # The seed's parameters skew mildly (0.55 against 0.45 per level): a node's expected in-degree
    # is m·0.55^zeros·0.45^ones of its 12 bits, so node 0's is 3.1× the mean. Against a uniform
    # graph (Poisson: variance = mean), the in-degrees are over-dispersed, and their maximum is higher.
    indegree = np.bincount(edges[:, 1], minlength=1 << 12)
    uniform = np.bincount(np.random.default_rng(3).integers(0, 1 << 12, 40_000), minlength=1 << 12)
    assert indegree.var() / indegree.mean() > 1.8 > 1.2 > uniform.var() / uniform.mean()
    assert indegree.max() > 2.5 * indegree.mean() and indegree.max() > uniform.max() + 5


def test_rmat_edges_refuse_impossible_requests():
    with pytest.raises(ValueError):
        rmat_edges(3, 7)  # 3 nodes have 6 edges
    with pytest.raises(ValueError):
        rmat_edges(10, 5, a=0.5, b=0.5, c=0.5, d=0.5)


def test_rmat_stream_at_the_seeds_sizes():
    batches = rmat_stream(edges_per_increment=400, seed=11)
    assert [len(b) for b in batches] == [50_000] + [400] * 9
    everything = np.concatenate(batches)
    assert _distinct(everything) == len(everything)
    assert len(np.unique(everything)) <= 5_000 + 9 * 100


def test_rmat_stream_increments_add_new_nodes_attached_to_the_graph():
    batches = rmat_stream(initial_nodes=200, initial_edges=1500, increments=4, nodes_per_increment=10,
                          edges_per_increment=25, seed=5)
    assert [len(b) for b in batches] == [1500] + [25] * 4
    assert batches[0].max() < 200
    seen = set(np.unique(batches[0]).tolist())
    all_edges = {tuple(e) for e in batches[0].tolist()}
    for inc, edges in enumerate(batches[1:], start=1):
        new = set(range(200 + (inc - 1) * 10, 200 + inc * 10))
        is_new = np.isin(edges, list(new))
        assert (is_new.sum(axis=1) == 1).all()  # one endpoint new, the other in the graph so far
        assert set(edges[is_new].tolist()) == new  # every new node appears
        assert set(edges[~is_new].tolist()) <= seen
        assert {"out", "in"} == {"out" if row[0] else "in" for row in is_new}  # both directions
        rows = {tuple(e) for e in edges.tolist()}
        assert len(rows) == len(edges) and not rows & all_edges
        all_edges |= rows
        seen |= set(np.unique(edges).tolist())
    again = rmat_stream(initial_nodes=200, initial_edges=1500, increments=2, nodes_per_increment=10,
                        edges_per_increment=25, seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(again, batches))  # a prefix of the longer stream


def test_rmat_stream_increments_reach_hubs():
    batches = rmat_stream(initial_nodes=1000, initial_edges=10_000, increments=3, nodes_per_increment=100,
                          edges_per_increment=400, seed=2)
    # A link from a new node goes to an old node picked by in-degree, a link to a new node comes
    # from one picked by out-degree: the picked nodes' mean degree is the graph's times
    # 1 + variance/mean² (≈ 1.2 here); picking nodes uniformly would give 1.
    initial = batches[0]
    indegree, outdegree = np.bincount(initial[:, 1], minlength=1000), np.bincount(initial[:, 0], minlength=1000)
    new = np.concatenate(batches[1:])
    targets = new[(new[:, 0] >= 1000) & (new[:, 1] < 1000), 1]
    sources = new[(new[:, 1] >= 1000) & (new[:, 0] < 1000), 0]
    assert indegree[targets].mean() > 1.08 * indegree[indegree > 0].mean()
    assert outdegree[sources].mean() > 1.08 * outdegree[outdegree > 0].mean()


def test_rmat_stream_refuses_too_few_edges_for_the_new_nodes():
    with pytest.raises(ValueError):
        rmat_stream(initial_nodes=100, initial_edges=500, increments=1, nodes_per_increment=10,
                    edges_per_increment=5)


# -- k-means data --------------------------------------------------------------------------------


def test_kmeans_points_fall_in_the_four_squares_evenly():
    points = kmeans_points(40_000, seed=4)
    assert points.shape == (40_000, 2) and points.dtype == np.float64
    inside = ((points >= 2) & (points <= 4)) | ((points >= 6) & (points <= 8))
    assert inside.all()
    square = (points[:, 0] > 5).astype(int) * 2 + (points[:, 1] > 5)
    assert np.allclose(np.bincount(square, minlength=4) / 40_000, 0.25, atol=0.01)
    assert np.array_equal(points, kmeans_points(40_000, seed=4))
    assert not np.array_equal(points, kmeans_points(40_000, seed=5))


def test_kmeans_stream_sizes():
    batches = kmeans_stream(initial_points=1000, increments=3, points_per_increment=50, seed=1)
    assert [len(b) for b in batches] == [1000, 50, 50, 50]
    assert not np.array_equal(batches[1], batches[2])


def test_initial_centroids_are_near_but_not_at_the_centres():
    c = kmeans_initial_centroids(seed=9)
    assert c.shape == (4, 2)
    offset = np.abs(c - SQUARE_CENTRES)
    assert (offset >= 0.2).all() and (offset <= 0.8).all()
    assert np.array_equal(c, kmeans_initial_centroids(seed=9))
    assert kmeans_initial_centroids(k=6, seed=9).shape == (6, 2)


def test_kmeans_converges_to_the_centres_on_the_seeds_data():
    result = kmeans(kmeans_points(20_000, seed=6), kmeans_initial_centroids(seed=6))
    assert len(result) == 4
    found = result[np.lexsort((result[:, 3], result[:, 2])), 2:]
    assert np.abs(found - SQUARE_CENTRES).max() < 0.05


# -- writers -------------------------------------------------------------------------------------


def test_writers_give_the_declared_schemas(tmp_path):
    edges = rmat_edges(64, 100, seed=1)
    write_edges(str(tmp_path / "e.parquet"), edges)
    table = pq.read_table(tmp_path / "e.parquet")
    assert table.schema == pa.schema([("src", pa.int64()), ("dst", pa.int64())])
    assert np.array_equal(np.stack([table["src"].to_numpy(), table["dst"].to_numpy()], axis=1), edges)
    points = kmeans_initial_centroids()
    write_points(str(tmp_path / "c.parquet"), points)
    table = pq.read_table(tmp_path / "c.parquet")
    assert table.schema == pa.schema([("x", pa.float64()), ("y", pa.float64())])
    assert np.array_equal(np.stack([table["x"].to_numpy(), table["y"].to_numpy()], axis=1), points)
    assert sorted(os.listdir(tmp_path)) == ["c.parquet", "e.parquet"]  # no hidden file left behind


def test_write_stream_one_file_per_batch_in_order(tmp_path):
    batches = kmeans_stream(initial_points=10, increments=2, points_per_increment=3)
    paths = write_stream(str(tmp_path / "points"), batches, write_points)
    assert [os.path.basename(p) for p in paths] == ["000000-000.parquet", "000001-000.parquet", "000002-000.parquet"]
    assert [pq.read_table(p).num_rows for p in paths] == [10, 3, 3]
    assert sorted(os.listdir(tmp_path / "points")) == [os.path.basename(p) for p in paths]


# -- PageRank ------------------------------------------------------------------------------------


def _pagerank_loop(edges, steps=10, damping=0.85):
    """PageRank straight from its definition, one edge at a time."""
    edges = [tuple(e) for e in np.asarray(edges).tolist()]
    nodes = {v for e in edges for v in e}
    n = len(nodes)
    outdeg = Counter(u for u, _ in edges)
    rank = {v: 1.0 / n for v in nodes}
    for _ in range(steps):
        new = {v: (1 - damping) / n for v in nodes}
        for u, v in edges:
            new[v] += damping * rank[u] / outdeg[u]
        rank = new
    return rank


def test_pagerank_of_a_cycle_stays_uniform():
    ranks = pagerank(np.array([[0, 1], [1, 2], [2, 0]]))
    assert ranks.keys() == {0, 1, 2}
    assert all(abs(r - 1 / 3) < 1e-15 for r in ranks.values())


def test_pagerank_two_nodes_by_hand():
    # 0 → 1, node 1 dangling; N = 2, both start at 1/2.
    # step 1: r0 = 0.15/2 = 0.075, r1 = 0.075 + 0.85·0.5 = 0.5
    # step 2: r0 = 0.075,          r1 = 0.075 + 0.85·0.075 = 0.13875 (dangling mass is lost)
    assert pagerank(np.array([[0, 1]]), steps=1) == pytest.approx({0: 0.075, 1: 0.5}, abs=1e-15)
    assert pagerank(np.array([[0, 1]]), steps=2) == pytest.approx({0: 0.075, 1: 0.13875}, abs=1e-15)
    assert pagerank(np.array([[0, 1]]), steps=0) == {0: 0.5, 1: 0.5}


def test_pagerank_edges_are_a_bag_and_self_loops_count():
    # 0→1 twice and 0→2: outdeg(0) = 3, node 1 gets two thirds of node 0's rank
    ranks = pagerank(np.array([[0, 1], [0, 1], [0, 2]]), steps=1)
    assert ranks == pytest.approx({0: 0.05, 1: 0.05 + 0.85 * 2 / 9, 2: 0.05 + 0.85 / 9}, abs=1e-15)
    # 0→0 and 0→1: node 0 keeps half of its own rank
    ranks = pagerank(np.array([[0, 0], [0, 1]]), steps=1)
    assert ranks == pytest.approx({0: 0.075 + 0.85 * 0.25, 1: 0.075 + 0.85 * 0.25}, abs=1e-15)


def test_pagerank_matches_the_definition_on_an_rmat_graph():
    edges = rmat_edges(300, 2000, seed=8)
    edges = np.concatenate([edges, edges[:50]])  # some repeated rows too
    expected = _pagerank_loop(edges)
    ranks = pagerank(edges)
    assert ranks.keys() == expected.keys()
    assert max(abs(ranks[v] - expected[v]) for v in expected) < 1e-12


def test_pagerank_of_no_edges_is_empty():
    assert pagerank(np.empty((0, 2), dtype=np.int64)) == {}


# -- k-means -------------------------------------------------------------------------------------


def _kmeans_loop(points, centroids0, steps=10):
    """Lloyd steps straight from the SQL's definition, one (point, centroid) pair at a time."""
    clusters = {tuple(c): tuple(c) for c in np.asarray(centroids0).tolist()}  # identity -> centroid
    for _ in range(steps):
        sums: dict = {}
        for px, py in np.asarray(points).tolist():
            d = {k: (px - cx) * (px - cx) + (py - cy) * (py - cy) for k, (cx, cy) in clusters.items()}
            for k in clusters:
                if not any(d[j] < d[k] for j in clusters):  # NOT EXISTS a strictly closer centroid
                    sx, sy, n = sums.get(k, (0.0, 0.0, 0))
                    sums[k] = (sx + px, sy + py, n + 1)
        clusters = {k: (sx / n, sy / n) for k, (sx, sy, n) in sums.items()}
    return np.array(sorted(k + c for k, c in clusters.items())).reshape(-1, 4)


def test_kmeans_steps_by_hand():
    points = np.array([[0.0, 0.0], [2.0, 0.0], [6.0, 0.0], [10.0, 0.0]])
    centroids0 = np.array([[0.0, 0.0], [1.5, 0.0]])
    # step 1: 0 → c1; 2, 6, 10 → c2 (2 is 0.25 from c2, 4 from c1): c1 = 0, c2 = 6
    # step 2: 2 is now nearer c1 (4 < 16): c1 = (0 + 2)/2 = 1, c2 = (6 + 10)/2 = 8; then stable
    assert np.array_equal(kmeans(points, centroids0, steps=1), [[0, 0, 0, 0], [1.5, 0, 6, 0]])
    assert np.array_equal(kmeans(points, centroids0, steps=2), [[0, 0, 1, 0], [1.5, 0, 8, 0]])
    assert np.array_equal(kmeans(points, centroids0), [[0, 0, 1, 0], [1.5, 0, 8, 0]])
    assert np.array_equal(kmeans(points, centroids0, steps=0), [[0, 0, 0, 0], [1.5, 0, 1.5, 0]])


def test_kmeans_ties_count_in_every_nearest_cluster():
    # both points are equally far from both centroids: each cluster gets both
    result = kmeans(np.array([[0.0, 0.0], [2.0, 0.0]]), np.array([[1.0, 1.0], [1.0, -1.0]]), steps=3)
    assert np.array_equal(result, [[1, -1, 1, 0], [1, 1, 1, 0]])


def test_kmeans_empty_clusters_disappear_and_points_are_a_bag():
    points = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 0.0]])
    result = kmeans(points, np.array([[1.0, 0.0], [100.0, 100.0]]), steps=2)
    assert np.array_equal(result, [[1, 0, 1, 0]])  # mean of 0, 0, 3
    assert kmeans(np.empty((0, 2)), np.array([[1.0, 0.0]])).shape == (0, 4)


def test_kmeans_matches_the_definition_on_the_seeds_data():
    points = kmeans_points(400, seed=12)
    points = np.concatenate([points, points[:20], [[5.0, 5.0]]])  # repeated points, a far one
    centroids0 = np.concatenate([kmeans_initial_centroids(seed=12), [[20.0, 20.0], [5.0, 4.9]]])
    expected = _kmeans_loop(points, centroids0)
    result = kmeans(points, centroids0)
    assert result.shape == expected.shape
    assert np.array_equal(result[:, :2], expected[:, :2])
    assert np.abs(result[:, 2:] - expected[:, 2:]).max() < 1e-12


# -- transitive closure --------------------------------------------------------------------------


def test_closure_of_a_chain():
    assert transitive_closure([(0, 1), (1, 2), (2, 3)]) == {(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)}


def test_closure_of_cycles_and_repeats():
    assert transitive_closure(np.array([[0, 1], [1, 0], [0, 1]])) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert transitive_closure([(5, 5), (5, 6)]) == {(5, 5), (5, 6)}
    assert transitive_closure([]) == set()


def test_closure_matches_repeated_joins():
    edges = {tuple(e) for e in rmat_edges(40, 60, seed=3).tolist()}
    closure = set(edges)
    while True:  # the recursive CTE's naive evaluation: join with the edges until nothing is new
        more = {(a, d) for a, b in closure for c, d in edges if b == c} - closure
        if not more:
            break
        closure |= more
    assert transitive_closure(edges) == closure
