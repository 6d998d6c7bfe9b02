"""Update files for the linear-algebra runner tests, and the oracle over what the commits list.

Files are written under a hidden name and renamed (a source sees them whole). The oracle
re-reads the files each commit lists, applies them to the semiring's zero with the semiring's
⊕ — its own reading, not the runner's — and re-evaluates the program (:mod:`.linalg_oracle`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from streamfold.linalg.api import Program

from .linalg_oracle import reevaluate


def write_entries(directory: Path, name: str, i: list[int], j: list[int], v: list[float],
                  weight: list[int] | None = None) -> None:
    cols = {"i": pa.array(i, pa.int64()), "j": pa.array(j, pa.int64()), "v": pa.array(v, pa.float64())}
    if weight is not None:
        cols["_weight"] = pa.array(weight, pa.int64())
    _publish(directory, name, lambda p: pq.write_table(pa.table(cols), p))


def write_rows(directory: Path, name: str, i: list[int], rows: list[list[float]]) -> None:
    table = pa.table({"i": pa.array(i, pa.int64()), "row": pa.array(rows, pa.list_(pa.float64()))})
    _publish(directory, name, lambda p: pq.write_table(table, p))


def write_matrix(directory: Path, name: str, m: np.ndarray) -> None:
    _publish(directory, name, lambda p: np.save(p, m))


def _publish(directory: Path, name: str, write) -> None:  # noqa: ANN001
    directory.mkdir(parents=True, exist_ok=True)
    suffix = Path(name).suffix
    tmp = directory / f".{name}.tmp{suffix}"
    write(str(tmp))
    os.replace(tmp, directory / name)


def _apply(m: np.ndarray, path: Path, ring: str) -> None:
    plus = (lambda a, b: a | (b != 0)) if ring == "boolean" else np.minimum if ring == "tropical" else np.add
    if path.suffix == ".npy":
        m[...] = plus(m, np.load(path))
        return
    t = pq.read_table(path).to_pydict()
    w = t.get("_weight", [1] * len(t["i"]))
    if "j" in t:
        for i, j, v, k in zip(t["i"], t["j"], t["v"], w):
            m[i, j] = plus(m[i, j], v * k if ring == "arithmetic" else v)
    else:
        for i, row, k in zip(t["i"], t["row"], w):
            m[i] = plus(m[i], np.array(row) * k if ring == "arithmetic" else np.array(row))


def oracle_by_commit(prog: Program, output: Path, sources: dict[str, Path]) -> list[tuple[int, dict[str, np.ndarray]]]:
    """For each committed batch, the program re-evaluated over every file committed up to it."""
    ring = prog.semiring
    inputs = {d.name: ring.zeros(d.rows, d.cols) for d in prog.inputs}
    out = []
    commits = sorted((output / "commits").glob("*.json"))
    for c in commits:
        record = json.loads(c.read_text())
        for name, names in record["inputs"].items():
            for f in names:
                _apply(inputs[name], sources[name] / f, ring.name)
        out.append((record["batch"], reevaluate(prog, inputs)))
    return out


def snapshot(output: Path, batch: int) -> dict[str, np.ndarray]:
    from streamfold.linalg.store import read_matrix

    d = output / "snapshots" / f"{batch:06d}"
    return {p.name[:-4] if p.suffix == ".npy" else p.name: read_matrix(str(p)) for p in d.iterdir()
            if not p.name.startswith(".")}
