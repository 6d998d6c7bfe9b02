"""Update files: what a batch does to an input matrix, read and factored.

A source is a directory; each file in it is an update of its matrix, in one of three forms:

- ``*.parquet`` / ``*.csv`` with columns ``i, j, v``: entry updates — entry (i, j) ⊕= v;
- ``*.parquet`` with columns ``i, row`` (``row`` a list of ``cols`` numbers): row updates —
  row i ⊕= row;
- ``*.npy``: a whole matrix of the input's shape, ⊕-added (an initial load, typically).

Indices count from 0. ⊕ is the program's semiring's: arithmetic adds (a negative v is a
deletion or a decrease), Boolean ORs (v must be 1: setting an entry back to 0 is a deletion
the Boolean semiring cannot express), tropical takes the minimum (a distance can only fall).
An optional integer ``_weight`` column multiplies an arithmetic change; a negative weight under
Boolean or tropical is refused (``DELETION_UNSUPPORTED``), as is anything malformed, naming the
file; nothing of a refused batch is applied.

A batch's change to an input is the ⊕-sum of its files, factored as ``ΔX = U·V`` with rank at
most the rows touched: ``U`` selects the k rows touched and ``V`` holds their changes — or, if
fewer columns than rows are touched, ``U`` holds the columns and ``V`` selects them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import BadInputError
from .maintain import InputChange
from .numpy_backend import Selector
from .semiring import Semiring

EXTENSIONS = (".parquet", ".csv", ".npy")


@dataclass
class Accumulated:
    """A batch's change to one input, row by row (rows in first-touched order)."""

    rows: int
    cols: int
    ring: Semiring
    index: dict[int, int]
    data: np.ndarray  # len(index) × cols, the semiring's zero where untouched

    @classmethod
    def empty(cls, rows: int, cols: int, ring: Semiring) -> Accumulated:
        return cls(rows, cols, ring, {}, ring.zeros(0, cols))

    def _slots(self, rows: np.ndarray) -> np.ndarray:
        new = [int(r) for r in dict.fromkeys(rows.tolist()) if int(r) not in self.index]
        if new:
            start = len(self.index)
            for k, r in enumerate(new):
                self.index[r] = start + k
            self.data = np.vstack([self.data, self.ring.zeros(len(new), self.cols)])
        return np.fromiter((self.index[int(r)] for r in rows), dtype=np.int64, count=len(rows))

    def add_entries(self, i: np.ndarray, j: np.ndarray, v: np.ndarray) -> None:
        slots = self._slots(i)
        ring = self.ring
        if ring.name == "arithmetic":
            np.add.at(self.data, (slots, j), v)
        elif ring.name == "tropical":
            np.minimum.at(self.data, (slots, j), v)
        else:
            np.logical_or.at(self.data, (slots, j), v.astype(bool))

    def add_rows(self, i: np.ndarray, rows: np.ndarray) -> None:
        slots = self._slots(i)
        ring = self.ring
        for s, r in zip(slots, rows):  # duplicates of a row in one file combine in order
            self.data[s] = ring.add(self.data[s], r)

    def add_dense(self, m: np.ndarray) -> None:
        touched = np.flatnonzero((m != self.ring.zero).any(axis=1))
        if len(touched):
            self.add_rows(touched, m[touched])

    def symmetric(self) -> bool:
        """Whether the change is symmetric: what a symmetric input's updates must be."""
        if not self.index:
            return True
        rows = np.fromiter(self.index, dtype=np.int64, count=len(self.index))
        slots = np.fromiter(self.index.values(), dtype=np.int64, count=len(self.index))
        order = np.argsort(rows)
        rows, data = rows[order], self.data[slots[order]]
        outside = np.ones(self.cols, dtype=bool)
        outside[rows] = False
        if (data[:, outside] != self.ring.zero).any():
            return False
        block = data[:, rows]
        return bool(np.array_equal(block, block.T))

    def change(self, name: str) -> InputChange | None:
        """The factored change (None if nothing changed)."""
        if not self.index:
            return None
        order = np.argsort(np.fromiter(self.index, dtype=np.int64, count=len(self.index)))
        rows = np.fromiter(self.index, dtype=np.int64, count=len(self.index))[order]
        data = self.data[order]
        touched_cols = np.flatnonzero((data != self.ring.zero).any(axis=0))
        if len(touched_cols) == 0:
            return None
        if len(touched_cols) < len(rows):  # fewer columns than rows: U holds the columns
            u = self.ring.zeros(self.rows, len(touched_cols))
            u[rows] = data[:, touched_cols]
            return InputChange(name, u, Selector(touched_cols, self.cols, transposed=True), len(touched_cols),
                               "selector_t")
        return InputChange(name, Selector(rows, self.rows), np.ascontiguousarray(data), len(rows), "selector")


