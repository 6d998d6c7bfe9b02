"""Iterations (exact or diffusion mode) against recompute, on (scaled) seed workloads: PageRank and k-means.

    .venv/bin/python benchmarks/iterative/run.py pagerank [--scale 0.1] [--increments 3] [--steps 10] [--mode exact]
    .venv/bin/python benchmarks/iterative/run.py kmeans   [--scale 0.01] [--increments 3] [--steps 10] [--mode exact]

``--mode diffusion`` runs the examples with ``MODE DIFFUSION KEY (node)`` / ``KEY (x0, y0)``
(seed 000 Algorithm 1, approximate) and reports, per increment, its error against the exact
answer (recompute's, which is the definition): the L1 distance of the PageRank vectors, or the
largest distance from a centroid to the nearest exact one.

The data are the seed's (000 §11; ``streamfold.bench.iterative``) with every size multiplied by
``--scale``: R-MAT graphs of 5K nodes / 50K edges plus increments of 100 nodes and 100–400 edges;
1M points in four squares plus increments of 10K points. ``examples/pagerank.sql`` and
``examples/kmeans.sql`` run with ``--steps`` steps: by streamfold (exact mode, the Python API; an
increment's time is from its file appearing to its answer committed) and by recompute (the same
query, unrolled into plain Spark SQL, as one batch job over all data so far). After every
increment both answers are compared with NumPy's (``streamfold.bench.reference``). Prints a
Markdown table.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import numpy as np  # noqa: E402

from streamfold.bench import iterative, reference  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workload", choices=["pagerank", "kmeans"])
    ap.add_argument("--scale", type=float, default=None, help="multiply the seed's sizes (pagerank 0.1, kmeans 0.01)")
    ap.add_argument("--increments", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--mode", choices=["exact", "diffusion"], default="exact")
    args = ap.parse_args()
    import streamfold
    from streamfold.runtime.session import get_spark
    from streamfold.sql.iterate import unrolled_sql

    sql = open(os.path.join(EXAMPLES, f"{args.workload}.sql")).read().replace("TIMES 10", f"TIMES {args.steps}")
    exact_sql = sql
    if args.mode == "diffusion":
        key = "node" if args.workload == "pagerank" else "x0, y0"
        sql = sql.replace(f"TIMES {args.steps}", f"TIMES {args.steps} MODE DIFFUSION KEY ({key})")
    tmp = tempfile.mkdtemp(prefix="sf-iter-")
    spark = get_spark("local[2]")
    if args.workload == "pagerank":
        scale = args.scale or 0.1
        batches = iterative.rmat_stream(int(5000 * scale), int(50000 * scale), args.increments,
                                        max(1, int(100 * scale)), max(1, int(100 * scale)))
        source, write, tables, schema = "edges", iterative.write_edges, {}, "src BIGINT, dst BIGINT"
    else:
        scale = args.scale or 0.01
        batches = iterative.kmeans_stream(int(1_000_000 * scale), args.increments, max(1, int(10_000 * scale)))
        centroids = iterative.kmeans_initial_centroids()
        os.makedirs(os.path.join(tmp, "centroids0"))
        iterative.write_points(os.path.join(tmp, "centroids0", "c.parquet"), centroids)
        source, write, schema = "points", iterative.write_points, "x DOUBLE, y DOUBLE"
        tables = {"centroids0": os.path.join(tmp, "centroids0")}
    src = os.path.join(tmp, source)
    os.makedirs(src)
    query = streamfold.start(sql, {source: src}, os.path.join(tmp, "out"), tables=tables,
                             schemas={source: schema}, spark=spark, background=False)
    rows = []
    so_far: list[np.ndarray] = []
    for i, batch in enumerate(batches):
        write(os.path.join(src, f"{i:06d}.parquet"), batch)
        so_far.append(batch)
        t = time.monotonic()
        result = query.process_available()
        incremental = time.monotonic() - t
        assert result is not None
        got = query.snapshot_pandas()
        t = time.monotonic()
        data = spark.read.parquet(src)
        data.createOrReplaceTempView(source)
        if tables:
            spark.read.parquet(tables["centroids0"]).createOrReplaceTempView("centroids0")
        again = spark.sql(unrolled_sql(exact_sql)).toPandas()
        recompute = time.monotonic() - t
        all_rows = np.concatenate(so_far)
        if args.workload == "pagerank":
            want = reference.pagerank(all_rows, steps=args.steps)
            exact = dict(zip(again["node"].astype(int), again["rank"]))
            mine = dict(zip(got["node"].astype(int), got["rank"]))
            off = sum(abs(mine.get(n, 0.0) - r) for n, r in exact.items()) + sum(
                abs(r) for n, r in mine.items() if n not in exact)
            err = max(abs(r - want[n]) for n, r in exact.items())
            size = f"{len(np.unique(all_rows)):,} nodes, {len(all_rows):,} edges"
        else:
            want = reference.kmeans(all_rows, centroids, args.steps)
            exact = again[["x", "y"]].to_numpy()
            mine = got[["x", "y"]].to_numpy()
            # each centroid against the nearest exact one (the answer has no lineage columns)
            off = float(max(np.hypot(*(exact - c).T).min() for c in mine)) if len(mine) and len(exact) else float("nan")
            err = np.abs(np.sort(again[["x", "y"]].to_numpy(), axis=0) - np.sort(want[:, 2:], axis=0)).max()
            size = f"{len(all_rows):,} points"
        if args.mode == "exact":
            off = err = max(err, _numpy_error(args.workload, got, want))
        rows.append((i, len(batch), size, incremental, recompute, off))
        print(f"{args.workload} increment {i}: {len(batch)} rows, streamfold {args.mode} {incremental:.2f}s, "
              f"recompute {recompute:.2f}s, error vs exact {off:.2e} (recompute vs NumPy {err:.1e})", flush=True)
    query.stop()
    print()
    what = "max error vs NumPy" if args.mode == "exact" else (
        "L1 vs exact" if args.workload == "pagerank" else "max centroid distance vs exact")
    print(f"| increment | new rows | data so far | streamfold {args.mode} | recompute | {what} |")
    print("|---|---|---|---|---|---|")
    for i, n, size, a, b, err in rows:
        print(f"| {i} | {n:,} | {size} | {a:.2f} s | {b:.2f} s | {err:.1e} |")
    return 0


def _numpy_error(workload: str, got, want) -> float:
    """Exact mode's answer against NumPy's: the largest difference of a rank or a coordinate."""
    if workload == "pagerank":
        return max(abs(r - want[int(n)]) for n, r in zip(got["node"], got["rank"]))
    return float(np.abs(np.sort(got[["x", "y"]].to_numpy(), axis=0) - np.sort(want[:, 2:], axis=0)).max())


if __name__ == "__main__":
    raise SystemExit(main())
