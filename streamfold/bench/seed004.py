"""``streamfold bench 004-fig5 | 004-fig6 | 004-fig8``: seed 004's §4.1 experiments, optimized
against unoptimized, side by side.

The paper streams (key, value) pairs, the keys Gaussian around 0 with standard deviation 5, in
one-second batches, and measures each batch's processing time with an optimization on and off:

* **Fig. 5, predicate push-down** — ``gb = SELECT key, avg(value) FROM x GROUP BY key`` then
  ``pred = SELECT … FROM gb WHERE key > 10`` at 500,000 pairs a second (paper: 712 → 497 ms,
  −30 %; here 200,000 by default, below). *streamfold* runs the filter on each batch's rows before the GROUP BY (its state keeps
  the 2.5 % of keys above 10); *unoptimized* is streamfold with ``STREAMFOLD_PUSH_DOWN_GROUPS=0``:
  every batch aggregated, every key kept, the filter over the answer.
* **Fig. 6, window push-up** — ``SELECT key FROM (x window 10 seconds) WHERE key = 20`` at
  500,000 pairs a second (paper: the unoptimized plan takes over 2 s for each 1-s batch, its
  delay unbounded; with push-up the delay stays low) and at 200,000 (paper: −65 %; the default here). *streamfold*: the filter on each batch's rows,
  the window's live rows only those that pass it; *unoptimized*: the window's rows filtered again
  every batch — the query recomputed by Spark over the files of the window, its bound compared with
  a timestamp literal so that Parquet's statistics skip the files older than the window.
* **Fig. 8, incremental windowed aggregation** — ``SELECT key, count(value) FROM (x window 10
  seconds) GROUP BY key`` at 100,000 pairs a second (paper: 715 → 310 ms). *streamfold*: the
  counts changed by each batch's rows and by the rows the clock passes; *unoptimized*: the
  window's rows counted again every batch (recomputed as for Fig. 6).

The rates are the paper's scaled to this machine (``--increment`` sets them): 200,000 pairs a
batch for Fig. 5 and 6, the paper's own lower rate for Fig. 6, since a batch of more rows than
one task holds (``shape.ONE_TASK_ROWS``, 250,000) is planned anew instead of replaying prepared
plans, on two cores; Fig. 8's 100,000 as the paper.

In streamfold's SQL the paper's window of ten one-second batches is an event-time bound,
``ts > max_event_time() - INTERVAL 10 SECONDS``; batch b holds the events of second b. The two
configurations run the same files in one Spark session after an untimed warm-up, side by side
(``side_by_side.py``): which goes first alternating, a batch's time from its file's arrival to
its answer read back, every answer of both checked against DuckDB's on the files so far (at the
batch's time).
Results in ``OUT/004-figN/results.json`` and ``results.md``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..settings import env_name
from .report import write_json_and_markdown
from .side_by_side import Query, run_configs

SCHEMA = pa.schema([pa.field("ts", pa.timestamp("us", "UTC")), pa.field("key", pa.int32()),
                    pa.field("value", pa.int32())])
COLUMNS = "ts TIMESTAMP, key INT, value INT"
T0 = 1_704_067_200_000_000  # 2024-01-01 UTC (µs)
WINDOW_S = 10
_BOUND = f"ts > max_event_time() - INTERVAL {WINDOW_S} SECONDS"


@dataclass(frozen=True)
class Experiment:
    """One of the paper's figures: streamfold's query, its text at a time (µs; None without a
    window) for Spark (True) or DuckDB (False), the unoptimized configuration and the paper's rate."""

    name: str
    figure: str
    sql: str
    text_at: Callable[[int | None, bool], str]
    unoptimized: str  # "unpushed": streamfold with STREAMFOLD_PUSH_DOWN_GROUPS=0; "recompute": Spark over the window
    rate: int  # pairs a second (= a batch) by default
    paper: str


def _windowed(select: str, tail: str = "") -> Callable[[int | None, bool], str]:
    def at(now_us: int | None, spark: bool) -> str:
        assert now_us is not None
        since = now_us - WINDOW_S * 1_000_000
        bound = f"ts > timestamp_micros({since})" if spark else f"epoch_us(ts) > {since}"
        return f"{select} WHERE {bound}{tail}"
    return at