def read_update(path: str, acc: Accumulated, source: str) -> None:
    """Add one file's updates to ``acc`` (raises BadInputError naming the file)."""
    ext = os.path.splitext(path)[1].lower()
    if ext == ".npy":
        _read_npy(path, acc, source)
        return
    if ext not in (".parquet", ".csv"):
        raise BadInputError(f"{path}: an update file must be .parquet, .csv or .npy", code="UNKNOWN_FORMAT",
                            params={"file": path, "source": source},
                            hint="write entry updates (i, j, v) as Parquet or CSV, a whole matrix as .npy")
    try:
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        table = pq.read_table(path) if ext == ".parquet" else pcsv.read_csv(path)
    except Exception as e:  # noqa: BLE001 - pyarrow raises several kinds for a damaged file
        raise BadInputError(f"{path} cannot be read: {e}", code="UNREADABLE_FILE",
                            params={"file": path, "source": source}) from None
    cols = set(table.column_names)
    weight = _weights(table, path, acc.ring, source) if "_weight" in cols else None
    if {"i", "j", "v"} <= cols:
        i = _indices(table, "i", acc.rows, path, source)
        j = _indices(table, "j", acc.cols, path, source)
        v = _numbers(table, "v", path, source)
        _check_values(v, acc.ring, path, source, entries=True)
        if weight is not None:
            v = v * weight
        acc.add_entries(i, j, v)
    elif {"i", "row"} <= cols:
        i = _indices(table, "i", acc.rows, path, source)
        try:
            rows = np.array(table.column("row").to_pylist(), dtype=np.float64)
        except (TypeError, ValueError):
            rows = np.empty((0,))
        if rows.ndim != 2 or rows.shape != (len(i), acc.cols):
            raise BadInputError(f"{path}: every row must have {acc.cols} numbers", code="BAD_ROW_LENGTH",
                                params={"file": path, "source": source, "cols": acc.cols},
                                hint=f"a row update of {source} is a list of {acc.cols} numbers")
        _check_values(rows, acc.ring, path, source, entries=False)
        if weight is not None:
            rows = rows * weight[:, None]
        acc.add_rows(i, rows.astype(acc.ring.dtype))
    else:
        raise BadInputError(f"{path} has columns {sorted(cols)}; an update has i, j, v (entries) or i, row (rows)",
                            code="BAD_COLUMNS", params={"file": path, "source": source, "columns": sorted(cols)},
                            hint="name the columns i, j, v or i, row (an optional _weight multiplies the change)")


def _read_npy(path: str, acc: Accumulated, source: str) -> None:
    try:
        m = np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001
        raise BadInputError(f"{path} is not a readable .npy file: {e}", code="UNREADABLE_FILE",
                            params={"file": path, "source": source}) from None
    if m.shape != (acc.rows, acc.cols):
        raise BadInputError(f"{path} holds a {'×'.join(map(str, m.shape))} array; {source} is {acc.rows}×{acc.cols}",
                            code="BAD_SHAPE", params={"file": path, "source": source, "shape": list(m.shape),
                                                      "expected": [acc.rows, acc.cols]},
                            hint="a .npy update is the whole matrix's change, of the input's shape")
    m = m.astype(acc.ring.dtype)
    _check_values(m, acc.ring, path, source, entries=False)
    acc.add_dense(m)


