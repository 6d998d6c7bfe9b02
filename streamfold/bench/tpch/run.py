"""TPC-H as a coverage yardstick: each query maintained by streamfold, checked after every batch.

For each query: streamfold compiles it (``streamfold.compile``); a coded refusal is recorded
("refused: UNSUPPORTED_SUBQUERY") and the runner moves on. A query that compiles runs with the
Python API (``background=False``): ``lineitem`` and ``orders`` (those of them the query reads)
are stream sources in directories of their own, fed batch by batch — the insert batches, then
the batch deleting some orders with their line items — and the other tables are static. Q2,
Q11 and Q16 read neither, so ``partsupp`` is their stream (see ``data.py``).

After every batch the snapshot is compared with DuckDB's answer on the prefix (the weighted
rows netted first): as bags, numbers equal up to 1e-9 relative or one unit in the last place of
the decimal streamfold answers with (Spark rounds decimal quotients and averages to 6 places
where DuckDB answers in DOUBLE); with ORDER BY the snapshot must also be in order, and with
LIMIT rows tied with the last row on the ORDER BY key may differ. Each batch is also timed
against a Spark recompute of the same query over the prefix, whose answer is checked against
DuckDB too (that checks the query texts and the oracle, independently of streamfold).

    .venv/bin/python -m streamfold.bench.tpch.run [--sf 0.01] [--batches 4] [--queries 1,3,5]
                                            [--out bench-out/tpch] [--no-recompute]

Writes ``<out>/tpch-sf<SF>.json`` and ``<out>/tpch-sf<SF>.md``; the data sets are kept under
``<out>/data`` and reused.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from ...runtime.netting import register_files
from ...verify import DuckOracle, OrderSpec, compare, order_of, python_value, recompute
from . import data as tpch_data
from .data import Dataset

HERE = os.path.dirname(os.path.abspath(__file__))
QUERY_DIR = os.path.join(HERE, "queries")
ALL_QUERIES = [f"q{i:02d}" for i in range(1, 23)]


# -- queries --------------------------------------------------------------------------------------
def load_query(name: str) -> str:
    with open(os.path.join(QUERY_DIR, f"{name}.sql")) as f:
        return f.read()


def query_names(spec: str | None) -> list[str]:
    """``"1,3,q05"`` → ``["q01", "q03", "q05"]``; None → all 22."""
    if not spec:
        return list(ALL_QUERIES)
    names = []
    for part in spec.split(","):
        part = part.strip().lower().lstrip("q")
        if part:
            n = int(part)
            if not 1 <= n <= 22:
                raise SystemExit(f"no TPC-H query {n}")
            names.append(f"q{n:02d}")
    return names


def tables_read(sql: str) -> set[str]:
    tree = sqlglot.parse_one(sql, read="spark")
    return {t.name.lower() for t in tree.find_all(exp.Table)} & set(tpch_data.TABLES)


# -- checking answers (streamfold.verify) -------------------------------------------------------------
def answer_difference(actual: list[tuple], expected: list[tuple], order: OrderSpec | None) -> str | None:
    """None if ``actual`` is a correct answer given DuckDB's ``expected`` (see :mod:`streamfold.verify`)."""
    return compare(actual, expected, order).detail


class TpchOracle:
    """DuckDB's answer to a query over a prefix of the batches (static tables whole)."""

    def __init__(self, ds: Dataset, sql: str, streams: Sequence[str], statics: Sequence[str]) -> None:
        self.ds = ds
        self.streams = list(streams)
        self.oracle = DuckOracle(sql)
        for t in statics:
            self.oracle.set_input(t, [ds.table_path(t)])

    def answer(self, last_batch: int) -> list[tuple]:
        for t in self.streams:
            self.oracle.set_input(t, self.ds.prefix_paths(t, last_batch))
        return self.oracle.answer()

    def close(self) -> None:
        self.oracle.close()


def spark_recompute(spark: Any, ds: Dataset, sql: str, streams: Sequence[str], statics: Sequence[str],
                    last_batch: int) -> tuple[list[tuple], float]:
    """The Spark batch query over a prefix, from the files, as a user without streamfold runs it."""
    inputs: dict[str, str | Sequence[str]] = {t: ds.table_path(t) for t in statics}
    inputs.update({t: ds.prefix_paths(t, last_batch) for t in streams})
    # insert batches: every row has _weight = +1, so nothing needs netting before the deletions
    # with them, only the rows a deletion can meet are netted, as streamfold's recompute does
    result = recompute(spark, sql, inputs, net=ds.has_deletions(last_batch), netting=register_files)
    return [tuple(python_value(v) for v in r) for r in result.rows or []], result.seconds


