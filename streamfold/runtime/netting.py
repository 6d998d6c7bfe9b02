"""A stream's files made a bag again for a query from scratch: its Z-set netted.

A stream that may delete holds rows with ``_weight``; a query over every file so far needs each
row as many times as its net weight. Netting groups the rows whole (every column), sums the
weights and repeats each row that many times — a shuffle of every row of the stream, most of a
recompute's time once the history is large (at TPC-H SF 1 a deletion made a recompute of Q01
several times slower: docs/journal.md, "Stop 39").

Most files prove from their Parquet footers that every weight in them is 1: no deletion, no
copy (:func:`~streamfold.runtime.sources.parquet_weights_all_one`). A row of such a file can only
change its count through a row of the *other* files that equals it whole, so only those rows are
netted. Which plain rows may meet one is decided on a few columns, the *probe* (of the weighted
rows, the integer, date and timestamp columns with the most distinct values — ids and keys, cheap
to hash; :func:`probe_columns`): a plain row whose probe values no weighted row has is taken as it
is (an anti join against the weighted rows' distinct probe values, broadcast, which reads only the
probe and the columns the query needs), the others are netted together with the weighted rows (a
semi join, then the grouping over that small part, cached for the query: a stream the query
reads twice is scanned whole once). The answer is the same bag whatever the probe: it only decides
how many rows are grouped. Netting every row is kept where the split does not pay.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .lowering import netting as lowering
from .sources import parquet_rows, parquet_weights_all_one

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# The weighted files are read on the driver to pick the probe columns, and their probe values
# broadcast: split only while they are this many values (rows × columns) at most — 8M values are
# some 130 MB — and fewer rows than the plain files (otherwise the joins cost more than the
# grouping they save).
SPLIT_MAX_VALUES = 8_000_000
PROBE_MAX = 2  # columns a plain row is matched on (SF 1 Q18: one or two cost alike, four more)


def split(paths: Sequence[str], columns: int, *, all_ones: Callable[[str], bool] = parquet_weights_all_one,
          rows: Callable[[str], int] = parquet_rows) -> tuple[list[str], list[str]] | None:
    """``(plain, weighted)``: the Parquet inputs whose footers prove every weight is 1, and the
    others — or None when netting the weighted ones apart does not pay (none is plain, or the
    weighted rows are too many to broadcast). ``weighted`` empty: nothing needs netting."""
    ones = {p: all_ones(p) for p in paths}
    plain = [p for p in paths if ones[p]]
    weighted = [p for p in paths if not ones[p]]
    if not weighted:
        return plain, []
    if not plain:
        return None
    heavy = sum(rows(p) for p in weighted)
    if heavy * max(columns, 1) > SPLIT_MAX_VALUES or heavy >= sum(rows(p) for p in plain):
        return None
    return plain, weighted


def probe_columns(weighted: Sequence[str], columns: Sequence[str]) -> list[str]:
    """The columns the plain rows are matched on: of the weighted files' rows (read here; they
    are few, :func:`split`), the integer, date and timestamp columns with the most distinct values
    (at most :data:`PROBE_MAX`: cheap to hash, and together near a key — TPC-H ``lineitem``'s
    ``l_partkey`` and ``l_orderkey``), else the one column with the most (ties: the earlier).
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    try:
        table = pa.concat_tables([pq.read_table(p) for p in weighted], promote_options="permissive")
    except (pa.ArrowException, OSError):  # files that disagree on a type: every column is exact too
        return list(columns)
    named = {n.lower(): n for n in table.column_names}  # a file's names as written, a query's as declared

    def exact(t: pa.DataType) -> bool:
        return pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_timestamp(t)

    def distinct(column: pa.ChunkedArray) -> int:
        try:
            return int(pc.count_distinct(column, mode="all").as_py())
        except pa.ArrowException:  # nested values: not a probe worth having
            return -1

    ranked = sorted(((exact(table.schema.field(named[c.lower()]).type), distinct(table[named[c.lower()]]), -i, c)
                     for i, c in enumerate(columns) if c.lower() in named), reverse=True)
    if not ranked:
        return list(columns)
    keys = [r[3] for r in ranked if r[0]][:PROBE_MAX] or [ranked[0][3]]
    return sorted(keys, key=list(columns).index)


def register(spark: SparkSession, name: str, columns: Sequence[str], weighted: str, plain: str | None = None,
             probe: Sequence[str] = ()) -> list[DataFrame]:
    """``name``, a temp view of ``weighted`` netted — with ``plain`` (rows whose weights are all 1)
    added: its rows whose ``probe`` values no weighted row has as they are, the others netted with
    the weighted rows. That netted part is small; it is computed (and cached) here once, so a
    query that reads the stream twice scans its plain rows whole only once. Returns what to
    unpersist after the query."""
    if plain is None:
        spark.sql(lowering.netted(columns, weighted)).createOrReplaceTempView(name)
        return []
    probe = list(probe) or list(columns)
    met = spark.sql(lowering.met_rows(columns, weighted, plain, probe))
    met = met.cache()
    met.count()
    met.createOrReplaceTempView(f"{name}__met")
    spark.sql(lowering.with_met(columns, weighted, plain, probe, f"{name}__met")).createOrReplaceTempView(name)
    return [met]


def register_netted(spark: SparkSession, name: str, columns: Sequence[str], paths: Sequence[str] | None,
                    read: Callable[[Sequence[str]], DataFrame], whole: str) -> list[DataFrame]:
    """``name``, a temp view of a weighted stream's rows netted: ``whole`` is a view of every
    file's rows (``columns`` and ``_weight``), ``paths`` its Parquet files (None: not Parquet,
    netted whole), ``read`` reads some of them. The files are split when it pays (:func:`split`),
    else every row is netted; with no weighted file, nothing is. Returns what to unpersist after
    the query."""
    parts = split(paths, len(columns)) if paths is not None else None
    if parts is not None and not parts[1]:
        spark.sql(lowering.projected(whole, columns)).createOrReplaceTempView(name)
        return []
    if parts is None:
        return register(spark, name, columns, whole)
    for kind, some in zip(("plain", "weighted"), parts, strict=True):
        read(some).createOrReplaceTempView(f"__{kind}_{name}")
    return register(spark, name, columns, f"__weighted_{name}", plain=f"__plain_{name}",
                    probe=probe_columns(parts[1], columns))


def register_files(session: SparkSession, name: str, files: Sequence[str], columns: Sequence[str]) -> list[DataFrame]:
    """``name`` registered in ``session`` from Parquet ``files`` netted as the recompute strategy
    nets them: the hook :func:`streamfold.verify.recompute` takes as ``netting`` (``bench tpch``
    passes it). Returns what to unpersist after the query."""
    session.read.parquet(*files).createOrReplaceTempView(f"__all_{name}")
    return register_netted(session, name, columns, files, lambda some: session.read.parquet(*some), f"__all_{name}")
