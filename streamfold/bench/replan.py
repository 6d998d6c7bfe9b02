"""``streamfold bench replan`` (also ``bench 004``): seed 004's Fig. 7, dynamic join reordering.

Three streams x, y, z of (key, value) pairs, the keys Gaussian with standard deviation 10: y's
around 0, z's around ``FAR``, and x's switching between the two every ``--reps`` batches (the
paper: 0 and 30, switching every 20 s of 1 s batches). The query joins them on x's key as the
paper's ``joined`` does and counts and sums the joined rows. While x's keys sit where y's do, the
delta term of x builds ``Δx ⋈ y`` — large — before meeting z, which keeps almost none of it;
joined the other way round it builds ``Δx ⋈ z``, almost nothing. The other two terms (``Δy ⋈ x ⋈
z``, ``Δz ⋈ x ⋈ y``) have one order only (y and z share no equality) and cost the same in both
configurations. Unlike the paper's, whose window is one batch, streamfold's states keep every
batch, so the joins grow batch after batch.

Two configurations run the same files side by side in one Spark session, after an untimed
warm-up — batch by batch, which of them goes first alternating, so that the other engineers' load
on a shared machine falls on both:

* **static** — the compile-time order (``join_order`` off);
* **replanned** — the order re-planned from the measured selectivities, with
  ``join_order_batches=1`` and ``join_order_smoothing=1`` (the last batch's measure alone): a
  switch of x's keys in batch t is measured by batch t, decided after it, and batch t+1 runs the
  new order — one batch of lag, as the paper's. (The defaults, k = 2 and a moving average, lag
  more and flip less.)

Per batch: the time to commit it and Δx's order. After every batch, each snapshot is checked
against DuckDB over the files so far. Results in ``OUT/replan/results.json`` and ``results.md``.
"""

from __future__ import annotations

import os
import shutil
import statistics
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .report import write_json_and_markdown
from ..verify import compare, duckdb_answer, python_value

SQL = ("SELECT count(*) AS c, sum(x.v + y.v + z.v) AS s FROM X x JOIN Y y ON x.k = y.k "
       "JOIN Z z ON x.k = z.k")
FAR = 60  # z's mean (the paper's 30 leaves x ⋈ y ⋈ z as large as x ⋈ y once states keep every batch)
SCHEMA = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int32())])


