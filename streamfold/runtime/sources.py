"""Directory sources and static tables: listing new files, checking them, reading a batch.

A source is a directory. Each poll takes the files (or directories, as Spark writes Parquet)
that appeared since the last batch, in name order; names starting with ``.`` or ``_`` are
ignored so a writer can write a hidden file and rename it. A file's rows are inserts unless it
has an integer ``_weight`` column (+n inserts n copies, −n deletes n).

A file that does not parse, or whose columns do not match the source's schema, is refused as a
whole with :class:`~streamfold.errors.BadInputError` naming it; nothing of it is applied.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..connectors.delta_source import DeltaSource, DeltaSourceError
from ..errors import BadInputError, SourceError, UsageError
from ..ir.printer import quote
from ..ir.rel import WEIGHT
from ..ir.types import DataType, array, parse_type, struct
from ..sql.catalog import SourceSchema, parse_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType as SparkType
    from pyspark.sql.types import StructType

FORMATS = ("parquet", "csv", "json")
TABLE_FORMATS = ("delta",)  # read through a connector (staged.py), not as files
BAD_FILE_HINT = ("nothing of this batch was applied: move the file out of the source directory (or replace it "
                 "with a good one) and run the same command again, or run with --on-bad-file quarantine")


@dataclass(frozen=True)
class InputSpec:
    """``NAME=PATH[:FORMAT]`` from the command line (or the API)."""

    name: str
    path: str
    format: str = "parquet"
    static: bool = False
    schema: str | None = None  # "col TYPE, ..." overriding inference
    # a staged source's origin (a Delta table): ``path`` is then its staging directory (staged.py)
    origin: str | None = None

    @classmethod
    def parse(cls, text: str, static: bool = False) -> InputSpec:
        if "=" not in text:
            raise UsageError(f"cannot read input {text!r}", code="BAD_INPUT_SPEC", params={"spec": text},
                             hint="write it as NAME=PATH or NAME=PATH:FORMAT (parquet, csv, json)")
        name, rest = text.split("=", 1)
        fmt = "parquet"
        head, sep, tail = rest.rpartition(":")
        if sep and tail.lower() in FORMATS + TABLE_FORMATS:
            rest, fmt = head, tail.lower()
        elif sep and head and tail.isalnum() and not os.path.exists(rest):
            raise UsageError(f"unknown format {tail!r} for input {name.strip()}", code="BAD_FORMAT",
                             params={"format": tail, "spec": text}, hint="the formats are parquet, csv, json and delta")
        if not name.strip() or not rest:
            raise UsageError(f"cannot read input {text!r}", code="BAD_INPUT_SPEC", params={"spec": text},
                             hint="write it as NAME=PATH or NAME=PATH:FORMAT")
        return cls(name.strip(), rest, fmt, static)


def list_inputs(path: str) -> list[str]:
    """Visible entries of a source directory, in name order."""
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        raise SourceError(f"source directory {path} does not exist", code="SOURCE_NOT_FOUND",
                          params={"path": path}, hint="create it, or check the --source path") from None
    except NotADirectoryError:
        raise SourceError(f"source path {path} is a file, not a directory", code="SOURCE_NOT_A_DIRECTORY",
                          params={"path": path}, hint="point --source at the directory new files arrive in") from None
    return sorted(n for n in names if not n.startswith((".", "_")))


def files_waiting(dirs: Mapping[str, str], consumed: Mapping[str, Collection[str]],
                  taking: Mapping[str, Collection[str]]) -> bool:
    """Whether a stream's directory (``dirs``: stream → directory) holds a file the next poll would
    take: neither ``consumed`` by a committed batch nor ``taking`` by the batch running now."""
    for name, path in dirs.items():
        seen, running = consumed.get(name, ()), taking.get(name, ())
        try:
            names = list_inputs(path)
        except SourceError:  # the poll reports it
            continue
        if any(n not in seen and n not in running for n in names):
            return True
    return False


def arrival(dirs: Mapping[str, str], inputs: Mapping[str, list[str]]) -> float | None:
    """When the first of a batch's files arrived (epoch seconds): the earliest status change of
    its files — a rename or a link into the directory sets it, as writing a file does — or None."""
    times = []
    for name, names in inputs.items():
        for n in names:
            try:
                times.append(os.stat(os.path.join(dirs[name], n)).st_ctime)
            except (OSError, KeyError):
                continue
    return min(times) if times else None


def still_present(pending: dict[str, list[str]], directory: Callable[[str], str],
                  report: Callable[[str], None]) -> dict[str, list[str]]:
    """An interrupted batch's files (per source) that are still in their source directories.

    The redo of a batch reads the files its offsets list, so that the batch is the same one.
    A file removed from its directory since then was never part of a committed answer: the redo
    goes on without it (and says so) instead of failing on it at every restart. If it comes back,
    it is a new file like any other.
    """
    kept: dict[str, list[str]] = {}
    for name, names in pending.items():
        kept[name] = [n for n in names if os.path.exists(os.path.join(directory(name), n))]
        gone = [n for n in names if n not in kept[name]]
        if gone:
            report(f"the interrupted batch's file(s) {', '.join(gone)} of {name} are no longer in "
                   f"{directory(name)}: redoing the batch without them (nothing of them was committed)")
    return kept


def table_paths(path: str) -> list[str]:
    """The files of a static table: the path itself if it is a file, else its visible entries."""
    if os.path.isfile(path):
        return [path]
    return [os.path.join(path, n) for n in list_inputs(path)]


# -- schemas -------------------------------------------------------------------------------------
def spark_type(dt: object) -> DataType:
    """Our type for a pyspark DataType."""
    text = dt.simpleString()  # type: ignore[attr-defined]
    try:
        return parse_type(text)
    except ValueError:
        raise SourceError(f"column type {text} is not supported yet", code="UNSUPPORTED_COLUMN_TYPE",
                          params={"type": text}, hint="MAP columns are not supported; ARRAY and STRUCT are") from None


def arrow_type(t: object) -> DataType:
    """Our type for a pyarrow DataType (used to infer Parquet schemas without Spark)."""
    import pyarrow as pa

    assert isinstance(t, pa.DataType)
    table = [
        (pa.types.is_int8, "TINYINT"), (pa.types.is_int16, "SMALLINT"), (pa.types.is_int32, "INT"),
        (pa.types.is_int64, "BIGINT"), (pa.types.is_float32, "FLOAT"), (pa.types.is_float64, "DOUBLE"),
        (pa.types.is_boolean, "BOOLEAN"), (pa.types.is_date32, "DATE"),
        (lambda x: pa.types.is_string(x) or pa.types.is_large_string(x), "STRING"),
        (lambda x: pa.types.is_binary(x) or pa.types.is_large_binary(x), "BINARY"),
    ]
    for test, name in table:
        if test(t):
            return DataType(name)
    if pa.types.is_decimal(t):
        return DataType("DECIMAL", t.precision, t.scale)  # type: ignore[attr-defined]
    if pa.types.is_timestamp(t):
        return DataType("TIMESTAMP" if t.tz else "TIMESTAMP_NTZ")  # type: ignore[attr-defined]
    if pa.types.is_integer(t):  # unsigned
        return DataType("BIGINT")
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return array(arrow_type(t.value_type))  # type: ignore[attr-defined]
    if pa.types.is_struct(t):
        return struct([(t.field(i).name, arrow_type(t.field(i).type)) for i in range(t.num_fields)])  # type: ignore[attr-defined]
    raise SourceError(f"column type {t} is not supported yet", code="UNSUPPORTED_COLUMN_TYPE",
                      params={"type": str(t)})


def _parquet_file(path: str) -> str:
    """A Parquet input may be a directory of part files (as Spark writes it): its first part."""
    if os.path.isdir(path):
        parts = [n for n in sorted(os.listdir(path)) if not n.startswith((".", "_"))]
        if not parts:
            raise BadInputError(f"{path} is an empty directory", code="EMPTY_INPUT", params={"file": path})
        return os.path.join(path, parts[0])
    return path


# Footer reads by (path, mtime, size): a recompute reads every file of the history each time, and
# a consumed file never changes (a file rewritten in place has another mtime or size).
_FOOTERS: dict[tuple[str, int, int, str], Any] = {}
_FOOTERS_MAX = 200_000


def _footer_cached(path: str, kind: str, read: Callable[[], Any]) -> Any:
    try:
        st = os.stat(path)
    except OSError:
        return read()  # its own error, as uncached
    key = (path, st.st_mtime_ns, st.st_size, kind)
    if key not in _FOOTERS:
        if len(_FOOTERS) >= _FOOTERS_MAX:
            _FOOTERS.clear()
        _FOOTERS[key] = read()
    return _FOOTERS[key]


def parquet_columns(path: str) -> list[tuple[str, DataType]]:
    return list(_footer_cached(path, "columns", lambda: _parquet_columns(path)))


def _parquet_columns(path: str) -> list[tuple[str, DataType]]:
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(_parquet_file(path))
    except BadInputError:
        raise
    except Exception as e:  # pyarrow raises several kinds for a damaged file
        raise BadInputError(f"{path} is not a readable Parquet file: {e}", code="UNREADABLE_FILE",
                            params={"file": path, "format": "parquet"}) from None
    columns = []
    for f in schema:
        try:
            columns.append((f.name, arrow_type(f.type)))
        except SourceError:
            # A fault of this file (pyarrow writes an empty or all-NULL column without a type as
            # `null`): bad input that names the file, so it can be moved away or quarantined,
            # not a failure of the run that leaves the batch naming it.
            raise BadInputError(f"{path}: column `{f.name}` has type {f.type}, which is not supported",
                                code="UNSUPPORTED_COLUMN_TYPE",
                                params={"file": path, "column": f.name, "type": str(f.type)},
                                hint="write the column with a type (a column of only NULLs needs one too)") from None
    return columns


def csv_header(path: str) -> list[str]:
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            row = next(csv.reader(fh), None)
    except (OSError, UnicodeDecodeError) as e:
        raise BadInputError(f"{path} cannot be read as CSV: {e}", code="UNREADABLE_FILE",
                            params={"file": path, "format": "csv"}) from None
    if not row:
        raise BadInputError(f"{path} has no header line", code="MISSING_HEADER", params={"file": path},
                            hint="CSV sources need a header naming the columns")
    return [c.strip() for c in row]


def infer_schema(spec: InputSpec, spark: SparkSession | None = None) -> SourceSchema:
    """The schema of a source: given, or read from its first file (Spark infers CSV/JSON types)."""
    if spec.schema:
        return SourceSchema.of(spec.name, parse_schema(spec.schema), static=spec.static)
    if spec.format == "delta" or spec.origin is not None:
        return delta_schema(spec)
    files = table_paths(spec.path) if spec.static else [os.path.join(spec.path, n) for n in list_inputs(spec.path)]
    if not files:
        raise SourceError(
            f"{'table' if spec.static else 'source'} {spec.name} has no files yet, so its schema is unknown",
            code="SCHEMA_UNKNOWN", params={"source": spec.name, "path": spec.path},
            hint=f'give it with --schema {spec.name}="col TYPE, ..." or add a first file',
        )
    first = files[0]
    if spec.format == "parquet":
        return SourceSchema.of(spec.name, parquet_columns(first), static=spec.static)
    if spark is None:
        raise SourceError(f"inferring the types of {spec.format.upper()} source {spec.name} needs Spark",
                          code="SCHEMA_NEEDS_SPARK", params={"source": spec.name},
                          hint=f'give --schema {spec.name}="col TYPE, ..."')
    reader = spark.read.option("inferSchema", "true")
    if spec.format == "csv":
        df = reader.option("header", "true").csv(first)
    else:
        df = reader.json(first)
    if not df.schema.fields:
        raise SourceError(f"cannot infer the schema of {first}", code="SCHEMA_UNKNOWN",
                          params={"source": spec.name, "path": first})
    return SourceSchema.of(spec.name, [(f.name, spark_type(f.dataType)) for f in df.schema.fields],
                           static=spec.static)


def delta_location(spec: InputSpec) -> str | None:
    """The Delta table a spec reads (staged or not), or None for a directory of files."""
    if spec.origin is not None:
        return spec.origin
    return spec.path if spec.format == "delta" else None


def delta_schema(spec: InputSpec) -> SourceSchema:
    """A Delta source's schema: the table's columns now, and ``_weight`` (its changes delete rows)."""
    location = delta_location(spec)
    assert location is not None
    if spec.static:
        raise DeltaSourceError(f"table {spec.name} is a Delta table: only sources may be Delta tables yet",
                               code="DELTA_STATIC_TABLE", params={"table": spec.name},
                               hint=f"give it as --source {spec.name}={location}:delta (its rows then follow "
                                    "the table's updates), or export it as files for --table")
    table = DeltaSource(spec.name, location)
    started = _started_with(spec)
    if started is not None:  # a restart reads the columns the run started with; new ones are ignored
        table.table()  # (still a Delta table that can be read exactly)
        return SourceSchema.of(spec.name, started + [(WEIGHT, "BIGINT")])
    schema = table.arrow_schema()
    return SourceSchema.of(spec.name, [(f.name, arrow_type(f.type)) for f in schema] + [(WEIGHT, "BIGINT")])


def _started_with(spec: InputSpec) -> list[tuple[str, DataType | str]] | None:
    """The columns a staged source had when its checkpoint was made (``query.json``), if it was.

    The table's schema may have grown since (a column added): the checkpoint's query stays the one
    it was started with, rather than refusing the restart as another query."""
    if spec.origin is None:
        return None
    query = os.path.join(os.path.dirname(os.path.dirname(spec.path)), "query.json")  # CHECKPOINT/sources/NAME
    if not os.path.exists(query):
        return None
    try:
        with open(query, encoding="utf-8") as fh:
            columns = json.load(fh)["identity"]["sources"][spec.name]["columns"]
    except (OSError, ValueError, KeyError):
        return None  # the checkpoint's own check reports it
    return [(c, t) for c, t in columns]



# -- reading -------------------------------------------------------------------------------------
_WIDENS = {
    "TINYINT": {"SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"},
    "SMALLINT": {"INT", "BIGINT", "FLOAT", "DOUBLE", "DECIMAL"},
    "INT": {"BIGINT", "DOUBLE", "DECIMAL"},
    "BIGINT": {"DECIMAL"},
    "FLOAT": {"DOUBLE"},
    "DATE": {"TIMESTAMP", "TIMESTAMP_NTZ"},
    "TIMESTAMP_NTZ": {"TIMESTAMP"},
}


def readable_as(have: DataType, want: DataType) -> bool:
    """Whether a column of type ``have`` converts to ``want`` without loss."""
    if have == want:
        return True
    if want.name == "DECIMAL" and have.name == "DECIMAL":
        assert have.precision is not None and have.scale is not None
        assert want.precision is not None and want.scale is not None
        return want.scale >= have.scale and want.precision - want.scale >= have.precision - have.scale
    if want.name == "DECIMAL" and have.is_integral:
        digits = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 19}[have.name]
        assert want.precision is not None and want.scale is not None
        return want.precision - want.scale >= digits
    return want.name in _WIDENS.get(have.name, set())


def check_columns(path: str, found: Sequence[tuple[str, DataType | None]], schema: SourceSchema) -> dict[str, str]:
    """Match a file's columns to the schema; returns schema column -> file column.

    ``found`` types are None when the format has no types (CSV headers).
    """
    by_lower = {n.lower(): (n, t) for n, t in found}
    mapping: dict[str, str] = {}
    for name, want in schema.columns:
        hit = by_lower.get(name.lower())
        if hit is None:
            raise BadInputError(
                f"{path} lacks column `{name}` of source {schema.name}", code="MISSING_COLUMN",
                params={"file": path, "column": name, "source": schema.name},
                hint=f"the source's columns are {', '.join(c for c, _ in schema.columns)}",
            )
        have = hit[1]
        if have is not None and not readable_as(have, want):
            raise BadInputError(
                f"{path}: column `{name}` is {have.sql()}, but source {schema.name} has it as {want.sql()}",
                code="COLUMN_TYPE_MISMATCH",
                params={"file": path, "column": name, "found": have.sql(), "expected": want.sql()},
                hint="write the file with the source's types, or give --schema",
            )
        mapping[name] = hit[0]
    weight = by_lower.get(WEIGHT)
    if weight is not None:
        if not schema.weighted:
            raise BadInputError(
                f"{path} has a _weight column, but source {schema.name} was started insert-only",
                code="UNEXPECTED_WEIGHT", params={"file": path, "source": schema.name},
                hint="a source may delete rows only if its schema has _weight from the start "
                     "(first file, or --schema with `_weight BIGINT`); use a new checkpoint",
            )
        if weight[1] is not None and not weight[1].is_integral:
            raise BadInputError(f"{path}: _weight is {weight[1].sql()}, not an integer", code="BAD_WEIGHT_TYPE",
                                params={"file": path, "type": weight[1].sql()})
        mapping[WEIGHT] = weight[0]
    return mapping


def parquet_rows(path: str) -> int:
    """Rows of a Parquet input (a file or a directory of parts), from the footers only."""
    return int(_footer_cached(path, "rows", lambda: _parquet_rows(path)))


def _parquet_rows(path: str) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(p).metadata.num_rows for p in _parquet_parts(path))


def parquet_weights_all_one(path: str) -> bool:
    """Whether a Parquet input's footers prove every ``_weight`` in it is 1 (no column: every row
    once) — no deletion and no copy, so its rows need no netting (:mod:`.netting`)."""
    return bool(_footer_cached(path, "ones", lambda: _parquet_weights_all_one(path)))


def _parquet_parts(path: str) -> list[str]:
    """The files of a Parquet input: itself, or a directory's parts."""
    if os.path.isdir(path):
        return [os.path.join(path, n) for n in os.listdir(path) if not n.startswith((".", "_"))]
    return [path]


