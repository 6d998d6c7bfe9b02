"""``streamfold bench soak``: long runs, to show that nothing grows from batch to batch (issue 17).

Each workload runs for ``--batches`` batches (30) with deletions, one after the other in one JVM:

* the 22 TPC-H queries at ``--sf`` (0.01): ``lineitem`` and ``orders`` streamed by order key —
  half the orders with their line items in batch 0, the rest over the following batches, and the
  last batch deleting 5 % of the orders with their line items (``partsupp`` the same way by part
  key for Q2, Q11 and Q16, which read neither); the dimension tables are sources whose only file
  arrives in batch 0, as in the issue (``--dimensions table`` gives them as static tables);
* the seed's workloads: ``groupby``, ``join-groupby``, ``pagerank`` and ``kmeans`` (the examples'
  iterations, exact mode) and ``reachability`` (``WITH RECURSIVE``); after batch 0 every batch
  inserts rows and deletes a tenth as many earlier ones;
* ``windowed``: a sliding window's groupBy under an event-time bound (:data:`WINDOWED_SQL`, rows
  out of order and late, the same churn): rows expire as the stream's time moves, so the states,
  not only the heap, must stay flat (``state_rows`` per batch); DuckDB evaluates the bound at the
  batch time each commit records.

After every batch the soak records the JVM's live heap (a full collection, twice: the second
after Spark's cleaner has dropped the blocks the first freed), the size of the batch's plans (the
text of every Spark SQL execution the batch ran, from Spark's status store), the bytes Spark
plans each state with, and whether the snapshot equals DuckDB's answer over the prefix.
A workload is **flat** when, from batch ``--from`` (5) on, the heap and the plan text per Spark
execution each stay within a band: max − min at most 15 % of their median or 64 MB (heap), 10 %
or 1,000 characters (plans). Per execution, because a loop runs as many rounds as its data needs
(``reachability``: 78 to 150 executions a batch of about 1,330 characters each); a batch that
also compacts the state (every 20th) runs the compaction's jobs besides and is left out of the
plan band, and a fold of a state's tail into its base (``runtime/runs.py``, a job of its own after
some commits) is not counted among a batch's executions. It passes when it is flat and every snapshot is exact. The heap is read after
Python's garbage is freed, which a query also does after its batches (``runtime/query.py``,
``GarbageCollector``).

Writes ``OUT/soak/results.json`` (every batch's figures) and ``results.md`` (the table for
``docs/benchmarks.md``) after every batch, so a run cut short keeps what it measured; exits 1 when a
workload is not flat, not exact, or fails.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import StreamfoldError, UsageError
from ..runtime.runs import FOLD_JOB
from .machine import jvm_heap_mb, machine_info

SEED_WORKLOADS = ("groupby", "join-groupby", "pagerank", "kmeans", "reachability", "windowed")
TPCH_QUERIES = tuple(f"q{i:02d}" for i in range(1, 23))
SEED = 17
# A sliding window over event time, under a bound that expires rows as the stream's time moves:
# the states must stay those of the last ten minutes while the history grows.
WINDOWED_SQL = ("SELECT window.start AS ws, count(*) AS n, sum(v) AS t, max(v) AS m FROM E "
                "WHERE ts > max_event_time() - INTERVAL 10 MINUTES GROUP BY window(ts, '10 minutes', '5 minutes')")
WINDOWED_T0 = 1_704_067_200_000_000  # 2024-01-01 UTC, in microseconds
_MIN = 60_000_000
_LIVE = f"(SELECT * FROM E WHERE epoch_us(ts) > {{batch_time_us}} - {10 * _MIN})"
_START = f"epoch_us(ts) - epoch_us(ts) % {5 * _MIN} - _n * {5 * _MIN}"
WINDOWED_ORACLE = (f"SELECT make_timestamp(_s), count(*), sum(v), max(v) FROM (SELECT *, {_START} AS _s FROM {_LIVE}, "
                   f"range(2) AS _r(_n)) WHERE _s <= epoch_us(ts) AND epoch_us(ts) < _s + {10 * _MIN} GROUP BY _s")
HEAP_BAND = (0.15, 64.0)  # relative to the median, and at least this many MB
PLAN_BAND = (0.10, 1_000)  # relative to the median, and at least this many characters (per execution)
STATE_BAND = (0.25, 100)  # a bounded workload's state rows: relative to the median, and at least this many rows


@dataclass(frozen=True)
class SoakInput:
    """A workload's query and data: each stream's file per batch (None: no file that batch)."""

    name: str
    sql: str
    streams: dict[str, list[str | None]]
    tables: dict[str, str] = field(default_factory=dict)
    schemas: dict[str, str] = field(default_factory=dict)
    oracle: str | None = None  # DuckDB's text, for a query of the batch's time: ``{batch_time_us}`` in it
    bounded: bool = False  # the states' rows must stay flat too (a time bound expires rows)


@dataclass
class BatchFigures:
    batch: int
    seconds: float
    heap_mb: float | None
    plan_chars: int  # the text of the batch's Spark SQL executions' physical plans
    plan_max_chars: int  # the longest of them
    executions: int
    planned_bytes: int  # the sizes Spark plans the states with, summed
    state_rows: int
    plans_complete: bool  # False: Spark had dropped some of the batch's executions (retention)
    exact: bool
    difference: str | None = None
    compacted: bool = False  # the batch also wrote a full copy of the state (every --compact-every batches)


# -- the workloads' data ----------------------------------------------------------------------------
def _write(path: str, table: Any) -> str:
    from .data import write_table

    write_table(path, table)
    return path


def _weighted(columns: dict[str, Any], weight: int) -> Any:
    import numpy as np
    import pyarrow as pa

    n = len(next(iter(columns.values())))
    arrays = {k: pa.array(v, pa.timestamp("us", tz="UTC")) if v.dtype.kind == "M" else pa.array(v)
              for k, v in columns.items()}  # (event times are instants: TIMESTAMP in Spark, UTC)
    return pa.table({**arrays, "_weight": pa.array(np.full(n, weight, np.int64))})


def _churn(directory: str, draw: Callable[[Any, int, int], dict[str, Any]], first: int, increment: int,
           batches: int, rng: Any) -> list[str | None]:
    """Batch 0: ``first`` rows of ``draw``; each later batch: ``increment`` new rows and the deletion
    of a tenth as many rows still there (chosen at random): one file per batch. ``draw(rng, n, b)``
    gives batch ``b``'s ``n`` new rows."""
    import numpy as np
    import pyarrow as pa

    os.makedirs(directory, exist_ok=True)
    alive: dict[str, Any] = {}
    paths: list[str | None] = []
    for b in range(batches):
        new = draw(rng, first if b == 0 else increment, b)
        parts = [_weighted(new, 1)]
        if b > 0 and alive:
            n = len(next(iter(alive.values())))
            gone = rng.choice(n, size=min(n, max(1, increment // 10)), replace=False)
            keep = np.ones(n, bool)
            keep[gone] = False
            parts.append(_weighted({k: v[gone] for k, v in alive.items()}, -1))
            alive = {k: v[keep] for k, v in alive.items()}
        alive = {k: np.concatenate([alive[k], v]) if alive else v for k, v in new.items()}
        paths.append(_write(os.path.join(directory, f"{b:06d}.parquet"), pa.concat_tables(parts)))
    return paths


def seed_input(name: str, root: str, batches: int, quick: bool) -> SoakInput:
    """One of :data:`SEED_WORKLOADS` with its data under ``root`` (see the module docstring)."""
    import numpy as np

    from . import iterative
    from .data import write_points
    from .workloads import GROUPBY_SQL, JOIN_GROUPBY_SQL, example_sql

    rng = np.random.default_rng(SEED)
    scale = 10 if quick else 1

    def ints(*cols: str, high: int = 10_001) -> Callable[[Any, int, int], dict[str, Any]]:
        return lambda r, n, b: {c: r.integers(0, high, n, dtype=np.int32) for c in cols}

    def edges(nodes: int) -> Callable[[Any, int, int], dict[str, Any]]:
        return lambda r, n, b: {"src": r.integers(0, nodes, n, dtype=np.int64),
                                "dst": r.integers(0, nodes, n, dtype=np.int64)}

    def events(r: Any, n: int, b: int) -> dict[str, Any]:
        """Batch ``b``'s events lie around minute ``b``: from 3 minutes before it (out of order,
        some late for the 10-minute bound) to 30 s after."""
        us = WINDOWED_T0 + b * 60_000_000 + r.integers(-180_000_000, 30_000_000, n)
        return {"k": r.integers(0, 10, n, dtype=np.int32), "ts": us.astype("datetime64[us]"),
                "v": r.integers(0, 1_000, n, dtype=np.int32)}

    def points(r: Any, n: int, b: int) -> dict[str, Any]:
        p = iterative.kmeans_points(n, int(r.integers(1 << 30)))
        return {"x": p[:, 0], "y": p[:, 1]}

    d = os.path.join(root, name)
    if name == "groupby":
        streams = {"S": _churn(f"{d}/S", ints("x", "y"), 20_000 // scale, 1_000 // scale, batches, rng)}
        return SoakInput(name, GROUPBY_SQL, streams, schemas={"S": "x INT, y INT, _weight BIGINT"})
    if name == "join-groupby":
        streams = {s: _churn(f"{d}/{s}", ints(*cols), 5_000 // scale, 500 // scale, batches, rng)
                   for s, cols in (("S1", ("A", "B")), ("S2", ("C", "D")))}
        return SoakInput(name, JOIN_GROUPBY_SQL, streams,
                         schemas={"S1": "A INT, B INT, _weight BIGINT", "S2": "C INT, D INT, _weight BIGINT"})
    if name == "pagerank":
        streams = {"edges": _churn(f"{d}/edges", edges(500 // scale), 3_000 // scale, 50, batches, rng)}
        return SoakInput(name, example_sql("pagerank"), streams, schemas={"edges": "src BIGINT, dst BIGINT, _weight BIGINT"})
    if name == "kmeans":
        streams = {"points": _churn(f"{d}/points", points, 5_000 // scale, 200 // scale, batches, rng)}
        os.makedirs(f"{d}/centroids0", exist_ok=True)
        write_points(f"{d}/centroids0/000000.parquet", iterative.kmeans_initial_centroids(seed=SEED))
        return SoakInput(name, example_sql("kmeans"), streams, tables={"centroids0": f"{d}/centroids0"},
                         schemas={"points": "x DOUBLE, y DOUBLE, _weight BIGINT"})
    if name == "windowed":
        streams = {"E": _churn(f"{d}/E", events, 2_000 // scale, 200 // scale, batches, rng)}
        return SoakInput(name, WINDOWED_SQL, streams, schemas={"E": "k INT, ts TIMESTAMP, v INT, _weight BIGINT"},
                         oracle=WINDOWED_ORACLE, bounded=True)
    if name == "reachability":
        streams = {"edges": _churn(f"{d}/edges", edges(150 // scale), 150 // scale, 5, batches, rng)}
        return SoakInput(name, example_sql("reachability"), streams,
                         schemas={"edges": "src BIGINT, dst BIGINT, _weight BIGINT"})
    raise UsageError(f"unknown soak workload {name!r}", code="UNKNOWN_WORKLOAD", params={"workload": name},
                     hint=f"use q01 … q22 or one of {', '.join(SEED_WORKLOADS)}")


def tpch_split(root: str, sf: float, batches: int) -> dict[str, Any]:
    """The streamed TPC-H tables in the soak's batches (made once under ``root``, then reused):
    ``{"dataset": …, "files": {table: [path per batch]}}``."""
    import json

    import numpy as np
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from .tpch import data

    ds = data.ensure(os.path.join(root, "data"), sf, 4)
    base = os.path.join(root, f"soak-sf{sf:g}-b{batches}")
    manifest = os.path.join(base, "manifest.json")
    files = {t: [os.path.join(base, t, f"{b:06d}.parquet") for b in range(batches)] for t in data.STREAM_KEYS}
    if os.path.exists(manifest):
        return {"dataset": ds, "files": files}
    shutil.rmtree(base, ignore_errors=True)
    rng = np.random.default_rng(SEED)
    by = {"o_orderkey": ("orders", "lineitem"), "ps_partkey": ("partsupp",)}
    for key, tables in by.items():
        whole = {t: pq.read_table(ds.table_path(t)) for t in tables}
        keys = np.unique(whole[tables[0]][key].to_numpy())
        half = len(keys) // 2
        chunks = [keys[:half]] + list(np.array_split(keys[half:], max(batches - 2, 1)))
        deleted = rng.choice(keys, size=max(1, len(keys) // 20), replace=False)
        for t in tables:
            os.makedirs(os.path.join(base, t))
            k = whole[t][data.STREAM_KEYS[t]]
            for b in range(batches):
                gone = b == batches - 1
                chosen = deleted if gone else chunks[b] if b < len(chunks) else keys[:0]
                part = whole[t].filter(pc.is_in(k, value_set=_array(chosen)))
                part = part.append_column("_weight", _array(np.full(part.num_rows, -1 if gone else 1, np.int64)))
                _write(files[t][b], part.cast(data.arrow_schema(t, weighted=True)))
    with open(manifest, "w") as fh:
        json.dump({"sf": sf, "batches": batches, "seed": SEED}, fh)
    return {"dataset": ds, "files": files}


def _array(values: Any) -> Any:
    import pyarrow as pa

    return pa.array(values)


def tpch_input(name: str, split: dict[str, Any], dimensions: str) -> SoakInput:
    """TPC-H query ``name`` over the soak's batches; its other tables as sources or static tables."""
    from .tpch import data, run

    sql = run.load_query(name)
    read = run.tables_read(sql)
    streamed = list(data.streams_for(read))
    ds = split["dataset"]
    streams: dict[str, list[str | None]] = {t: list(split["files"][t]) for t in streamed}
    tables: dict[str, str] = {}
    batches = len(next(iter(streams.values())))
    for t in sorted(read - set(streamed)):
        if dimensions == "table":
            tables[t] = ds.table_path(t)
        else:
            streams[t] = [ds.table_path(t)] + [None] * (batches - 1)
    schemas = {t: data.schema_sql(t, t in streamed) for t in read}
    return SoakInput(name, sql, streams, tables, schemas)


# -- measuring ----------------------------------------------------------------------------------------
def live_heap_mb(spark: Any) -> float | None:
    """The JVM's live heap: Python's garbage freed first (its proxies keep JVM objects live), then a
    full collection, a moment for Spark's cleaner to drop the blocks it freed, and another."""
    import gc

    gc.collect()
    jvm_heap_mb(spark, collect=True)
    time.sleep(0.3)
    return jvm_heap_mb(spark, collect=True)


# Spark keeps this many SQL executions' plans for its status store (streamfold keeps 50): enough
# for every execution of a batch (an exact PageRank batch runs over 50), at most a few MB of text.
RETAINED_EXECUTIONS = 400


def executions_after(spark: Any, last: int) -> tuple[list[int], int, bool]:
    """The lengths of the physical plans of the Spark SQL executions after id ``last``, the last
    id, and whether Spark still had all of them (none dropped for its retention limit).

    A fold of a state's tail into its base (runtime/runs.py, after a batch's commit, every few
    batches) is left out: its plan is a merge of two runs, constant in size, and counted among a
    batch's executions it made that batch's plan text per execution dip (TPC-H Q09 at SF 0.01:
    17,026 against 20,000 characters), which the band judges as if plans were not flat."""
    listed = spark._jsparkSession.sharedState().statusStore().executionsList()
    lengths, ids = [], []
    for i in range(listed.size()):
        e = listed.apply(i)
        eid = int(e.executionId())
        if eid > last:
            ids.append(eid)
            if not str(e.description() or "").startswith(FOLD_JOB):
                lengths.append(len(e.physicalPlanDescription() or ""))
    complete = not ids or min(ids) == last + 1 or last < 0
    return lengths, max(ids, default=last), complete


def state_estimates(query: Any) -> dict[str, tuple[int | None, int]]:
    """Per state of a running query: its rows, and the bytes Spark plans it with."""
    store = query.engine.store
    out = {}
    for name, df in store.current.items():
        planned = int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))
        out[name] = (store.rows.get(name), planned)
    return out


def band(values: Sequence[float | None], start: int, relative: float, floor: float) -> dict[str, Any]:
    """Whether ``values[start:]`` stay within max − min ≤ max(relative × median, floor)."""
    tail = [v for v in values[start:] if v is not None]
    if len(tail) < 2:
        return {"flat": None, "median": None, "spread": None, "bound": None, "slope": None}
    median = statistics.median(tail)
    spread = max(tail) - min(tail)
    bound = max(relative * median, floor)
    slope = statistics.linear_regression(range(len(tail)), tail).slope
    return {"flat": spread <= bound, "median": round(median, 1), "spread": round(spread, 1),
            "bound": round(bound, 1), "slope": round(slope, 2)}


# -- running --------------------------------------------------------------------------------------------
def _place(src: str, directory: str, batch: int) -> None:
    """Make a batch's file appear in a source directory at once (hidden name, then renamed)."""
    name = f"{batch:06d}.parquet"
    hidden = os.path.join(directory, "." + name)
    try:
        os.link(src, hidden)
    except OSError:
        shutil.copyfile(src, hidden)
    os.replace(hidden, os.path.join(directory, name))


def run_workload(soak: SoakInput, spark: Any, work: str, say: Callable[[str], None] = print,
                 measured: Callable[[dict[str, Any]], None] | None = None, measure_heap: bool = True) -> dict[str, Any]:
    """Stream ``soak`` batch by batch, measure and check each batch; the workload's record
    (given to ``measured`` after every batch, with status ``running`` until the last). Without
    ``measure_heap`` the live heap is not measured (two full collections a batch)."""
    import streamfold

    from ..sql.iterate import unrolled_sql
    from ..verify import DuckOracle, compare, order_of, python_value

    shutil.rmtree(work, ignore_errors=True)
    dirs = {s: os.path.join(work, "in", s) for s in soak.streams}
    for d in dirs.values():
        os.makedirs(d)
    record: dict[str, Any] = {"workload": soak.name, "status": "running", "batches": [], "bounded": soak.bounded}
    query = oracle = None
    _, last, _ = executions_after(spark, -1)
    try:
        order = order_of(unrolled_sql(soak.sql))
        oracle = DuckOracle(soak.sql, soak.oracle)
        for name, path in soak.tables.items():
            oracle.set_input(name, [path])
        for b in range(len(next(iter(soak.streams.values())))):
            for s, files in soak.streams.items():
                batch_file = files[b]
                if batch_file is not None:
                    _place(batch_file, dirs[s], b)
            if query is None:
                query = streamfold.start(soak.sql, dirs, os.path.join(work, "out"), tables=soak.tables,
                                         schemas=soak.schemas, spark=spark, background=False)
            result = query.process_available()
            if result is None:
                raise RuntimeError(f"batch {b} made no batch")
            plans, last, complete = executions_after(spark, last)
            estimates = state_estimates(query)
            heap = live_heap_mb(spark) if measure_heap else None
            for s, files in soak.streams.items():
                oracle.set_input(s, [p for p in files[: b + 1] if p is not None])
            if soak.oracle is not None:  # the query's time bound at the time the commit recorded
                oracle.text = soak.oracle.format(batch_time_us=int(query.commit(b)["batch_time_us"]))
            actual = [tuple(python_value(v) for v in r) for r in query.snapshot_pandas().itertuples(index=False, name=None)]
            difference = compare(actual, oracle.answer(), order).detail
            every = query.engine.config.compact_every
            figures = BatchFigures(b, round(result.duration_s, 3), heap, sum(plans), max(plans, default=0), len(plans),
                                   sum(p for _, p in estimates.values()),
                                   sum(r or 0 for r, _ in estimates.values()), complete, difference is None,
                                   difference, bool(every) and (b + 1) % every == 0)
            record["batches"].append(asdict(figures))
            if measured is not None:
                measured(record)
            say(f"{soak.name}: batch {b} {result.duration_s:.2f}s heap {heap} MB plans {sum(plans):,} chars "
                f"({len(plans)}) planned {figures.planned_bytes:,} B {'ok' if difference is None else 'DIFFERS: ' + difference}")
        record["status"] = "ok"
    except StreamfoldError as e:
        record.update(status="ERROR", code=e.code, params=e.params, error=e.message)
        say(f"{soak.name}: ERROR {e}")
    except Exception as e:  # noqa: BLE001 - a failing workload is a finding; the soak goes on
        record.update(status="ERROR", code=type(e).__name__, error=str(e).splitlines()[0] if str(e) else "",
                      trace=traceback.format_exc(limit=4)[-2000:])
        say(f"{soak.name}: ERROR {record['error']}")
    finally:
        if oracle is not None:
            oracle.close()
        if query is not None:
            query.stop()
    return record


def per_execution(row: dict[str, Any]) -> float | None:
    """A batch's plan text per Spark execution (None for a batch that ran none)."""
    return row["plan_chars"] / row["executions"] if row.get("executions") else None


def judge(record: dict[str, Any], start: int) -> dict[str, Any]:
    """The workload's verdict: exact in every batch, and heap and plans flat from batch ``start``."""
    rows = record["batches"]
    heap = band([r["heap_mb"] for r in rows], start, *HEAP_BAND)
    plans = band([None if r.get("compacted") else per_execution(r) for r in rows], start, *PLAN_BAND)
    states = band([r["state_rows"] for r in rows], start, *STATE_BAND) if record.get("bounded") else None
    exact = bool(rows) and all(r["exact"] for r in rows)
    passed = (record["status"] == "ok" and exact and bool(heap["flat"]) and bool(plans["flat"])
              and (states is None or bool(states["flat"])))
    return {"exact": exact, "heap": heap, "plans": plans, "states": states, "passed": passed,
            "median_s": round(statistics.median(r["seconds"] for r in rows), 2) if rows else None}


@dataclass(frozen=True)
class SoakOptions:
    workloads: tuple[str, ...]
    batches: int = 30
    start: int = 5
    sf: float = 0.01
    dimensions: str = "source"
    quick: bool = False
    out: str = "bench-out"
    master: str | None = None
    command: tuple[str, ...] = ()


def parse_workloads(spec: str | None) -> tuple[str, ...]:
    """``"q21,18,groupby"`` → ``("q21", "q18", "groupby")``; None → every TPC-H query and seed workload."""
    if not spec:
        return TPCH_QUERIES + SEED_WORKLOADS
    out = []
    for part in (p.strip().lower() for p in spec.split(",") if p.strip()):
        digits = part.lstrip("q")
        if digits.isdigit() and 1 <= int(digits) <= 22:
            out.append(f"q{int(digits):02d}")
        elif part in SEED_WORKLOADS:
            out.append(part)
        else:
            raise UsageError(f"unknown soak workload {part!r}", code="UNKNOWN_WORKLOAD", params={"workload": part},
                             hint=f"use q1 … q22 or one of {', '.join(SEED_WORKLOADS)}, comma-separated")
    return tuple(out)


def run_soak(opts: SoakOptions, spark: Any = None, say: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run every workload of ``opts``; write and return the results."""
    say = say or (lambda m: print(m, file=sys.stderr, flush=True))
    if opts.batches < 3 or not 0 <= opts.start < opts.batches - 1:
        raise UsageError(f"a soak needs at least 3 batches and --from below the last ({opts.batches}, {opts.start})",
                         code="BAD_SIZE", params={"batches": opts.batches, "from": opts.start},
                         hint="e.g. --batches 30 --from 5")
    directory = os.path.join(opts.out, "soak")
    os.makedirs(directory, exist_ok=True)
    if spark is None:
        from ..runtime.session import get_spark

        spark = get_spark(opts.master, conf={"spark.sql.ui.retainedExecutions": str(RETAINED_EXECUTIONS)})
    data_root = os.path.join(opts.out, "soak-data")
    split = None
    results: dict[str, Any] = {"command": list(opts.command), "machine": machine_info(spark),
                               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                               "options": asdict(opts), "workloads": {}}
    for name in opts.workloads:
        if name in SEED_WORKLOADS:
            soak = seed_input(name, os.path.join(data_root, "quick" if opts.quick else "full"), opts.batches, opts.quick)
        else:
            split = split or tpch_split(os.path.join(data_root, "tpch"), opts.sf, opts.batches)
            soak = tpch_input(name, split, opts.dimensions)
        def measured(record: dict[str, Any]) -> None:
            results["workloads"][record["workload"]] = {**record, **judge(record, opts.start)}
            _write_results(results, directory, opts)

        record = run_workload(soak, spark, os.path.join(directory, "work", name), say, measured)
        measured(record)
    results["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    _write_results(results, directory, opts)
    return results


def _write_results(results: dict[str, Any], directory: str, opts: SoakOptions) -> None:
    import json

    with open(os.path.join(directory, "results.json"), "w") as fh:
        json.dump(results, fh, indent=1, default=str)
    with open(os.path.join(directory, "results.md"), "w") as fh:
        fh.write(markdown(results, opts.start))


def markdown(results: dict[str, Any], start: int) -> str:
    """The soak's table: per workload, exactness, time, and the heap and plan bands from ``start``."""
    lines = ["| workload | batches | exact | s/batch (median) | live heap MB: batch "
             f"{start} → max → last | heap band (max − min ≤ bound), trend | plan chars per execution: batch {start} → max "
             "| plan band | flat |", "|---|---|---|---|---|---|---|---|---|"]
    for name, rec in results["workloads"].items():
        rows = rec["batches"]
        if len(rows) <= start:
            what = "running" if rec["status"] == "running" else f"{rec['status']}: {rec.get('code')}"
            lines.append(f"| {name} | {len(rows)} ({what}) | {'yes' if rec['exact'] else 'NO'} | "
                         f"{rec['median_s'] if rows else ''} | {rec.get('error', '')[:80]} | | | | |")
            continue
        heap = [r["heap_mb"] for r in rows]
        plans = [None if r.get("compacted") else per_execution(r) for r in rows]
        tail_plans = [v for v in plans[start:] if v is not None]
        runs = sorted({r["executions"] for r in rows[start:]})
        executions = f"{runs[0]}" if len(runs) == 1 else f"{runs[0]}–{runs[-1]}"
        h, p = rec["heap"], rec["plans"]
        tail_heap = [v for v in heap[start:] if v is not None]
        status = {"ok": "", "running": " (not finished)"}.get(rec["status"], f" ({rec['status']} {rec.get('code')})")
        lines.append(
            f"| {name} | {len(rows)}{status} | {'yes' if rec['exact'] else 'NO'} | {rec['median_s']} | "
            f"{_n(heap[start] if len(heap) > start else None)} → {_n(max(tail_heap) if tail_heap else None)} → "
            f"{_n(heap[-1])} | {_within(h)}, {_trend(h['slope'])} | "
            f"{_n(plans[start])} → {_n(max(tail_plans) if tail_plans else None)} ({executions} executions) | "
            f"{_within(p)} | "
            f"{'yes' if h['flat'] and p['flat'] and (rec.get('states') or {'flat': True})['flat'] else 'NO'} |")
    for name, rec in results["workloads"].items():
        if rec.get("states") and rec["states"]["flat"] is not None:
            rows = [r["state_rows"] for r in rec["batches"]]
            lines.append(f"\n{name}: the states' rows, batch {start} → max → last: {_n(rows[start])} → "
                         f"{_n(max(rows[start:]))} → {_n(rows[-1])} ({_within(rec['states'])}, "
                         f"trend {rec['states']['slope']:+.1f} rows/batch) while the history grows")
    return "\n".join(lines) + "\n"


def _within(b: dict[str, Any]) -> str:
    """``spread ≤ bound`` (or ``>`` when it is not within)."""
    return f"{_n(b['spread'])} {'≤' if b['flat'] else '>'} {_n(b['bound'])}"


def _trend(slope: float | None) -> str:
    return "trend –" if slope is None else f"{slope:+.1f} MB/batch"


def _n(v: float | None) -> str:
    return "–" if v is None else f"{v:,.0f}"
