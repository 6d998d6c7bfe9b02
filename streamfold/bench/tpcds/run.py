"""Run a TPC-DS query through streamfold over a data set and check every batch against DuckDB.

The query runs as Spark SQL (:func:`.spark_text`); DuckDB runs the extension's own text over the
same prefix (dimensions whole, fact tables netted by ``_weight``), compared under
:func:`streamfold.verify.compare` (in order where the query's ORDER BY is total).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from typing import Any

from ...runtime.netting import register_files
from ...verify import DuckOracle, compare, order_of, python_value, recompute
from . import STREAMED, duckdb_text, schemas, spark_text
from .data import Dataset


@dataclass
class Result:
    query: int
    status: str  # passes | refused | FAILS | ERROR
    code: str | None = None
    message: str = ""
    batches: list[str] = field(default_factory=list)  # per batch: "ok" or the difference
    # with ``timed``, per batch: streamfold's time to its commit, the strategy it recorded, and
    # Spark recomputing the query over the prefix from the files in the same session
    times: list[dict[str, Any]] = field(default_factory=list)


def tables_read(sql: str) -> set[str]:
    import sqlglot
    from sqlglot import exp

    ctes = {c.alias_or_name.lower() for c in sqlglot.parse_one(sql, read="spark").find_all(exp.CTE)}
    return {t.name.lower() for t in sqlglot.parse_one(sql, read="spark").find_all(exp.Table)} - ctes


def spark_recompute(spark: Any, ds: Dataset, sql: str, streams: list[str], statics: list[str], last: int) -> float:
    """Seconds Spark takes for the batch query over batches ``0..last`` (rows netted by
    ``_weight`` once the deletion batch is in), as a user without streamfold runs it."""
    inputs: dict[str, str | list[str]] = {t: ds.table(t) for t in statics}
    inputs.update({t: [ds.batch_file(t, i) for i in range(last + 1)] for t in streams})
    return recompute(spark, sql, inputs, net=last >= ds.batches, netting=register_files).seconds


def run_query(nr: int, ds: Dataset, spark, workdir: str, partitions: int | None = 2, timed: bool = False,
              options: dict[str, Any] | None = None, log: Any = None) -> Result:
    """Query ``nr`` over the data set, checked after every batch; ``timed`` also measures each
    batch against a recompute (``streamfold bench tpcds``); ``options`` go to ``streamfold.start``."""
    import streamfold
    from streamfold.errors import StreamfoldError

    sql = spark_text(nr)
    read = tables_read(sql)
    streams = sorted(read & set(STREAMED))
    statics = sorted(read - set(STREAMED))
    all_schemas = schemas()
    run_dir = os.path.join(workdir, f"q{nr:02d}")
    shutil.rmtree(run_dir, ignore_errors=True)
    dirs = {t: os.path.join(run_dir, "in", t) for t in streams}
    for d in dirs.values():
        os.makedirs(d)
    result = Result(nr, "passes")
    oracle = DuckOracle(sql, duckdb_text(nr))
    # Division by zero is NULL in streamfold (docs/sql.md, "Exactness"): DuckDB's text divides
    # doubles the IEEE way (0/0 is NaN, Q12's revenue ratio of a class that sold nothing), so the
    # oracle is told to give NULL too, the one dialect difference the query texts keep.
    oracle.con.execute("SET ieee_floating_point_ops = false")
    oracle.con.execute("SET error_on_division_by_zero = false")
    for t in statics:
        oracle.set_input(t, [ds.table(t)])
    spec = order_of(sql)
    query = None
    try:
        try:
            query = streamfold.start(sql, dirs, os.path.join(run_dir, "out"), tables={t: ds.table(t) for t in statics},
                                     schemas={t: all_schemas[t] for t in streams + statics}, spark=spark,
                                     background=False, partitions=partitions, **(options or {}))
        except StreamfoldError as e:
            result.status, result.code, result.message = "refused", e.code, str(e).split("\n")[0]
            return result
        for b in range(ds.total_batches):
            for t in streams:
                shutil.copy(ds.batch_file(t, b), os.path.join(dirs[t], f"{b:04d}.parquet"))
                oracle.set_input(t, [ds.batch_file(t, i) for i in range(b + 1)])
            try:
                done = query.process_available()
            except StreamfoldError as e:
                result.status, result.code, result.message = "ERROR", e.code, f"batch {b}: {e}".split("\n")[0]
                return result
            actual = [tuple(python_value(v) for v in r) for r in query.snapshot_pandas().itertuples(index=False, name=None)]
            check = compare(actual, oracle.answer(), order=spec)
            result.batches.append("ok" if check.matches else str(check.detail))
            if timed and done is not None:
                result.times.append(_timed(done, spark, ds, sql, streams, statics, b, run_dir))
                if log is not None:
                    mine = result.times[-1]
                    log(f"Q{nr}: batch {b} {result.batches[-1][:80]} streamfold {mine['streamfold_s']:.2f} s "
                        f"({mine['strategy']}) recompute {mine['recompute_s']:.2f} s")
            if not check.matches and result.status == "passes":
                result.status, result.message = "FAILS", f"batch {b}: {check.detail}"
    finally:
        if query is not None:
            query.stop()
        oracle.close()
    return result


def _timed(done: Any, spark: Any, ds: Dataset, sql: str, streams: list[str], statics: list[str], b: int,
           run_dir: str) -> dict[str, Any]:
    import json

    commit: dict[str, Any] = {}
    path = os.path.join(run_dir, "out", "commits", f"{done.batch:06d}.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as fh:
            commit = json.load(fh)
    until_commit = done.commit_s if done.commit_s is not None else done.duration_s
    return {"batch": b, "deletes": b >= ds.batches, "streamfold_s": round(until_commit, 4),
            "after_commit_s": round(done.duration_s - until_commit, 4),
            "strategy": commit.get("strategy", "incremental"),
            "recompute_s": round(spark_recompute(spark, ds, sql, streams, statics, b), 4)}
