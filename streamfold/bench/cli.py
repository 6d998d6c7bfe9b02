"""``streamfold bench``: the options, and the glue from them to :func:`run_bench`.

``streamfold/cli.py`` only adds the subparser (:func:`add_parser`) and calls :func:`main`.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..errors import UsageError
from .systems import MODE_SYSTEMS, NAMES
from .targets import TARGETS
from .workloads import MODES, WORKLOADS, get_workload, quick

MEMORY_INCREMENTS = 200  # the memory target is judged between increment 20 and 200


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """Add ``bench`` to the ``streamfold`` subcommands."""
    p = sub.add_parser(
        "bench", help="run a workload through streamfold, recompute and Spark streaming; time and check them",
        description="Run WORKLOAD through several systems on the same machine and data; per increment, time "
                    "from the files appearing to the exact answer being committed. Writes results.json, "
                    "results.md and plot.png under OUT/WORKLOAD/; every final answer is checked against DuckDB.")
    p.add_argument("workload", metavar="WORKLOAD",
                   help=f"{' | '.join(WORKLOADS)} | custom | soak | tpch | tpcds | pause | reconfigure | theta (soak: long "
                        "runs, below; tpch: the 22 TPC-H queries with lineitem and orders streamed, below; tpcds: "
                        "the 99 TPC-DS queries, fact tables streamed, each checked after every batch; the "
                        "control targets: pause latency during batch 0, reconfiguration delay against "
                        "stop-and-restart; theta: a band join's join matrix under a fluctuating size ratio, "
                        "adaptive against static and recompute; replan or 004: seed 004's Fig. 7, three streams joined, x's keys "
                        "switching every --reps batches (default 8), the join order static against re-planned, "
                        "--increment rows per stream per batch (default 2000), --increments batches (default 24); linear-road: "
                        "seed 004's §4.2, Linear Road's congestion query maintained against recomputed, the rate "
                        "ramping over --increments batches (default 60); 004-fig5, 004-fig6, 004-fig8: seed 004's "
                        "§4.1 predicate push-down, window push-up and incremental windowed aggregation, "
                        "optimized against unoptimized, --increment pairs a 1-s batch (default 200,000, "
                        "200,000 and 100,000), --increments batches (default 30))")
    p.add_argument("--systems", default=None, metavar="LIST",
                   help=f"comma-separated, from {','.join(NAMES)} (default: all but streamfold-auto — "
                        "streamfold-cli for groupby, join-groupby, groupby-10m and groupby-100m only; with "
                        "--memory: streamfold)")
    p.add_argument("--history", type=int, metavar="N", help="history rows per source")
    p.add_argument("--increment", type=int, metavar="N", help="rows per source per increment")
    p.add_argument("--increments", type=int, metavar="N",
                   help=f"number of increments (default 9; with --memory {MEMORY_INCREMENTS})")
    p.add_argument("--steps", type=int, metavar="N", help="steps of the query's iteration (pagerank, kmeans: default 10)")
    p.add_argument("--mode", metavar="MODES",
                   help=f"pagerank, kmeans: the iteration's modes streamfold runs in, comma-separated from "
                        f"{', '.join(MODES)} (default exact); each is a system of its own "
                        f"({', '.join(MODE_SYSTEMS.values())})")
    p.add_argument("--errors", action="store_true",
                   help="pagerank, kmeans: after every increment, each system's answer against NumPy's over all the "
                        "data so far (PageRank: L1 distance of the rank vectors; k-means: the largest distance from "
                        "a centroid to the nearest exact one), a column per system in results.md")
    p.add_argument("--warm-up", type=int, metavar="N", dest="warm_up",
                   help="before measuring, each system runs the query over small data with N increments, untimed, "
                        "so none is charged for warming the shared JVM (default 10, with --quick 2; 0: measure "
                        "cold). custom: the same history and its first N increments (default 2); "
                        "not for iterations")
    p.add_argument("--profile", action="store_true",
                   help="streamfold's waterfall per increment (phases, Spark jobs and stages, py4j calls), in "
                        "results.json and waterfall.txt")
    p.add_argument("--reps", type=int, metavar="N",
                   help="pause: pauses during batch 0 (default 5); reconfigure: reconfigurations, each against a "
                        "restart (default 4); theta --skew: rounds of every partitioning, in alternating orders, "
                        "each batch timed as its least over them (default 2)")
    p.add_argument("--ratio", type=int, metavar="K",
                   help="theta: the inputs' size ratio swings between K and 1/K (default 4); --history is "
                        "each input's first rows (default 2000), --increments the phases (default 3)")
    p.add_argument("--skew", action="store_true",
                   help="theta: the thesis's Table 4.1 joins (EQ5, EQ7, BCI, BNCI; --queries) on Zipf-skewed TPC-H at "
                        "--sf (default 0.01) for each --zipf z, under SHJ, STATICMID, STATICOPT and DYNAMIC "
                        "(--systems) over --cells J (default 16); --increments after a history of half the rows")
    p.add_argument("--zipf", metavar="LIST", help="theta --skew: the Zipf parameters (default 0,0.25,0.5,0.75,1)")
    p.add_argument("--cells", type=int, metavar="J", help="theta --skew: the join matrix's cells (a power of two)")
    p.add_argument("--partitions", type=int, metavar="P",
                   help="theta --skew: the Spark partitions the J cells are laid over (default: a state's, one per "
                        "core, at least 2 — each partition runs several cells; J: a task per cell, the thesis's "
                        "setting)")
    p.add_argument("--distinct", action="store_true",
                   help="reconfigure: the query keeps a count(DISTINCT y) too (a multiset state: a heavier h)")
    p.add_argument("--quick", action="store_true", help="small sizes: seconds, for tests and a first look")
    p.add_argument("--out", default="bench-out", metavar="DIR", help="output directory (default bench-out)")
    p.add_argument("--query", metavar="FILE", help="custom: the query (.sql file or the SQL text)")
    p.add_argument("--source", action="append", metavar="NAME=DIR",
                   help="custom: a source directory of Parquet files; the last --increments files are the increments")
    p.add_argument("--memory", action="store_true",
                   help="many increments; sample the RSS of the Python driver and of the JVM; report the growth "
                        "of peak RSS from increment 20 to the end, and the JVM's live heap (after a full GC) every "
                        "20 increments with its trend (output in OUT/WORKLOAD-memory/)")
    p.add_argument("--streaming-mode", choices=("auto", "complete", "update", "append"), default="auto",
                   help="spark-streaming's output mode (default auto: the first of complete, update, append "
                        "that Spark accepts)")
    p.add_argument("--master", metavar="URL", help="Spark master (default local[*])")
    p.add_argument("--max-load", type=float, default=1.5, metavar="L",
                   help="wait while the 1-minute load average is above L and the CPUs are over 20%% busy before "
                        "measuring (default 1.5)")
    p.add_argument("--max-wait", type=float, default=900.0, metavar="SECONDS",
                   help="wait at most this long for the load to drop, then measure anyway (default 900)")
    p.add_argument("--time-limit", type=float, metavar="SECONDS",
                   help="stop a system whose increment (the history included) runs longer than this: its Spark "
                        "jobs are cancelled and it is reported as stopped at that increment (default: no limit; "
                        "not for pause, reconfigure, theta, soak, tpch)")
    soak = p.add_argument_group("soak", "streamfold bench soak: long runs with deletions; the heap and the plans "
                                        "must stay flat (streamfold/bench/soak.py)")
    soak.add_argument("--queries", metavar="LIST", help="soak: q1 … q22, groupby, join-groupby, pagerank, kmeans, "
                                                        "reachability, windowed, comma-separated (default: all)")
    soak.add_argument("--batches", type=int, metavar="N", help="soak: batches per workload (default 30; --quick 8)")
    soak.add_argument("--from", type=int, dest="from_batch", metavar="B",
                      help="soak: judge flatness from batch B on (default 5; --quick 3)")
    soak.add_argument("--sf", type=float, default=0.01, help="soak, tpch: TPC-H scale factor (default 0.01)")
    tpch = p.add_argument_group("tpch", "streamfold bench tpch --sf SF --increments N [--queries q01,q18] [--json]: "
                                        "the history as batch 0, then N increments of 1 % of the orders (the last "
                                        "deleting 1 %); per query and batch streamfold's time and strategy, "
                                        "recompute's, DuckDB's check (streamfold/bench/tpch/streamed.py); "
                                        "--increments defaults to 10, --queries (above) to all 22. "
                                        "streamfold bench tpcds --sf SF --increments N [--queries 3,42]: the same "
                                        "for TPC-DS's 99 queries, 1 % of each fact table per increment "
                                        "(streamfold/bench/tpcds/bench.py; --increments defaults to 3; "
                                        "results.json keeps the queries measured before)")
    tpch.add_argument("--json", action="store_true", help="tpch: print results.json instead of the table")
    tpch.add_argument("--sinks", action="store_true",
                      help="tpch: each query also delivers to a PostgreSQL table (a throw-away server on loopback) "
                           "and a Delta table, both checked against DuckDB after every batch")
    tpch.add_argument("--strategy", choices=("auto", "incremental", "recompute"), default="auto",
                      help="tpch, tpcds: streamfold's strategy per batch (default auto: the cost model chooses)")
    soak.add_argument("--dimensions", choices=("source", "table"), default="source",
                      help="soak: TPC-H tables that are not streamed, as sources with one file (default) or "
                           "static tables")
    return p


def options(args: argparse.Namespace, argv: list[str] | None = None) -> Any:
    """The :class:`BenchOptions` the arguments ask for (usage mistakes raise UsageError)."""
    from .runner import BenchOptions

    if args.workload == "custom":
        workload = _custom(args)
    else:
        if args.query or args.source:
            raise UsageError("--query and --source are for the custom workload", code="BAD_OPTION",
                             hint=f"streamfold bench custom --query FILE --source NAME=DIR (not {args.workload})")
        workload = get_workload(args.workload)
        if args.quick:
            workload = quick(workload)
    increments = args.increments
    if increments is None and args.memory:
        increments = 25 if args.quick else MEMORY_INCREMENTS
    if args.workload != "custom":
        workload = workload.sized(args.history, args.increment, increments)
    workload = workload.with_steps(args.steps)
    if workload.increments < 1:
        raise UsageError("--increments must be at least 1", code="BAD_SIZE", params={"value": workload.increments})
    # `streamfold run` in a process of its own is measured where issue 18's targets are stated
    # (streamfold-auto, the cost model's choice per batch, only when asked for)
    default = "streamfold" if args.memory else ",".join(n for n in NAMES if n != "streamfold-auto" and (
        n != "streamfold-cli" or workload.name in TARGETS))
    systems = [s.strip() for s in (args.systems or default).split(",") if s.strip()]
    known = NAMES + tuple(MODE_SYSTEMS.values())
    unknown = [s for s in systems if s not in known]
    if unknown or not systems:
        raise UsageError(f"unknown system {unknown[0]!r}" if unknown else "--systems is empty", code="UNKNOWN_SYSTEM",
                         hint=f"a comma-separated list of {', '.join(known)}")
    if args.mode is not None:
        modes = [m.strip().lower() for m in args.mode.split(",") if m.strip()]
        for m in modes or [""]:
            workload.in_mode(m)  # an unknown mode, or a workload without an iteration: a usage error
        at = systems.index("streamfold") if "streamfold" in systems else 0
        systems = [s for s in systems if s != "streamfold"]
        systems[at:at] = [MODE_SYSTEMS[m] for m in dict.fromkeys(modes)]
    if args.errors:
        from .accuracy import check_measurable

        check_measurable(workload)
    warm_up = args.warm_up if args.warm_up is not None else 2 if args.quick or args.workload == "custom" else 10
    if warm_up < 0:
        raise UsageError(f"--warm-up must be 0 or more, not {warm_up}", code="BAD_SIZE",
                         params={"option": "--warm-up", "value": warm_up},
                         hint="the number of increments of each system's untimed warm-up round; 0 for none")
    command = ["streamfold", *(argv if argv is not None else sys.argv[1:])]
    return BenchOptions(workload=workload, systems=systems, out=args.out, quick=args.quick, memory=args.memory,
                        streaming_mode=args.streaming_mode, master=args.master, load_limit=args.max_load,
                        max_wait_s=args.max_wait, command=command, warm_up=warm_up, errors=args.errors,
                        profile=args.profile, time_limit_s=_time_limit(args.time_limit),
                        label=f"{workload.name}-memory" if args.memory else None)


def _time_limit(seconds: float | None) -> float | None:
    if seconds is not None and seconds <= 0:
        raise UsageError(f"--time-limit must be positive, not {seconds:g}", code="BAD_SIZE",
                         params={"option": "--time-limit", "value": seconds},
                         hint="seconds one increment of a system may take before the system is stopped")
    return seconds


def _custom(args: argparse.Namespace) -> Any:
    from ..runtime.sources import InputSpec
    from .custom import custom_workload

    if not args.query or not args.source:
        raise UsageError("custom needs --query FILE and at least one --source NAME=DIR", code="NO_QUERY",
                         hint="streamfold bench custom --query q.sql --source S=data/S")
    if args.history or args.increment:
        raise UsageError("--history and --increment do not apply to custom: its files are the sizes",
                         code="BAD_OPTION", hint="use --increments N: the last N files of each source are the increments")
    sql = args.query
    if os.path.isfile(sql):
        with open(sql, encoding="utf-8") as fh:
            sql = fh.read()
    elif sql.strip().lower().endswith(".sql"):
        raise UsageError(f"query file {sql} does not exist", code="QUERY_NOT_FOUND", params={"path": sql})
    specs = [InputSpec.parse(s) for s in args.source]
    return custom_workload(sql, specs, args.increments or 9)


# Benches with runners of their own (not runner.run_bench): --time-limit does not reach them.
OWN_RUNNERS = ("pause", "reconfigure", "theta", "soak", "tpch", "tpcds", "replan", "004", "linear-road",
               "004-fig5", "004-fig6", "004-fig8")


def main(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    """Run the bench; 0 when every system that ran gave DuckDB's answer, 1 otherwise."""
    if args.time_limit is not None and args.workload in OWN_RUNNERS:
        raise UsageError(f"--time-limit is not applied by bench {args.workload}", code="BAD_OPTION",
                         params={"option": "--time-limit"},
                         hint="it stops a system of a workload run system by system (groupby, join-groupby, "
                              "band-join, pagerank, kmeans, custom …)")
    if args.workload in ("pause", "reconfigure"):
        from .control import main as control_bench

        reps = args.reps or (5 if args.workload == "pause" else 4)
        return control_bench(args.workload, args.history, args.increment, reps, args.out, args.master,
                             args.distinct)
    if args.workload == "theta" and args.skew:
        from .theta_tpch import main as skew_bench

        return skew_bench(args.sf, args.zipf, args.queries, args.systems, args.cells, args.increments, args.out,
                          args.master, args.partitions, args.reps)
    if args.workload in ("replan", "004"):
        from .replan import main as replan_bench

        return replan_bench(args.increment, args.increments, args.reps, args.quick, args.out, args.master)
    if args.workload in ("004-fig5", "004-fig6", "004-fig8"):
        from .seed004 import main as seed004_bench

        return seed004_bench(args.workload, args.increment, args.increments, args.quick, args.out, args.master)
    if args.workload == "linear-road":
        from .linear_road import main as linear_road_bench

        return linear_road_bench(args.increments, args.quick, args.out, args.master)
    if args.workload == "theta":
        from .theta import main as theta_bench

        return theta_bench(args.history, args.ratio, args.increments, args.out, args.master)
    from .runner import run_bench

    if args.workload == "soak":
        return soak(args, argv)
    if args.workload == "tpch":
        from .tpch.streamed import run as tpch

        return tpch(args.sf, args.increments or 10, args.queries, args.out, args.master, args.json,
                    strategy=args.strategy, sinks=args.sinks)
    if args.workload == "tpcds":
        from .tpcds.bench import main as tpcds

        return tpcds(args.sf, args.queries, args.out, args.master, args.increments, strategy=args.strategy)
    if args.queries or args.batches or args.from_batch is not None:
        raise UsageError("--queries, --batches and --from are for the soak", code="BAD_OPTION",
                         hint="streamfold bench soak --queries q21,groupby --batches 30")
    opts = options(args, argv)
    results = run_bench(opts)
    return summarize(results, opts.directory)