# -- running one query ----------------------------------------------------------------------------
@dataclass
class BatchRecord:
    batch: int
    deletes: bool
    input_rows: dict[str, int]
    streamfold_s: float
    recompute_s: float | None
    snapshot_rows: int
    state_rows: dict[str, int]
    difference: str | None = None
    spark_difference: str | None = None
    timings: dict[str, float] = field(default_factory=dict)  # streamfold's own breakdown of the batch
    after_commit_s: float = 0.0  # the batch's work after its commit (batch 0: preparing batch 1, calibrating)


@dataclass
class QueryRecord:
    query: str
    status: str  # passes | refused | FAILS | ERROR
    streams: list[str]
    code: str | None = None
    message: str | None = None
    spot: str | None = None  # refused: the start of the query text the error marks
    first_difference: str | None = None
    batches: list[BatchRecord] = field(default_factory=list)
    text_check: str | None = None  # refused queries: Spark vs DuckDB on all data ("ok" or the difference)
    seconds: float = 0.0

    @property
    def summary(self) -> str:
        if self.status == "refused":
            return f"refused ({self.code})"
        if self.status == "FAILS":
            return "FAILS"
        if self.status == "ERROR":
            return f"ERROR ({self.code})" if self.code else "ERROR"
        return self.status


def compile_check(sql: str, streams: Sequence[str], statics: Sequence[str]):
    """``streamfold.compile`` of the query; returns the StreamfoldError it raises, or None."""
    import streamfold
    from streamfold.errors import StreamfoldError

    schemas = {t: tpch_data.schema_sql(t, t in streams) for t in list(streams) + list(statics)}
    try:
        streamfold.compile(sql, schemas, tables=list(statics))
    except StreamfoldError as e:
        return e
    return None


def _spot(sql: str, error: Exception) -> str | None:
    span = getattr(error, "span", None)
    if not span:
        return None
    text = " ".join(sql[span[0]:span[1] + 1].split())
    return text if len(text) <= 40 else text[:39] + "…"


