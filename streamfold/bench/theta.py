"""``streamfold bench theta``: the join matrix under a fluctuating cardinality ratio (thesis Fig. 4.12).

A band join (|x.B − y.C| ≤ 1 over random pairs in [0, 10000], its pairs counted and summed)
over two streams whose sizes take turns: both start with
``--history`` rows; then, phase after phase, one of them grows in ``BATCHES_PER_PHASE`` batches
until it holds ``--ratio`` K times the other's rows (the other receiving 1/(4K) as many rows per
batch), so |S1|/|S2| swings between K and 1/K. Each configuration runs the same files:

* **DYNAMIC** — streamfold with Algorithm 2 (ε = 1): the mapping follows the sizes;
* **STATICMID** — streamfold with the square mapping (2, 2) kept (``matrix_epsilon=None``);
* **recompute** — Spark SQL's batch query over every file so far, in the same session.

Per batch: the time to commit it (recompute: to write the answer), the mapping, |S1| and |S2|,
the input-load factor (the rows one cell holds, |R|/n + |S|/m) against the best mapping's, and
the rows all cells hold together (a row of an input counts once per cell it is kept in). A
small untimed run warms the JVM first. Every final answer is checked against DuckDB. (STATICOPT,
the best fixed mapping in hindsight, has no meaning when the ratio keeps swinging; SHJ does not
apply to a band join: Spark streaming refuses it, see the ``band-join`` workload.)
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any

from ..verify import compare, duckdb_answer, read_rows
from .data import write_pairs
from .report import write_json_and_markdown

# A band join of two streams of random pairs in [0, 10000], every pair counted and summed: each
# input is kept on its whole rows (the sum reads a column of each), so both grow with every row.
FLUCT_SQL = "SELECT count(*) AS n, sum(x.A + y.D) AS total FROM S1 x JOIN S2 y ON abs(x.B - y.C) <= 1"
BATCHES_PER_PHASE = 3
CONFIGS = (("DYNAMIC", 1.0), ("STATICMID", None))


def schedule(history: int, ratio: int, phases: int) -> list[tuple[int, int]]:
    """Rows added to (S1, S2) per batch: the history, then each phase's batches."""
    sizes = [history, history]
    out = [(history, history)]
    for p in range(phases):
        grow = p % 2  # phase 0 grows S1, phase 1 S2, …
        # the other input receives step / (4K) rows a batch; the phase ends at K times its size
        need = ratio * sizes[1 - grow] - sizes[grow]
        step = max(int(need / (BATCHES_PER_PHASE * 0.75)), 1)
        for _ in range(BATCHES_PER_PHASE):
            add = [0, 0]
            add[grow], add[1 - grow] = step, max(step // (4 * ratio), 1)
            sizes = [sizes[0] + add[0], sizes[1] + add[1]]
            out.append((add[0], add[1]))
    return out


def _files(root: str, plan: list[tuple[int, int]]) -> list[dict[str, str]]:
    """Write the files of every batch once (the configurations replay them)."""
    batches = []
    for b, (n1, n2) in enumerate(plan):
        files = {}
        for name, cols, n, salt in (("S1", ("A", "B"), n1, 1), ("S2", ("C", "D"), n2, 2)):
            d = os.path.join(root, name)
            os.makedirs(d, exist_ok=True)
            path = os.path.join(d, f"{b:06d}.parquet")
            write_pairs(path, cols, n, 7919 * b + salt)
            files[name] = path
        batches.append(files)
    return batches


def _streamfold(spark: Any, name: str, epsilon: float | None, batches: list[dict[str, str]], work: str,
                say: Any) -> dict[str, Any]:
    import streamfold

    base = os.path.join(work, name)
    shutil.rmtree(base, ignore_errors=True)
    dirs = {s: os.path.join(base, "in", s) for s in ("S1", "S2")}
    for d in dirs.values():
        os.makedirs(d)
    out = os.path.join(base, "out")
    q = streamfold.start(FLUCT_SQL, dirs, out, spark=spark, background=False, matrix_epsilon=epsilon,
                         schemas={"S1": "A INT, B INT", "S2": "C INT, D INT"})
    rows: list[dict[str, Any]] = []
    try:
        for b, files in enumerate(batches):
            for s, path in files.items():
                shutil.copy(path, os.path.join(dirs[s], os.path.basename(path)))
            result = q.process_available()
            assert result is not None
            with open(os.path.join(out, "commits", f"{b:06d}.json"), encoding="utf-8") as fh:
                entry = json.load(fh)["matrix"]["in_x"]
            stored = sum(v for k, v in result.state_rows.items() if k in ("in_x", "in_y"))
            rows.append({"batch": b, "seconds": round(result.duration_s, 3), "mapping": entry["mapping"],
                         "sizes": entry["sizes"], "ilf": entry["ilf"], "ilf_opt": entry["ilf_opt"],
                         "ilf_ratio": entry["ilf_ratio"], "stored_rows": stored,
                         "migrated": "migrated_from" in entry})
            say(f"[theta] {name} batch {b}: {result.duration_s:.2f} s, mapping {tuple(entry['mapping'])}, "
                f"sizes {tuple(entry['sizes'])}, ILF/ILF* {entry['ilf_ratio']}")
        answer = [tuple(r) for r in q.snapshot_pandas().itertuples(index=False)]
    finally:
        q.stop()
    return {"batches": rows, "answer": answer}


def _recompute(spark: Any, batches: list[dict[str, str]], work: str, say: Any) -> dict[str, Any]:
    rows = []
    target = os.path.join(work, "recompute-out")
    for b in range(len(batches)):
        t = time.monotonic()
        for s in ("S1", "S2"):
            spark.read.parquet(*[f[s] for f in batches[: b + 1]]).createOrReplaceTempView(s)
        spark.sql(FLUCT_SQL).write.mode("overwrite").parquet(target)
        rows.append({"batch": b, "seconds": round(time.monotonic() - t, 3)})
        say(f"[theta] recompute batch {b}: {rows[-1]['seconds']:.2f} s")
    return {"batches": rows, "answer": read_rows(target)}


def run(history: int, ratio: int, phases: int, out: str, master: str | None,
        say: Any = print) -> dict[str, Any]:
    """Run the experiment; results.json and results.md under ``out``/theta."""
    from ..runtime.session import get_spark

    directory = os.path.join(out, "theta")
    work = os.path.join(directory, "work")
    shutil.rmtree(work, ignore_errors=True)
    plan = schedule(history, ratio, phases)
    batches = _files(os.path.join(work, "data"), plan)
    spark = get_spark(master or "local[*]", app_name="streamfold-bench-theta")
    results: dict[str, Any] = {"query": FLUCT_SQL, "history": history, "ratio": ratio, "phases": phases,
                               "schedule": plan, "systems": {}}
    expected = duckdb_answer(FLUCT_SQL, {s: [f[s] for f in batches] for s in ("S1", "S2")})
    # untimed: warm the JVM on a few small batches, so the first configuration is not charged for it
    warm = _files(os.path.join(work, "warm"), schedule(100, ratio, 1))
    _streamfold(spark, "warm-up", 1.0, warm, work, lambda msg: None)
    for name, epsilon in CONFIGS:
        rec = _streamfold(spark, name, epsilon, batches, work, say)
        rec["matches_duckdb"] = compare(rec.pop("answer"), expected).matches
        results["systems"][name] = rec
    rec = _recompute(spark, batches, work, say)
    rec["matches_duckdb"] = compare(rec.pop("answer"), expected).matches
    results["systems"]["recompute"] = rec
    write_json_and_markdown(results, directory, report(results))
    return results


def report(results: dict[str, Any]) -> str:
    """The per-batch table: time per system, and each streamfold configuration's mapping and ILF."""
    systems = results["systems"]
    lines = ["| batch | +S1 | +S2 | " + " | ".join(f"{n} s" for n in systems) +
             " | DYNAMIC (n, m) | DYNAMIC ILF/ILF* | STATICMID ILF/ILF* | DYNAMIC rows stored | STATICMID rows stored |",
             "|---" * (3 + len(systems) + 5) + "|"]
    for b, (n1, n2) in enumerate(results["schedule"]):
        dyn, mid = systems["DYNAMIC"]["batches"][b], systems["STATICMID"]["batches"][b]
        times = " | ".join(f"{systems[n]['batches'][b]['seconds']:.2f}" for n in systems)
        mark = " (migrated)" if dyn["migrated"] else ""
        lines.append(f"| {b} | {n1} | {n2} | {times} | {tuple(dyn['mapping'])}{mark} | {dyn['ilf_ratio']} | "
                     f"{mid['ilf_ratio']} | {dyn['stored_rows']} | {mid['stored_rows']} |")
    checks = ", ".join(f"{n}: {'exact' if r['matches_duckdb'] else 'WRONG'}" for n, r in systems.items())
    return "\n".join(lines) + f"\n\nfinal answers against DuckDB — {checks}\n"


def main(history: int | None, ratio: int | None, phases: int | None, out: str, master: str | None) -> int:
    results = run(history or 2000, ratio or 4, phases or 3, out, master)
    print(report(results))
    return 0 if all(r["matches_duckdb"] for r in results["systems"].values()) else 1
