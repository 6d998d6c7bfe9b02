"""``streamfold bench tpcds``: TPC-DS's queries as the seven fact tables grow, against recompute.

The data (``tpcgen-cli``, the scale factor ``--sf``): each fact table's rows dealt at random into
the history (batch 0) and ``--increments`` batches — each but the last inserting 1 % of the rows,
the last deleting 1 % of the rows inserted before; the dimensions static. Per query and batch:
streamfold's time (files in → answer committed; the work after the commit delays only the next
batch), the strategy its commit records, Spark recomputing the query over all the data so far in
the same session (a fresh ``newSession``, rows netted by ``_weight`` once deletions are in), and
DuckDB's check of streamfold's answer (the extension's own text).

``OUT/tpcds-sf<SF>/results.json`` is written after every query and kept: a later run with
``--queries`` adds or replaces those queries, so the 99 may be measured in several sittings
(the same ``--increments``; another number starts the file over). ``results.md`` and
``plot.png`` are rendered from all of it.

    streamfold bench tpcds --sf 1 --increments 3 [--queries 3,7,42] [--strategy auto]
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from ...errors import UsageError
from .. import ratios
from . import ALL_QUERIES
from . import data as tpcds_data
from . import run as tpcds

INCREMENT = 0.01  # of each fact table's rows, per increment (and deleted by the last one)


def main(sf: float, queries: str | None, out: str, master: str | None, increments: int | None = None,
         strategy: str = "auto", log: Any = print) -> int:
    """Run the bench; 0 when every query gave DuckDB's answer after every batch (or was refused)."""
    increments = 3 if increments is None else increments
    if increments < 1:
        raise UsageError("--increments must be at least 1", code="BAD_OPTION", params={"increments": increments})
    chosen = parse_queries(queries)
    directory = os.path.join(out, f"tpcds-sf{sf:g}")
    os.makedirs(directory, exist_ok=True)
    ds = tpcds_data.ensure(os.path.join(out, "tpcds-data"), sf=sf, batches=increments,
                           delete_fraction=INCREMENT, increment=INCREMENT, log=log)
    results = _results(os.path.join(directory, "results.json"), sf, increments, strategy, ds)
    from ...runtime.session import get_spark

    spark = get_spark(master or "local[2]", app_name="streamfold-bench-tpcds")
    try:
        for nr in chosen:
            started = time.monotonic()
            log(f"Q{nr}: running ({len(results['queries'])} of 99 measured so far)")
            r = tpcds.run_query(nr, ds, spark, os.path.join(directory, "work"), partitions=None, timed=True,
                                options={"strategy": strategy}, log=log)
            batches = [dict(t, check=check) for t, check in zip(r.times, r.batches, strict=False)]
            results["queries"][f"q{nr:02d}"] = {
                "status": r.status, "code": r.code, "message": r.message, "batches": batches,
                "seconds": round(time.monotonic() - started, 1), "load_average": round(os.getloadavg()[0], 2),
                **ratios.summarize(batches)}
            results["queries"] = dict(sorted(results["queries"].items()))
            _write(results, directory)
            log(f"Q{nr}: {r.status} {r.code or ''} {r.message[:200]}")
    finally:
        spark.stop()
    print(markdown(results))
    print(f"wrote {directory}/results.json, results.md and plot.png")
    return 0 if all(results["queries"][f"q{nr:02d}"]["status"] in ("passes", "refused") for nr in chosen) else 1


def parse_queries(spec: str | None) -> list[int]:
    if not spec:
        return list(ALL_QUERIES)
    try:
        chosen = [int(q.strip().lower().lstrip("q")) for q in spec.split(",") if q.strip()]
    except ValueError:
        chosen = []
    if not chosen or any(nr not in ALL_QUERIES for nr in chosen):
        raise UsageError(f"--queries {spec}: TPC-DS has queries 1 to 99", code="BAD_OPTION",
                         params={"queries": spec}, hint="for example --queries 3,q07,42")
    return chosen


def _results(path: str, sf: float, increments: int, strategy: str, ds: tpcds_data.Dataset) -> dict[str, Any]:
    """The results measured so far with these parameters, or a new document."""
    with open(os.path.join(ds.path, "manifest.json"), encoding="utf-8") as fh:
        manifest = json.load(fh)
    fresh = {"sf": sf, "increments": increments, "increment_fraction": INCREMENT, "strategy": strategy,
             "rows": manifest["rows"], "queries": {}}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            kept = json.load(fh)
        if all(kept.get(k) == fresh[k] for k in ("sf", "increments", "increment_fraction", "strategy")):
            for q in kept["queries"].values():  # the summaries as this version computes them
                q.update(ratios.summarize(q["batches"]))
            return kept
    return fresh


def _write(results: dict[str, Any], directory: str) -> None:
    with open(os.path.join(directory, "results.json"), "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=1)
    with open(os.path.join(directory, "results.md"), "w", encoding="utf-8") as fh:
        fh.write(markdown(results))
    ratios.plot(results["queries"], f"TPC-DS SF {results['sf']:g}, {results['increments']} increments of "
                f"{results['increment_fraction']:.0%}", os.path.join(directory, "plot.png"))


def markdown(results: dict[str, Any]) -> str:
    rows = results["rows"]
    queries = results["queries"]
    loads = [q["load_average"] for q in queries.values() if q.get("load_average") is not None]
    lines = [f"TPC-DS SF {results['sf']:g}: the fact tables' history ({rows['store_sales'][0]:,} store sales, "
             f"{rows['inventory'][0]:,} inventory rows, …) as batch 0, then {results['increments']} increments of "
             f"{results['increment_fraction']:.0%} of each fact table (the last deleting "
             f"{results['increment_fraction']:.0%}); the dimensions static; strategy `{results['strategy']}`. "
             + (f"1-minute load average after each query: {min(loads):.1f}–{max(loads):.1f}." if loads else ""),
             "", *ratios.HEADER]
    lines += [ratios.row(name.upper(), q) for name, q in queries.items()]
    lines += ["", ratios.FOOTNOTE, "", ratios.summary(list(queries.values()))]
    lines += [f"Measured {len(queries)} of 99 queries; refused {sum(q['status'] == 'refused' for q in queries.values())}, "
              f"failing or in error {sum(q['status'] in ('FAILS', 'ERROR') for q in queries.values())}."]
    return "\n".join(lines) + "\n"