def run_query(name: str, ds: Dataset, spark, workdir: str, *, recompute: bool = True, partitions: int | None = None,
              streams: Sequence[str] = tpch_data.DEFAULT_STREAMS, log=print,
              options: dict[str, Any] | None = None,
              after_batch: Callable[[int, list[tuple]], None] | None = None) -> QueryRecord:
    """Run query ``name`` over the data set and check every batch (see the module doc).
    ``options`` are more options of ``streamfold.start`` (``profile=True``, ``sinks=[…]``, …);
    ``after_batch(batch, expected)`` is called after each batch's check with DuckDB's answer on
    the prefix (a sink's table checked against it, say)."""
    import streamfold
    from streamfold.errors import StreamfoldError

    started = time.perf_counter()
    sql = load_query(name)
    read = tables_read(sql)
    stream_tables = list(tpch_data.streams_for(read, tuple(streams)))
    statics = sorted(read - set(stream_tables))
    record = QueryRecord(name, "passes", stream_tables)
    spec = order_of(sql)

    error = compile_check(sql, stream_tables, statics)
    if error is not None:
        record.status, record.code, record.message = "refused", error.code, error.message
        record.spot = _spot(sql, error)
        log(f"{name}: refused [{error.code}] {error.message}" + (f" at `{record.spot}`" if record.spot else ""))
        if recompute:
            record.text_check = _text_check(ds, spark, sql, stream_tables, statics, spec)
        record.seconds = time.perf_counter() - started
        return record

    run_dir = os.path.join(workdir, name)
    shutil.rmtree(run_dir, ignore_errors=True)
    dirs = {t: os.path.join(run_dir, "in", t) for t in stream_tables}
    for d in dirs.values():
        os.makedirs(d)
    schemas = {t: tpch_data.schema_sql(t, t in stream_tables) for t in stream_tables + statics}
    options = dict(options or {})
    if partitions:
        options["partitions"] = partitions
    oracle = TpchOracle(ds, sql, stream_tables, statics)
    query = None
    try:
        try:
            query = streamfold.start(sql, dirs, os.path.join(run_dir, "out"),
                                     tables={t: ds.table_path(t) for t in statics}, schemas=schemas, spark=spark,
                                     background=False, **options)
        except StreamfoldError as e:
            record.status, record.code, record.message = "refused", e.code, e.message
            log(f"{name}: refused at start [{e.code}] {e.message}")
            return record
        for b in range(ds.total_batches):
            for t in stream_tables:
                _place(ds.batch_path(t, b), os.path.join(dirs[t], f"{b:06d}.parquet"))
            try:
                result = query.process_available()
            except Exception as e:  # noqa: BLE001 - a failing batch is a finding, not a crash
                record.status = "ERROR"
                record.code = getattr(e, "code", type(e).__name__)
                record.message = f"batch {b}: {e}".split("\n")[0][:500]
                record.first_difference = traceback.format_exc(limit=3)[-2000:]
                log(f"{name}: ERROR in batch {b}: {record.message}")
                break
            if result is None or result.batch != b:
                record.status, record.code = "ERROR", "NO_BATCH"
                record.message = f"batch {b}: process_available() made {'no batch' if result is None else result.batch}"
                log(f"{name}: ERROR {record.message}")
                break
            actual = [tuple(python_value(v) for v in r)
                      for r in query.snapshot_pandas().itertuples(index=False, name=None)]
            expected = oracle.answer(b)
            difference = answer_difference(actual, expected, spec)
            if after_batch is not None:
                after_batch(b, expected)
            rec = BatchRecord(b, b == ds.deletion_batch, dict(result.rows),
                              round(result.commit_s if result.commit_s is not None else result.duration_s, 4), None,
                              len(actual), dict(result.state_rows), difference,
                              timings={k: round(v, 4) for k, v in (result.timings or {}).items()},
                              after_commit_s=round(result.duration_s - result.commit_s, 4)
                              if result.commit_s is not None else 0.0)
            if recompute:
                spark_rows, seconds = spark_recompute(spark, ds, sql, stream_tables, statics, b)
                rec.recompute_s = round(seconds, 4)
                rec.spark_difference = answer_difference(spark_rows, expected, spec)
            record.batches.append(rec)
            if difference is not None and record.first_difference is None:
                record.status = "FAILS"
                record.first_difference = f"batch {b}: {difference}"
            log(f"{name}: batch {b} {'ok ' if difference is None else 'DIFFERS'} "
                f"streamfold {rec.streamfold_s:.2f}s"
                + (f" recompute {rec.recompute_s:.2f}s" if rec.recompute_s is not None else "")
                + f" states {result.state_rows}"
                + (f"\n    {difference}" if difference else "")
                + (f"\n    Spark recompute differs from DuckDB: {rec.spark_difference}" if rec.spark_difference else ""))
    finally:
        if query is not None:
            try:
                query.stop()
            except Exception as e:  # noqa: BLE001
                log(f"{name}: stop failed: {e}")
        oracle.close()
        record.seconds = time.perf_counter() - started
    return record


def _place(src: str, dst: str) -> None:
    """Make a batch file appear in a source directory at once (hidden name, then rename)."""
    hidden = os.path.join(os.path.dirname(dst), "." + os.path.basename(dst))
    try:
        os.link(src, hidden)
    except OSError:
        shutil.copyfile(src, hidden)
    os.replace(hidden, dst)


def _text_check(ds: Dataset, spark, sql: str, streams: Sequence[str], statics: Sequence[str],
                spec: OrderSpec | None) -> str:
    """Spark's batch answer over all batches against DuckDB's: "ok", or the difference."""
    last = ds.total_batches - 1
    oracle = TpchOracle(ds, sql, streams, statics)
    try:
        rows, _ = spark_recompute(spark, ds, sql, streams, statics, last)
        difference = answer_difference(rows, oracle.answer(last), spec)
    finally:
        oracle.close()
    return "ok" if difference is None else difference


# -- the report -----------------------------------------------------------------------------------
def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _secs(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f} s"


