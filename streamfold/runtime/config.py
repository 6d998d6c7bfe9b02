"""What a run is told (:class:`QueryConfig`) and what each batch reports (:class:`BatchResult`).

A :class:`QueryConfig` is checked when it is made, once: the command line and
:func:`streamfold.start` make one, and every value the runtime reads from it — the run's options
and the typed :class:`~streamfold.settings.Settings` — is one it can work with. A value it cannot
is a coded ``BAD_OPTION`` (``BAD_SETTING`` for a setting) naming the option and what it takes.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..connectors.sinks import check_sink
from ..errors import UsageError
from ..plan.matrix import DEFAULT_POLICY, EQUI_PARTITIONINGS, MatrixPolicy
from ..settings import Settings
from .checkpoint import batch_name
from .profile import Waterfall
from .sources import FORMATS, TABLE_FORMATS, InputSpec
from .staged import staged_specs
from .strategy import MODES

ON_BAD_FILE = ("stop", "quarantine")
# The command line's flag of an option, where it is not the option's name in dashes.
FLAGS = {"matrix_equi": "--equi-joins", "matrix_epsilon": None, "matrix_cells": None, "matrix_start": None,
         "settings": None}


@dataclass(frozen=True)
class QueryConfig:
    """Everything ``streamfold run`` (or :func:`streamfold.start`) is told, checked."""

    sql: str
    sources: list[InputSpec]
    output: str
    tables: list[InputSpec] = field(default_factory=list)
    checkpoint: str | None = None
    trigger: float = 1.0
    until_idle: float | None = None
    # state partitions: given, else the settings' (STREAMFOLD_PARTITIONS), else None: one per core
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
    # where each committed batch is delivered (features/sinks.py): endpoints (postgres://…, PATH:delta)
    # and Python hooks, each checked here (no connection yet)
    sinks: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        _check_number("trigger", self.trigger, 0.0, inclusive=False)
        _check_number("until_idle", self.until_idle, 0.0, optional=True)
        _check_number("partitions", self.partitions, 1, whole=True, optional=True)
        _check_number("compact_every", self.compact_every, 1, whole=True)
        _check_number("keep_snapshots", self.keep_snapshots, 1, whole=True, optional=True)
        _check_number("matrix_epsilon", self.matrix_epsilon, 0.0, optional=True)
        _check_choice("on_bad_file", self.on_bad_file, ON_BAD_FILE)
        _check_choice("strategy", self.strategy, MODES)
        _check_choice("matrix_equi", self.matrix_equi, EQUI_PARTITIONINGS)
        cells = self.matrix_cells
        if isinstance(cells, bool) or not isinstance(cells, int) or cells < 1 or cells & (cells - 1):
            raise _bad_option("matrix_cells", cells, "a power of two: 1, 2, 4, 8, …")
        start = self.matrix_start
        if start is not None and (len(start) != 2 or not all(isinstance(x, int) and x >= 1 for x in start)
                                  or start[0] * start[1] != cells):
            raise _bad_option("matrix_start", start, f"(n, m) with n·m = matrix_cells ({cells}), or None: square")
        if not isinstance(self.settings, Settings):
            raise _bad_option("settings", self.settings, "a streamfold.Settings, or None: the environment's")
        # a Delta source is read from its staging directory in the checkpoint (staged.py)
        object.__setattr__(self, "sources", staged_specs(self.sources, self.checkpoint_dir))
        object.__setattr__(self, "sinks", tuple(self.sinks))
        for spec in self.sinks:
            check_sink(spec)
        if self.partitions is None and self.settings.partitions is not None:
            object.__setattr__(self, "partitions", self.settings.partitions)

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


def input_specs(sources: Mapping[str, str], tables: Mapping[str, str] | None = None,
                formats: Mapping[str, str] | None = None, schemas: Mapping[str, str] | None = None
                ) -> tuple[list[InputSpec], list[InputSpec]]:
    """The streams and the static tables of a run, from their paths by name, with a format
    (parquet by default) and a schema ("col TYPE, …") each may be given."""
    formats, schemas, tables = dict(formats or {}), schemas or {}, tables or {}

    def spec(name: str, path: str, static: bool) -> InputSpec:
        if name not in formats and path.lower().endswith(":delta"):  # the command line's PATH:delta
            path, formats[name] = path[:-len(":delta")], "delta"
        fmt = formats.get(name, "parquet").lower()
        if fmt not in FORMATS + TABLE_FORMATS:
            raise UsageError(f"unknown format {fmt!r} for {name}", code="BAD_FORMAT", params={"format": fmt},
                             hint=f"use one of {', '.join(FORMATS + TABLE_FORMATS)}")
        return InputSpec(name, path, fmt, static, schemas.get(name))

    unknown = set(schemas) - set(sources) - set(tables)
    if unknown:
        raise UsageError(f"--schema given for unknown input {sorted(unknown)[0]}", code="UNKNOWN_INPUT",
                         params={"input": sorted(unknown)[0]})
    return [spec(n, p, False) for n, p in sources.items()], [spec(n, p, True) for n, p in tables.items()]


def flag(option: str) -> str | None:
    """The command line's flag for a run option (None: the API's only)."""
    return FLAGS.get(option, "--" + option.replace("_", "-"))


def _bad_option(option: str, value: Any, takes: str) -> UsageError:
    spelled = option if flag(option) is None else f"{option} ({flag(option)})"
    return UsageError(f"{option} cannot be {value!r}", code="BAD_OPTION", params={"option": option, "value": value},
                      hint=f"{spelled} takes {takes}")


def _check_number(option: str, value: Any, least: float, inclusive: bool = True, whole: bool = False,
                  optional: bool = False) -> None:
    if value is None and optional:
        return
    if (isinstance(value, bool) or not isinstance(value, int if whole else (int, float))
            or value < least or (value == least and not inclusive)):
        takes = f"{'a whole number' if whole else 'a number'} {'of at least' if inclusive else 'above'} {least}"
        raise _bad_option(option, value, takes + (", or None" if optional else ""))


def _check_choice(option: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise _bad_option(option, value, "one of " + ", ".join(choices))


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
    sink_lags: dict[str, int] = field(default_factory=dict)  # per sink: committed batches it does not hold yet
    state_bytes: dict[str, int] = field(default_factory=dict)  # each state's bytes in Spark's block stores (storage.py)
    clock_only: bool = False  # run with no file: the clock passed live rows of a time bound (batch_time.py)

    def waterfall(self) -> Waterfall | None:
        """Where the batch's time went (with ``profile``; :mod:`.profile`), built on first call."""
        return self.profile() if self.profile is not None else None

    def states_line(self) -> str:
        """Every state's rows and bytes, the largest first (:func:`.storage.states_line`)."""
        from .storage import states_line

        return states_line(batch_name(self.batch), self.state_rows, self.state_bytes)

    def line(self) -> str:
        ins = "clock: rows expired" if self.clock_only else "  ".join(f"{n} +{r}" for n, r in self.rows.items())
        states = " · ".join(f"{n} {r}" for n, r in self.state_rows.items())
        sinks = "".join(f" │ {n} {'delivered' if lag == 0 else f'{lag} behind'}" for n, lag in self.sink_lags.items())
        return (f"batch {batch_name(self.batch)}  {ins}  │ states {states} │ snapshot {self.snapshot_rows} rows, "
                f"{self.change_rows} changes{sinks} │ {self.duration_s:.2f} s")
