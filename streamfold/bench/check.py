"""The check every run ends with: each system's final answer against DuckDB's, as bags.

DuckDB is an engine independent of Spark, so a match is evidence about streamfold *and* about
the baselines. The Spark SQL is transpiled with sqlglot; rows are compared as bags, floats with
a relative tolerance of 1e-9 (sums in another order differ in the last bits).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
from dataclasses import dataclass

from ..errors import UsageError

REL_TOL = 1e-9


@dataclass(frozen=True)
class Check:
    """The outcome of comparing one answer with DuckDB's."""

    matches: bool
    rows: int
    expected_rows: int
    detail: str | None = None  # the first difference, when there is one

    def to_json(self) -> dict:
        return {"matches_duckdb": self.matches, "rows": self.rows, "duckdb_rows": self.expected_rows,
                "detail": self.detail}


def duckdb_answer(sql: str, files: dict[str, list[str]]) -> list[tuple]:
    """DuckDB's answer to the Spark SQL ``sql`` with each source a view over its Parquet ``files``."""
    import duckdb
    import sqlglot

    con = duckdb.connect()
    try:
        con.execute(f"SET threads TO {os.cpu_count() or 1}")
        for name, paths in files.items():
            listed = ", ".join("'" + p.replace("'", "''") + "'" for p in _parquet_paths(paths))
            con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM read_parquet([{listed}])')
        try:
            text = sqlglot.transpile(sql, read="spark", write="duckdb")[0]
        except sqlglot.errors.ParseError as e:
            raise UsageError(f"sqlglot cannot transpile the query for DuckDB: {e}", code="NO_ORACLE") from None
        return [tuple(r) for r in con.execute(text).fetchall()]
    finally:
        con.close()


def _parquet_paths(paths: list[str]) -> list[str]:
    """Files as given; a directory of part files (as Spark writes Parquet) by its visible parts."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, n) for n in os.listdir(p)
                          if n.endswith(".parquet") and not n.startswith((".", "_")))
        else:
            out.append(p)
    return out


def read_rows(path: str) -> list[tuple]:
    """The rows of a Parquet file or a directory of part files (hidden and ``_`` files skipped)."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return [tuple(r.values()) for r in table.to_pylist()]


def compare(actual: list[tuple], expected: list[tuple]) -> Check:
    """Bag comparison with float tolerance; the detail names the first differing row."""
    a = sorted(actual, key=_key)
    e = sorted(expected, key=_key)
    if len(a) != len(e):
        return Check(False, len(a), len(e), f"{len(a)} rows, DuckDB has {len(e)}")
    for ra, re in zip(a, e):
        if len(ra) != len(re) or not all(_close(x, y) for x, y in zip(ra, re)):
            return Check(False, len(a), len(e), f"row {ra!r} where DuckDB has {re!r}")
    return Check(True, len(a), len(e))


def _norm(v: object) -> object:
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.replace(tzinfo=None)
    return v


def _close(a: object, b: object) -> bool:
    a, b = _norm(a), _norm(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=REL_TOL, abs_tol=1e-12)
    return a == b


def _key(row: tuple) -> tuple:
    """Sorts NULLs first and near-equal floats together (rounded to 8 digits)."""
    out: list[tuple] = []
    for v in row:
        v = _norm(v)
        if v is None:
            out.append((0, 0.0, ""))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append((1, float(f"{float(v):.8g}"), ""))
        else:
            out.append((2, 0.0, str(v)))
    return tuple(out)