def markdown(records: list[QueryRecord], ds: Dataset) -> str:
    m = ds.manifest
    lines = [
        f"TPC-H SF {ds.sf:g}: {m['rows']['lineitem']:,} line items and {m['rows']['orders']:,} orders in "
        f"{ds.batches} batches, then a batch deleting {len(m['deleted_orders'])} orders with their "
        f"{m['deleted_lineitems']:,} line items (Q2, Q11, Q16: partsupp in {ds.batches} batches, then deleting "
        f"the partsupp rows of {len(m['deleted_parts'])} parts).",
        "",
        "| query | status | streams | states after the last insert batch (rows) | batch 0: streamfold / recompute "
        "| later batches, median: streamfold / recompute |",
        "|---|---|---|---|---|---|",
    ]
    for r in records:
        if r.batches:
            # After the last insert batch: the largest the states get. (The counts streamfold
            # reports for a batch that deletes still include the keys that left in it.)
            full = r.batches[min(ds.batches, len(r.batches)) - 1]
            states = ", ".join(f"{n} {v:,}" for n, v in full.state_rows.items()) or "—"
            b0 = r.batches[0]
            first = f"{_secs(b0.streamfold_s)} / {_secs(b0.recompute_s)}"
            later = r.batches[1:]
            rest = (f"{_secs(_median([b.streamfold_s for b in later]))} / "
                    f"{_secs(_median([b.recompute_s for b in later if b.recompute_s is not None]))}")
        else:
            states, first, rest = "—", "—", "—"
        status = r.summary
        if r.status == "refused" and r.spot:
            status += f" at `{r.spot}`"
        elif r.status == "FAILS" and r.first_difference:
            status += f": {r.first_difference.splitlines()[0][:160]}"
        elif r.status == "ERROR" and r.message:
            status += f": {r.message[:160]}"
        lines.append(f"| {r.query.upper()} | {status} | {', '.join(r.streams)} | {states} | {first} | {rest} |")
    counts: dict[str, int] = {}
    for r in records:
        counts[r.status] = counts.get(r.status, 0) + 1
    lines += ["", "Totals: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))]
    spark_bad = [r.query for r in records
                 if any(b.spark_difference for b in r.batches) or (r.text_check not in (None, "ok"))]
    if spark_bad:
        lines.append(f"Spark's batch answer differs from DuckDB's for: {', '.join(spark_bad)} (check the query texts)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="TPC-H coverage and timing for streamfold")
    ap.add_argument("--sf", type=float, default=0.01, help="scale factor (default 0.01)")
    ap.add_argument("--batches", type=int, default=4, help="insert batches before the deletion batch (default 4)")
    ap.add_argument("--queries", help="comma-separated query numbers (default: all 22)")
    ap.add_argument("--out", default="bench-out/tpch", help="output directory (default bench-out/tpch)")
    ap.add_argument("--data", help="where generated data sets are kept (default <out>/data)")
    ap.add_argument("--no-recompute", action="store_true", help="skip the Spark recompute (no timing baseline)")
    ap.add_argument("--partitions", type=int, help="streamfold state partitions (default: its own)")
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument("--check-texts", action="store_true",
                    help="only check Spark's batch answer against DuckDB's on all the data, for each query")
    args = ap.parse_args(argv)

    names = query_names(args.queries)
    ds = tpch_data.ensure(args.data or os.path.join(args.out, "data"), args.sf, args.batches)
    from streamfold.runtime.session import get_spark

    spark = get_spark(args.master, app_name="streamfold-tpch")
    tpch_data.check_spark_types(spark, ds)
    if args.check_texts:
        bad = 0
        for name in names:
            sql = load_query(name)
            read = tables_read(sql)
            streams = list(tpch_data.streams_for(read))
            start = time.perf_counter()
            result = _text_check(ds, spark, sql, streams, sorted(read - set(streams)), order_of(sql))
            bad += result != "ok"
            print(f"{name}: Spark vs DuckDB {result} ({time.perf_counter() - start:.1f} s)")
        spark.stop()
        return 1 if bad else 0
    workdir = os.path.join(args.out, "runs", f"sf{args.sf:g}")
    records = []
    for name in names:
        records.append(run_query(name, ds, spark, workdir, recompute=not args.no_recompute,
                                 partitions=args.partitions))
    spark.stop()

    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"tpch-sf{args.sf:g}")
    with open(stem + ".json", "w") as f:
        json.dump({"sf": args.sf, "batches": args.batches, "manifest": ds.manifest,
                   "queries": [asdict(r) | {"summary": r.summary} for r in records]}, f, indent=1, default=str)
    table = markdown(records, ds)
    with open(stem + ".md", "w") as f:
        f.write(table)
    print()
    print(table)
    print(f"wrote {stem}.json and {stem}.md")
    return 0 if all(r.status in ("passes", "refused") for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
