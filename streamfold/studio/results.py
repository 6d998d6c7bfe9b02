"""Reading a run's output for the page, with pyarrow and without Spark: the commits (the batch
timeline), a batch's changes (which rows changed), a page of a snapshot (sorted, paged) and a
column's values over batches (the chart).

Everything here reads only committed batches — ``commits/<batch>.json`` exists — and committed
outputs never change, so results per batch are cached as they are.

Values are made JSON-safe for the page: decimals as strings (exact), dates and times in ISO
form, NaN and infinities as strings, bytes as hex.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..runtime.checkpoint import OutputDir

if TYPE_CHECKING:
    import pyarrow as pa

CHANGES_SHOWN = 500  # a batch event carries at most this many changed rows
PAGE_MAX = 500
WEIGHT = "_weight"


def commits_after(output: str, after: int) -> list[dict[str, Any]]:
    """The commit records of the batches after ``after``, each summarised for the timeline."""
    out = OutputDir(output)
    return [summarise(out.read_commit(b)) for b in out.committed() if b > after]


def summarise(commit: dict[str, Any]) -> dict[str, Any]:
    """A commit without its file lists (the page shows how many files each source gave)."""
    summary = {k: v for k, v in commit.items() if k != "inputs"}
    summary["files"] = {name: len(names) for name, names in commit.get("inputs", {}).items()}
    return summary


def read_table(directory: str) -> pa.Table:
    """A Parquet directory's rows, its part files read in name order (so ORDER BY holds)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = sorted(n for n in os.listdir(directory) if n.endswith(".parquet") and not n.startswith((".", "_")))
    tables = [pq.read_table(os.path.join(directory, n)) for n in parts]
    if not tables:
        return pa.table({})
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def json_value(v: Any) -> Any:
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, decimal.Decimal):
        return str(v)
    if isinstance(v, (dt.date, dt.datetime, dt.time)):
        return v.isoformat()
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, dict):
        return {k: json_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [json_value(x) for x in v]
    return v


def table_rows(table: pa.Table) -> list[list[Any]]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [[json_value(c[r]) for c in columns] for r in range(table.num_rows)]


class Results:
    """One run's output directory, read for the page; caches decoded batches (small LRU)."""

    def __init__(self, output: str, cache: int = 8) -> None:
        self.output = output
        self.dir = OutputDir(output)
        self._tables: OrderedDict[tuple[str, int], pa.Table] = OrderedDict()
        self._cache = cache
        self._lock = threading.Lock()

    def last_batch(self) -> int:
        done = self.dir.committed()
        return done[-1] if done else -1

    def _table(self, kind: str, batch: int) -> pa.Table:
        if batch not in self.dir.committed():
            raise UsageError(f"batch {batch} is not committed", code="NO_BATCH", params={"batch": batch})
        with self._lock:
            hit = self._tables.get((kind, batch))
            if hit is not None:
                self._tables.move_to_end((kind, batch))
                return hit
        path = self.dir.snapshot_path(batch) if kind == "snapshot" else self.dir.changes_path(batch)
        if not os.path.isdir(path):
            raise UsageError(f"the {kind} of batch {batch} was pruned", code="NO_BATCH", params={"batch": batch})
        table = read_table(path)
        with self._lock:
            self._tables[(kind, batch)] = table
            while len(self._tables) > self._cache:
                self._tables.popitem(last=False)
        return table

    def changes(self, batch: int, limit: int = CHANGES_SHOWN) -> dict[str, Any]:
        """The rows whose multiplicity changed in ``batch``: the answer's columns and ``_weight``."""
        table = self._table("changes", batch)
        shown = table.slice(0, limit)
        return {"batch": batch, "columns": table.column_names, "rows": table_rows(shown),
                "total": table.num_rows, "truncated": table.num_rows > limit}

    def page(self, batch: int | None = None, sort: str | None = None, descending: bool = False,
             offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """A page of the snapshot after ``batch`` (default: the last), sorted by ``sort`` if given
        (else in the snapshot's order, which is the query's ORDER BY)."""
        b = self.last_batch() if batch is None else batch
        if b < 0:
            return {"batch": -1, "columns": [], "types": [], "rows": [], "total": 0, "offset": 0}
        table = self._table("snapshot", b)
        if sort is not None:
            if sort not in table.column_names:
                raise UsageError(f"no column {sort!r} in the answer", code="UNKNOWN_COLUMN", params={"column": sort})
            order = "descending" if descending else "ascending"
            table = table.sort_by([(sort, order)])  # nulls last
        limit = max(1, min(limit, PAGE_MAX))
        offset = max(0, offset)
        shown = table.slice(offset, limit)
        return {"batch": b, "columns": table.column_names, "types": [str(t) for t in table.schema.types],
                "rows": table_rows(shown), "total": table.num_rows,
                "offset": offset}

    def series(self, value: str, label: str | None, labels: list[Any], first: int = 0) -> dict[str, Any]:
        """``value`` over batches ``first``… for the rows whose ``label`` is each of ``labels``
        (None where the row is absent). Without ``label`` the answer must have one row."""
        batches = [b for b in self.dir.committed() if b >= first]
        points: dict[str, list[Any]] = {str(x): [] for x in labels} if label else {value: []}
        for b in batches:
            table = self._table("snapshot", b)
            for name in (value, label) if label else (value,):
                if name not in table.column_names:
                    raise UsageError(f"no column {name!r} in the answer", code="UNKNOWN_COLUMN",
                                     params={"column": name})
            values = [json_value(v) for v in table.column(value).to_pylist()]
            if label is None:
                points[value].append(values[0] if len(values) == 1 else None)
                continue
            by_label = {str(json_value(k)): v for k, v in zip(table.column(label).to_pylist(), values)}
            for x in labels:
                points[str(x)].append(by_label.get(str(x)))
        return {"batches": batches, "series": points}
