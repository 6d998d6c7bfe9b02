"""Run a TPC-DS query through streamfold over a data set and check every batch against DuckDB.

The query runs as Spark SQL (:func:`.spark_text`); DuckDB runs the extension's own text over the
same prefix (dimensions whole, fact tables netted by ``_weight``), compared under
:func:`streamfold.verify.compare` (in order where the query's ORDER BY is total).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from ...verify import DuckOracle, compare, order_of, python_value
from . import STREAMED, duckdb_text, schemas, spark_text
from .data import Dataset


@dataclass
class Result:
    query: int
    status: str  # passes | refused | FAILS | ERROR
    code: str | None = None
    message: str = ""
    batches: list[str] = field(default_factory=list)  # per batch: "ok" or the difference


def tables_read(sql: str) -> set[str]:
    import sqlglot
    from sqlglot import exp

    ctes = {c.alias_or_name.lower() for c in sqlglot.parse_one(sql, read="spark").find_all(exp.CTE)}
    return {t.name.lower() for t in sqlglot.parse_one(sql, read="spark").find_all(exp.Table)} - ctes


def run_query(nr: int, ds: Dataset, spark, workdir: str, partitions: int = 2) -> Result:
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
                                     background=False, partitions=partitions)
        except StreamfoldError as e:
            result.status, result.code, result.message = "refused", e.code, str(e).split("\n")[0]
            return result
        for b in range(ds.total_batches):
            for t in streams:
                shutil.copy(ds.batch_file(t, b), os.path.join(dirs[t], f"{b:04d}.parquet"))
                oracle.set_input(t, [ds.batch_file(t, i) for i in range(b + 1)])
            try:
                query.process_available()
            except StreamfoldError as e:
                result.status, result.code, result.message = "ERROR", e.code, f"batch {b}: {e}".split("\n")[0]
                return result
            actual = [tuple(python_value(v) for v in r) for r in query.snapshot_pandas().itertuples(index=False, name=None)]
            check = compare(actual, oracle.answer(), order=spec)
            result.batches.append("ok" if check.matches else str(check.detail))
            if not check.matches and result.status == "passes":
                result.status, result.message = "FAILS", f"batch {b}: {check.detail}"
    finally:
        if query is not None:
            query.stop()
        oracle.close()
    return result
