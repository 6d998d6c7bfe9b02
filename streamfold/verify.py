"""One verification kit: how every answer in this repository is checked.

Tests, ``streamfold bench``, ``streamfold demo`` and the TPC-H runner check answers the same way:

* :func:`compare` — one comparator with one tolerance rule (below), rows as bags, and optionally
  the order an ORDER BY promises (:func:`order_of`);
* :class:`DuckOracle` — one DuckDB oracle: the Spark SQL query (iterations unrolled) transpiled by
  sqlglot, over inputs given as Parquet files or Arrow tables, weighted rows netted first;
* :func:`recompute` — one recompute baseline: the batch query run by Spark over all data so far;
* :func:`net_rows` — the bag a stream of weighted rows adds up to.

**The tolerance rule.** Two values are equal when both are NULL; or both are numbers (int,
float, Decimal) and ``|a − b| ≤ 1e-9 · max(|a|, |b|, 1) + ulp(a) + ulp(b)``, where ``ulp`` of a
Decimal is one unit in its last place and 0 for others — sums taken in another order differ in
the last bits of a DOUBLE, and Spark rounds decimal quotients and averages to 6 places where
DuckDB answers in DOUBLE; or both are NaN; or a timestamp at midnight and the date it starts
(DuckDB answers date arithmetic with a TIMESTAMP where Spark keeps a DATE), time zones dropped;
otherwise when ``a == b``. Rows are equal when every value is; answers when they are equal as
bags of rows, and, if an order is given, ``actual`` lists them in that order — where a LIMIT cut
through rows tied on the ORDER BY key, any of the tied rows may be the ones kept.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cmp_to_key
from typing import TYPE_CHECKING, Any

from .errors import UsageError

if TYPE_CHECKING:
    import pyarrow as pa

REL_TOL = 1e-9
WEIGHT = "_weight"  # a stream's row weight: +n inserts n copies, −n deletes them


# -- values ------------------------------------------------------------------------------------------
def python_value(v: Any) -> Any:
    """A value read from pandas, NumPy or Spark as plain Python (pandas' NaN of a NULL is None)."""
    if v is None:
        return None
    try:
        import numpy as np
        import pandas as pd

        if v is pd.NaT:
            return None
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, pd.Timestamp):
            v = v.to_pydatetime()
    except ImportError:  # pragma: no cover - both come with the runtime
        pass
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _comparable(v: Any) -> Any:
    if isinstance(v, dict):  # a STRUCT (a time window's start and end): its fields compared alike
        return {k: _comparable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)) or type(v).__name__ == "ndarray":  # an ARRAY (Arrow: a list; pandas: NumPy,
        return tuple(_comparable(python_value(x)) for x in v)  # its NULL integers NaNs of a float array)
    if isinstance(v, dt.datetime):
        v = v.replace(tzinfo=None)
        if v.time() == dt.time(0):
            return v.date()
    return v


def _ulp(v: Any) -> float:
    if isinstance(v, decimal.Decimal):
        exponent = v.as_tuple().exponent
        return 10.0 ** exponent if isinstance(exponent, int) else 0.0
    return 0.0


def _number(v: Any) -> bool:
    return isinstance(v, (int, float, decimal.Decimal)) and not isinstance(v, bool)


def same_value(a: Any, b: Any) -> bool:
    """Whether two values are equal under the tolerance rule (see the module docstring)."""
    a, b = _comparable(a), _comparable(b)
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, tuple) and isinstance(b, tuple):  # arrays: element by element
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if _number(a) and _number(b):
        fa, fb = float(a), float(b)
        if math.isnan(fa) or math.isnan(fb):
            return math.isnan(fa) and math.isnan(fb)
        return abs(fa - fb) <= REL_TOL * max(abs(fa), abs(fb), 1.0) + _ulp(a) + _ulp(b)
    return bool(a == b)


def same_row(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))


def _sort_key(row: Sequence[Any]) -> tuple:
    """Sorts NULLs first and near-equal numbers together (6 significant digits)."""
    out: list[tuple] = []
    for v in row:
        v = _comparable(v)
        if v is None:
            out.append((0, 0.0, ""))
        elif _number(v):
            f = float(v)
            out.append((1, 0.0, "NaN") if math.isnan(f) else (1, float(f"{f:.6g}"), ""))
        else:
            out.append((2, 0.0, _text(v)))
    return tuple(out)


def _text(v: Any) -> str:
    """A compared value's text, numbers to 6 significant digits (an array's 4 and 4.0 alike)."""
    if isinstance(v, tuple):
        return "(" + ", ".join(_text(x) for x in v) + ")"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_text(x)}" for k, x in v.items()) + "}"
    if v is None:
        return "NULL"
    if _number(v):
        return f"{float(v):.6g}"
    return str(v)


