"""The workloads ``streamfold bench`` knows: a query, its sources and a schedule of increments.

The built-in ones are the seed's (000 §11): random integer pairs in [0, 10000] with a fixed
seed. A workload is data only, so new ones (k-means and PageRank, once iteration lands) are one
more entry in :data:`WORKLOADS` with their own generator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ..errors import UsageError

SEED = 2016


@dataclass(frozen=True)
class Source:
    """One input stream of a workload: its name in the query and its columns (all INT)."""

    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Workload:
    """A query and its schedule: ``history`` rows per source first, then ``increments`` × ``increment``.

    ``keys`` are the answer columns that identify a row (the group keys), used to rebuild the
    answer from a system that commits upserts (Spark's update mode); ``None`` means the answer
    is the union of what is emitted (a query without aggregation).
    """

    name: str
    sql: str
    sources: tuple[Source, ...]
    history: int
    increment: int
    increments: int
    keys: tuple[str, ...] | None
    history_files: int = 1  # the history is split into this many files (10M rows: ten files)
    generator: str = "pairs"  # how data is made; "files" replays a user's files (custom)
    seed: int = SEED
    description: str = ""
    files: dict[str, list[str]] = field(default_factory=dict)  # custom: the user's files per source

    def sized(self, history: int | None = None, increment: int | None = None,
              increments: int | None = None) -> Workload:
        """The same workload with other sizes (``None`` keeps a size)."""
        for label, value in (("--history", history), ("--increment", increment), ("--increments", increments)):
            if value is not None and value < (0 if label == "--increments" else 1):
                raise UsageError(f"{label} must be positive, not {value}", code="BAD_SIZE",
                                 params={"option": label, "value": value},
                                 hint="sizes are row counts (--history, --increment) and a count of increments")
        return replace(self, history=history or self.history, increment=increment or self.increment,
                       increments=self.increments if increments is None else increments)


GROUPBY_SQL = "SELECT x, avg(y) AS avg_y FROM S GROUP BY x"
JOIN_GROUPBY_SQL = "SELECT x.A, avg(y.D) AS avg_d FROM S1 x JOIN S2 y ON x.B = y.C GROUP BY x.A"

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("groupby", GROUPBY_SQL, (Source("S", ("x", "y")),), 1_000_000, 40_000, 9, ("x",),
                 description="seed 000 §11 groupBy: 1M-row history, nine 40K increments"),
        Workload("join-groupby", JOIN_GROUPBY_SQL, (Source("S1", ("A", "B")), Source("S2", ("C", "D"))),
                 100_000, 40_000, 9, ("A",),
                 description="seed 000 §11 join-groupBy: 100K + 100K history, nine 40K increments to each input"),
        Workload("groupby-10m", GROUPBY_SQL, (Source("S", ("x", "y")),), 10_000_000, 40_000, 9, ("x",),
                 history_files=10,
                 description="groupBy with a 10M-row history: how an increment's cost grows with the history"),
    )
}

# --quick: the same shapes at sizes that run in seconds (used by tests/test_bench.py).
QUICK: dict[str, Callable[[Workload], Workload]] = {
    "groupby": lambda w: w.sized(20_000, 2_000, 3),
    "join-groupby": lambda w: w.sized(5_000, 1_000, 3),
    "groupby-10m": lambda w: replace(w.sized(100_000, 2_000, 3), history_files=2),
}


def get_workload(name: str) -> Workload:
    """The built-in workload ``name``, or a usage error listing the known ones."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise UsageError(f"unknown workload {name!r}", code="UNKNOWN_WORKLOAD", params={"workload": name},
                         hint=f"use one of {', '.join(WORKLOADS)}, or custom with --query FILE --source NAME=DIR") from None


def quick(workload: Workload) -> Workload:
    """The workload at --quick sizes (custom workloads keep their files)."""
    return QUICK[workload.name](workload) if workload.name in QUICK else workload
