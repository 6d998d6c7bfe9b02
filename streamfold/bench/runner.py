"""Run one workload through the chosen systems, one system after the other, and report.

Systems run one after the other (not interleaved), each with its own source directories into
which the same files appear, so no system's background work (a streaming query's polling, a
cached state) is running while another is timed. A tiny Spark job warms the JVM first, and then
every system runs a warm-up round — the same query over small data (the workload's ``--quick``
sizes), results discarded — so no system is charged for the JIT compilation of its own code paths,
and none for another's: the JVM is shared, and the system measured first used to pay for all
(streamfold's first groupBy increments in a fresh JVM took several times what they take in a warm one).
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import sys
import threading
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

from ..verify import compare, duckdb_answer
from .data import DataSet, appear, cached, generate
from .machine import jvm_heap_mb, jvm_pid, load_average, machine_info, rss_mb, wait_for_quiet
from .systems import Context, Rejected, System, system_class
from .workloads import Workload

LATENCY = ("per increment: from the moment its files appear in the system's source directory (linked under "
           "a hidden name, then renamed) until the updated exact answer over all data so far is committed; "
           "increment 0 is the history: from starting the system until its first answer is committed")
MEMORY_REFERENCE = 20  # the target: peak RSS growth under 10% between increment 20 and the end


@dataclass
class BenchOptions:
    """What ``streamfold bench`` was asked to do."""

    workload: Workload
    systems: list[str]
    out: str = "bench-out"
    quick: bool = False
    memory: bool = False
    streaming_mode: str = "auto"
    master: str | None = None
    load_limit: float = 1.5
    max_wait_s: float = 900.0
    command: list[str] = field(default_factory=list)
    label: str | None = None  # the output directory's name (default: the workload's)
    warm_up: int = 10  # increments of each system's warm-up round (0: measure a cold JVM)
    errors: bool = False  # measure each answer against the NumPy reference after every increment
    profile: bool = False  # streamfold's waterfall per increment (its spans, Spark jobs, py4j calls)
    time_limit_s: float | None = None  # a system whose increment runs longer is stopped there (its jobs cancelled)

    @property
    def directory(self) -> str:
        return os.path.join(self.out, self.label or self.workload.name)


class TimeLimit(Exception):
    """A system's increment ran past ``--time-limit``: its Spark jobs were cancelled."""

    def __init__(self, increment: int, seconds: float) -> None:
        super().__init__(f"increment {increment} ran past the time limit of {seconds:g} s; its Spark jobs were "
                         "cancelled and the system stopped")
        self.increment, self.seconds = increment, seconds


@contextmanager
def _limited(spark: Any, seconds: float | None, increment: int) -> Iterator[None]:
    """Run the block under a watchdog: past ``seconds`` every Spark job is cancelled (systems run
    one after the other, so the jobs are the measured system's) and :class:`TimeLimit` is raised,
    whatever the block raised when its jobs were cancelled."""
    if seconds is None:
        yield
        return
    fired = threading.Event()

    def cancel() -> None:
        fired.set()
        spark.sparkContext.cancelAllJobs()

    timer = threading.Timer(seconds, cancel)
    timer.daemon = True
    timer.start()
    try:
        yield
    except Exception:
        if fired.is_set():
            raise TimeLimit(increment, seconds) from None
        raise
    finally:
        timer.cancel()
    if fired.is_set():  # the block finished as the watchdog fired: its time is past the limit anyway
        raise TimeLimit(increment, seconds)


def say(message: str) -> None:
    """A progress line on stderr (stdout stays for the final summary)."""
    print(message, file=sys.stderr, flush=True)