def _indices(table: object, col: str, bound: int, path: str, source: str) -> np.ndarray:
    try:
        a = np.asarray(table.column(col).to_numpy(zero_copy_only=False))  # type: ignore[attr-defined]
        if a.dtype.kind == "f" and np.all(np.mod(a, 1) == 0):
            a = a.astype(np.int64)
        if a.dtype.kind not in "iu":
            raise ValueError
    except (ValueError, TypeError):
        raise BadInputError(f"{path}: column {col} must hold integer indices", code="BAD_INDEX",
                            params={"file": path, "source": source, "column": col}) from None
    bad = (a < 0) | (a >= bound)
    if bad.any():
        raise BadInputError(f"{path}: index {col} = {int(a[bad][0])} is outside 0..{bound - 1} of {source}",
                            code="INDEX_OUT_OF_RANGE",
                            params={"file": path, "source": source, "column": col, "value": int(a[bad][0]),
                                    "bound": bound}, hint="indices count from 0")
    return a.astype(np.int64)


def _numbers(table: object, col: str, path: str, source: str) -> np.ndarray:
    try:
        return np.asarray(table.column(col).to_numpy(zero_copy_only=False), dtype=np.float64)  # type: ignore[attr-defined]
    except (ValueError, TypeError):
        raise BadInputError(f"{path}: column {col} must hold numbers", code="BAD_VALUE",
                            params={"file": path, "source": source, "column": col}) from None


def _weights(table: object, path: str, ring: Semiring, source: str) -> np.ndarray:
    w = _numbers(table, "_weight", path, source)
    if not ring.negation and (w < 0).any():
        raise BadInputError(f"{path}: a negative _weight is a deletion, which the {ring.name} semiring cannot undo",
                            code="DELETION_UNSUPPORTED", params={"file": path, "source": source,
                                                                  "semiring": ring.name},
                            hint=f"{ring.name} ⊕ has no inverse (seed 001 §5.3.2): only additions can be maintained")
    return w


def _check_values(v: np.ndarray, ring: Semiring, path: str, source: str, entries: bool) -> None:
    """Refuse values the semiring cannot add. In a row or a whole matrix the semiring's zero
    means "no change"; an entry update of 0 under Boolean would mean removing the entry."""
    if ring.name == "boolean" and entries and np.any(v == 0):
        raise BadInputError(f"{path}: a Boolean update sets entries to 1; a 0 would remove one, a deletion the "
                            f"Boolean semiring cannot undo", code="DELETION_UNSUPPORTED",
                            params={"file": path, "source": source, "semiring": ring.name},
                            hint="write only the entries that become 1 (edges added)")
    if ring.name == "arithmetic" and not np.all(np.isfinite(v)):
        raise BadInputError(f"{path}: updates must be finite numbers", code="BAD_VALUE",
                            params={"file": path, "source": source})


def batch_changes(files: dict[str, list[str]], shapes: dict[str, tuple[int, int]], ring: Semiring,
                  symmetric: frozenset[str] = frozenset()) -> tuple[list[InputChange], dict[str, Accumulated]]:
    """Read a batch: per source, its files (full paths, in order), factored. The change to an
    input declared symmetric must be symmetric (the compiler relied on Xᵀ = X)."""
    changes, accs = [], {}
    for name, paths in files.items():
        rows, cols = shapes[name]
        acc = Accumulated.empty(rows, cols, ring)
        for p in paths:
            read_update(p, acc, name)
        if name in symmetric and not acc.symmetric():
            raise BadInputError(f"the batch's change to {name} is not symmetric, and {name} is declared symmetric",
                                code="NOT_SYMMETRIC", params={"source": name, "files": paths},
                                hint=f"update (i, j) and (j, i) of {name} alike, in the same batch")
        accs[name] = acc
        c = acc.change(name)
        if c is not None:
            changes.append(c)
    return changes, accs
