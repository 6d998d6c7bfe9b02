"""The workspace's directories as sources: where they are, their format, their columns — no Spark.

A **source directory** is a directory under the workspace, at most two levels down, that holds
input files (``*.parquet``, ``*.csv``, ``*.json``/``*.jsonl``, or Parquet directories as Spark
writes them) or nothing yet; names starting with ``.`` or ``_`` are skipped, as ``streamfold
run`` skips them, and the search does not descend into a source. Its default table name is its
base name.

Columns come from the first file, as the runtime takes them: a Parquet footer, or the first
megabyte of a CSV (with its header) or JSON-lines file parsed by pyarrow. The studio passes the
CSV and JSON types it found to the run as an explicit schema, so the plan the editor shows is
the plan that runs. Results are cached per (directory, first file, its size and mtime).
"""

from __future__ import annotations

import io
import os
import threading
from dataclasses import dataclass

from ..errors import StreamfoldError
from ..ir.types import DataType
from ..runtime.sources import arrow_type, list_inputs, parquet_columns

FORMAT_OF_SUFFIX = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json"}
SAMPLE_BYTES = 1 << 20  # CSV/JSON types are inferred from this much of the first file
MAX_DEPTH = 2


@dataclass(frozen=True, slots=True)
class SourceDir:
    """One candidate source: ``path`` relative to the workspace, with what its first file says."""

    path: str
    name: str
    format: str | None  # None while the directory is empty
    files: int
    columns: tuple[tuple[str, str], ...] = ()  # (name, SQL type)
    error: dict[str, object] | None = None  # why the columns are unknown (a coded error)

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "name": self.name, "format": self.format, "files": self.files,
                "columns": [{"name": c, "type": t} for c, t in self.columns], "error": self.error}


def input_format(name: str, is_dir: bool) -> str | None:
    """The format an input entry has by its name (a directory counts only as ``x.parquet``)."""
    suffix = os.path.splitext(name)[1].lower()
    if is_dir:
        return "parquet" if suffix == ".parquet" else None
    return FORMAT_OF_SUFFIX.get(suffix)


class SourceScanner:
    """Finds the source directories of a workspace and reads their columns, with a cache."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._cache: dict[tuple[str, str, int, int], SourceDir] = {}
        self._lock = threading.Lock()

    def scan(self) -> list[SourceDir]:
        found: list[SourceDir] = []
        self._walk(self.root, 0, found)
        return sorted(found, key=lambda s: s.path)

    def _walk(self, directory: str, depth: int, found: list[SourceDir]) -> None:
        try:
            entries = sorted((e for e in os.scandir(directory) if not e.name.startswith((".", "_"))), key=lambda e: e.name)
        except OSError:
            return
        dirs = [e for e in entries if e.is_dir(follow_symlinks=False) and input_format(e.name, True) is None]
        inputs = [e for e in entries if input_format(e.name, e.is_dir(follow_symlinks=False)) is not None]
        if directory != self.root and (inputs or not entries):
            found.append(self.describe(os.path.relpath(directory, self.root)))
            return
        if depth < MAX_DEPTH:
            for d in dirs:
                self._walk(d.path, depth + 1, found)

    def describe(self, rel: str) -> SourceDir:
        """The source at ``rel`` (a directory inside the workspace, already checked)."""
        path = os.path.join(self.root, rel)
        name = os.path.basename(rel.rstrip("/"))
        entries = [n for n in list_inputs(path) if input_format(n, os.path.isdir(os.path.join(path, n)))]
        if not entries:
            return SourceDir(rel, name, None, 0)
        first = os.path.join(path, entries[0])
        fmt = input_format(entries[0], os.path.isdir(first))
        assert fmt is not None
        stat = os.stat(first)
        key = (rel, entries[0], stat.st_size, stat.st_mtime_ns)
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None:
            return SourceDir(rel, name, fmt, len(entries), hit.columns, hit.error)
        error: dict[str, object] | None = None
        try:
            columns = tuple((c, t.sql()) for c, t in read_columns(first, fmt))
        except StreamfoldError as e:
            columns, error = (), {"code": e.code, "message": e.message, "hint": e.hint, "params": e.params}
        result = SourceDir(rel, name, fmt, len(entries), columns, error)
        with self._lock:
            self._cache[key] = result
        return result


def read_columns(path: str, fmt: str) -> list[tuple[str, DataType]]:
    """The columns of one input file (or Parquet directory), read without Spark."""
    if fmt == "parquet":
        return parquet_columns(path)
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.json as pjson

    from ..errors import BadInputError

    try:
        with open(path, "rb") as fh:
            sample = fh.read(SAMPLE_BYTES)
            if len(sample) == SAMPLE_BYTES:  # cut at the last whole line
                sample = sample[: sample.rfind(b"\n") + 1]
        if fmt == "csv":
            table = pcsv.read_csv(io.BytesIO(sample))
        else:
            table = pjson.read_json(io.BytesIO(sample))
    except (OSError, pa.ArrowInvalid) as e:
        raise BadInputError(f"{path} cannot be read as {fmt.upper()}: {e}", code="UNREADABLE_FILE",
                            params={"file": path, "format": fmt}) from None
    # A column that is empty in the sample has no type yet: read it as text.
    return [(f.name, DataType("STRING") if pa.types.is_null(f.type) else arrow_type(f.type)) for f in table.schema]
