"""Run a query over generated batches and check it after every batch.

After batch t: the snapshot equals DuckDB's answer over batches 0..t (as a bag; in order too
when the query's ORDER BY is total), and snapshot(t) = snapshot(t−1) + changes(t).
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.parquet as pq

from .oracle import WEIGHT, bag_diff, close, duckdb_answer, weighted_bag

ARROW = {"INT": pa.int32(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(), "STRING": pa.string(),
         "DATE": pa.date32(), "BOOLEAN": pa.bool_()}


def arrow_type(sql_type: str) -> pa.DataType:
    """The Arrow type of a column declared as ``sql_type`` (nested types included)."""
    from streamfold.ir.types import parse_type

    def convert(t) -> pa.DataType:
        if t.name == "ARRAY":
            return pa.list_(convert(t.element))
        if t.name == "STRUCT":
            return pa.struct([pa.field(n, convert(ft)) for n, ft in t.params])
        if t.name == "DECIMAL":
            return pa.decimal128(t.precision, t.scale)
        return ARROW[t.sql()]

    return convert(parse_type(sql_type))


@dataclass(frozen=True)
class Source:
    name: str
    columns: tuple[tuple[str, str], ...]  # (name, SQL type)
    weighted: bool = False
    static: bool = False

    def schema_sql(self) -> str:
        cols = [f"{c} {t}" for c, t in self.columns]
        if self.weighted:
            cols.append(f"{WEIGHT} BIGINT")
        return ", ".join(cols)

    def arrow_schema(self) -> pa.Schema:
        fields = [pa.field(c, arrow_type(t)) for c, t in self.columns]
        if self.weighted:
            fields.append(pa.field(WEIGHT, pa.int64()))
        return pa.schema(fields)

    def table(self, rows: list[tuple]) -> pa.Table:
        names = [c for c, _ in self.columns] + ([WEIGHT] if self.weighted else [])
        return pa.Table.from_pylist([dict(zip(names, r)) for r in rows], schema=self.arrow_schema())


@dataclass
class Run:
    """What a checked run saw, for tests that want to look further."""

    batches: int = 0
    snapshots: list[list[tuple]] = field(default_factory=list)


def check_stream(spark, tmp: str, sql: str, sources: list[Source], batches: list[dict[str, list[tuple]]],
                 tables: dict[str, list[tuple]] | None = None, ordered: bool = False,
                 oracle_sql: str | None = None, check: Callable[[int, list[tuple], dict], None] | None = None,
                 **options) -> Run:
    """Feed ``batches`` (rows per source per batch) to ``sql`` and check every committed batch
    (against DuckDB running ``oracle_sql`` if given: DuckDB's own text for the query; and by
    ``check(batch, snapshot, prefix)`` if given, ``prefix`` the Arrow tables of each source so far)."""
    import streamfold

    tables = tables or {}
    by_name = {s.name: s for s in sources}
    dirs = {s.name: os.path.join(tmp, "in", s.name) for s in sources}
    for d in dirs.values():
        os.makedirs(d, exist_ok=True)
    for s in sources:
        if s.static:
            pq.write_table(s.table(tables.get(s.name, [])), os.path.join(dirs[s.name], "table.parquet"))
    out = os.path.join(tmp, "out")
    streams = {s.name: dirs[s.name] for s in sources if not s.static}
    statics = {s.name: dirs[s.name] for s in sources if s.static}
    options.setdefault("partitions", 2)
    query = streamfold.start(sql, streams, out, tables=statics, schemas={s.name: s.schema_sql() for s in sources},
                             spark=spark, background=False, **options)
    prefix: dict[str, list[pa.Table]] = {s.name: [] for s in sources}
    for s in sources:
        if s.static:
            prefix[s.name].append(s.table(tables.get(s.name, [])))
        else:
            prefix[s.name].append(s.table([]))
    run = Run()
    previous: list[tuple] = []
    try:
        for i, batch in enumerate(batches):
            wrote = False
            for name, rows in batch.items():
                if rows:
                    pq.write_table(by_name[name].table(rows), os.path.join(dirs[name], f"{i:04d}.parquet"))
                    prefix[name].append(by_name[name].table(rows))
                    wrote = True
            result = query.process_available()
            if not wrote:
                assert result is None, "a poll without new files must not make a batch"
                continue
            assert result is not None and result.batch == run.batches
            snapshot = [tuple(r) for r in query.snapshot_pandas().itertuples(index=False, name=None)]
            snapshot = [tuple(_py(v) for v in r) for r in snapshot]
            expected = duckdb_answer(sql, prefix, duckdb_sql=oracle_sql)
            problem = bag_diff(snapshot, expected)
            assert problem is None, f"batch {run.batches}: snapshot differs from DuckDB: {problem}\nquery: {sql}"
            if check is not None:
                check(run.batches, snapshot, prefix)
            if ordered:
                assert len(snapshot) == len(expected)
                for a, e in zip(snapshot, expected):
                    assert all(close(x, y) for x, y in zip(a, e)), \
                        f"batch {run.batches}: order differs\nactual:   {snapshot}\nexpected: {expected}"
            changes = [tuple(_py(v) for v in r) for r in query.changes_pandas().itertuples(index=False, name=None)]
            assert all(r[-1] != 0 for r in changes), "a changes row with weight 0"
            diff = weighted_bag(snapshot)
            diff.subtract(weighted_bag(previous))
            got: Counter = Counter()
            for r in changes:
                got[tuple(weighted_bag([r[:-1]]))[0]] += r[-1]
            want = {k: v for k, v in diff.items() if v}
            have = {k: v for k, v in got.items() if v}
            assert have == want, f"batch {run.batches}: changes are not snapshot(t) - snapshot(t-1)\n{have}\n{want}"
            previous = snapshot
            run.snapshots.append(snapshot)
            run.batches += 1
    finally:
        query.stop()
    return run


def _py(v: object) -> object:
    """pandas values back to plain Python (NaN from nullable ints becomes None)."""
    import math

    import numpy as np
    import pandas as pd

    if v is None or v is pd.NaT:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, pd.Timestamp):
        return v.to_pydatetime()
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.replace(tzinfo=None)
    return v
