"""The workload's data: generated once, then made to appear in each system's source directories.

Every system gets its own source directories (so each one's latency starts when *its* files
appear, not when another system's run began) but the same bytes: the files are hard links to
one generated copy. A file appears atomically: linked under a hidden name (``.``-prefixed names
are ignored by streamfold and by Spark's file source), then renamed.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import UsageError
from .workloads import Workload

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa


def write_pairs(path: str, columns: tuple[str, ...], rows: int, seed: int) -> None:
    """``rows`` random integer rows in [0, 10000] as one Parquet file (written hidden, then renamed)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    write_table(path, pa.table({c: rng.integers(0, 10_001, rows, dtype=np.int32) for c in columns}))


def write_ticks(path: str, columns: tuple[str, ...], start: int, rows: int, seed: int) -> None:
    """``rows`` events as one Parquet file: the first column counts up from ``start`` (a time
    after every earlier file's), the second a key in [0, 10), the third an amount in [-500, 500)."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    ts, key, amount = columns
    write_table(path, pa.table({ts: np.arange(start, start + rows, dtype=np.int32),
                                key: rng.integers(0, 10, rows, dtype=np.int32),
                                amount: rng.integers(-500, 500, rows, dtype=np.int32)}))


class Deleting:
    """Random pairs as :func:`write_pairs` makes them, with a ``_weight`` column, and increments
    that also delete: as many rows as they insert, half of them the first row of a random group
    (the largest second column of a first column's value: a top-k per group loses its top row),
    half random rows present before. It keeps the rows present, so the files of a data set are
    written in order by one instance."""

    def __init__(self, columns: tuple[str, ...], seed: int, groups: int = 10_001) -> None:
        self.columns = columns
        self.groups = groups  # the first column's values: 0 … groups − 1
        self.rng = np.random.default_rng(seed)
        self.live = np.empty((0, len(columns)), dtype=np.int32)

    def write(self, path: str, rows: int, deletes: bool) -> None:
        import pyarrow as pa

        new = self.rng.integers(0, 10_001, (rows, len(self.columns)), dtype=np.int32)
        new[:, 0] = self.rng.integers(0, self.groups, rows, dtype=np.int32)
        gone = np.empty((0, len(self.columns)), dtype=np.int32)
        if deletes and len(self.live):
            group, value = self.live[:, 0], self.live[:, 1]
            groups = np.unique(group)
            tops = []
            for g in self.rng.choice(groups, size=min(rows // 2, len(groups)), replace=False):
                members = np.flatnonzero(group == g)
                tops.append(members[np.argmax(value[members])])
            rest = np.setdiff1d(np.arange(len(self.live)), tops)
            picked = np.concatenate([np.asarray(tops, dtype=np.int64),
                                     self.rng.choice(rest, size=min(rows - len(tops), len(rest)), replace=False)])
            gone = self.live[picked]
            self.live = np.delete(self.live, picked, axis=0)
        self.live = np.concatenate([self.live, new])
        both = np.concatenate([new, gone])
        weights = np.concatenate([np.ones(len(new), np.int64), -np.ones(len(gone), np.int64)])
        write_table(path, pa.table({**{c: both[:, i] for i, c in enumerate(self.columns)}, "_weight": weights}))


def write_table(path: str, table: pa.Table) -> None:
    """Write an Arrow table as one Parquet file that appears atomically: hidden name first, then renamed."""
    import pyarrow.parquet as pq

    directory, name = os.path.split(path)
    tmp = os.path.join(directory, "." + name)
    pq.write_table(table, tmp)
    os.rename(tmp, path)


def write_edges(path: str, edges: np.ndarray) -> None:
    """An ``(m, 2)`` edge array as one Parquet file with columns ``src BIGINT, dst BIGINT``, atomically."""
    import pyarrow as pa

    edges = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    write_table(path, pa.table({"src": pa.array(edges[:, 0], pa.int64()), "dst": pa.array(edges[:, 1], pa.int64())}))


def write_points(path: str, points: np.ndarray) -> None:
    """An ``(n, 2)`` point (or centroid) array as one Parquet file with columns ``x DOUBLE, y DOUBLE``, atomically."""
    import pyarrow as pa

    points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
    write_table(path, pa.table({"x": pa.array(points[:, 0], pa.float64()), "y": pa.array(points[:, 1], pa.float64())}))


def write_stream(directory: str, batches: Sequence[np.ndarray],
                 write: Callable[[str, np.ndarray], None] = write_edges) -> list[str]:
    """Each batch as one file ``<batch:06d>-000.parquet`` in ``directory`` (created), in order; their paths.

    The names sort in batch order and match :func:`generate`'s, so a source directory
    filled all at once is read as batch 0, and one filled file by file as one batch per file.
    """
    os.makedirs(directory, exist_ok=True)
    paths = []
    for i, batch in enumerate(batches):
        path = os.path.join(directory, f"{i:06d}-000.parquet")
        write(path, batch)
        paths.append(path)
    return paths


@dataclass(frozen=True)
class DataSet:
    """The files of each increment (0 = the history), per source, and the rows they hold."""

    files: list[dict[str, list[str]]]  # [increment][source] -> paths
    rows: list[dict[str, int]]  # [increment][source] -> rows
    tables: dict[str, str] = field(default_factory=dict)  # static table -> its directory (read by all)

    def upto(self, increment: int) -> dict[str, list[str]]:
        """Every file per source of increments 0..``increment`` (what a system has seen by then)."""
        out: dict[str, list[str]] = {}
        for inc in self.files[: increment + 1]:
            for source, paths in inc.items():
                out.setdefault(source, []).extend(paths)
        return out


def cached(workload: Workload, out: str, progress: bool = True) -> DataSet:
    """The workload's random pairs or events (``generator`` "pairs", "pairs-deleting", "ticks"), generated once under
    ``out/data/<name and sizes>/`` and reused by later runs (a manifest written last marks a
    complete set: 100M rows take minutes to write)."""
    import json

    key = (f"{workload.name}-h{workload.history}x{workload.history_files}-i{workload.increment}x{workload.increments}"
           f"-s{workload.seed}")
    root = os.path.join(out, "data", key)
    manifest = os.path.join(root, "manifest.json")
    if os.path.exists(manifest):
        with open(manifest, encoding="utf-8") as fh:
            saved = json.load(fh)
        if all(os.path.exists(p) for inc in saved["files"] for paths in inc.values() for p in paths):
            return DataSet(saved["files"], saved["rows"])
    shutil.rmtree(root, ignore_errors=True)
    data = generate(workload, root, progress)
    with open(manifest + ".tmp", "w", encoding="utf-8") as fh:
        json.dump({"files": data.files, "rows": data.rows}, fh)
    os.rename(manifest + ".tmp", manifest)
    return data


def generate(workload: Workload, root: str, progress: bool = True) -> DataSet:
    """Write the workload's files under ``root`` (random pairs with a fixed seed, or the user's files)."""
    if workload.generator == "files":
        return _replay(workload)
    if workload.generator in ("rmat", "kmeans"):
        return _iterative(workload, root)
    import sys

    files: list[dict[str, list[str]]] = []
    rows: list[dict[str, int]] = []
    written = 0  # rows per source so far: the next "ticks" file's first time
    deleting = {s.name: Deleting(s.columns, workload.seed + 1_009 * k, workload.groups)
                for k, s in enumerate(workload.sources)}
    for inc in range(workload.increments + 1):
        per_file = _split(workload.history, workload.history_files) if inc == 0 else [workload.increment]
        files.append({})
        rows.append({})
        for k, source in enumerate(workload.sources):
            d = os.path.join(root, source.name)
            os.makedirs(d, exist_ok=True)
            paths = []
            for j, n in enumerate(per_file):
                p = os.path.join(d, f"{inc:06d}-{j:03d}.parquet")
                seed = workload.seed + 100_003 * inc + 1_009 * k + j
                if workload.generator == "ticks":
                    write_ticks(p, source.columns, written + sum(per_file[:j]), n, seed)
                elif workload.generator == "pairs-deleting":
                    deleting[source.name].write(p, n, deletes=inc > 0)
                else:
                    write_pairs(p, source.columns, n, seed)
                paths.append(p)
            files[inc][source.name] = paths
            rows[inc][source.name] = sum(per_file)
        written += sum(per_file)
        if progress and inc == 0 and workload.history >= 1_000_000:
            print(f"[{workload.name}] generated the history ({workload.history:,} rows per source)",
                  file=sys.stderr, flush=True)
    return DataSet(files, rows)


def _iterative(workload: Workload, root: str) -> DataSet:
    """The seed's PageRank or k-means stream (:mod:`.iterative`), one file per increment."""
    from . import iterative

    (source,) = workload.sources
    tables: dict[str, str] = {}
    write: Callable[[str, np.ndarray], None]
    if workload.generator == "rmat":
        try:
            batches = iterative.rmat_stream(max(workload.history // 10, 2), workload.history, workload.increments,
                                            min(100, workload.increment), workload.increment, workload.seed)
        except ValueError as e:  # too many edges for the nodes
            raise UsageError(f"pagerank cannot make this graph: {e}", code="BAD_SIZE",
                             params={"history": workload.history, "increment": workload.increment},
                             hint="the graph has history/10 nodes and R-MAT needs room: use --history 300 or more") from None
        write = write_edges
    else:
        batches = iterative.kmeans_stream(workload.history, workload.increments, workload.increment, workload.seed)
        write = write_points
        for table in workload.tables:  # the initial centroids
            tables[table.name] = os.path.join(root, table.name)
            os.makedirs(tables[table.name], exist_ok=True)
            write(os.path.join(tables[table.name], "000000-000.parquet"),
                  iterative.kmeans_initial_centroids(seed=workload.seed))
    paths = write_stream(os.path.join(root, source.name), batches, write)
    return DataSet([{source.name: [p]} for p in paths], [{source.name: len(b)} for b in batches], tables)


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts) if base + (1 if i < extra else 0) > 0]


