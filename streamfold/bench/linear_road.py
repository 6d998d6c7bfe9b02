"""``streamfold bench linear-road``: seed 004 §4.2, Linear Road's congestion query (Fig. 11).

Cars on a freeway report (time, vid, speed, hwy, lane, dir, seg, pos); the query counts the
reports, in the last 15 seconds, of cars in congested segments — those whose average speed over
the last minute is under 40 mph. In streamfold's SQL, two event-time bounds of one column:

    SELECT count(r.vid) AS c FROM R r JOIN (SELECT seg, dir, hwy FROM R
      WHERE ts > max_event_time() - INTERVAL 60 SECONDS GROUP BY seg, dir, hwy
      HAVING avg(speed) < 40) s ON … WHERE r.ts > max_event_time() - INTERVAL 15 SECONDS

The paper replays the benchmark's three hours, 5 to 1,884 reports per second, five times faster;
the data here is a generator of its schema (the benchmark's own generator is not on PyPI): a
batch is five seconds of reports (one second replayed five times faster), the rate ramping
linearly from 50 to 2,000 reports a second over ``--increments`` batches (default 60);
a few segments of each road and direction are congested at a time (speeds around 30 instead of
60), the congestion moving every minute.

Two configurations run the same files side by side in one Spark session (``side_by_side.py``),
batch by batch, which goes first alternating:

* **streamfold** — the query maintained: the bounds pushed onto the stream's rows (window
  push-up), the segments' sums kept and changed by each batch's rows and by the rows the clock
  passes (incremental aggregation), the states bounded by the windows;
* **recompute** — standing in for the paper's plan without those optimizations: every batch the
  query again in Spark over the files so far, its bounds read from the files' largest time (Spark skips the
  Parquet row groups the bound excludes by their statistics, so it reads about the window, not
  the whole history).

Per batch the time to its answer; every answer of both against DuckDB at the batch's time.
Results in ``OUT/linear-road/results.json`` and ``results.md``.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .report import write_json_and_markdown
from .side_by_side import Query, run_configs

_ON = "r.seg = s.seg AND r.dir = s.dir AND r.hwy = s.hwy"
SQL = ("SELECT count(r.vid) AS c FROM R r JOIN (SELECT seg, dir, hwy FROM R "
       "WHERE ts > max_event_time() - INTERVAL 60 SECONDS GROUP BY seg, dir, hwy HAVING avg(speed) < 40) s "
       f"ON {_ON} WHERE r.ts > max_event_time() - INTERVAL 15 SECONDS")
# The same query at a given time (µs): DuckDB's text, and Spark's over the files (recompute).
_AT = ("SELECT count(r.vid) FROM R r JOIN (SELECT seg, dir, hwy FROM R WHERE {ts60} GROUP BY seg, dir, hwy "
       f"HAVING avg(speed) < 40) s ON {_ON} WHERE {{ts15}}")
SCHEMA = pa.schema([pa.field("ts", pa.timestamp("us", "UTC")), pa.field("vid", pa.int32()),
                    pa.field("speed", pa.int32()), pa.field("hwy", pa.int32()), pa.field("lane", pa.int32()),
                    pa.field("dir", pa.int32()), pa.field("seg", pa.int32()), pa.field("pos", pa.int32())])
T0 = 1_704_067_200_000_000  # 2024-01-01 UTC (µs)
ROADS, SEGMENTS, CARS = 2, 100, 5_000
SPAN = 5  # seconds of reports a batch: one second of the benchmark replayed five times faster


def rates(batches: int, low: float, high: float) -> list[float]:
    """Reports a second in each batch: a linear ramp from ``low`` to ``high``."""
    return [low + (high - low) * b / max(1, batches - 1) for b in range(batches)]


def write_files(root: str, batches: int, span: int, low: float, high: float, seed: int = 42) -> list[str]:
    """One Parquet file of reports per batch, ``span`` seconds of them at the batch's rate."""
    rng = np.random.default_rng(seed)
    os.makedirs(root, exist_ok=True)
    paths = []
    for b, rate in enumerate(rates(batches, low, high)):
        n = max(1, int(rate * span))
        t = b * span + rng.uniform(0, span, n)
        hwy, direction = rng.integers(0, ROADS, n), rng.integers(0, 2, n)
        seg = rng.integers(0, SEGMENTS, n)
        minute = (t // 60).astype(np.int64)
        congested = (seg + 7 * minute + 13 * hwy + 29 * direction) % 10 == 0  # a tenth, moving each minute
        speed = np.clip(rng.normal(np.where(congested, 30, 60), 10), 0, 100).astype(np.int32)
        table = pa.Table.from_arrays([
            pa.array(T0 + (t * 1e6).astype(np.int64), pa.timestamp("us", "UTC")),
            pa.array(rng.integers(0, CARS, n), pa.int32()), pa.array(speed),
            pa.array(hwy, pa.int32()), pa.array(rng.integers(0, 4, n), pa.int32()), pa.array(direction, pa.int32()),
            pa.array(seg, pa.int32()), pa.array(seg * 5280 + rng.integers(0, 5280, n), pa.int32())], schema=SCHEMA)
        path = os.path.join(root, f"{b:06d}.parquet")
        pq.write_table(table, path)
        paths.append(path)
    return paths


COLUMNS = "ts TIMESTAMP, vid INT, speed INT, hwy INT, lane INT, dir INT, seg INT, pos INT"


def _at(now_us: int | None, spark: bool) -> str:
    """The query with its bounds at ``now_us``: Spark's text compares ``ts`` with a timestamp
    literal (so that Parquet's statistics skip what is older), DuckDB's its ``epoch_us``."""
    assert now_us is not None  # the query has time bounds: every batch has a time

    def bound(ts: str, seconds: int) -> str:
        since = now_us - seconds * 1_000_000
        return f"{ts} > timestamp_micros({since})" if spark else f"epoch_us({ts}) > {since}"

    return _AT.format(ts60=bound("ts", 60), ts15=bound("r.ts", 15))


def run(batches: int, span: int, low: float, high: float, out: str, master: str | None, say: Any = print,
        warm_up: bool = True) -> dict[str, Any]:
    """The experiment; results.json and results.md under ``out``/linear-road."""
    from ..runtime.session import get_spark

    directory = os.path.join(out, "linear-road")
    work = os.path.join(directory, "work")
    shutil.rmtree(work, ignore_errors=True)
    files = write_files(os.path.join(work, "data"), batches, span, low, high)
    spark = get_spark(master or "local[*]", app_name="streamfold-bench-linear-road")
    query = Query("linear-road", SQL, "R", COLUMNS, _at, "recompute")
    if warm_up:  # untimed: the JVM warmed for both
        run_configs(spark, query, write_files(os.path.join(work, "warm"), 4, span, low, low, seed=5), work,
                    lambda m: None)
    results: dict[str, Any] = {"query": SQL, "batches": batches, "span_s": span, "rates": [round(r, 1) for r in
                               rates(batches, low, high)], "systems": run_configs(spark, query, files, work, say)}
    results["mean_ratio"] = round(results["systems"]["streamfold"]["mean_s"] / results["systems"]["recompute"]["mean_s"],
                                  3)
    write_json_and_markdown(results, directory, report(results))
    return results


def report(results: dict[str, Any]) -> str:
    """Per batch: the rate, each configuration's seconds, the answer; then mean and sd."""
    systems = results["systems"]
    lines = ["| batch | reports/s | streamfold s | recompute s | answer |", "|---|---|---|---|---|"]
    for b, rate in enumerate(results["rates"]):
        s, r = systems["streamfold"]["batches"][b], systems["recompute"]["batches"][b]
        lines.append(f"| {b} | {rate:.0f} | {s['seconds']:.2f} | {r['seconds']:.2f} | {s['answer']} |")
    lines.append("")
    for name, r in systems.items():
        lines.append(f"- {name}: mean {r['mean_s']:.2f} s, sd {r['sd_s']:.2f} s per batch (batches 1–"
                     f"{results['batches'] - 1}); every answer against DuckDB: {'exact' if r['exact'] else 'WRONG'}")
    lines.append(f"- streamfold / recompute: mean {results['mean_ratio']:.2f}")
    return "\n".join(lines) + "\n"


def main(batches: int | None, quick: bool, out: str, master: str | None) -> int:
    if quick:  # seconds: no warm-up, four batches at a low rate
        results = run(batches or 4, SPAN, 20, 60, out, master, warm_up=False)
    else:
        results = run(batches or 60, SPAN, 50, 2_000, out, master)
    print(report(results))
    return 0 if all(r["exact"] for r in results["systems"].values()) else 1
