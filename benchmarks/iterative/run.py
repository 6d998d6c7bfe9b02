"""Iterations (exact or diffusion mode) against recompute, on (scaled) seed workloads: PageRank and k-means.

    .venv/bin/python benchmarks/iterative/run.py pagerank [--scale 0.1] [--increments 3] [--steps 10] [--mode exact]
    .venv/bin/python benchmarks/iterative/run.py kmeans   [--scale 0.01] [--increments 3] [--steps 10] [--mode exact]

``--mode`` takes one or more of ``exact`` (the default), ``differential`` and ``diffusion``,
comma-separated; each runs as a query of its own over the same source, one after the other on
each increment (so each has the machine to itself), and the table has a column per mode.
``--mode diffusion`` runs the examples with ``MODE DIFFUSION KEY (node)`` / ``KEY (x0, y0)``
(seed 000 Algorithm 1, approximate) and reports, per increment, its error against the exact
answer (recompute's, which is the definition): the L1 distance of the PageRank vectors, or the
largest distance from a centroid to the nearest exact one.

The data are the seed's (000 §11; ``streamfold.bench.iterative``) with every size multiplied by
``--scale``: R-MAT graphs of 5K nodes / 50K edges plus increments of 100 nodes and 100–400 edges;
1M points in four squares plus increments of 10K points. ``examples/pagerank.sql`` and
``examples/kmeans.sql`` run with ``--steps`` steps: by streamfold (in each mode, the Python API; an
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


MODES = ("exact", "differential", "diffusion")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("workload", choices=["pagerank", "kmeans"])
    ap.add_argument("--scale", type=float, default=None, help="multiply the seed's sizes (pagerank 0.1, kmeans 0.01)")
    ap.add_argument("--increments", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--mode", default="exact",
                    help=f"one or more of {', '.join(MODES)}, comma-separated: each runs as its own query, "
                         "side by side on the same increments")
    args = ap.parse_args()
    modes = [m.strip().lower() for m in args.mode.split(",") if m.strip()]
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        ap.error(f"--mode: {', '.join(bad) or 'none given'}; choose from {', '.join(MODES)}")
    import streamfold
    from streamfold.runtime.session import get_spark
    from streamfold.sql.iterate import unrolled_sql

    exact_sql = open(os.path.join(EXAMPLES, f"{args.workload}.sql")).read().replace("TIMES 10", f"TIMES {args.steps}")
    key = "node" if args.workload == "pagerank" else "x0, y0"
    written = {"exact": "", "differential": " MODE DIFFERENTIAL", "diffusion": f" MODE DIFFUSION KEY ({key})"}
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
    queries = {m: streamfold.start(exact_sql.replace(f"TIMES {args.steps}", f"TIMES {args.steps}{written[m]}"),
                                   {source: src}, os.path.join(tmp, f"out-{m}"), tables=tables,
                                   schemas={source: schema}, spark=spark, background=False)
               for m in modes}
    rows = []
    so_far: list[np.ndarray] = []
    for i, batch in enumerate(batches):
        write(os.path.join(src, f"{i:06d}.parquet"), batch)
        so_far.append(batch)
        took, answers = {}, {}
        for m, query in queries.items():  # one after the other: each has the machine to itself
            t = time.monotonic()
            assert query.process_available() is not None
            took[m] = time.monotonic() - t
            answers[m] = query.snapshot_pandas()
        t = time.monotonic()
        spark.read.parquet(src).createOrReplaceTempView(source)
        if tables:
            spark.read.parquet(tables["centroids0"]).createOrReplaceTempView("centroids0")
        again = spark.sql(unrolled_sql(exact_sql)).toPandas()
        recompute = time.monotonic() - t
        all_rows = np.concatenate(so_far)
        errors = {}
        if args.workload == "pagerank":
            want = reference.pagerank(all_rows, steps=args.steps)
            exact = dict(zip(again["node"].astype(int), again["rank"]))
            err = max(abs(r - want[n]) for n, r in exact.items())
            for m, got in answers.items():
                mine = dict(zip(got["node"].astype(int), got["rank"]))
                errors[m] = sum(abs(mine.get(n, 0.0) - r) for n, r in exact.items()) + sum(
                    abs(r) for n, r in mine.items() if n not in exact)
            size = f"{len(np.unique(all_rows)):,} nodes, {len(all_rows):,} edges"
        else:
            want = reference.kmeans(all_rows, centroids, args.steps)
            exact = again[["x", "y"]].to_numpy()
            err = np.abs(np.sort(exact, axis=0) - np.sort(want[:, 2:], axis=0)).max()
            for m, got in answers.items():
                # each centroid against the nearest exact one (the answer has no lineage columns)
                mine = got[["x", "y"]].to_numpy()
                errors[m] = (float(max(np.hypot(*(exact - c).T).min() for c in mine))
                             if len(mine) and len(exact) else float("nan"))
            size = f"{len(all_rows):,} points"
        for m in modes:
            if m != "diffusion":  # exact modes: against NumPy too
                errors[m] = max(errors[m], err, _numpy_error(args.workload, answers[m], want))
        rows.append((i, len(batch), size, took, recompute, errors))
        shown = ", ".join(f"{m} {took[m]:.2f}s (error {errors[m]:.1e})" for m in modes)
        print(f"{args.workload} increment {i}: {len(batch)} rows, streamfold {shown}, recompute {recompute:.2f}s "
              f"(vs NumPy {err:.1e})", flush=True)
    for query in queries.values():
        query.stop()
    what = "L1 vs exact" if args.workload == "pagerank" else "max centroid distance vs exact"
    print()
    print("| increment | new rows | data so far | " + " | ".join(f"streamfold {m}" for m in modes)
          + " | recompute | " + " | ".join(f"{m}: {what if m == 'diffusion' else 'max error vs NumPy'}"
                                            for m in modes) + " |")
    print("|---" * (4 + 2 * len(modes)) + "|")
    for i, n, size, took, b, errors in rows:
        print(f"| {i} | {n:,} | {size} | " + " | ".join(f"{took[m]:.2f} s" for m in modes) + f" | {b:.2f} s | "
              + " | ".join(f"{errors[m]:.1e}" for m in modes) + " |")
    return 0


def _numpy_error(workload: str, got, want) -> float:
    """Exact mode's answer against NumPy's: the largest difference of a rank or a coordinate."""
    if workload == "pagerank":
        return max(abs(r - want[int(n)]) for n, r in zip(got["node"], got["rank"]))
    return float(np.abs(np.sort(got[["x", "y"]].to_numpy(), axis=0) - np.sort(want[:, 2:], axis=0)).max())


if __name__ == "__main__":
    raise SystemExit(main())