def _parquet_weights_all_one(path: str) -> bool:
    import pyarrow.parquet as pq

    for part in _parquet_parts(path):
        meta = pq.ParquetFile(part).metadata
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        if WEIGHT not in names:
            continue
        column = names.index(WEIGHT)
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(column).statistics
            if meta.row_group(g).num_rows == 0:
                continue
            if stats is None or not stats.has_min_max or stats.min != 1 or stats.max != 1 or stats.null_count:
                return False
    return True


TimeRange = tuple[int | None, int | None]  # (earliest, latest) in µs since the epoch; None: no value


def parquet_time_range(path: str, column: str) -> TimeRange | None:
    """The earliest and latest value of a timestamp column over a Parquet input's rows that
    insert (``_weight`` > 0), from the footers' statistics alone; None where they cannot tell:
    a row group without statistics, a ``_weight`` that may be below 1, a timestamp that is not an
    instant in micro- or milliseconds (INT96, nanoseconds, or without ``isAdjustedToUTC``)."""
    return _footer_cached(path, f"times:{column}", lambda: _parquet_time_range(path, column))  # type: ignore[no-any-return]


_TIME_UNITS = {"milliseconds": 1000, "microseconds": 1}


def _parquet_time_range(path: str, column: str) -> TimeRange | None:
    import pyarrow.parquet as pq

    low: int | None = None
    high: int | None = None
    for part in _parquet_parts(path):
        meta = pq.ParquetFile(part).metadata
        names = [meta.schema.column(i).name for i in range(meta.num_columns)]
        matches = [i for i, n in enumerate(names) if n == column] or \
            [i for i, n in enumerate(names) if n.lower() == column.lower()]
        if len(matches) != 1:
            return None
        logical = json.loads(meta.schema.column(matches[0]).logical_type.to_json())
        unit = _TIME_UNITS.get(logical.get("timeUnit", ""))
        if logical.get("Type") != "Timestamp" or not logical.get("isAdjustedToUTC") or unit is None:
            return None
        weight = names.index(WEIGHT) if WEIGHT in names else None
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            if group.num_rows == 0:
                continue
            if weight is not None:
                w = group.column(weight).statistics
                if w is None or not w.has_min_max or w.null_count or w.min_raw < 1:
                    return None
            stats = group.column(matches[0]).statistics
            if stats is None or (not stats.has_min_max and stats.null_count != group.num_rows):
                return None
            if stats.has_min_max:
                low, high = widen((low, high), (stats.min_raw * unit, stats.max_raw * unit))
    return low, high