_FIG5 = "SELECT key, value FROM (SELECT key, avg(value) AS value FROM x GROUP BY key) gb WHERE key > 10"
EXPERIMENTS = {e.name: e for e in (
    Experiment("004-fig5", "Fig. 5, predicate push-down", _FIG5, lambda now, spark: _FIG5, "unpushed", 200_000,
               "712 → 497 ms a batch (−30 %)"),
    Experiment("004-fig6", "Fig. 6, window push-up", f"SELECT key, value FROM x WHERE {_BOUND} AND key = 20",
               _windowed("SELECT key, value FROM x", " AND key = 20"), "recompute", 200_000,
               "over 2 s for each 1-s batch, delay unbounded → low and flat; −65 % at 200,000 a second"),
    Experiment("004-fig8", "Fig. 8, incremental windowed aggregation",
               f"SELECT key, count(value) AS c FROM x WHERE {_BOUND} GROUP BY key",
               _windowed("SELECT key, count(value) AS c FROM x", " GROUP BY key"), "recompute", 100_000,
               "715 → 310 ms a batch (−57 %)"),
)}


def write_files(root: str, batches: int, rate: int, seed: int = 4) -> list[str]:
    """One Parquet file a batch: ``rate`` pairs with event times in the batch's second."""
    rng = np.random.default_rng(seed)
    os.makedirs(root, exist_ok=True)
    paths = []
    for b in range(batches):
        ts = T0 + b * 1_000_000 + rng.integers(0, 1_000_000, rate)
        table = pa.Table.from_arrays([
            pa.array(ts, pa.timestamp("us", "UTC")), pa.array(np.rint(rng.normal(0, 5, rate)).astype(np.int32)),
            pa.array(rng.integers(0, 1_000, rate, dtype=np.int32))], schema=SCHEMA)
        path = os.path.join(root, f"{b:06d}.parquet")
        pq.write_table(table, path)
        paths.append(path)
    return paths


def run(exp: Experiment, batches: int, rate: int, out: str, master: str | None, say: Any = print,
        warm_up: bool = True) -> dict[str, Any]:
    """The experiment; results.json and results.md under ``out``/``exp.name``."""
    from ..runtime.session import get_spark

    directory = os.path.join(out, exp.name)
    work = os.path.join(directory, "work")
    shutil.rmtree(work, ignore_errors=True)
    files = write_files(os.path.join(work, "data"), batches, rate)
    spark = get_spark(master or "local[*]", app_name=f"streamfold-bench-{exp.name}")
    query = Query(exp.name, exp.sql, "x", COLUMNS, exp.text_at, "unoptimized", unpushed=exp.unoptimized == "unpushed")
    if warm_up:  # untimed: the JVM warmed for both
        run_configs(spark, query, write_files(os.path.join(work, "warm"), 4, 2_000, seed=5), work, lambda m: None)
    results: dict[str, Any] = {"experiment": exp.name, "figure": exp.figure, "query": exp.sql,
                               "unoptimized": exp.unoptimized, "batches": batches, "pairs_per_batch": rate,
                               "paper": exp.paper, "systems": run_configs(spark, query, files, work, say)}
    systems = results["systems"]
    results["mean_ratio"] = round(systems["streamfold"]["mean_s"] / systems["unoptimized"]["mean_s"], 3)
    write_json_and_markdown(results, directory, report(results))
    return results


def report(results: dict[str, Any]) -> str:
    """Per batch each configuration's seconds; then mean, median, max and the ratio."""
    systems = results["systems"]
    unoptimized = (f"streamfold, {env_name('push_down_groups')}=0" if results["unoptimized"] == "unpushed"
                   else "the window recomputed by Spark")
    lines = [f"{results['figure']}: `{results['query']}`, {results['pairs_per_batch']:,} pairs a 1-s batch; "
             f"unoptimized: {unoptimized}. The paper: {results['paper']}.", "",
             "| batch | streamfold s | unoptimized s | answer rows |", "|---|---|---|---|"]
    for b in range(results["batches"]):
        s, u = systems["streamfold"]["batches"][b], systems["unoptimized"]["batches"][b]
        lines.append(f"| {b} | {s['seconds']:.2f} | {u['seconds']:.2f} | {s['answer_rows']} |")
    lines.append("")
    for name, r in systems.items():
        lines.append(f"- {name}: mean {r['mean_s']:.2f} s (median {r['median_s']:.2f}, max {r['max_s']:.2f}, sd "
                     f"{r['sd_s']:.2f}) a batch (batches 1–{results['batches'] - 1}); every answer against DuckDB: "
                     f"{'exact' if r['exact'] else 'WRONG'}")
    lines.append(f"- streamfold / unoptimized: mean {results['mean_ratio']:.2f}")
    return "\n".join(lines) + "\n"


def main(name: str, rate: int | None, batches: int | None, quick: bool, out: str, master: str | None) -> int:
    exp = EXPERIMENTS[name]
    if quick:  # seconds: no warm-up, four small batches
        results = run(exp, batches or 4, rate or 2_000, out, master, warm_up=False)
    else:
        results = run(exp, batches or 30, rate or exp.rate, out, master)
    print(report(results))
    return 0 if all(r["exact"] for r in results["systems"].values()) else 1
