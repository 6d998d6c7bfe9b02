"""A batch's outputs: its snapshot, its changes and, for a plan with states, its changelog.

The three are computed by one statement each (``lowering``, through :class:`.answer.AnswerSql`
and the state store) and written side by side: small ones collected by one Spark job and written
on the driver (``emit.emit_together``), large ones by Spark. A batch that writes its states
whole (a restate, a rebuild, a migrated join matrix) writes them into the checkpoint's base for
that batch instead of a changelog, so a restart restores them without what came before. The
first batch of a newly installed plan takes its changes from the answer before it
(:class:`AnswerBefore`); a recompute batch from the last snapshot read back.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Protocol

from .batch import parallel
from .bundle import Bundle
from .context import RunContext
from .emit import emit, emit_together, write_parts
from .failures import batch_failure
from . import lowering
from .lowering import Columns
from . import shape
from .shape import tasks
from .views import Views, output_rows

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

Outputs = list[tuple[str, str, Columns]]  # (SQL, target directory, (column, Spark type) pairs)


class AnswerBefore(Protocol):
    """The answer a newly installed plan's first batch takes its changes from."""

    def before_answer(self, spark: SparkSession, states: Mapping[str, DataFrame | str],
                      views: Views) -> DataFrame | str | None: ...


def outputs_sql(ctx: RunContext, b: Bundle, batch: int, merged: dict[str, DataFrame],
                new: Mapping[str, DataFrame | str], views: Views, whole: bool,
                installed: AnswerBefore | None) -> Outputs:
    """The batch's outputs as (SQL, target directory, columns): its snapshot, its changes and, for
    a plan with states, its changelog — or its states whole (``whole``)."""
    store = b.store
    states: dict[str, DataFrame | str] = {**store.current, **new}
    durable = store.durable()
    with ctx.clock.part("outputs' SQL (views)"):
        snapshot = b.answer.snapshot(states, views)
        if installed is None:
            changes = b.answer.changes(batch == 0, merged, states, dict(store.current), views)
        else:  # a newly installed plan's first batch: its changes from the old plan's last answer
            changes = b.answer.changes_between(snapshot, installed.before_answer(ctx.spark, states, views), views)
        logs: dict[str, DataFrame | str]
        if installed is not None and not merged and not whole:  # h did not run: no state changed
            logs = {n: store.empty(n) for n in durable}
            log_dir = ctx.checkpoint.delta_dir(batch)
        elif not whole:
            logs = {n: store.log_view(n, merged[n], views) for n in durable}
            log_dir = ctx.checkpoint.delta_dir(batch)
        else:  # its states whole: a restart restores them without the old plan's changelogs
            logs = {n: states[n] for n in durable}
            log_dir = ctx.checkpoint.base_dir(batch)
        outputs: Outputs = [
            (snapshot, ctx.output.snapshot_path(batch), b.answer.columns()),
            (changes, ctx.output.changes_path(batch), b.answer.columns(weight=True))]
        if durable:
            outputs.append((store.pack_sql(logs, views), log_dir, store.pack_columns()))
    return outputs


def write(ctx: RunContext, b: Bundle, batch: int, merged: dict[str, DataFrame], new: Mapping[str, DataFrame | str],
          views: Views, eager: bool, lazy_reads: int, whole: bool, installed: AnswerBefore | None,
          collect: Callable[[DataFrame], pa.Table] | None = None,
          answer_ready: Callable[[pa.Table, pa.Table], None] | None = None) -> tuple[int, int]:
    """The changelog, snapshot and changes of the batch, written side by side; the snapshot's and
    the changes' rows.

    ``lazy_reads`` bounds what the job reads when the merges are lazy (the states before the
    batch and its rows); eager merges are read from their checkpoints. ``collect`` runs the job
    that collects small outputs (a capture of prepared plans keeps it); ``answer_ready``
    receives small outputs' snapshot and changes as soon as they are on the driver, before they
    are written."""
    store = b.store
    try:
        outputs = outputs_sql(ctx, b, batch, merged, new, views, whole, installed)
        # The merges' row counts bound every output: the snapshot by the answer's states, the
        # changes and changelog by the keys touched. Small ones are collected and written here.
        if eager:
            store.count_rows()
        bound = rows_bound(b, merged if not whole and (installed is None or merged) else store.durable())
        ordered = bool(b.plan.answer.order)
        if not eager or shape.collects(bound, output_row_bytes(b)):
            written = emit_together(ctx.spark, outputs, tasks(bound if eager else lazy_reads, ctx.cores),
                                    ctx.clock.part, collect, ordered, _answer_of(answer_ready))
        else:
            written = [emit(ctx.spark.sql(outputs[0][0]), outputs[0][1], False, ordered=ordered)]
            written += parallel(ctx.spark, [partial(_emit, ctx.spark, sql, target) for sql, target, _ in outputs[1:]])
    except Exception as e:  # noqa: BLE001
        raise batch_failure(batch, "write", "writing its answer", e, ctx.local, ctx.config.settings) from e
    return written[0], written[1]


