"""Matrices on disk: snapshots, changes, and the checkpoint's base and per-batch factors.

Everything is written into a hidden directory and renamed into place (:mod:`..runtime.files`),
so a reader sees a batch's directory whole or not at all; the batch exists once its commit does
(:mod:`..runtime.checkpoint`, the same protocol as ``streamfold run``).

- a value (a view, an input, an output): ``NAME.npy`` — or, for a distributed matrix on Spark,
  a directory ``NAME/`` of row blocks (``rows-<start>.npy``), see :func:`read_matrix`;
- factors: ``NAME.u.npy`` and ``NAME.v.npy`` (``NAME.u.npy`` alone for a dense change), with
  ``factors.json`` naming them in the order they were applied and which are selectors (stored
  as their row indices).
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..runtime import files
from .numpy_backend import Selector

FACTORS = "factors.json"


def write_dir(final: str, write: Any) -> int:
    """Create ``final`` whole: ``write(tmp_dir)`` fills a hidden directory, renamed into place.
    Returns the bytes written."""
    tmp = files.temp_dir_for(final)
    os.makedirs(tmp)
    write(tmp)
    size = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(tmp) for f in fs)
    files.publish_dir(tmp, final)
    return size


def save_values(directory: str, values: dict[str, Any], backend: Any) -> None:
    for name, value in values.items():
        backend.save(value, os.path.join(directory, name))


def load_values(directory: str, names: list[str], backend: Any) -> dict[str, Any]:
    return {name: backend.load(os.path.join(directory, name)) for name in names}


def _save_factor(f: Any, directory: str, stem: str) -> dict[str, Any] | None:
    if f is None:
        return None
    if isinstance(f, Selector):
        np.save(os.path.join(directory, stem + ".npy"), f.rows)
        return {"kind": "selector", "file": stem + ".npy", "n": f.n, "transposed": f.transposed}
    np.save(os.path.join(directory, stem + ".npy"), np.asarray(f))
    return {"kind": "array", "file": stem + ".npy"}


def _load_factor(desc: dict[str, Any] | None, directory: str) -> Any:
    if desc is None:
        return None
    data = np.load(os.path.join(directory, desc["file"]))
    if desc["kind"] == "selector":
        return Selector(data, int(desc["n"]), bool(desc["transposed"]))
    return data


def save_factors(directory: str, deltas: list[tuple[str, Any, Any]]) -> None:
    """The factors applied in a batch, in order: ``view ⊕= u·v`` (``v`` None: ``view ⊕= u``)."""
    entries = []
    for view, u, v in deltas:
        entries.append({"view": view, "u": _save_factor(u, directory, f"{view}.u"),
                        "v": _save_factor(v, directory, f"{view}.v")})
    files.write_json(os.path.join(directory, FACTORS), {"applied": entries})


def load_factors(directory: str) -> list[tuple[str, Any, Any]]:
    data = files.read_json(os.path.join(directory, FACTORS))
    return [(e["view"], _load_factor(e["u"], directory), _load_factor(e["v"], directory)) for e in data["applied"]]


def read_matrix(path: str) -> np.ndarray:
    """A matrix streamfold wrote (a snapshot's output, a base's view): ``NAME.npy``, or a
    directory of row blocks ``NAME/rows-<start>.npy`` stacked in order."""
    if os.path.isdir(path):
        parts = sorted((int(n[5:-4]), n) for n in os.listdir(path) if n.startswith("rows-") and n.endswith(".npy"))
        return np.vstack([np.load(os.path.join(path, n)) for _, n in parts])
    return np.load(path if path.endswith(".npy") else path + ".npy")
