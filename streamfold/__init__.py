"""streamfold: write a batch SQL query once; get an exact, continuously maintained answer on Spark.

Without Spark::

    import streamfold
    print(streamfold.explain("SELECT x, avg(y) FROM S GROUP BY x", {"S": "x INT, y INT"}))

On Spark (pyspark is imported only here)::

    q = streamfold.start("SELECT x, avg(y) FROM S GROUP BY x", sources={"S": "data/S"}, output="out")
    q.wait_for_batch(0)
    q.snapshot_pandas()
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .errors import (
    BadInputError, BatchError, BindError, CheckpointError, ParseError, SinkError, SourceError, SqlError,
    StreamfoldError, UnsupportedError, UsageError,
)
from .ir.types import DataType
from .settings import Settings

if TYPE_CHECKING:
    from .control.api import ControlledQuery
    from .plan.model import IncrementalPlan
    from .sql.catalog import SourceSchema

__version__ = "0.1.0"

Schemas = Mapping[str, "str | Iterable[tuple[str, DataType | str]] | SourceSchema"]

__all__ = [
    "BadInputError", "BatchError", "BindError", "CheckpointError", "ParseError", "Settings", "SinkError", "SourceError",
    "SqlError", "StreamfoldError", "UnsupportedError", "UsageError", "compile", "explain", "start",
]


def compile(sql: str, schemas: Schemas, tables: Iterable[str] = (),  # noqa: A001
            matrix_equi: str | None = None) -> IncrementalPlan:
    """Compile ``sql`` to its incremental plan. ``schemas`` maps each input to ``"col TYPE, …"``
    (a ``_weight`` column marks a source that may delete rows); ``tables`` names the static ones;
    ``matrix_equi`` how equi-joins of two streams are partitioned (as the run option). The plan
    keeps its compilation (``plan.compilation``: the query parsed, bound and normalized once)."""
    from .plan.compilation import Compilation
    from .plan.matrix import EQUI_PARTITIONINGS, MatrixPolicy
    from .sql import Catalog

    if matrix_equi is not None and matrix_equi not in EQUI_PARTITIONINGS:
        raise UsageError(f"matrix_equi cannot be {matrix_equi!r}", code="BAD_OPTION",
                         params={"option": "matrix_equi", "value": matrix_equi},
                         hint=f"matrix_equi (--equi-joins) takes one of {', '.join(EQUI_PARTITIONINGS)}")
    policy = MatrixPolicy(equi=matrix_equi) if matrix_equi is not None else MatrixPolicy()
    return Compilation(sql, Catalog.from_mapping(schemas, static=tables), policy).plan


def explain(sql: str, schemas: Schemas, tables: Iterable[str] = (), format: str = "text",  # noqa: A002
            matrix_equi: str | None = None) -> str:
    """The incremental plan of ``sql`` as readable text (``format="text"``) or JSON."""
    from .plan import explain_json, explain_text

    if format not in ("text", "json"):
        raise UsageError(f"unknown explain format {format!r}", code="BAD_FORMAT", params={"format": format},
                         hint="use text or json")
    plan = compile(sql, schemas, tables, matrix_equi)
    return explain_json(plan) if format == "json" else explain_text(plan)


def start(sql: str, sources: Mapping[str, Any], output: str, *, tables: Mapping[str, Any] | None = None,
          formats: Mapping[str, str] | None = None, schemas: Mapping[str, str] | None = None,
          checkpoint: str | None = None, trigger: float = 1.0, until_idle: float | None = None,
          partitions: int | None = None, on_bad_file: str = "stop", compact_every: int = 20,
          keep_snapshots: int | None = None, profile: bool = False, matrix_epsilon: float | None = 1.0,
          matrix_cells: int = 4, matrix_equi: str = "hash", matrix_start: tuple[int, int] | None = None,
          strategy: str = "incremental", settings: Settings | None = None, spark: Any = None,
          master: str | None = None, background: bool = True, progress: Callable[[str], None] | None = None,
          endpoint: bool = True, control_host: str = "127.0.0.1", control_port: int = 0,
          pause_grace: float = 0.1, sinks: Iterable[Any] = ()) -> ControlledQuery:
    """Start maintaining ``sql`` over ``sources`` (and static ``tables``), writing to ``output``.

    A source is a directory of files, ``"PATH:delta"`` (a Delta Lake table), or a streaming Spark
    DataFrame (``spark.readStream…``: Spark's checkpoint decides its micro-batches); a table is
    a path or a static DataFrame (docs/sources.md).

    ``formats`` gives a format per input (parquet, csv, json); ``schemas`` gives "col TYPE, …" per
    input instead of inferring it. With ``background=False`` nothing runs until you call
    :meth:`Query.process_available`. The run's options are those of ``streamfold run``
    (docs/running.md): ``until_idle``, ``partitions``, ``on_bad_file`` (``stop`` or
    ``quarantine``), ``compact_every``, ``keep_snapshots``; ``strategy``: ``incremental``
    (default), ``recompute`` or ``auto``, the cost model's choice per batch; ``profile`` records
    each batch's waterfall (``BatchResult.waterfall()``). Join matrices: ``matrix_epsilon``, a
    theta join's matrix re-maps once an input grew by this fraction (None: never);
    ``matrix_cells`` J; ``matrix_equi``, how equi-joins of two streams are partitioned (hash,
    matrix, hybrid, auto); ``matrix_start``, the (n, m) mapping matrices start with. The control
    endpoint: ``endpoint=False`` (none), ``control_host``, ``control_port``, and ``pause_grace``,
    the seconds a pause lets a running step finish. ``progress`` is told what a long batch is
    doing. ``settings`` (:class:`Settings`; the environment's if not given) are the rest:
    driver memory and the other JVM settings for a session streamfold starts, A/B switches
    (docs/tuning.md). Every option is checked before Spark starts (``BAD_OPTION``).
    ``sinks`` are where each committed batch is also delivered (docs/sinks.md):
    ``"postgres://USER@HOST:PORT/DB?table=NAME"`` and ``"PATH:delta"`` exactly once, and callables
    ``fn(batch, changes, snapshot)`` (Spark DataFrames) at least once.
    The query has the control actions as methods (pause, resume, inspect, reconfigure, …).
    """
    from .control.api import start as _start

    return _start(sql, sources, output, tables=tables, formats=formats, schemas=schemas, checkpoint=checkpoint,
                  trigger=trigger, until_idle=until_idle, partitions=partitions, on_bad_file=on_bad_file,
                  compact_every=compact_every, keep_snapshots=keep_snapshots, profile=profile,
                  matrix_epsilon=matrix_epsilon, matrix_cells=matrix_cells, matrix_equi=matrix_equi,
                  matrix_start=matrix_start, strategy=strategy, settings=settings, spark=spark, master=master,
                  background=background, progress=progress, endpoint=endpoint, control_host=control_host,
                  control_port=control_port, pause_grace=pause_grace, sinks=tuple(sinks))