# -- answers -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class OrderSpec:
    """The outermost ORDER BY as output column positions, and whether a LIMIT follows it."""

    keys: tuple[tuple[int, bool, bool], ...]  # (column, descending, nulls first)
    limit: bool


def order_of(sql: str) -> OrderSpec | None:
    """The ORDER BY of the outermost SELECT of a Spark SQL query, mapped to output columns (None
    without ORDER BY, or when an ORDER BY item is not an output column: then only bags compare)."""
    import sqlglot
    from sqlglot import exp

    from .sql.window_text import mark_window_calls

    tree = sqlglot.parse_one(mark_window_calls(sql), read="spark")  # (`window(` read as a call)
    order = tree.args.get("order")
    if order is None:
        return None
    outputs = tree.expressions
    keys = []
    for o in order.expressions:
        target, index = o.this, None
        if isinstance(target, exp.Literal) and target.is_int:
            index = int(target.this) - 1
        else:
            for i, proj in enumerate(outputs):
                if isinstance(target, exp.Column) and not target.table and proj.alias_or_name == target.name:
                    index = i
                    break
                if proj.unalias().sql("spark") == target.sql("spark"):
                    index = i
                    break
        if index is None:
            return None
        desc = bool(o.args.get("desc"))
        nulls_first = o.args.get("nulls_first")
        if nulls_first is None:
            nulls_first = not desc  # Spark: NULLs first ascending, last descending
        keys.append((index, desc, bool(nulls_first)))
    return OrderSpec(tuple(keys), tree.args.get("limit") is not None)


@dataclass(frozen=True)
class Check:
    """The outcome of comparing an answer with the expected one."""

    matches: bool
    rows: int
    expected_rows: int
    detail: str | None = None  # the first difference, when there is one

    def to_json(self) -> dict[str, Any]:
        return {"matches_duckdb": self.matches, "rows": self.rows, "duckdb_rows": self.expected_rows,
                "detail": self.detail}


def compare(actual: Sequence[Sequence[Any]], expected: Sequence[Sequence[Any]], order: OrderSpec | None = None,
            positional: bool = False) -> Check:
    """``actual`` against ``expected`` under the tolerance rule: as bags, in ``order`` if given,
    or row by row when ``positional`` (an ORDER BY that orders every row)."""
    a, e = [tuple(r) for r in actual], [tuple(r) for r in expected]
    detail = _difference(a, e, order, positional)
    return Check(detail is None, len(a), len(e), detail)


def _difference(actual: list[tuple], expected: list[tuple], order: OrderSpec | None, positional: bool) -> str | None:
    if positional:
        for i, (x, y) in enumerate(zip(actual, expected)):
            if not same_row(x, y):
                return f"row {i} is {_fmt(x)} where {_fmt(y)} is expected (in this order)"
    if order is not None:
        for i in range(1, len(actual)):
            if _compare_keys(order, actual[i - 1], actual[i]) > 0:
                return f"rows {i - 1} and {i} are out of ORDER BY order: {_fmt(actual[i - 1])}, {_fmt(actual[i])}"
    problem = _bag_difference(actual, expected)
    if problem is None or order is None or not order.limit or len(actual) != len(expected) or not expected:
        return problem
    # LIMIT cut through rows tied on the ORDER BY key: those may be any of the tied rows.
    def by_order(x: tuple, y: tuple) -> int:
        return _compare_keys(order, x, y)

    last = sorted(expected, key=cmp_to_key(by_order))[-1]
    untied_a = [r for r in actual if _compare_keys(order, r, last) != 0]
    untied_e = [r for r in expected if _compare_keys(order, r, last) != 0]
    return problem if _bag_difference(untied_a, untied_e) is not None else None


def _bag_difference(actual: list[tuple], expected: list[tuple]) -> str | None:
    """None if the bags are equal, else the first difference."""
    if len(actual) != len(expected):
        return f"{len(actual)} rows, expected {len(expected)}" + _sample(actual, expected)
    a, e = sorted(actual, key=_sort_key), sorted(expected, key=_sort_key)
    # Merge the sorted bags, then match what is left one by one: rounding to the sort key can
    # put near-equal rows in different places.
    left_a: list[tuple] = []
    left_e: list[tuple] = []
    i = j = 0
    while i < len(a) and j < len(e):
        if same_row(a[i], e[j]):
            i, j = i + 1, j + 1
        elif _sort_key(a[i]) <= _sort_key(e[j]):
            left_a.append(a[i])
            i += 1
        else:
            left_e.append(e[j])
            j += 1
    left_a += a[i:]
    left_e += e[j:]
    for row in left_a:
        match = next((k for k, cand in enumerate(left_e) if same_row(row, cand)), None)
        if match is None:
            missing = next((r for r in left_e if not any(same_row(r, x) for x in left_a)), None)
            return (f"row {_fmt(row)} is not expected"
                    + (f"; expected rows not in the answer include {_fmt(missing)}" if missing else "")
                    + _sample(actual, expected))
        del left_e[match]
    return None