def summarize(results: dict[str, Any], directory: str) -> int:
    """Print the medians and checks on stdout; the exit code (1 if a system failed or was wrong)."""
    ok = True
    print(f"{results['workload']}: median latency per increment (1–{results['sizes']['increments']})")
    for name, rec in results["systems"].items():
        check = rec.get("check")
        error = next((r["error"] for r in reversed(rec["increments"]) if r.get("error") is not None), None)
        shown = f"   error {error:.1e}" if error is not None else ""
        if rec.get("cycle_median_s") is not None:
            shown += f"   (to commit; whole batch cycle {rec['cycle_median_s']:.3f} s)"
        if rec["status"] == "ok" and check and not rec.get("exact", True):
            print(f"  {name:<16} {rec['median_s']:.3f} s   history {rec['history_s']:.2f} s   "
                  f"approximate by design{shown}")
        elif rec["status"] == "ok" and check:
            ok &= bool(check["matches_duckdb"])
            print(f"  {name:<16} {rec['median_s']:.3f} s   history {rec['history_s']:.2f} s   "
                  f"matches DuckDB: {'yes' if check['matches_duckdb'] else 'no'}{shown}")
        else:
            ok &= rec["status"] == "rejected"
            print(f"  {name:<16} {rec['status']}: {rec.get('error') or next(iter(rec.get('rejections', {}).values()), '').splitlines()[0]}")
    for t in results.get("targets", []):
        print(f"  target: {t['target']}: {t['measured']} — "
              f"{ {True: 'met', False: 'NOT met', None: 'not judged'}[t['met']]}")
    print(f"wrote {os.path.join(directory, 'results.json')}, results.md, plot.png")
    return 0 if ok else 1


