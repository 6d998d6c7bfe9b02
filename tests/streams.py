"""Run a query over generated batches and check it after every batch.

After batch t: the snapshot equals DuckDB's answer over batches 0..t (as a bag; in order too
when the query's ORDER BY is total), and snapshot(t) = snapshot(t−1) + changes(t).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from typing import Any
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from streamfold.verify import WEIGHT, changes_difference, compare, duckdb_answer, python_value

ARROW = {"INT": pa.int32(), "BIGINT": pa.int64(), "DOUBLE": pa.float64(), "STRING": pa.string(),
         "DATE": pa.date32(), "BOOLEAN": pa.bool_(), "TIMESTAMP": pa.timestamp("us", tz="UTC")}


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
    checked: list[int] = field(default_factory=list)  # the batches compared with DuckDB


def check_stream(spark, tmp: str, sql: str, sources: list[Source], batches: list[dict[str, list[tuple]]],
                 tables: dict[str, list[tuple]] | None = None, ordered: bool = False,
                 oracle_sql: str | Callable[[dict], str] | None = None, check: Callable[[int, list[tuple], dict], None] | None = None,
                 empty_files: bool = False, out_of_order: bool = False, inspect: Callable[[Any], None] | None = None,
                 **options) -> Run:
    """Feed ``batches`` (rows per source per batch) to ``sql`` and check every committed batch
    (against DuckDB running ``oracle_sql`` if given: DuckDB's own text for the query; and by
    ``check(batch, snapshot, prefix)`` if given, ``prefix`` the Arrow tables of each source so far;
    ``oracle_sql`` may be a function of the batch's commit record, for a query read at its batch time).
    With ``empty_files`` a source given no rows in a batch gets a Parquet file without rows (else
    no file). With ``out_of_order`` a deletion may come in a batch before the insertion it deletes:
    a prefix then holds a row a negative number of times, where no batch query has an answer, and
    the snapshot is compared with DuckDB's only after the batches whose prefix holds none.
    ``inspect(query)``, if given, looks at the running query after each batch."""
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
        read = {s.name.lower() for s in query.engine.plan.streams}  # a source the query does not read is ignored
        for i, batch in enumerate(batches):
            wrote = False
            for name, rows in batch.items():
                if rows or empty_files:
                    pq.write_table(by_name[name].table(rows), os.path.join(dirs[name], f"{i:04d}.parquet"))
                    prefix[name].append(by_name[name].table(rows))
                    wrote = wrote or name.lower() in read
            result = query.process_available()
            if not wrote:
                assert result is None, "a poll without new files of the query's sources must not make a batch"
                continue
            assert result is not None and result.batch == run.batches
            snapshot = _rows(query.snapshot_pandas())
            if not (out_of_order and _negative(prefix)):
                oracle = oracle_sql(query.engine.ctx.output.read_commit(run.batches)) if callable(oracle_sql) else oracle_sql
                expected = duckdb_answer(sql, prefix, duckdb_sql=oracle)
                result = compare(snapshot, expected, positional=ordered)
                assert result.matches, f"batch {run.batches}: snapshot differs from DuckDB: {result.detail}\nquery: {sql}"
                if check is not None:
                    check(run.batches, snapshot, prefix)
                run.checked.append(run.batches)
            problem = changes_difference(previous, snapshot, _rows(query.changes_pandas()))
            assert problem is None, f"batch {run.batches}: changes are not snapshot(t) - snapshot(t-1): {problem}"
            previous = snapshot
            if inspect is not None:
                inspect(query)
            run.snapshots.append(snapshot)
            run.batches += 1
    finally:
        query.stop()
    return run


def check_seeded(spark, tmp: str, seed: str, sql: str, sources: list[Source], oracle_sql: str | None,
                 batches: int = 4, **options) -> Run:
    """:func:`check_stream` over ``batches`` random batches drawn from ``seed`` (2–10 rows per
    stream each, weighted sources deleting earlier rows), every one of them committed."""
    from .strategies import random_stream

    drawn = random_stream(random.Random(seed), sources, batches=batches, max_rows=10, min_rows=2)
    run = check_stream(spark, tmp, sql, sources, drawn, oracle_sql=oracle_sql, **options)
    assert run.batches == batches
    return run


def assert_refused(cases: list[tuple[str, str]], schemas: dict[str, str], unhinted: tuple[str, ...] = ()) -> None:
    """Each (SQL, code) compiles to that coded error, with a hint (but for the codes ``unhinted``)."""
    import pytest

    import streamfold

    for sql, code in cases:
        with pytest.raises(streamfold.StreamfoldError) as e:
            streamfold.compile(sql, schemas)
        assert e.value.code == code, (sql, e.value.code)
        assert e.value.hint or code in unhinted, sql


def check_restarting(spark, tmp: str, sql: str, source: Source, batches: list[list[tuple]], every: int,
                     **options: Any) -> None:
    """Feed ``batches`` (rows of the one stream ``source``) to ``sql``, stopping the query and
    starting it again from its checkpoint before every ``every``-th batch; after each batch the
    snapshot equals DuckDB's answer on the prefix, and the changes are snapshot(t) − snapshot(t−1).
    ``options`` go to ``streamfold.start`` (``compact_every``, …)."""
    import streamfold

    directory = os.path.join(tmp, source.name)
    os.makedirs(directory)

    def start():  # type: ignore[no-untyped-def]
        return streamfold.start(sql, {source.name: directory}, os.path.join(tmp, "out"), spark=spark,
                                background=False, partitions=2, schemas={source.name: source.schema_sql()},
                                **options)

    query = start()
    prefix: list[pa.Table] = [source.table([])]
    previous: list[tuple] = []
    try:
        for i, rows in enumerate(batches):
            if i and i % every == 0:
                query.stop()
                query = start()
            prefix.append(source.table(rows))
            pq.write_table(prefix[-1], os.path.join(directory, f"{i:04d}.parquet"))
            assert query.process_available() is not None
            snapshot = _rows(query.snapshot_pandas())
            result = compare(snapshot, duckdb_answer(sql, {source.name: prefix}))
            assert result.matches, f"batch {i}: {result.detail}"
            problem = changes_difference(previous, snapshot, _rows(query.changes_pandas()))
            assert problem is None, f"batch {i}: {problem}"
            previous = snapshot
    finally:
        query.stop()


def _negative(prefix: dict[str, list[pa.Table]]) -> bool:
    """Whether some source's rows so far hold a row a negative number of times."""
    for tables in prefix.values():
        table = pa.concat_tables(tables)
        if WEIGHT not in table.column_names:
            continue
        keys = [c for c in table.column_names if c != WEIGHT]
        summed = table.group_by(keys, use_threads=False).aggregate([(WEIGHT, "sum")])
        if pc.any(pc.less(summed[WEIGHT + "_sum"], 0)).as_py():
            return True
    return False


def _rows(frame) -> list[tuple]:
    """A pandas answer as rows of plain Python values."""
    return [tuple(python_value(v) for v in r) for r in frame.itertuples(index=False, name=None)]
