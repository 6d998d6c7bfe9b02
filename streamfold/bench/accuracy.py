"""How far an iteration's answer is from the exact one: ``streamfold bench --errors``.

After every increment the answer of each system is compared with the NumPy reference
(:mod:`.reference`) over all the data so far, with the workload's number of steps:

* PageRank (answer ``node, rank``): the L1 distance of the rank vectors — the sum over nodes of
  the absolute difference, a node missing from one side counted with its whole rank;
* k-means (answer ``x, y``): the largest distance from a centroid of the answer to the nearest
  centroid of the reference (the answer has no lineage columns to pair them by).

The exact modes stay within rounding (about 1e-12); diffusion mode (seed 000 Algorithm 1) is
approximate by design, and this is the figure that says by how much.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import UsageError
from ..verify import parquet_files
from . import reference
from .workloads import Workload

MEASURED = ("pagerank", "kmeans")  # the workloads with a reference


def check_measurable(workload: Workload) -> None:
    """Refuse --errors for a workload without a NumPy reference."""
    if workload.example not in MEASURED:
        raise UsageError(f"--errors needs a reference answer; {workload.name} has none", code="BAD_OPTION",
                         params={"option": "--errors"}, hint="use --errors with pagerank or kmeans")


def answer_error(workload: Workload, answer: Sequence[Sequence[Any]], files: dict[str, list[str]],
                 tables: dict[str, str]) -> float:
    """The error of ``answer`` (see the module docstring) over the files of each source so far."""
    steps = workload.steps or 0
    if workload.example == "pagerank":
        want = reference.pagerank(_array(files["edges"], ("src", "dst")), steps=steps)
        mine = {int(node): float(rank) for node, rank in answer}
        return (sum(abs(mine.get(n, 0.0) - r) for n, r in want.items())
                + sum(abs(r) for n, r in mine.items() if n not in want))
    centroids = reference.kmeans(_array(files["points"], ("x", "y")), _array([tables["centroids0"]], ("x", "y")),
                                 steps)[:, 2:]
    if not len(answer) or not len(centroids):
        return 0.0 if len(answer) == len(centroids) else math.inf
    return float(max(np.hypot(*(centroids - np.array([float(x), float(y)])).T).min() for x, y in answer))


def _array(paths: list[str], columns: tuple[str, ...]) -> np.ndarray:
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = [pq.read_table(p, columns=list(columns)) for p in parquet_files(paths)]
    if not tables:
        return np.empty((0, len(columns)))
    table = pa.concat_tables(tables)
    return np.stack([table.column(c).to_numpy() for c in columns], axis=1)
