"""Sources that are not a directory of files, staged into one: the seam to the connectors.

The engine reads one kind of stream: a directory whose new files are a batch, their rows
carrying ``_weight``; the checkpoint records the files of a batch before it reads them, and the
history of a source (a recompute, a rebuild) is every file it consumed. A connector's source
(a Delta table) is fitted to that by *staging*: before each poll, :meth:`Stager.stage` asks the
connector for the rows changed since the last staged position and writes them (Spark, Parquet)
as one file in the source's staging directory, ``CHECKPOINT/sources/<name>/``, named by the
positions it covers — ``delta-v<first>-v<last>`` for the Delta versions ``first .. last``.
From there on it is a file like any other: recorded in ``offsets/`` before it is read, listed
by the commit that applies it, read again whole by a recompute. A streaming Spark DataFrame is
staged the same way, by its own Spark stream as each micro-batch ends (``spark-b<batch id>``,
:mod:`..connectors.spark_source`; :func:`dataframe_inputs` sets it up).

Why that is exactly-once: the staged file is written under a hidden name and renamed into the
directory, so it is there whole or not at all; the next position is read back from the names in
the directory (never from memory), so a run killed after staging a file applies it on restart,
and one killed while writing stages the same versions again. A position that a commit applied is
in that commit's ``inputs`` (and its ``positions``), so a restart never takes a version twice.

The cost: the changed rows are written once more (netted, so usually far fewer than the files
the versions rewrote). Bad input is refused *before* anything is staged — a schema change the
query cannot read, versions vacuumed away — so nothing is half-applied and the checkpoint stays
usable once the cause is fixed.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..connectors.delta_source import DeltaSource, DeltaSourceError
from ..connectors.spark_source import STAGED as _SPARK
from ..connectors.spark_source import SparkFeeds, SparkStreamSource, is_dataframe, stage_table
from ..sql.catalog import SourceSchema
from .sources import InputSpec, arrow_type, readable_as, spark_struct

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from ..settings import Settings

log = logging.getLogger("streamfold")

STAGED_DIR = "sources"
_DELTA = re.compile(r"^delta-v(\d{20})-v(\d{20})$")


def staged_specs(specs: Sequence[InputSpec], checkpoint_dir: str) -> list[InputSpec]:
    """``specs`` with each Delta stream read from its staging directory (its table in ``origin``)."""
    out = []
    for spec in specs:
        if spec.format == "delta" and spec.origin is None:
            staging = os.path.join(os.path.abspath(checkpoint_dir), STAGED_DIR, spec.name)
            spec = replace(spec, path=staging, format="parquet", origin=spec.path)
        out.append(spec)
    return out


def positions(inputs: Mapping[str, Iterable[str]]) -> dict[str, Any]:
    """What a batch's staged files say of their sources' positions (for its commit record):
    per Delta source, the first and last table version the batch applied; per streaming
    DataFrame, the Spark micro-batch ids."""
    out: dict[str, Any] = {}
    for name, names in inputs.items():
        versions = [(int(m.group(1)), int(m.group(2))) for n in names if (m := _DELTA.match(n))]
        if versions:
            out[name] = {"kind": "delta", "first_version": min(v[0] for v in versions),
                         "version": max(v[1] for v in versions)}
        ids = [int(m.group(1)) for n in names if (m := _SPARK.match(n))]
        if ids:
            out[name] = {"kind": "spark", "batch_ids": ids}
    return out


def watched_paths(specs: Iterable[InputSpec]) -> list[str]:
    """The directories whose new entries should wake the poll (:mod:`.watch`): each stream's, and
    a Delta source's transaction log, where a new version lands as a new commit file."""
    streams = [spec for spec in specs if not spec.static]
    return [spec.path for spec in streams] + [os.path.join(os.path.abspath(spec.origin), "_delta_log")
                                               for spec in streams if spec.origin and "://" not in spec.origin]


