"""What every system is given and must do."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..workloads import Workload


@dataclass
class Context:
    """A system's inputs: the Spark session, the workload, its own source directories and work dir."""

    spark: Any
    workload: Workload
    dirs: dict[str, str]  # source name -> this system's source directory
    work: str  # this system's own directory for outputs and checkpoints
    schemas: dict[str, str]  # source name -> "col TYPE, ..." (Spark DDL), from the data's first file
    options: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)  # static table -> its directory of Parquet files


class Rejected(Exception):
    """Spark refused to run the query this way; ``messages`` are its exact errors, per attempt."""

    def __init__(self, messages: dict[str, str]) -> None:
        super().__init__("; ".join(f"{k}: {v.splitlines()[0]}" for k, v in messages.items()))
        self.messages = messages


class System(ABC):
    """One way of keeping the query's answer up to date."""

    name: ClassVar[str]
    #: what "committed" means for this system (goes into the report)
    commit_means: ClassVar[str]
    #: whether its Spark jobs run outside a job group (so the runner can count them per increment)
    counts_jobs: ClassVar[bool] = True
    #: whether its answer is exact (checked against DuckDB); an approximate one is measured, not checked
    exact: ClassVar[bool] = True
    #: whether it runs in a process (and JVM) of its own, which the bench's warm-up cannot warm
    own_process: ClassVar[bool] = False
    #: its first increments, left out of its median (a process of its own warms up on them)
    warm_increments: ClassVar[int] = 0

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    @abstractmethod
    def start(self) -> None:
        """Get ready; the history's files are already in the source directories."""

    @abstractmethod
    def process(self, increment: int) -> dict[str, Any]:
        """Return once the answer over all files so far is committed; details (phase timings, rows)."""

    @abstractmethod
    def answer(self) -> list[tuple]:
        """The last committed answer, as rows."""

    def after(self) -> dict[str, Any]:
        """Details of the increment just timed that cost time to gather (read after the clock stops)."""
        return {}

    def describe(self) -> dict[str, Any]:
        """How the system ran (mode, settings), for the report."""
        return {}

    def close(self) -> None:  # noqa: B027 - a system holding nothing keeps this no-op
        """Release what the system holds (queries, cached state)."""
