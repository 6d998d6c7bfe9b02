"""``streamfold bench tpcds``: TPC-DS's queries over a generated data set, each checked against
DuckDB after every batch; a table of each query's status and time per batch (results.md and
results.json under OUT/tpcds/). It reports correctness and streamfold's times; the recompute
comparison of the issue's targets is not measured here yet."""

from __future__ import annotations

import json
import os
import time

from . import ALL_QUERIES
from . import data as tpcds_data
from . import run as tpcds


def main(sf: float, queries: str | None, out: str, master: str | None, increments: int | None = None) -> int:
    from ...runtime.session import get_spark

    chosen = [int(q.strip().lstrip("qQ")) for q in queries.split(",")] if queries else list(ALL_QUERIES)
    directory = os.path.join(out, "tpcds")
    os.makedirs(directory, exist_ok=True)
    ds = tpcds_data.ensure(os.path.join(directory, "data"), sf=sf, batches=increments or 2)
    spark = get_spark(master, app_name="streamfold-bench-tpcds")
    rows, failed = [], 0
    for nr in chosen:
        started = time.monotonic()
        r = tpcds.run_query(nr, ds, spark, os.path.join(directory, "work"))
        seconds = time.monotonic() - started
        failed += r.status in ("FAILS", "ERROR")
        rows.append({"query": nr, "status": r.status, "code": r.code, "message": r.message, "seconds": round(seconds, 2)})
        print(f"Q{nr}: {r.status} {r.code or ''} {seconds:.1f} s {r.message[:200]}", flush=True)
    with open(os.path.join(directory, "results.json"), "w", encoding="utf-8") as fh:
        json.dump({"sf": sf, "batches": ds.total_batches, "queries": rows}, fh, indent=1)
    with open(os.path.join(directory, "results.md"), "w", encoding="utf-8") as fh:
        fh.write("| query | status | code | seconds (all batches) |\n|---|---|---|---|\n")
        fh.writelines(f"| Q{r['query']} | {r['status']} | {r['code'] or ''} | {r['seconds']} |\n" for r in rows)
    return 1 if failed else 0