def schedule(batches: int, phase: int) -> list[int]:
    """x's key mean per batch: 0 for ``phase`` batches, then FAR, and so on."""
    return [0 if (b // phase) % 2 == 0 else FAR for b in range(batches)]


def write_files(root: str, means: list[int], rows: int, seed: int = 4) -> list[dict[str, str]]:
    """Each batch's file per stream, written once (both configurations copy them)."""
    rng = np.random.default_rng(seed)
    batches = []
    for b, mean in enumerate(means):
        files = {}
        for name, mu in (("X", mean), ("Y", 0), ("Z", FAR)):
            keys = np.rint(rng.normal(mu, 10, rows)).astype(np.int32)
            values = rng.integers(0, 1_000_000, rows, dtype=np.int32)
            path = os.path.join(root, name, f"{b:06d}.parquet")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            pq.write_table(pa.Table.from_arrays([keys, values], schema=SCHEMA), path)
            files[name] = path
        batches.append(files)
    return batches


def run_configs(spark: Any, configs: list[tuple[str, bool]], batches: list[dict[str, str]], work: str,
                say: Any) -> dict[str, dict[str, Any]]:
    """The configurations side by side over the files, batch by batch — which goes first
    alternating — so that a change of the machine's load falls on both: per batch its seconds,
    Δx's order, DuckDB's check."""
    import streamfold
    from ..settings import Settings

    queries: dict[str, Any] = {}
    dirs: dict[str, dict[str, str]] = {}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in configs}
    seen: dict[str, list[str]] = {s: [] for s in ("X", "Y", "Z")}
    try:
        for name, reorder in configs:
            base = os.path.join(work, name)
            shutil.rmtree(base, ignore_errors=True)
            dirs[name] = {s: os.path.join(base, "in", s) for s in seen}
            for d in dirs[name].values():
                os.makedirs(d)
            settings = Settings.from_environ().replace(join_order=reorder, join_order_batches=1,
                                                       join_order_smoothing=1.0)
            queries[name] = streamfold.start(SQL, dirs[name], os.path.join(base, "out"), spark=spark,
                                             background=False, settings=settings,
                                             schemas={s: "k INT, v INT" for s in seen})
        for b, files in enumerate(batches):
            for s, path in files.items():
                seen[s].append(path)
            expected = duckdb_answer(SQL, dict(seen))
            turn = configs if b % 2 == 0 else configs[::-1]
            for name, _ in turn:
                q = queries[name]
                for s, path in files.items():
                    shutil.copy(path, os.path.join(dirs[name][s], os.path.basename(path)))
                result = q.process_available()
                assert result is not None
                entry = (q.commit(b).get("join_order") or {}).get("in_x")
                order = entry["order"] if entry else ["in_y", "in_z"]
                snapshot = [tuple(python_value(v) for v in r) for r in q.snapshot_pandas().itertuples(index=False)]
                check = compare(snapshot, expected)
                rows[name].append({"batch": b, "seconds": round(result.duration_s, 3), "order": order,
                                   "exact": check.matches})
                say(f"[replan] {name} batch {b}: {result.duration_s:.2f} s, Δx ⋈ {' ⋈ '.join(order)}"
                    + ("" if check.matches else f"  WRONG against DuckDB: {check.detail}"))
    finally:
        for q in queries.values():
            q.stop()
    out = {}
    for name, rs in rows.items():
        secs = [r["seconds"] for r in rs[1:]]  # batch 0 (empty states, first plans) left out
        out[name] = {"batches": rs, "mean_s": round(statistics.fmean(secs), 3), "p95_s": round(_p95(secs), 3),
                     "exact": all(r["exact"] for r in rs)}
    return out


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def run(rows: int, batches: int, phase: int, out: str, master: str | None, say: Any = print,
        warm_up: bool = True) -> dict[str, Any]:
    """The experiment; results.json and results.md under ``out``/replan."""
    from ..runtime.session import get_spark

    directory = os.path.join(out, "replan")
    work = os.path.join(directory, "work")
    shutil.rmtree(work, ignore_errors=True)
    means = schedule(batches, phase)
    files = write_files(os.path.join(work, "data"), means, rows)
    spark = get_spark(master or "local[*]", app_name="streamfold-bench-replan")
    if warm_up:  # untimed: the JVM warmed for both
        warm = write_files(os.path.join(work, "warm"), schedule(3, 1), max(rows // 10, 10), seed=5)
        run_configs(spark, [("warm-up", True)], warm, work, lambda msg: None)
    results: dict[str, Any] = {"query": SQL, "rows_per_stream_per_batch": rows, "batches": batches, "phase": phase,
                               "x_means": means, "systems": {}}
    results["systems"] = run_configs(spark, [("static", False), ("replanned", True)], files, work, say)
    static, dynamic = results["systems"]["static"], results["systems"]["replanned"]
    results["mean_ratio"] = round(dynamic["mean_s"] / static["mean_s"], 3)
    results["p95_ratio"] = round(dynamic["p95_s"] / static["p95_s"], 3)
    write_json_and_markdown(results, directory, report(results))
    return results


def report(results: dict[str, Any]) -> str:
    """Per batch: x's mean, each configuration's seconds and Δx's order; then mean and p95."""
    systems = results["systems"]
    lines = ["| batch | x's mean | static s | replanned s | replanned Δx order |", "|---|---|---|---|---|"]
    for b, mean in enumerate(results["x_means"]):
        s, d = systems["static"]["batches"][b], systems["replanned"]["batches"][b]
        lines.append(f"| {b} | {mean} | {s['seconds']:.2f} | {d['seconds']:.2f} | Δx ⋈ {' ⋈ '.join(d['order'])} |")
    lines.append("")
    for name, r in systems.items():
        lines.append(f"- {name}: mean {r['mean_s']:.2f} s, p95 {r['p95_s']:.2f} s per batch (batches 1–"
                     f"{results['batches'] - 1}); every snapshot against DuckDB: {'exact' if r['exact'] else 'WRONG'}")
    lines.append(f"- replanned / static: mean {results['mean_ratio']:.2f}, p95 {results['p95_ratio']:.2f}")
    return "\n".join(lines) + "\n"


def main(rows: int | None, batches: int | None, phase: int | None, quick: bool, out: str, master: str | None) -> int:
    if quick:  # seconds: no warm-up, three batches, x's keys switching after two
        results = run(rows or 200, batches or 3, phase or 2, out, master, warm_up=False)
    else:
        results = run(rows or 2000, batches or 24, phase or 8, out, master)
    print(report(results))
    return 0 if all(r["exact"] for r in results["systems"].values()) else 1
