"""``streamfold bench tpch``: TPC-H streamed as a warehouse table grows, against recompute.

``lineitem`` and ``orders`` are streamed: the history is batch 0, then ``--increments`` batches —
each but the last adds about 1 % of the orders with their line items (the next order keys), the
last deletes 1 % of the orders (a seeded sample, plus the three largest) with their line items.
The other tables are static (Q2, Q11, Q16 stream ``partsupp`` the same way, see ``data.py``).

Per query and batch: streamfold's time (files in → answer committed: what the engine does after
the commit — compaction, the cost model's probe of a recompute — is in the batch's ``timings``
and delays only the next batch), the strategy its commit
records (``"strategy"``; ``incremental`` when the commit names none), Spark recomputing the
query over all the data so far in the same run, and DuckDB's check of streamfold's answer.
Writes ``results.json``, ``results.md`` and ``plot.png`` under ``OUT/tpch-sf<SF>/``.

    streamfold bench tpch --sf 0.01 --increments 5 --queries q01,q18,q21 [--json]
"""

from __future__ import annotations

import json
import os
import sys
import time
from functools import partial
from typing import Any

from ...errors import UsageError
from .. import ratios
from . import data as tpch_data
from . import run as tpch

INCREMENT = 0.01  # of the orders, per increment (and deleted by the last one)


def run(sf: float, increments: int, queries: str | None, out: str, master: str | None, as_json: bool,
        log: Any = print, strategy: str = "auto", sinks: bool = False) -> int:
    """Run the bench; 0 when every query gave DuckDB's answer after every batch (or was refused).
    ``sinks``: each query also delivers to a PostgreSQL table (a throw-away server on loopback,
    fsync on) and a Delta table, both checked against DuckDB after every batch."""
    if as_json:  # stdout is the document: progress goes to stderr
        log = partial(print, file=sys.stderr)
    if increments < 1:
        raise UsageError("--increments must be at least 1", code="BAD_OPTION", params={"increments": increments})
    names = tpch.query_names(queries)
    directory = os.path.join(out, f"tpch-sf{sf:g}")
    os.makedirs(directory, exist_ok=True)
    # increments − 1 insert batches after the history, then the deletion batch
    ds = tpch_data.ensure(os.path.join(out, "tpch-data"), sf, increments, delete_fraction=INCREMENT,
                          increment=INCREMENT, log=log)
    from ...runtime.session import get_spark

    spark = get_spark(master or "local[2]", app_name="streamfold-bench-tpch")
    started = time.time()
    load = os.getloadavg()
    results: dict[str, Any] = {"sf": sf, "increments": increments, "increment_fraction": INCREMENT,
                               "strategy": strategy,
                               "load_average_at_start": [round(v, 2) for v in load],
                               "manifest": {k: v for k, v in ds.manifest.items() if k != "deleted_orders"},
                               "queries": {}}
    workdir = os.path.join(directory, "runs")
    results["sinks"] = sinks
    try:
        with _sink_server(sinks) as server:
            for name in names:
                checks: list[str | None] = []
                options, after = _sink_options(server, name, directory, checks) if sinks else ({}, None)
                record = tpch.run_query(name, ds, spark, workdir, recompute=True, log=log,
                                        options={"strategy": strategy, **options}, after_batch=after)
                results["queries"][name] = _query_result(record, os.path.join(workdir, name, "out", "commits"),
                                                         checks if sinks else None)
    finally:
        spark.stop()
    results["seconds"] = round(time.time() - started, 1)
    with open(os.path.join(directory, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(directory, "results.md"), "w") as f:
        f.write(markdown(results))
    plot(results, os.path.join(directory, "plot.png"))
    if as_json:
        print(json.dumps(results, indent=1))
    else:
        print(markdown(results))
        print(f"wrote {directory}/results.json, results.md and plot.png")
    return 0 if all(q["status"] in ("passes", "refused") and not q.get("sinks_differ")
                    for q in results["queries"].values()) else 1


def _sink_server(sinks: bool) -> Any:
    from contextlib import nullcontext

    from ..pgserver import throwaway_postgres

    return throwaway_postgres(durable=True) if sinks else nullcontext(None)


def _sink_options(server: Any, name: str, directory: str,
                  checks: list[str | None]) -> tuple[dict[str, Any], Any]:
    """The query's two sinks, and a check of both after each batch into ``checks``."""
    import shutil
    import uuid

    from ..sink_check import sinks_difference

    table, delta = f"{name}_{uuid.uuid4().hex[:8]}", os.path.abspath(os.path.join(directory, "sinks", name))
    shutil.rmtree(delta, ignore_errors=True)
    shutil.rmtree(delta + "_changes", ignore_errors=True)
    conn = server.connect()

    def after(batch: int, expected: list[tuple]) -> None:
        checks.append(sinks_difference(expected, conn, table, delta))

    return {"sinks": [server.url(table), f"{delta}:delta"]}, after


def _query_result(record: tpch.QueryRecord, commits: str, sink_checks: list[str | None] | None = None) -> dict[str, Any]:
    batches = []
    for b in record.batches:
        path = os.path.join(commits, f"{b.batch:06d}.json")
        commit: dict[str, Any] = {}
        if os.path.exists(path):
            with open(path) as f:
                commit = json.load(f)
        batches.append({"batch": b.batch, "deletes": b.deletes, "input_rows": b.input_rows,
                        "streamfold_s": b.streamfold_s, "after_commit_s": b.after_commit_s, "recompute_s": b.recompute_s,
                        "strategy": commit.get("strategy", "incremental"),
                        "check": "ok" if b.difference is None else b.difference,
                        **({"sinks": _sink_check(sink_checks, b.batch), "delivery_s": b.timings.get("sinks")}
                           if sink_checks is not None else {})})
    return {
        "status": record.status, "code": record.code, "message": record.message, "batches": batches,
        **ratios.summarize(batches),
        **({"sinks_differ": [b["batch"] for b in batches if b["sinks"] != "ok"],
            "median_delivery_s": ratios.median([b["delivery_s"] for b in batches[1:] if b["delivery_s"] is not None])}
           if sink_checks is not None else {}),
    }


def _sink_check(checks: list[str | None], batch: int) -> str:
    if batch >= len(checks):
        return "not checked"
    return checks[batch] or "ok"


def markdown(results: dict[str, Any]) -> str:
    m = results["manifest"]
    load = results["load_average_at_start"]
    lines = [
        f"TPC-H SF {results['sf']:g} streamed: {m['rows']['lineitem']:,} line items and {m['rows']['orders']:,} "
        f"orders; the history as batch 0, then {results['increments']} increments of "
        f"{results['increment_fraction']:.0%} of the orders each (the last deleting {results['increment_fraction']:.0%} "
        f"of the orders with their line items); other tables static. 1-minute load average at the start "
        f"{load[0]:.1f}.",
        "",
        *ratios.HEADER,
    ]
    lines += [ratios.row(name.upper(), q) for name, q in results["queries"].items()]
    if results.get("sinks"):
        lines += ["", "With `--sinks` every query also delivered each batch to a PostgreSQL table and a Delta table "
                      "(streamfold's times are to its own commit; the delivery to both follows it, its median per "
                      "increment in the last column); both were checked against DuckDB after every batch."]
    lines += ["", ratios.FOOTNOTE, "", ratios.summary(list(results["queries"].values()))]
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: str) -> None:
    ratios.plot(results["queries"], f"TPC-H SF {results['sf']:g}, {results['increments']} increments of "
                f"{results['increment_fraction']:.0%} (1-min load {results['load_average_at_start'][0]:.1f})", path)