def _replay(workload: Workload) -> DataSet:
    from ..runtime.sources import parquet_rows

    k = workload.increments
    files: list[dict[str, list[str]]] = [{} for _ in range(k + 1)]
    for source, paths in workload.files.items():
        files[0][source] = paths[: len(paths) - k]
        for i in range(1, k + 1):
            files[i][source] = [paths[len(paths) - k + i - 1]]
    rows = [{s: sum(parquet_rows(p) for p in ps) for s, ps in inc.items()} for inc in files]
    return DataSet(files, rows)


def appear(data: DataSet, increment: int, dirs: dict[str, str]) -> None:
    """Make increment ``increment``'s files appear in ``dirs`` (source -> directory), each atomically."""
    for source, paths in data.files[increment].items():
        for j, path in enumerate(paths):
            ext = ".parquet" if path.endswith(".parquet") or os.path.isdir(path) else os.path.splitext(path)[1]
            name = f"{increment:06d}-{j:03d}{ext}"
            hidden = os.path.join(dirs[source], "." + name)
            _link(path, hidden)
            os.rename(hidden, os.path.join(dirs[source], name))


def _link(src: str, dst: str) -> None:
    """A hard link (no copy, same bytes) where possible; a copy across file systems or for directories."""
    if os.path.isdir(src):
        shutil.copytree(src, dst)
        return
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)
