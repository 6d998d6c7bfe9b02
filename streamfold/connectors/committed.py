"""A committed batch as a sink reads it: its snapshot and its changes, from streamfold's output.

Sinks read the Parquet directories ``snapshots/<batch>/`` and ``changes/<batch>/`` the commit
published. The output is the source of truth, so a sink delivering the batch just committed and a
sink catching up after an outage (or a restart) read the same rows, and nothing a sink does can
delay or change a commit. The rows are read as Arrow (pyarrow, whole columns) and handed on as
Arrow. One shortcut: a small batch's snapshot and changes, collected to the driver and split there
before they are written (:func:`streamfold.runtime.emit.write_parts`), are handed to a two-phase
sink as the very tables written to ``snapshots/<batch>/`` and ``changes/<batch>/`` (``held``),
conformed to the same types.

Spark writes TIMESTAMP as INT96 (nanoseconds, no zone) where a small output written from Arrow
carries microseconds in the session's zone; both are the same instants, so every TIMESTAMP column
is read as ``timestamp[us, UTC]`` and every TIMESTAMP_NTZ as ``timestamp[us]``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

WEIGHT = "_weight"


@dataclass(frozen=True)
class AnswerShape:
    """What a sink is told when it opens: the answer's columns (name, Spark type), its key (the
    output names of its GROUP BY key, ``()`` for a one-row answer, None for a multiset) and the
    query's identity (the application id progress is recorded under)."""

    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...] | None
    query_id: str

    @property
    def names(self) -> list[str]:
        return [c for c, _ in self.columns]


@dataclass(frozen=True)
class CommittedBatch:
    """Batch ``batch`` as committed: where its snapshot and changes are, read on demand."""

    batch: int
    snapshot_path: str
    changes_path: str
    shape: AnswerShape
    held: tuple[pa.Table, pa.Table] | None = None  # the snapshot and changes as written, in memory

    def changes(self) -> pa.Table:
        """The rows whose multiplicity changed, with ``_weight`` (new − old multiplicity)."""
        columns = [*self.shape.columns, (WEIGHT, "bigint")]
        if self.held is not None:
            return conform([self.held[1]], columns)
        return read_parquet_dir(self.changes_path, columns)

    def snapshot(self) -> pa.Table:
        """The whole answer after the batch (a multiset's rows repeated)."""
        if self.held is not None:
            return conform([self.held[0]], list(self.shape.columns))
        if not os.path.isdir(self.snapshot_path):
            from ..errors import SinkError

            raise SinkError(f"the snapshot of batch {self.batch} was pruned", code="SINK_SNAPSHOT_PRUNED",
                                  params={"batch": self.batch},
                                  hint="a sink that is rewritten from snapshots needs them: raise --keep-snapshots")
        return read_parquet_dir(self.snapshot_path, list(self.shape.columns))


@dataclass(frozen=True)
class Prepared:
    """A batch a sink has applied but not yet made visible (a two-phase sink's ``prepare``):
    ``commit`` makes it visible, ``abort`` drops it."""

    commit: Callable[[], None]
    abort: Callable[[], None]


def read_parquet_dir(path: str, columns: list[tuple[str, str]]) -> pa.Table:
    """The Parquet files of ``path`` (hidden ones left out) as one table with ``columns``."""
    import pyarrow.parquet as pq

    names = sorted(n for n in os.listdir(path) if n.endswith(".parquet") and not n.startswith((".", "_")))
    return conform([pq.read_table(os.path.join(path, n)) for n in names], columns)


def conform(tables: list[pa.Table], columns: list[tuple[str, str]]) -> pa.Table:
    """``tables`` (parts of one output) as one table with ``columns``, typed as a sink reads them."""
    import pyarrow as pa

    target = pa.schema([(c, arrow_type(t)) for c, t in columns])
    if not tables:
        return target.empty_table()
    table = pa.concat_tables([t.select([c for c, _ in columns]) for t in tables], promote_options="permissive")
    return table.cast(target)


def arrow_type(spark_type: str) -> pa.DataType:
    """The Arrow type a Spark type (``DataType.simpleString()``) is read as."""
    import pyarrow as pa

    t = spark_type.lower()
    simple = {"tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
              "float": pa.float32(), "double": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
              "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
              "binary": pa.binary()}
    if t in simple:
        return simple[t]
    if t.startswith("decimal("):
        p, s = (int(x) for x in t[len("decimal("):-1].split(","))
        return pa.decimal128(p, s)
    if t.startswith(("varchar(", "char(")):
        return pa.string()
    from ..errors import UsageError

    raise UsageError(f"a sink cannot hold a column of type {spark_type}", code="SINK_TYPE",
                     params={"type": spark_type}, hint="cast the column to a string or a number in the query")
