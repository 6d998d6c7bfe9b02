"""A Delta Lake table as a stream: each batch is the versions committed since the last one.

The transaction log says what each version did; Spark reads the Parquet files it names. For the
versions ``after+1 .. upto``:

- with ``change_feed``, a version with ``cdc`` actions (the table has the change data feed on and
  the version changed rows in place) contributes its change files' rows, ``_change_type`` giving
  the weight (``insert``/``update_postimage`` +1, ``delete``/``update_preimage`` −1), and nothing
  of its ``add``/``remove`` actions (the protocol's rule for change-data readers). Not by default:
  delta-rs 1.6.6 writes feeds without the duplicate post-images of an UPDATE (two rows updated
  into equal rows give one post-image), which the data files have right;
- any other version contributes the rows of the files it added (+1) and of the files it removed
  (−1), for actions with ``dataChange`` only (an OPTIMIZE moves rows and changes none).

A file added and removed again inside the range is dropped on both sides, unread. Where files
were removed, an UPDATE/DELETE/MERGE rewrote them: most of their rows are in the files added by
the same versions, unchanged. Those rows are netted in Spark — the removed files (−1) and the
added files of the versions that removed files (+1), grouped by every column, keeping the groups
whose weights do not sum to zero — so an unchanged row rewritten costs nothing downstream. Files
of pure appends are not netted (nothing can cancel them).

The first batch (``after`` = −1) is the table's snapshot at ``upto``: every live file, +1.

A partitioned table's partition columns are not in its data files: each file's values come from
its ``partitionValues`` in the log (strings, cast to the column's type), added as constants to the
rows Spark reads from it — files with the same values are read together.

Only what can be read exactly is read: tables with deletion vectors or column mapping are refused with a coded :class:`DeltaSourceError` (they need the data file's rows to be
combined with something outside the file); so is a version whose log entry or data files are gone
(vacuumed, or the log cleaned up) — those rows can no longer be known.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from ..errors import SourceError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

WEIGHT = "_weight"
CHANGE_WEIGHTS = {"insert": 1, "update_postimage": 1, "delete": -1, "update_preimage": -1}
VACUUM_HINT = ("the table was vacuumed (or its log cleaned up) past the version this query needs; keep "
               "the table's history longer (delta.deletedFileRetentionDuration, delta.logRetentionDuration) "
               "than a run may be stopped, or start the query over with a new --output: its first batch "
               "reads the table's current version whole")


class DeltaSourceError(SourceError):
    """A Delta table cannot be read as a stream, or not exactly."""

    default_code = "DELTA_SOURCE_ERROR"


@dataclass
class Changes:
    """What the versions of a range did, as files: read with a weight, or netted first."""

    appended: list[str] = field(default_factory=list)  # +1, versions that removed nothing
    rewritten: list[str] = field(default_factory=list)  # +1, versions that removed files: netted
    removed: list[str] = field(default_factory=list)  # −1: netted
    change_files: list[str] = field(default_factory=list)  # rows with _change_type
    # path → the file's partition values, as the log writes them (strings; None for NULL)
    partitions: dict[str, tuple[tuple[str, str | None], ...]] = field(default_factory=dict)


class DeltaSource:
    """The table at ``location`` (a path or ``file://`` URI), read with deltalake (delta-rs)."""

    def __init__(self, name: str, location: str) -> None:
        self.name = name
        self.location = location
        self.root = _local_path(location)

    # -- the table -------------------------------------------------------------------------------
    def table(self, version: int | None = None) -> Any:
        """The ``deltalake.DeltaTable`` (at ``version``), refused if it cannot be read exactly."""
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError, TableNotFoundError

        params = {"source": self.name, "path": self.location}
        try:
            if not DeltaTable.is_deltatable(self.location):
                raise DeltaSourceError(f"{self.location} is not a Delta table (it has no _delta_log)",
                                       code="NOT_A_DELTA_TABLE", params=params,
                                       hint="point NAME=PATH:delta at a Delta table's root directory, or drop "
                                            ":delta to read a directory of files")
            dt = DeltaTable(self.location, version=version)
        except TableNotFoundError:
            raise DeltaSourceError(f"{self.location} is not a Delta table", code="NOT_A_DELTA_TABLE",
                                   params=params, hint="point NAME=PATH:delta at a Delta table's root") from None
        except DeltaError as e:
            if version is None:
                raise DeltaSourceError(f"cannot open the Delta table {self.location}: {e}", code="DELTA_UNREADABLE",
                                       params=params) from e
            raise DeltaSourceError(f"version {version} of the Delta table {self.location} is gone: {e}",
                                   code="DELTA_VERSION_GONE", params={**params, "version": version},
                                   hint=VACUUM_HINT) from e
        self._refuse_inexact(dt)
        return dt

    def _refuse_inexact(self, dt: Any) -> None:
        params = {"source": self.name, "path": self.location}
        protocol = dt.protocol()
        features = set(protocol.reader_features or [])
        config = dt.metadata().configuration or {}
        if "deletionVectors" in features or config.get("delta.enableDeletionVectors", "").lower() == "true":
            raise DeltaSourceError(f"the Delta table {self.location} uses deletion vectors", code="DELTA_DELETION_VECTORS",
                                   params=params, hint="streamfold cannot read deletion vectors exactly yet: turn "
                                   "them off (delta.enableDeletionVectors=false) and purge them (REORG TABLE … "
                                   "APPLY (PURGE)), or pass the table as a Spark streaming DataFrame")
        if "columnMapping" in features or config.get("delta.columnMapping.mode", "none") != "none":
            raise DeltaSourceError(f"the Delta table {self.location} uses column mapping", code="DELTA_COLUMN_MAPPING",
                                   params=params, hint="column mapping is not supported yet: pass the table as a "
                                   "Spark streaming DataFrame")

    def version(self) -> int:
        """The table's latest version."""
        return int(self.table().version())

    def arrow_schema(self, version: int | None = None) -> pa.Schema:
        """The table's columns (at ``version``) as a pyarrow schema."""
        import pyarrow as pa

        return pa.schema(self.table(version).schema().to_arrow())

    # -- the log ---------------------------------------------------------------------------------
    def _log_entry(self, version: int) -> list[dict[str, Any]]:
        path = os.path.join(self.root, "_delta_log", f"{version:020d}.json")
        try:
            with open(path, encoding="utf-8") as fh:
                return [json.loads(line) for line in fh if line.strip()]
        except FileNotFoundError:
            raise DeltaSourceError(f"the log entry of version {version} of {self.location} is gone",
                                   code="DELTA_VERSION_GONE",
                                   params={"source": self.name, "path": self.location, "version": version},
                                   hint=VACUUM_HINT) from None

    def changes(self, after: int, upto: int, change_feed: bool = False) -> Changes:
        """The files versions ``after+1 .. upto`` changed (see the module docstring)."""
        if after < 0:
            changes = self._snapshot(upto)
        else:
            changes = self._range(after, upto, change_feed)
        missing = [p for p in changes.removed + changes.change_files + changes.appended + changes.rewritten
                   if not os.path.exists(p)]
        if missing:
            raise DeltaSourceError(f"{len(missing)} data file(s) of versions {after + 1}..{upto} of {self.location} "
                                   f"are gone, e.g. {missing[0]}", code="DELTA_VERSION_GONE",
                                   params={"source": self.name, "path": self.location, "version": after + 1,
                                           "missing": missing[:5]}, hint=VACUUM_HINT)
        return changes

    def _snapshot(self, version: int) -> Changes:
        """Every live file of ``version`` (+1), with its partition values."""
        import pyarrow as pa

        dt = self.table(version)
        columns = list(dt.metadata().partition_columns)
        if not columns:
            return Changes(appended=[self._file(p) for p in dt.file_uris()])
        actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
        changes = Changes()
        for a in actions:
            path = self._file(a["path"])
            changes.appended.append(path)
            changes.partitions[path] = tuple((c, _logged(a[f"partition.{c}"])) for c in columns)
        return changes

    def _range(self, after: int, upto: int, change_feed: bool) -> Changes:
        added: dict[str, tuple[int, bool]] = {}  # path → (version, its version removed files)
        removed: list[str] = []
        change_files: list[str] = []
        partitions: dict[str, tuple[tuple[str, str | None], ...]] = {}
        for v in range(after + 1, upto + 1):
            actions = self._log_entry(v)
            for a in actions:
                for kind in ("add", "remove", "cdc"):
                    if kind in a and a[kind].get("partitionValues"):
                        partitions[self._file(a[kind]["path"])] = tuple(sorted(a[kind]["partitionValues"].items()))
            for a in actions:
                entry = a.get("add") or a.get("remove")
                if entry and entry.get("deletionVector"):
                    raise DeltaSourceError(f"version {v} of {self.location} wrote a deletion vector",
                                           code="DELTA_DELETION_VECTORS",
                                           params={"source": self.name, "path": self.location, "version": v},
                                           hint="deletion vectors cannot be read exactly yet: turn them off")
            cdc = [a["cdc"]["path"] for a in actions if "cdc" in a]
            if cdc and change_feed:
                change_files += cdc
                continue
            adds = [a["add"]["path"] for a in actions if "add" in a and a["add"].get("dataChange", True)]
            removes = [a["remove"]["path"] for a in actions if "remove" in a and a["remove"].get("dataChange", True)]
            for p in removes:
                if p in added:  # added inside the range: neither side is read
                    del added[p]
                else:
                    removed.append(p)
            for p in adds:
                added[p] = (v, bool(removes))
        return Changes(
            appended=[self._file(p) for p, (_, rewrite) in added.items() if not rewrite],
            rewritten=[self._file(p) for p, (_, rewrite) in added.items() if rewrite],
            removed=[self._file(p) for p in removed],
            change_files=[self._file(p) for p in change_files], partitions=partitions)

    def _file(self, path: str) -> str:
        if "://" in path:
            return _local_path(path)
        return os.path.join(self.root, unquote(path))

    # -- rows ------------------------------------------------------------------------------------
    def read(self, spark: SparkSession, after: int, upto: int, struct: StructType,
             change_feed: bool = False) -> DataFrame:
        """The rows versions ``after+1 .. upto`` changed: the columns of ``struct`` and ``_weight``."""
        from functools import reduce

        from pyspark.sql import functions as F
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        ch = self.changes(after, upto, change_feed)
        columns = [F.col(f"`{f.name}`") for f in struct.fields]
        frames: list[DataFrame] = []

        def scan(paths: list[str], with_type: bool = False) -> DataFrame:
            """The files' rows as ``struct``'s columns (and ``_change_type``), partition values added."""
            groups: dict[tuple[tuple[str, str | None], ...], list[str]] = {}
            for p in paths:
                groups.setdefault(ch.partitions.get(p, ()), []).append(p)
            frames = []
            for values, group in groups.items():
                constant = dict(values)
                stored = [f for f in struct.fields if f.name not in constant]
                extra = [StructField("_change_type", StringType())] if with_type else []
                df = spark.read.schema(StructType(stored + extra)).parquet(*group)
                cols = [F.lit(constant[f.name]).cast(f.dataType).alias(f.name) if f.name in constant
                        else F.col(f"`{f.name}`") for f in struct.fields]
                frames.append(df.select(*cols, *([F.col("_change_type")] if with_type else [])))
            return reduce(lambda a, b: a.unionByName(b), frames)

        def files(paths: list[str], weight: int) -> DataFrame:
            return scan(paths).select(*columns, F.lit(weight).cast("bigint").alias(WEIGHT))

        if ch.appended:
            frames.append(files(ch.appended, 1))
        if ch.removed or ch.rewritten:
            sides = ([files(ch.removed, -1)] if ch.removed else []) + ([files(ch.rewritten, 1)] if ch.rewritten else [])
            both = reduce(lambda a, b: a.unionByName(b), sides)
            netted = both.groupBy(*columns).agg(F.sum(WEIGHT).alias(WEIGHT)).where(F.col(WEIGHT) != 0)
            frames.append(netted)
        if ch.change_files:
            kind = F.col("_change_type")
            weight = F.when(kind.isin("insert", "update_postimage"), F.lit(1)).when(
                kind.isin("delete", "update_preimage"), F.lit(-1)).otherwise(F.lit(0)).cast("bigint")
            cdf = scan(ch.change_files, with_type=True)
            frames.append(cdf.select(*columns, weight.alias(WEIGHT)).where(F.col(WEIGHT) != 0))
        if not frames:  # versions that changed no row (OPTIMIZE, a schema or property change)
            return spark.createDataFrame([], StructType([*struct.fields, StructField(WEIGHT, LongType())]))
        return reduce(lambda a, b: a.unionByName(b), frames)


def _logged(value: Any) -> str | None:
    """A partition value delta-rs read typed, as the log writes it (what Spark casts back)."""
    if value is None:
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat(sep=" ") if hasattr(value, "hour") else value.isoformat()
    return str(value)


def _local_path(location: str) -> str:
    """A local path for ``location``; other stores (s3://, abfss://) are not supported yet."""
    if "://" not in location:
        return os.path.abspath(location)
    parts = urlsplit(location)
    if parts.scheme != "file":
        raise DeltaSourceError(f"Delta tables on {parts.scheme}:// are not supported yet", code="DELTA_REMOTE_TABLE",
                               params={"path": location}, hint="give a local path (or file://)")
    return unquote(parts.path)
