"""Write a batch's outputs: a Parquet directory, whole or not at all.

A small result (the common case: an aggregate's answer, a batch's changes, a state's changelog)
is collected as Arrow and written by pyarrow: one Spark job, no output committer. A large one
is written by Spark from the executors. Either way it is written under a hidden name and
renamed into place.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from . import files
from .lowering import Columns, stack, stack_parts, stacked, union_all
from .profile import Part, no_part

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame



def emit(df: DataFrame, final: str, small: bool, ordered: bool = False) -> int:
    """Write ``df`` to the directory ``final``; returns the number of rows written."""
    tmp = files.temp_dir_for(final)
    if small:
        import pyarrow.parquet as pq

        table = df.toArrow()
        os.makedirs(tmp)
        pq.write_table(table, os.path.join(tmp, "part-00000.parquet"))
        rows = table.num_rows
    else:
        (df.coalesce(1) if ordered else df).write.parquet(tmp)
        rows = parquet_dir_rows(tmp)
    files.publish_dir(tmp, final)
    return rows


def emit_together(spark: object, parts: Sequence[tuple[str, str, Columns]],
                  tasks: int | None = None, part: Part = no_part,
                  collect: Callable[[DataFrame], pa.Table] | None = None, ordered: bool = False,
                  ready: Callable[[list[pa.Table]], None] | None = None) -> list[int]:
    """Write several small results computed by one Spark job (of ``tasks`` tasks, if given).

    ``parts`` are (SQL, target directory, its (column, Spark type) pairs). The results are stacked into one
    relation — a tag column says which part a row belongs to, and the parts share its columns by
    type (:func:`.lowering.stack`) — collected once as Arrow, and split on the driver.
    Row order within a part is kept (UNION ALL concatenates its inputs' partitions in order),
    so an ordered snapshot stays ordered — and so does coalescing into one task, which reads its
    inputs' partitions in order (with more tasks, partitions are grouped by locality: with
    ``ordered``, the first part — an ordered snapshot — gets one task of its own, the other parts
    ``tasks``). ``part`` names the steps for a profile; ``collect``, if given, runs the stacked
    frame instead of ``toArrow`` (prepared plans: prepared.py); ``ready`` receives the parts
    before they are written (:func:`write_parts`).
    """
    with part("analyse outputs"):
        stacked = stacked_frame(spark, [(sql, cols) for sql, _, cols in parts], tasks, ordered)
    with part("plan + job + Arrow"):
        table = stacked.toArrow() if collect is None else collect(stacked)
    with part("write files"):
        return write_parts(table, [(final, cols) for _, final, cols in parts], ready)


def stacked_frame(spark: object, parts: list[tuple[str, Columns]], tasks: int | None = None,
                  ordered: bool = False) -> DataFrame:
    """The parts (SQL, its (column, Spark type) pairs) stacked into one relation
    (:func:`.lowering.stack`), in ``tasks`` tasks if given; with ``ordered``, the first part in
    one task of its own (it reads its sorted partitions in order), then the others in ``tasks``.

    Without the split an ordered answer's outputs were not coalesced at all: one task per
    partition of every part — tens of tasks for TPC-H Q21's snapshot, changes and six states'
    changelogs, their fixed costs a visible share of its batch."""
    if not ordered or tasks is None or tasks <= 1:  # one task reads every part's partitions in order
        stacked = spark.sql(stack(parts))  # type: ignore[attr-defined]
        return stacked.coalesce(tasks) if tasks is not None else stacked
    statements = stack_parts(parts)
    head = spark.sql(statements[0]).coalesce(1)  # type: ignore[attr-defined]
    if len(statements) == 1:
        return head
    return head.unionAll(spark.sql(union_all(statements[1:])).coalesce(tasks))  # type: ignore[attr-defined]


def write_parts(table: pa.Table, parts: Sequence[tuple[str, Columns]],
                ready: Callable[[list[pa.Table]], None] | None = None) -> list[int]:
    """Split a stacked table (:func:`emit_together`) into its parts' directories (target, its
    (column, Spark type) pairs). ``ready``, if given, receives the split parts before they are
    written (a two-phase sink starts on the changes while the files are written)."""
    import pyarrow.compute as pc

    names = stacked([cols for _, cols in parts])
    split = [table.filter(pc.equal(table.column("__part"), k)).select(names[k]).rename_columns([c for c, _ in cols])
             for k, (_, cols) in enumerate(parts)]
    if ready is not None:
        ready(split)
    if len(split) == 1:
        return [_write_part(split[0], parts[0][0])]
    # Each file written and its directory synced in a thread of its own (Arrow's writer and the
    # syncs release the GIL): the parts are independent, and the commit waits for all of them.
    return list(_writers().map(_write_part, split, [final for final, _ in parts]))


@functools.cache
def _writers() -> ThreadPoolExecutor:
    """The threads that write a batch's parts (snapshot, changes, changelog) side by side."""
    return ThreadPoolExecutor(max_workers=3, thread_name_prefix="streamfold-write")


def _write_part(part: pa.Table, final: str) -> int:
    """One part of a stacked table as the Parquet directory ``final``; its rows."""
    import pyarrow.parquet as pq

    tmp = files.temp_dir_for(final)
    os.makedirs(tmp)
    pq.write_table(part, os.path.join(tmp, "part-00000.parquet"))
    files.publish_dir(tmp, final)
    return part.num_rows


def parquet_dir_rows(directory: str) -> int:
    import pyarrow.parquet as pq

    total = 0
    for n in os.listdir(directory):
        if n.endswith(".parquet") and not n.startswith((".", "_")):
            total += pq.ParquetFile(os.path.join(directory, n)).metadata.num_rows
    return total