def _answer_of(answer_ready: Callable[[pa.Table, pa.Table], None] | None) -> Callable[[list[pa.Table]], None] | None:
    """The snapshot and the changes (the first two outputs) of a batch's split outputs, handed to
    ``answer_ready``."""
    return None if answer_ready is None else lambda parts: answer_ready(parts[0], parts[1])


def _emit(spark: SparkSession, sql: str, target: str) -> int:
    return emit(spark.sql(sql), target, False)


def write_collected(ctx: RunContext, b: Bundle, batch: int, table: pa.Table,
                    answer_ready: Callable[[pa.Table, pa.Table], None] | None = None) -> tuple[int, int]:
    """A batch's outputs collected as one stacked Arrow table (a prepared plans' job), written;
    ``answer_ready`` receives the snapshot and the changes before they are."""
    parts = [(ctx.output.snapshot_path(batch), b.answer.columns()),
             (ctx.output.changes_path(batch), b.answer.columns(weight=True))]
    if b.store.durable():
        parts.append((ctx.checkpoint.delta_dir(batch), b.store.pack_columns()))
    with ctx.clock.part("write files"):
        written = write_parts(table, parts, _answer_of(answer_ready))
    return written[0], written[1]


def write_recomputed(ctx: RunContext, b: Bundle, batch: int, answer: DataFrame, views: Views, previous: str,
                     paths: tuple[str, str]) -> tuple[int, int]:
    """The snapshot (``answer``, computed) and its changes from the snapshot at ``previous``,
    written to ``paths`` (snapshot, changes)."""
    spark = answer.sparkSession
    before = spark.read.schema(b.output_schema).parquet(previous) if os.path.isdir(previous) else None
    snapshot = lowering.snapshot_of(views.name(answer, "recomputed"))
    changes = b.answer.changes_between(snapshot, before, views)
    # The answer is computed (its adaptive plan ran as one job per stage); the outputs over it
    # are one job of their own as the engine's are, without adaptive execution.
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        rows = output_rows(answer)
        outputs: Outputs = [(snapshot, paths[0], b.answer.columns()), (changes, paths[1], b.answer.columns(weight=True))]
        if rows is not None and shape.collects(rows, lowering.stacked_width([cols for _, _, cols in outputs])):
            written = emit_together(spark, outputs, 1 if rows <= shape.ONE_TASK_ROWS else None, ctx.clock.part)
        else:
            written = [emit(answer, paths[0], False, ordered=bool(b.plan.answer.order)),
                       emit(spark.sql(changes), paths[1], False)]
    except Exception as e:  # noqa: BLE001
        raise batch_failure(batch, "write", "writing its answer", e, ctx.local, ctx.config.settings) from e
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", "true")
    return written[0], written[1]


def output_row_bytes(b: Bundle) -> int:
    """The bytes of one row of the batch's outputs (snapshot, changes, changelog) stacked into
    one relation, as Arrow: what collecting them costs per row (:func:`.shape.collects`)."""
    parts = [b.answer.columns(), b.answer.columns(weight=True)]
    return lowering.stacked_width(parts + ([b.store.pack_columns()] if b.store.durable() else []))


def rows_bound(b: Bundle, names: Iterable[str]) -> int:
    """The rows of these states, a count not yet known taken as more than shape.SMALL_ROWS."""
    return sum(r if r is not None else shape.SMALL_ROWS + 1 for r in (b.store.rows.get(n) for n in names))


def state_rows(b: Bundle) -> dict[str, int]:
    """The rows of each state a batch maintains (static ones are not reported)."""
    return {n: r for n, r in b.store.rows.items() if r is not None and not b.store.defs[n].static}
