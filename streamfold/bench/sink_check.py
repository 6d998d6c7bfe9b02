"""What a sink holds, as rows to compare with DuckDB's answer (``streamfold.verify.compare``):
used by the sinks' tests and by ``streamfold bench tpch --sinks``."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..verify import compare


def plain(v: Any) -> Any:
    """An aware timestamp as UTC wall time (the comparator compares wall times)."""
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return v


def postgres_rows(conn, table: str, columns: list[str], multiset: bool) -> list[tuple]:
    """The rows of a PostgreSQL sink's table, a multiset's rows repeated ``_count`` times."""
    cols = ", ".join(f'"{c}"' for c in columns)
    sql = (f'SELECT {cols} FROM "{table}", generate_series(1, _count)' if multiset
           else f'SELECT {cols} FROM "{table}"')
    return [tuple(plain(v) for v in r) for r in conn.execute(sql).fetchall()]


def postgres_answer(conn, table: str) -> list[tuple]:
    """The answer a PostgreSQL sink's table holds, whether kept by key or as a multiset."""
    columns = [c for (c,) in conn.execute("SELECT column_name FROM information_schema.columns WHERE table_name = %s "
                                          "ORDER BY ordinal_position", (table,)).fetchall()]
    return postgres_rows(conn, table, [c for c in columns if c != "_count"], multiset="_count" in columns)


def delta_rows(path: str) -> list[tuple]:
    """The rows of a Delta table as delta-rs reads it (through its log: files an overwrite
    removed are not read). DuckDB's delta extension would do as well, but it is a download."""
    from deltalake import DeltaTable

    table = DeltaTable(path).to_pyarrow_table()
    return [tuple(plain(v) for v in r.values()) for r in table.to_pylist()]


def sinks_difference(expected: list[tuple], conn=None, table: str | None = None,
                     delta: str | None = None) -> str | None:
    """None when the PostgreSQL table and the Delta table (those given) hold ``expected``;
    otherwise which differs, and how."""
    want = [tuple(plain(v) for v in r) for r in expected]
    if conn is not None and table is not None:
        result = compare(postgres_answer(conn, table), want)
        if not result.matches:
            return f"the PostgreSQL table differs from DuckDB: {result.detail}"
    if delta is not None:
        result = compare(delta_rows(delta), want)
        if not result.matches:
            return f"the Delta table differs from DuckDB: {result.detail}"
    return None