def run_bench(opts: BenchOptions, spark: Any = None) -> dict[str, Any]:
    """Run the workload through every system, check the answers, write the three outputs; the results."""
    from .report import write_outputs
    from .targets import evaluate

    classes = {name: system_class(name) for name in opts.systems}  # unknown names fail before any work
    w = opts.workload
    base = opts.directory
    work = os.path.join(base, "work")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    load = wait_for_quiet(opts.load_limit, opts.max_wait_s, say)
    if spark is None:
        from ..runtime.session import get_spark

        spark = get_spark(opts.master)
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    say(f"[{w.name}] generating data: {w.history:,} history rows and {w.increments} × {w.increment:,} rows "
        f"per source" if w.generator in ("pairs", "pairs-deleting", "ticks") else f"[{w.name}] replaying the files of {', '.join(w.files)}")
    data = cached(w, opts.out) if w.generator in ("pairs", "pairs-deleting", "ticks") else generate(w, os.path.join(work, "data"))
    schemas = {s: spark.read.parquet(paths[0]).schema for s, paths in data.files[0].items() if paths}
    _warm_up(spark, os.path.join(work, "warmup"))
    warm = warm_up_workload(w, opts.warm_up)
    if warm is not None:
        say(f"[{w.name}] warm-up: each system runs " + (
            f"the history and the first {warm.increments} increments" if warm.generator == "files" else
            f"{warm.history:,} rows and {warm.increments} × {warm.increment:,} rows per source") + " (not measured)")
        warm_data = generate(warm, os.path.join(work, "warm-data"), progress=False)
        for name, cls in classes.items():
            if cls.own_process:  # its JVM is not this one: it warms up on its first increments instead
                continue
            _warm_system(cls, Context(spark, warm, {}, os.path.join(work, "warm-up", name), schemas,
                                      {"streaming_mode": opts.streaming_mode}, dict(warm_data.tables)), warm_data)
    expected = duckdb_answer(w.oracle_sql, {**data.upto(w.increments), **{t: [d] for t, d in data.tables.items()}})
    pids = {"python": os.getpid(), "jvm": jvm_pid(spark)}
    systems: dict[str, dict[str, Any]] = {}
    for name, cls in classes.items():
        ctx = Context(spark, w, {}, os.path.join(work, name), schemas,
                      {"streaming_mode": opts.streaming_mode, "profile": opts.profile}, dict(data.tables))
        systems[name] = _run_system(cls, ctx, data, expected, opts, pids)
        systems[name]["load_average_after"] = load_average()
    results: dict[str, Any] = {
        "workload": w.name, "description": w.description, "sql": w.sql,
        "sizes": {"history_rows_per_source": w.history, "increment_rows_per_source": w.increment,
                  "increments": w.increments, "history_files": w.history_files, "quick": opts.quick,
                  "sources": {s: [r[s] for r in data.rows] for s in data.rows[0]}},
        "machine": machine_info(spark), "load_average": load, "latency_definition": LATENCY,
        "command": opts.command, "started_at": started,
        "warm_up": None if warm is None else {"increments": warm.increments, **(
            {"replays": "the measured run's history and first increments"} if warm.generator == "files" else
            {"history_rows_per_source": warm.history, "increment_rows_per_source": warm.increment})},
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "duckdb": {"rows": len(expected), "sql": _transpiled(w.oracle_sql)},
        "systems": systems,
    }
    results["targets"] = evaluate(results, opts)
    write_outputs(results, base)
    return results


def warm_up_workload(w: Workload, increments: int) -> Workload | None:
    """The warm-up round of ``w``: its query at the ``--quick`` sizes with ``increments``
    increments; for a custom workload (its files are the only data) the same history and its
    first ``increments`` increments; None for none (asked for 0, or an iteration, whose
    increments take seconds each even when small)."""
    from .workloads import QUICK

    if increments >= 1 and w.generator == "files":
        n = min(increments, w.increments)
        return replace(w, increments=n, files={s: p[: len(p) - w.increments + n] for s, p in w.files.items()})
    if increments < 1 or w.generator not in ("pairs", "pairs-deleting", "ticks") or w.name not in QUICK:
        return None
    small = QUICK[w.name](w)
    return small.sized(min(small.history, w.history), min(small.increment, w.increment), increments)


