"""The DuckDB oracle: the batch query over a prefix of the batches, and bag comparison.

Test data are pyarrow tables with an optional ``_weight`` column; the oracle applies the weights
(net multiplicity per distinct row) before running the query, transpiled from Spark SQL with
sqlglot, in DuckDB.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections import Counter
from collections.abc import Iterable, Sequence

import duckdb
import pyarrow as pa
import sqlglot

WEIGHT = "_weight"


def net_rows(tables: Sequence[pa.Table]) -> pa.Table:
    """The bag the weighted rows of ``tables`` add up to, one row per copy, without ``_weight``."""
    combined = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    if WEIGHT not in combined.column_names:
        return combined
    cols = [c for c in combined.column_names if c != WEIGHT]
    counts: Counter = Counter()
    first: dict[str, dict] = {}  # rows by a hashable key (nested values are lists and dicts)
    data = combined.to_pylist()
    for row in data:
        key = repr(tuple(row[c] for c in cols))
        first.setdefault(key, {c: row[c] for c in cols})
        counts[key] += row[WEIGHT]
    out = []
    for key, row in first.items():
        n = counts[key]
        assert n >= 0, f"test data deletes a row that is not there: {key}"
        out.extend([row] * n)
    schema = pa.schema([combined.schema.field(c) for c in cols])
    return pa.Table.from_pylist(out, schema=schema)


def duckdb_answer(sql: str, prefix: dict[str, Sequence[pa.Table]], duckdb_sql: str | None = None) -> list[tuple]:
    """DuckDB's answer to the Spark SQL ``sql`` (or to ``duckdb_sql``, written for DuckDB) over
    the weighted batches in ``prefix``."""
    con = duckdb.connect()
    try:
        for name, tables in prefix.items():
            table = net_rows(tables)
            con.register(f"__{name}", table)
            con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM "__{name}"')
        from streamfold.sql.iterate import unrolled_sql

        text = duckdb_sql or sqlglot.transpile(unrolled_sql(sql), read="spark", write="duckdb")[0]
        return [tuple(r) for r in con.execute(text).fetchall()]
    finally:
        con.close()


def normalize(value: object) -> object:
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dt.datetime):
        value = value.replace(tzinfo=None)
        # DuckDB answers date arithmetic with a TIMESTAMP where Spark keeps a DATE.
        if value.time() == dt.time(0):
            return value.date()
    return value


def _key(row: tuple) -> tuple:
    """A sort key that puts NULLs first and rounds floats so near-equal rows sort together."""
    out = []
    for v in row:
        v = normalize(v)
        if v is None:
            out.append((0, 0))
        elif isinstance(v, float):
            out.append((1, float(f"{v:.8g}")))
        elif isinstance(v, bool):
            out.append((1, int(v)))
        elif isinstance(v, (int,)):
            out.append((1, float(v)))
        else:
            out.append((2, str(v)))
    return tuple(out)


def close(a: object, b: object) -> bool:
    a, b = normalize(a), normalize(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def bag_diff(actual: Iterable[tuple], expected: Iterable[tuple]) -> str | None:
    """None if the bags are equal (floats up to summation order), else a description."""
    a = sorted((tuple(r) for r in actual), key=_key)
    e = sorted((tuple(r) for r in expected), key=_key)
    if len(a) != len(e):
        return f"{len(a)} rows, expected {len(e)}\nactual:   {a[:20]}\nexpected: {e[:20]}"
    for i, (ra, re) in enumerate(zip(a, e)):
        if len(ra) != len(re) or not all(close(x, y) for x, y in zip(ra, re)):
            return f"row {i} differs: {ra} != {re}\nactual:   {a[:20]}\nexpected: {e[:20]}"
    return None


def weighted_bag(rows: Iterable[tuple]) -> Counter:
    """A bag (Counter) of rows with floats rounded, for comparing changes with snapshot differences."""
    c: Counter = Counter()
    for r in rows:
        c[tuple(_key(r))] += 1
    return c