def _compare_values(a: Any, b: Any, nulls_first: bool) -> int:
    a, b = _comparable(a), _comparable(b)
    if a is None or b is None:
        if a is None and b is None:
            return 0
        return (-1 if a is None else 1) * (1 if nulls_first else -1)
    if isinstance(a, decimal.Decimal) and isinstance(b, decimal.Decimal):
        # two decimals of one answer are exact: 51.82 sorts before 51.84 although the tolerance
        # rule (a last place either way) calls them equal (TPC-DS Q93's ORDER BY sumsales)
        return (a > b) - (a < b)
    if same_value(a, b):
        return 0
    return -1 if a < b else 1


def _compare_keys(order: OrderSpec, r1: Sequence[Any], r2: Sequence[Any]) -> int:
    for index, desc, nulls_first in order.keys:
        c = _compare_values(r1[index], r2[index], nulls_first)
        if c:
            return -c if desc and r1[index] is not None and r2[index] is not None else c
    return 0


def _fmt(row: Sequence[Any]) -> str:
    return "(" + ", ".join(str(v) if isinstance(v, decimal.Decimal) else repr(v) for v in row) + ")"


def _sample(actual: list[tuple], expected: list[tuple], n: int = 5) -> str:
    a = ", ".join(_fmt(r) for r in sorted(actual, key=_sort_key)[:n])
    e = ", ".join(_fmt(r) for r in sorted(expected, key=_sort_key)[:n])
    return f"\n  actual (first {n} sorted):   {a}\n  expected (first {n} sorted): {e}"


# -- reading answers ---------------------------------------------------------------------------------
def read_rows(path: str) -> list[tuple]:
    """The rows of a Parquet file or of a directory of part files (hidden and ``_`` files skipped)."""
    import pyarrow.parquet as pq

    return [tuple(r.values()) for r in pq.read_table(path).to_pylist()]


def parquet_files(paths: Sequence[str]) -> list[str]:
    """Files as given; a directory of part files (as Spark writes Parquet) by its visible parts."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(os.path.join(p, n) for n in os.listdir(p)
                          if n.endswith(".parquet") and not n.startswith((".", "_")))
        else:
            out.append(p)
    return out


# -- the DuckDB oracle ---------------------------------------------------------------------------------
class DuckOracle:
    """DuckDB's answer to a Spark SQL query, an engine independent of Spark.

    The query's iterations are unrolled and the text transpiled by sqlglot (``duckdb_sql``
    replaces it where sqlglot's translation is wrong). Each input is a list of Parquet files
    (or directories of parts) or of Arrow tables; one with a ``_weight`` column is netted: each
    distinct row as often as its weights add up (a negative sum is an error in the data).
    """

    def __init__(self, sql: str, duckdb_sql: str | None = None) -> None:
        import duckdb

        self.text = duckdb_sql or _duckdb_text(sql)
        self.con = duckdb.connect()
        self.con.execute(f"SET threads TO {os.cpu_count() or 1}")

    def set_input(self, name: str, data: Sequence[str] | Sequence[pa.Table]) -> None:
        """Make ``name`` the rows of ``data`` (Parquet paths or Arrow tables), netted."""
        import pyarrow as pa

        self.con.execute(f'DROP VIEW IF EXISTS "__{name}_rows"')
        if data and all(isinstance(d, pa.Table) for d in data):
            tables = [d for d in data if isinstance(d, pa.Table)]
            self.con.register(f"__{name}_arrow", pa.concat_tables(tables) if len(tables) > 1 else tables[0])
            source = f'"__{name}_arrow"'
        else:
            listed = ", ".join("'" + str(p).replace("'", "''") + "'" for p in parquet_files([str(p) for p in data]))
            source = f"read_parquet([{listed}])"
        columns = [r[0] for r in self.con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()]
        self.con.execute(f'DROP TABLE IF EXISTS "{name}"')
        if WEIGHT not in columns:
            self.con.execute(f'CREATE TABLE "{name}" AS SELECT * FROM {source}')
            return
        cols = ", ".join(f'"{c}"' for c in columns if c != WEIGHT)
        net = f"SELECT {cols}, CAST(sum({WEIGHT}) AS BIGINT) AS __w FROM {source} GROUP BY ALL"
        negative = self.con.execute(f"SELECT count(*) FROM ({net}) WHERE __w < 0").fetchone()
        if negative and negative[0]:
            raise AssertionError(f"the rows of {name} delete {negative[0]} rows that are not there")
        self.con.execute(f'CREATE TABLE "{name}" AS SELECT {cols} FROM (SELECT {cols}, unnest(range(__w)) '
                         f'FROM ({net}) WHERE __w > 0)')

    def answer(self) -> list[tuple]:
        return [tuple(r) for r in self.con.execute(self.text).fetchall()]

    def close(self) -> None:
        self.con.close()


def _duckdb_text(sql: str) -> str:
    import sqlglot

    from .sql.iterate import unrolled_sql

    try:
        return sqlglot.transpile(unrolled_sql(sql), read="spark", write="duckdb")[0]
    except sqlglot.errors.ParseError as e:
        raise UsageError(f"sqlglot cannot transpile the query for DuckDB: {e}", code="NO_ORACLE") from None


def duckdb_answer(sql: str, inputs: Mapping[str, Sequence[str] | Sequence[pa.Table]],
                  duckdb_sql: str | None = None) -> list[tuple]:
    """DuckDB's answer to ``sql`` over ``inputs`` (see :class:`DuckOracle`)."""
    oracle = DuckOracle(sql, duckdb_sql)
    try:
        for name, data in inputs.items():
            oracle.set_input(name, data)
        return oracle.answer()
    finally:
        oracle.close()