def _warm_system(cls: type[System], ctx: Context, data: DataSet) -> None:
    """Run a system through a small schedule, untimed and unchecked (a failure shows when measured)."""
    _make_dirs(ctx, data)
    system = cls(ctx)
    try:
        appear(data, 0, ctx.dirs)
        system.start()
        system.process(0)
        for inc in range(1, ctx.workload.increments + 1):
            appear(data, inc, ctx.dirs)
            system.process(inc)
    except Exception as e:  # noqa: BLE001 - Spark may reject the query: the measured run reports it
        say(f"[{ctx.workload.name}] {cls.name}: warm-up stopped: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    finally:
        system.close()
    shutil.rmtree(ctx.work, ignore_errors=True)


def _make_dirs(ctx: Context, data: DataSet) -> None:
    ctx.dirs = {s: os.path.join(ctx.work, "in", s) for s in data.files[0]}
    for d in ctx.dirs.values():
        os.makedirs(d)


def _run_system(cls: type[System], ctx: Context, data: DataSet, expected: list[tuple], opts: BenchOptions,
                pids: dict[str, int | None]) -> dict[str, Any]:
    """One system through the whole schedule; its latencies, details, check and memory samples."""
    w = ctx.workload
    _make_dirs(ctx, data)
    record: dict[str, Any] = {"status": "ok", "commit_means": cls.commit_means, "exact": cls.exact,
                              "increments": [], "memory": []}
    system = cls(ctx)
    try:
        appear(data, 0, ctx.dirs)
        t0 = time.monotonic()
        system.start()
        record["setup_s"] = round(time.monotonic() - t0, 4)
        with _limited(ctx.spark, opts.time_limit_s, 0):
            detail = system.process(0)
        latency = _to_commit(detail, t0, time.monotonic() - t0)
        detail.update(system.after())
        _measure_error(detail, system, ctx, data, 0, opts)
        _record(record, cls.name, 0, latency, detail, data, opts, ctx, pids)
        for inc in range(1, w.increments + 1):
            jobs = _last_job(ctx.spark)
            appear(data, inc, ctx.dirs)
            t = time.monotonic()
            with _limited(ctx.spark, opts.time_limit_s, inc):
                detail = system.process(inc)
            latency = time.monotonic() - t
            latency = _to_commit(detail, t, latency)
            detail.update(system.after())
            if cls.counts_jobs:
                detail["spark_jobs"] = _last_job(ctx.spark) - jobs
            _measure_error(detail, system, ctx, data, inc, opts)
            _record(record, cls.name, inc, latency, detail, data, opts, ctx, pids)
        check = compare(system.answer(), expected)
        record["check"] = check.to_json()
        if cls.exact:
            say(f"[{w.name}] {cls.name}: matches DuckDB: {'yes' if check.matches else 'NO — ' + str(check.detail)}")
    except TimeLimit as e:
        record.update(status="stopped", error=str(e), stopped_at_increment=e.increment, time_limit_s=e.seconds)
        say(f"[{w.name}] {cls.name} stopped: {e}")
    except Rejected as e:
        record.update(status="rejected", rejections=e.messages)
        say(f"[{w.name}] {cls.name}: Spark rejects the query: {e}")
    except Exception as e:  # noqa: BLE001 - a system failing is a result to report, not the end of the run
        record.update(status="failed", error=f"{type(e).__name__}: {e}".splitlines()[0])
        say(f"[{w.name}] {cls.name} FAILED: {record['error']}")
        traceback.print_exc(file=sys.stderr)
    finally:
        try:
            record["describe"] = system.describe()
        except Exception:  # noqa: BLE001 - a system that failed to start may not describe itself
            record["describe"] = {}
        system.close()
    skip = min(cls.warm_increments, w.increments - 1)  # at least one increment is measured
    lat = [r["latency_s"] for r in record["increments"] if r["increment"] > skip]
    record["median_s"] = round(statistics.median(lat), 4) if lat else None
    cycles = [r["cycle_s"] for r in record["increments"] if r["increment"] > skip and "cycle_s" in r]
    if cycles:
        record["cycle_median_s"] = round(statistics.median(cycles), 4)
    record["history_s"] = record["increments"][0]["latency_s"] if record["increments"] else None
    if opts.memory and record["memory"]:
        record["memory_summary"] = _memory_summary(record["memory"], w.increments)
    return record


def _to_commit(detail: dict[str, Any], start: float, cycle: float) -> float:
    """An increment's latency: from its files appearing to its answer committed. A system that
    says when it committed (``committed_at``, monotonic) may go on after that (streamfold readies
    the next batch's state views); that time is its ``cycle_s``, not its latency."""
    committed = detail.pop("committed_at", None)
    if committed is None:
        return cycle
    detail["cycle_s"] = round(cycle, 4)
    return min(cycle, committed - start)


def _record(record: dict[str, Any], name: str, inc: int, latency: float, detail: dict[str, Any], data: DataSet,
            opts: BenchOptions, ctx: Context, pids: dict[str, int | None]) -> None:
    """Keep one increment's figures, sample memory (after the timing), print the progress line."""
    entry = {"increment": inc, "latency_s": round(latency, 4), "rows": data.rows[inc], **detail}
    record["increments"].append(entry)
    sample: dict[str, Any] = {"increment": inc}
    for who, pid in pids.items():
        rss = rss_mb(pid)
        sample[f"{who}_rss_mb"], sample[f"{who}_peak_rss_mb"] = rss["rss_mb"], rss["peak_rss_mb"]
    if opts.memory:
        sample.update(_storage_sample(detail, ctx))
    if opts.memory and _heap_sampled(inc, ctx.workload.increments):
        gc.collect()  # Python's proxies of JVM objects freed first: they keep those objects live
        sample["jvm_heap_used_after_gc_mb"] = jvm_heap_mb(ctx.spark, collect=True)
    record["memory"].append(sample)
    rows = " ".join(f"+{n:,}" for n in data.rows[inc].values())
    label = "history" if inc == 0 else f"{inc}/{ctx.workload.increments}"
    phases = detail.get("timings") or {}
    top = " · ".join(f"{k} {v:.2f}" for k, v in sorted(phases.items(), key=lambda kv: -kv[1])[:3]
                     if isinstance(v, float))
    err = f"  error {detail['error']:.1e}" if detail.get("error") is not None else ""
    mem = f"  rss py {sample['python_rss_mb']:.0f} MB jvm {sample['jvm_rss_mb']:.0f} MB" \
        if opts.memory and sample.get("jvm_rss_mb") is not None else ""
    say(f"[{ctx.workload.name}] {name:<15} {label:>9} {rows:>12}  {latency:7.3f} s"
        f"{'  (' + top + ')' if top else ''}{err}{mem}")


def _storage_sample(detail: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The JVM heap's peak so far, the states' bytes in Spark's block stores (a system that
    reports them: streamfold's commit records) and the bytes of the streams' files so far."""
    from ..runtime.storage import peak_heap_mb

    out: dict[str, Any] = {"jvm_peak_heap_mb": peak_heap_mb(ctx.spark), "data_bytes": _data_bytes(ctx.dirs)}
    if isinstance(detail.get("state_bytes"), dict):
        out["state_bytes"] = sum(detail["state_bytes"].values())
    return out


def _data_bytes(dirs: dict[str, str]) -> int:
    """Bytes of the files under the streams' directories (a Delta table's log too)."""
    return sum(os.path.getsize(os.path.join(root, n)) for d in dirs.values() for root, _, names in os.walk(d)
               for n in names if not n.startswith((".", "_")) or root != d)


def _measure_error(detail: dict[str, Any], system: System, ctx: Context, data: DataSet, inc: int,
                   opts: BenchOptions) -> None:
    """With --errors: the answer just committed against the NumPy reference (after the timing)."""
    if opts.errors:
        from .accuracy import answer_error

        detail["error"] = answer_error(ctx.workload, system.answer(), data.upto(inc), data.tables)


def _heap_sampled(inc: int, increments: int) -> bool:
    """Whether the live heap is measured after increment ``inc``: every 20th from the 20th, and the last."""
    ref = min(MEMORY_REFERENCE, increments)
    return inc == increments or (inc >= ref and inc % MEMORY_REFERENCE == 0)


def heap_trend(series: list[tuple[int, float]]) -> float | None:
    """The least-squares slope of (increment, live heap MB) in KB per increment: a leak grows it
    batch after batch, while what a few recent batches leave live only moves it up and down."""
    if len(series) < 3 or len({x for x, _ in series}) < 2:
        return None
    xs, ys = zip(*series)
    return round(1024 * statistics.linear_regression(xs, ys).slope, 1)


def _memory_summary(samples: list[dict[str, Any]], increments: int) -> dict[str, Any]:
    """Peak RSS at increment 20 (or the last, if fewer) and at the end, and the growth between;
    the live heap after a full GC every 20 increments, and its trend."""
    ref = min(MEMORY_REFERENCE, increments)
    at = {s["increment"]: s for s in samples}
    out: dict[str, Any] = {"reference_increment": ref, "last_increment": increments}
    for who in ("python", "jvm"):
        a, b = at[ref].get(f"{who}_peak_rss_mb"), at[increments].get(f"{who}_peak_rss_mb")
        out[who] = {"peak_rss_at_reference_mb": a, "peak_rss_at_end_mb": b,
                    "rss_at_reference_mb": at[ref].get(f"{who}_rss_mb"), "rss_at_end_mb": at[increments].get(f"{who}_rss_mb"),
                    "growth_pct": round(100 * (b - a) / a, 2) if a and b else None}
    out["jvm"]["heap_used_after_gc_at_reference_mb"] = at[ref].get("jvm_heap_used_after_gc_mb")
    out["jvm"]["heap_used_after_gc_at_end_mb"] = at[increments].get("jvm_heap_used_after_gc_mb")
    series = [(s["increment"], s["jvm_heap_used_after_gc_mb"]) for s in samples
              if s.get("jvm_heap_used_after_gc_mb") is not None]
    out["jvm"]["heap_used_after_gc_mb"] = [list(p) for p in series]
    out["jvm"]["heap_trend_kb_per_increment"] = heap_trend(series)
    peaks = [s["jvm_peak_heap_mb"] for s in samples if s.get("jvm_peak_heap_mb") is not None]
    out["jvm"]["peak_heap_mb"] = max(peaks) if peaks else None
    out["states"] = {f"{k}_at_{when}": at[i].get(k) for k in ("state_bytes", "data_bytes")
                     for when, i in (("reference", ref), ("end", increments))}
    states, data = out["states"]["state_bytes_at_end"], out["states"]["data_bytes_at_end"]
    out["states"]["ratio_at_end"] = round(states / data, 3) if states is not None and data else None
    return out


def _last_job(spark: Any) -> int:
    """The id of the last Spark job started (ids grow by one per job): counts an increment's jobs."""
    try:
        return max(spark.sparkContext.statusTracker().getJobIdsForGroup(None), default=-1)
    except Exception:  # noqa: BLE001 - no status tracker (Spark Connect): not counted
        return -1


def _warm_up(spark: Any, path: str) -> None:
    """One small job through the paths every system uses (Parquet write and read, a grouped aggregate)."""
    df = spark.range(100_000).selectExpr("CAST(id % 100 AS INT) AS x", "CAST(id AS INT) AS y")
    df.write.mode("overwrite").parquet(path)
    spark.read.parquet(path).groupBy("x").avg("y").write.mode("overwrite").parquet(path + "-answer")


def _transpiled(sql: str) -> str:
    import sqlglot

    return sqlglot.transpile(sql, read="spark", write="duckdb")[0]