def soak(args: argparse.Namespace, argv: list[str] | None = None) -> int:
    """``streamfold bench soak``: 0 when every workload was exact and flat, 1 otherwise."""
    from .soak import SoakOptions, parse_workloads, run_soak

    quick = bool(args.quick)
    opts = SoakOptions(parse_workloads(args.queries), batches=args.batches or (8 if quick else 30),
                       start=args.from_batch if args.from_batch is not None else 3 if quick else 5,
                       sf=args.sf, dimensions=args.dimensions, quick=quick, out=args.out, master=args.master,
                       command=("streamfold", *(argv if argv is not None else sys.argv[1:])))
    results = run_soak(opts)
    ok = True
    print(f"soak: {opts.batches} batches per workload; heap and plans judged from batch {opts.start}")
    for name, rec in results["workloads"].items():
        ok &= bool(rec["passed"])
        h, p = rec["heap"], rec["plans"]
        print(f"  {name:<13} {'passes' if rec['passed'] else 'FAILS '}  exact: {'yes' if rec['exact'] else 'no'}  "
              f"heap spread {h['spread']} MB (bound {h['bound']})  plan spread {p['spread']} chars (bound {p['bound']})"
              + (f"  {rec['status']}: {rec.get('code')}" if rec["status"] != "ok" else ""))
    print(f"wrote {os.path.join(opts.out, 'soak', 'results.json')}, results.md")
    return 0 if ok else 1
