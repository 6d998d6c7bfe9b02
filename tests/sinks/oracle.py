"""What a sink holds, as rows to compare with DuckDB's answer (``streamfold.verify.compare``)."""

from __future__ import annotations

import datetime as dt
from typing import Any


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


def delta_rows(path: str) -> list[tuple]:
    """The rows of a Delta table as delta-rs reads it (through its log: files an overwrite
    removed are not read). DuckDB's delta extension would do as well, but it is a download."""
    from deltalake import DeltaTable

    table = DeltaTable(path).to_pyarrow_table()
    return [tuple(plain(v) for v in r.values()) for r in table.to_pylist()]