def widen(a: TimeRange, b: TimeRange) -> TimeRange:
    """The earliest and latest of two (earliest, latest) pairs; None where neither has one."""
    lows = [t for t in (a[0], b[0]) if t is not None]
    highs = [t for t in (a[1], b[1]) if t is not None]
    return (min(lows) if lows else None), (max(highs) if highs else None)


def read_files(spark: SparkSession, spec: InputSpec, schema: SourceSchema, paths: Sequence[str]) -> DataFrame:
    """Read ``paths`` as the schema's columns plus ``_weight`` and ``__bad``, checking each file's
    columns first (Parquet types and CSV headers; a mismatch raises :class:`BadInputError`).

    ``__bad`` counts values in the row that did not parse (CSV); a batch with any is refused.
    """
    from functools import reduce

    groups: dict[tuple, list[str]] = {}
    mappings: dict[tuple, dict[str, str]] = {}
    for p in paths:
        try:
            sig, mapping = check_file(spec, schema, p)
        except BadInputError as e:
            e.params.setdefault("file", p)
            e.params["source"] = schema.name
            e.params["name"] = os.path.basename(p)
            raise
        groups.setdefault(sig, []).append(p)
        mappings[sig] = mapping
    frames = []
    for sig, group in groups.items():
        mapping = mappings[sig]
        frames.append(_read_group(spark, spec, schema, group, mapping))
    return reduce(lambda a, b: a.unionByName(b), frames)