def net_rows(tables: Sequence[pa.Table]) -> pa.Table:
    """The bag weighted rows add up to, one row per copy, without ``_weight``."""
    oracle = DuckOracle("SELECT 1", duckdb_sql="SELECT 1")
    try:
        oracle.set_input("rows", list(tables))
        return oracle.con.sql('SELECT * FROM "rows"').to_arrow_table()
    finally:
        oracle.close()


# -- the recompute baseline ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Recomputed:
    """The Spark batch query's answer over all data so far, and how long it took."""

    rows: list[tuple] | None  # None when it was written to a target instead
    seconds: float


# registers an input (name, its files, its columns but _weight) netted in a session; returns what
# to unpersist after the query
Netting = Callable[[Any, str, Sequence[str], Sequence[str]], "list[Any]"]


def recompute(spark: Any, sql: str, inputs: Mapping[str, str | Sequence[str]], target: str | None = None,
              net: bool = True, netting: Netting | None = None) -> Recomputed:
    """The query from scratch over every file of ``inputs`` (name → Parquet files or directories),
    as a scheduled batch job without streamfold would run it: a fresh session (no temp view or
    cached plan carried between runs), rows with ``_weight`` netted (``net=False`` drops the
    column instead: every weight is +1), the answer written to ``target`` or collected. ``netting``,
    given an input's files one by one, registers it netted its own way (the runtime's:
    :func:`streamfold.runtime.netting.register_files`)."""
    session = spark.newSession()
    start = time.monotonic()
    cached: list[Any] = []  # the netted parts of weighted inputs, released after the answer
    for name, paths in inputs.items():
        files = [paths] if isinstance(paths, str) else list(paths)
        df = session.read.parquet(*files)
        if WEIGHT in df.columns:
            columns = [c for c in df.columns if c != WEIGHT]
            df.createOrReplaceTempView(f"__{name}_files")
            cols = ", ".join(f"`{c}`" for c in columns)
            # a directory given whole is one input; files given one by one may be netted apart
            if net and netting is not None and not isinstance(paths, str):
                cached += netting(session, name, files, columns)
            elif net:
                session.sql(f"SELECT {cols} FROM (SELECT {cols}, sum({WEIGHT}) AS __w FROM __{name}_files GROUP BY {cols}) "
                            f"LATERAL VIEW explode(sequence(1, __w)) AS __copy WHERE __w > 0").createOrReplaceTempView(name)
            else:
                session.sql(f"SELECT {cols} FROM __{name}_files").createOrReplaceTempView(name)
        else:
            df.createOrReplaceTempView(name)
    answer = session.sql(sql)
    try:
        if target is not None:
            answer.write.mode("overwrite").parquet(target)
            return Recomputed(None, time.monotonic() - start)
        rows = [tuple(r) for r in answer.collect()]
        return Recomputed(rows, time.monotonic() - start)
    finally:
        for df in cached:
            df.unpersist()


def changes_difference(previous: Sequence[Sequence[Any]], snapshot: Sequence[Sequence[Any]],
                       changes: Sequence[Sequence[Any]]) -> str | None:
    """None if ``changes`` (rows with their ``_weight`` last) are ``snapshot − previous`` as bags
    (values compared by their 6-digit sort key), else the two sides."""
    from collections import Counter

    want: Counter = Counter(_sort_key(r) for r in snapshot)
    want.subtract(Counter(_sort_key(r) for r in previous))
    have: Counter = Counter()
    for r in changes:
        if r[-1] == 0:
            return f"a changes row with weight 0: {_fmt(r)}"
        have[_sort_key(r[:-1])] += r[-1]
    want_, have_ = {k: v for k, v in want.items() if v}, {k: v for k, v in have.items() if v}
    return None if have_ == want_ else f"changes {have_}, snapshot difference {want_}"