class Stager:
    """Stages the new positions of a run's connector sources before each poll."""

    def __init__(self, specs: Mapping[str, InputSpec], streams: Sequence[SourceSchema], settings: Settings) -> None:
        self.sources = [(specs[s.name.lower()], s) for s in streams
                        if specs[s.name.lower()].origin is not None and not specs[s.name.lower()].static]
        self.change_feed = settings.delta_change_feed

    def stage(self, spark: SparkSession) -> None:
        for spec, schema in self.sources:
            _stage_delta(spark, spec, schema, self.change_feed)


def staged_version(directory: str) -> int:
    """The last Delta version staged in ``directory`` (−1: none)."""
    names = os.listdir(directory) if os.path.isdir(directory) else []
    return max((int(m.group(2)) for n in names if (m := _DELTA.match(n))), default=-1)


def _stage_delta(spark: SparkSession, spec: InputSpec, schema: SourceSchema, change_feed: bool) -> None:
    assert spec.origin is not None
    source = DeltaSource(spec.name, spec.origin)
    after = staged_version(spec.path)
    upto = source.version()
    if upto <= after:
        return
    _check_schemas(source, schema, upto)
    os.makedirs(spec.path, exist_ok=True)
    name = f"delta-v{after + 1:020d}-v{upto:020d}"
    tmp = os.path.join(spec.path, f".{name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)  # a write a killed run left
    struct = spark_struct(list(schema.columns))
    rows = source.read(spark, after, upto, struct, change_feed)
    rows.write.parquet(tmp)  # (no rows: one file without rows, with the columns)
    os.rename(tmp, os.path.join(spec.path, name))
    log.info("staged versions %d..%d of %s", after + 1, upto, spec.origin)


def _check_schemas(source: DeltaSource, schema: SourceSchema, upto: int) -> None:
    """Refuse the versions up to ``upto`` if the table's schema then lacks a column of the query's,
    or has it with a type it cannot be read as.

    Only the schema at ``upto`` counts: a schema changing columns the query reads is an
    overwrite (every file removed, new ones added), so no file of an intermediate schema is
    read; and a column added later is NULL in older files, as Delta reads them too. So a table
    whose column came back (a new version) is read on from where the query stopped."""
    found = {f.name.lower(): arrow_type(f.type) for f in source.arrow_schema(upto)}
    for column, want in schema.columns:
        have = found.get(column.lower())
        if have is None or not readable_as(have, want):
            what = "dropped" if have is None else f"changed to {have.sql()}"
            raise DeltaSourceError(
                f"version {upto} of the Delta table {source.location}: column `{column}` of source "
                f"{schema.name} was {what}", code="DELTA_SCHEMA_CHANGED",
                params={"source": schema.name, "version": upto, "column": column,
                        "found": have.sql() if have else None, "expected": want.sql()},
                hint="nothing of these versions was applied; the query reads the columns it started with: "
                     "restore the column in the table (a new version), or start the query over with a new "
                     "--output. New columns are ignored.")



def dataframe_inputs(sources: Mapping[str, Any], tables: Mapping[str, Any] | None,
                     schemas: Mapping[str, str] | None, checkpoint_dir: str
                     ) -> tuple[dict[str, str], dict[str, str], dict[str, str], SparkFeeds]:
    """The API's inputs with each Spark DataFrame replaced by its staging directory: a streaming
    one by the directory its micro-batches are staged into (started by the returned feeds), a
    static one by its copy written once (:mod:`..connectors.spark_source`)."""
    root = os.path.abspath(checkpoint_dir)
    paths, table_paths, given = {}, {}, dict(schemas or {})
    feeds = []
    for name, value in sources.items():
        if not is_dataframe(value):
            paths[name] = value
            continue
        source = SparkStreamSource(name, value, os.path.join(root, STAGED_DIR, name))
        os.makedirs(source.directory, exist_ok=True)
        paths[name] = source.directory
        given.setdefault(name, source.schema())
        feeds.append(source)
    for name, value in (tables or {}).items():
        if is_dataframe(value):
            os.makedirs(os.path.join(root, "tables"), exist_ok=True)
            value = stage_table(name, value, os.path.join(root, "tables", name))
        table_paths[name] = value
    return paths, table_paths, given, SparkFeeds(feeds)