def check_file(spec: InputSpec, schema: SourceSchema, p: str) -> tuple[tuple, dict[str, str]]:
    """A file's column signature (files sharing one are read together) and its column mapping."""
    sig: tuple[object, ...]
    if spec.format == "parquet":
        cols = parquet_columns(p)
        mapping = check_columns(p, cols, schema)
        sig = tuple(cols)
    elif spec.format == "csv":
        header = csv_header(p)
        mapping = check_columns(p, [(h, None) for h in header], schema)
        sig = tuple(header)
    else:
        mapping = {c: c for c, _ in schema.columns}
        if schema.weighted:
            mapping[WEIGHT] = WEIGHT
        sig = ("json",)
    return sig, mapping


def read_first_rows(spark: SparkSession, spec: InputSpec, schema: SourceSchema, path: str, rows: int) -> DataFrame:
    """At most ``rows`` rows of Parquet file ``path`` (checked already), as :func:`read_files`
    reads them: the first of its rows, read on the driver (pyarrow) into a frame. A limit over
    Spark's scan of the file read on past it in the engine's session (half of TPC-H SF 1's
    lineitem file for a limit of ten thousand rows; the same file read without the schema's
    casts stopped at once — not understood)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = next(pq.ParquetFile(path).iter_batches(batch_size=max(1, rows)), None)
    table = pa.Table.from_batches([first]) if first is not None else pq.read_schema(path).empty_table()
    _, mapping = check_file(spec, schema, path)
    frame = spark.createDataFrame(table, schema=spark_struct(parquet_columns(path)))
    return _read_group(spark, spec, schema, [path], mapping, frame)


def _read_group(spark: SparkSession, spec: InputSpec, schema: SourceSchema, paths: list[str],
                mapping: dict[str, str], frame: DataFrame | None = None) -> DataFrame:
    """Files with the same columns, read as the schema's columns, ``_weight`` and ``__bad``
    (``frame``: their rows, read already).

    Built as SQL expressions (one call into Spark), not column by column.
    """
    bad: list[str] = []
    if spec.format == "parquet":
        # the files' own schema (checked already): Spark need not infer it again
        df = frame if frame is not None else spark.read.schema(spark_struct(parquet_columns(paths[0]))).parquet(*paths)
        cols = [f"CAST({quote(mapping[c])} AS {t.sql()}) AS {quote(c)}" for c, t in schema.columns]
    elif spec.format == "csv":
        df = spark.read.option("header", "true").option("mode", "FAILFAST").option("inferSchema", "false").csv(paths)
        cols = []
        for c, t in schema.columns:
            raw = quote(mapping[c])
            cols.append(f"try_cast({raw} AS {t.sql()}) AS {quote(c)}")
            bad.append(f"CASE WHEN {raw} IS NOT NULL AND trim({raw}) <> '' AND try_cast({raw} AS {t.sql()}) IS NULL "
                       f"THEN 1 ELSE 0 END")
        if WEIGHT in mapping:
            raw = quote(mapping[WEIGHT])
            bad.append(f"CASE WHEN {raw} IS NOT NULL AND try_cast({raw} AS BIGINT) IS NULL THEN 1 ELSE 0 END")
    else:
        struct = spark_struct(list(schema.columns) + ([(WEIGHT, "BIGINT")] if schema.weighted else []))
        df = spark.read.schema(struct).option("mode", "FAILFAST").json(paths)
        cols = [quote(c) for c, _ in schema.columns]
    if WEIGHT in mapping:
        cast = "try_cast" if spec.format == "csv" else "CAST"
        weight = f"coalesce({cast}({quote(mapping[WEIGHT])} AS BIGINT), 1L)"
    else:
        weight = "1L"
    return df.selectExpr(*cols, f"{weight} AS {WEIGHT}", f"CAST({' + '.join(bad) or '0'} AS INT) AS __bad")


def spark_struct(columns: Sequence[tuple[str, DataType | str]]) -> StructType:
    """A pyspark StructType for (name, type) pairs."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(n, _spark_type(parse_type(t) if isinstance(t, str) else t)) for n, t in columns])


def empty_frame(spark: SparkSession, schema: StructType) -> DataFrame:
    """An empty DataFrame of the StructType ``schema`` that Spark alone plans (a local relation).

    ``spark.createDataFrame([], struct)`` would be an RDD of pickled rows: reading it starts
    Python workers, and Spark cannot see that it is empty, so every join with it runs. Spark
    drops a join with an empty local relation at planning: batch 0's old states and a source
    without new files.
    """
    from pyspark.sql import DataFrame

    session = spark._jsparkSession
    jvm: Any = spark._jvm
    struct = session.parseDataType(schema.json())
    return DataFrame(session.createDataFrame(jvm.java.util.ArrayList(), struct), spark)


def _spark_type(t: DataType) -> SparkType:
    from pyspark.sql.types import _parse_datatype_string

    return _parse_datatype_string(t.sql())
