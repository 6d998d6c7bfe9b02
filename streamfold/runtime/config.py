"""What a run is told (:class:`QueryConfig`) and what each batch reports (:class:`BatchResult`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from ..plan.matrix import DEFAULT_POLICY, MatrixPolicy
from ..settings import Settings
from .checkpoint import batch_name
from .profile import Waterfall
from .sources import InputSpec


@dataclass
class QueryConfig:
    """Everything ``streamfold run`` (or :func:`streamfold.start`) is told."""

    sql: str
    sources: list[InputSpec]
    output: str
    tables: list[InputSpec] = field(default_factory=list)
    checkpoint: str | None = None
    trigger: float = 1.0
    until_idle: float | None = None
    partitions: int | None = None
    on_bad_file: str = "stop"  # or "quarantine"
    compact_every: int = 20
    keep_snapshots: int | None = None  # prune older snapshots, keeping this many
    profile: bool = False  # record each batch's waterfall (BatchResult.waterfall)
    # Algorithm 2's ε for join matrices: re-map once an input grew by this fraction; None keeps
    # the square mapping (the thesis's STATICMID)
    matrix_epsilon: float | None = 1.0
    # the planner's join matrices (plan.matrix.MatrixPolicy): J cells, how equi-joins of two
    # streams are partitioned (hash, matrix, hybrid, auto: hashed until a key turns out heavy),
    # the mapping matrices start with (else square)
    matrix_cells: int = 4
    matrix_equi: str = DEFAULT_POLICY.equi
    matrix_start: tuple[int, int] | None = None
    # per batch: maintain the states, recompute the answer from every file, or choose by cost
    # (strategy.py); a plan with loops or join matrices is always incremental
    strategy: str = "incremental"
    # the registry's settings (streamfold/settings.py): given, or the environment's when the config is made
    settings: Settings = field(default_factory=Settings.from_environ)

    @property
    def matrix_policy(self) -> MatrixPolicy:
        return MatrixPolicy(self.matrix_cells, self.matrix_equi,
                            tuple(self.matrix_start) if self.matrix_start is not None else None)  # type: ignore[arg-type]

    @property
    def checkpoint_dir(self) -> str:
        return self.checkpoint or os.path.join(self.output, "_checkpoint")

    @property
    def inputs(self) -> list[InputSpec]:
        return self.sources + self.tables


@dataclass
class BatchResult:
    batch: int
    inputs: dict[str, list[str]]
    rows: dict[str, int]
    duration_s: float
    snapshot_rows: int
    change_rows: int
    state_rows: dict[str, int]
    timings: dict[str, float] = field(default_factory=dict)
    profile: Callable[[], Waterfall] | None = field(default=None, repr=False, compare=False)
    # time.monotonic() when commits/<batch>.json was published: the answer is visible from then on;
    # what the batch does after it (the next batch's state views, compaction) is not in its latency
    committed_at: float | None = field(default=None, compare=False)
    commit_s: float | None = None  # seconds from the batch's start to its commit (the latency a reader sees)

    def waterfall(self) -> Waterfall | None:
        """Where the batch's time went (with ``profile``; :mod:`.profile`), built on first call."""
        return self.profile() if self.profile is not None else None

    def line(self) -> str:
        ins = "  ".join(f"{n} +{r}" for n, r in self.rows.items())
        states = " · ".join(f"{n} {r}" for n, r in self.state_rows.items())
        return (f"batch {batch_name(self.batch)}  {ins}  │ states {states} │ snapshot {self.snapshot_rows} rows, "
                f"{self.change_rows} changes │ {self.duration_s:.2f} s")
