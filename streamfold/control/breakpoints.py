"""Breakpoints: conditions that stop a query before a batch's commit.

Checked after the batch's outputs are written and before its commit record, so a hit leaves the
batch uncommitted: the user may resume (commit it as it is), skip the offending files (a source
breakpoint: they move to the quarantine and the batch runs again without them), or reconfigure
first (the batch runs again under the new query).

Four kinds::

    source S  COND   the batch's new rows of stream S (with ``_weight``) meet COND
    changes   COND   the answer's changes of the batch (with ``_weight``) meet COND
    state X   COND   rows of state X (its explain name) the batch touched, after it, meet COND
    after N          N batches after the breakpoint was added (once)

A condition is a Spark SQL boolean expression over those rows' columns, evaluated by Spark
(``SELECT … WHERE COND LIMIT n``: no Python per row); it is parsed and analysed when the
breakpoint is added, so a mistake is refused then with a coded error. The rows that met it (at
most :data:`MAX_ROWS`) are written to ``OUTPUT/breakpoints/<batch>/<id>.parquet`` beside
``<id>.json``; a source's carry the file each came from (``_file``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import sqlglot
from sqlglot import exp

from ..errors import UsageError
from ..ir.rel import WEIGHT
from ..runtime import files, lowering
from ..runtime.checkpoint import batch_name
from ..runtime.inputs import first_line
from ..runtime.sources import read_files
from ..runtime.views import Views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from ..runtime.engine import Engine
    from ..runtime.hooks import Pending

KINDS = ("source", "changes", "state", "after")
MAX_ROWS = 1000  # rows of a hit kept (written, and counted "at least" beyond)
SHOWN_ROWS = 20  # rows of a hit shown by status


@dataclass(frozen=True)
class Breakpoint:
    id: str
    kind: str
    target: str | None = None  # the source or the state
    condition: str | None = None
    batch: int | None = None  # "after": the batch it stops before committing

    def describe(self) -> str:
        if self.kind == "after":
            return f"after batch {batch_name(self.batch or 0)}"
        on = f"{self.kind} {self.target}" if self.target else self.kind
        return f"{on}: {self.condition}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "target": self.target, "condition": self.condition,
                "batch": self.batch, "description": self.describe()}

    @classmethod
    def from_record(cls, r: dict[str, Any]) -> Breakpoint:
        return cls(r["id"], r["kind"], r.get("target"), r.get("condition"), r.get("batch"))


@dataclass(frozen=True)
class Hit:
    """A breakpoint that stopped a batch, with the rows that met it."""

    breakpoint: Breakpoint
    batch: int
    rows: list[dict[str, Any]]
    count: int  # rows that met it, up to MAX_ROWS + 1
    files: dict[str, list[str]]  # source breakpoints: the files those rows came from
    path: str | None  # OUTPUT/breakpoints/<batch>/

    def to_json(self, shown: int = SHOWN_ROWS) -> dict[str, Any]:
        return {"breakpoint": self.breakpoint.to_json(), "batch": self.batch, "rows": self.rows[:shown],
                "row_count": self.count if self.count <= MAX_ROWS else f"more than {MAX_ROWS}",
                "files": self.files, "path": self.path}


def condition_error(condition: str, reason: str, **params: Any) -> UsageError:
    return UsageError(f"breakpoint condition `{condition}`: {reason}", code="BREAKPOINT_BAD_CONDITION",
                      params={"condition": condition, **params},
                      hint="write a boolean Spark SQL expression over the rows' columns, e.g. amount < 0")


def parse_condition(condition: str) -> None:
    """Refuse anything but one expression (no statement, no subquery)."""
    try:
        tree = sqlglot.parse_one(condition, read="spark", into=exp.Condition)
    except sqlglot.errors.SqlglotError as e:
        raise condition_error(condition, f"does not parse: {first_line(e)}") from None
    if tree is None or isinstance(tree, exp.Query) or tree.find(exp.Query, exp.Subquery) is not None:
        raise condition_error(condition, "must be an expression, without subqueries")


def check_condition(spark: SparkSession, condition: str, schema: StructType) -> None:
    """Analyse the condition's statement over empty rows of ``schema`` (names and types are
    checked; nothing runs)."""
    from ..runtime.sources import empty_frame

    views = Views(spark, "breakpoint")
    columns = [f.name for f in schema.fields]
    try:
        relation = views.name(empty_frame(spark, schema), "empty")
        spark.sql(lowering.breakpoint_rows(relation, columns, condition, 1)).schema  # noqa: B018 - analysis only
    except Exception as e:  # noqa: BLE001 - Spark's analysis error, shown to the user
        raise condition_error(condition, first_line(e), columns=columns) from None
    finally:
        views.drop()


def target_schema(engine: Engine, kind: str, target: str | None) -> StructType:
    """The columns a condition of this kind sees (coded error for an unknown target)."""
    from ..runtime.sources import spark_struct

    if kind == "source":
        streams = {s.name.lower(): s for s in engine.plan.streams}
        source = streams.get((target or "").lower())
        if source is None:
            raise UsageError(f"no stream source {target!r}", code="BREAKPOINT_UNKNOWN_TARGET",
                             params={"kind": kind, "target": target},
                             hint=f"the query's stream sources: {', '.join(s.name for s in engine.plan.streams)}")
        return cast("StructType", spark_struct(list(source.columns) + [(WEIGHT, "BIGINT")]))
    if kind == "state":
        if target not in engine.store.schemas or engine.store.defs[target].static:
            raise UsageError(f"no state {target!r}", code="BREAKPOINT_UNKNOWN_TARGET",
                             params={"kind": kind, "target": target},
                             hint=f"the plan's states (see explain): {', '.join(engine.store.durable())}")
        return engine.store.schemas[target]
    return cast("StructType", spark_struct(engine.answer.columns(weight=True)))


def rows_meeting(engine: Engine, bp: Breakpoint, pending: Pending, views: Views) -> DataFrame | None:
    """The batch's rows that meet ``bp``'s condition (None: it has none to look at)."""
    spark = engine.spark
    with_file = False
    if bp.kind == "source":
        source = next((s for s in engine.plan.streams if s.name.lower() == (bp.target or "").lower()), None)
        names = pending.inputs.get(source.name, []) if source is not None else []
        if source is None or not names:
            return None
        spec = engine.specs[source.name.lower()]
        # read afresh (not the batch's cached frame) so that each row names its file
        df = read_files(spark, spec, source, [os.path.join(spec.path, n) for n in names])
        columns, with_file = [c for c, _ in source.columns] + [WEIGHT], True
    elif bp.kind == "changes":
        df = spark.read.parquet(pending.changes_path)
        columns = df.columns
    else:
        if bp.target not in pending.states:
            return None
        df = pending.touched(bp.target or "")
        columns = df.columns
    statement = lowering.breakpoint_rows(views.name(df, f"{bp.kind}_{bp.id}"), columns, bp.condition or "true",
                                         MAX_ROWS + 1, files=with_file)
    return spark.sql(statement)


def evaluate(engine: Engine, bp: Breakpoint, pending: Pending, output_root: str) -> Hit | None:
    """Whether ``bp`` stops this batch, and with which rows (written under the output)."""
    if bp.kind == "after":
        if bp.batch != pending.batch:
            return None
        return _record(Hit(bp, pending.batch, [], 0, {}, None), None, output_root)
    views = Views(engine.spark, "breakpoint")
    try:
        df = rows_meeting(engine, bp, pending, views)
        if df is None:
            return None
        table = df.toArrow()
    finally:
        views.drop()
    if table.num_rows == 0:
        return None
    hit_files: dict[str, list[str]] = {}
    if bp.kind == "source":
        names = sorted({os.path.basename(f) for f in table.column("_file").to_pylist()})
        source = next(s.name for s in engine.plan.streams if s.name.lower() == (bp.target or "").lower())
        hit_files = {source: [n for n in pending.inputs.get(source, []) if n in names]}
        table = table.set_column(table.schema.get_field_index("_file"), "_file",
                                 [[os.path.basename(f) for f in table.column("_file").to_pylist()]])
    rows = _jsonable(table.slice(0, MAX_ROWS).to_pylist())
    return _record(Hit(bp, pending.batch, rows, table.num_rows, hit_files, None), table, output_root)


def _record(hit: Hit, table: Any, output_root: str) -> Hit:
    """Write the hit under OUTPUT/breakpoints/<batch>/ (rows as Parquet, the hit as JSON)."""
    import pyarrow.parquet as pq

    directory = os.path.join(output_root, "breakpoints", batch_name(hit.batch))
    os.makedirs(directory, exist_ok=True)
    if table is not None:
        tmp = os.path.join(directory, f".{hit.breakpoint.id}.parquet.tmp")
        pq.write_table(table.slice(0, MAX_ROWS), tmp)
        os.replace(tmp, os.path.join(directory, f"{hit.breakpoint.id}.parquet"))
    hit = Hit(hit.breakpoint, hit.batch, hit.rows, hit.count, hit.files, directory)
    files.write_json(os.path.join(directory, f"{hit.breakpoint.id}.json"), hit.to_json(shown=MAX_ROWS))
    return hit


def _jsonable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as JSON values (dates, decimals and the like as their text)."""
    return json.loads(json.dumps(rows, default=str))
