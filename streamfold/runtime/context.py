"""What every part of a run shares: the session, the inputs, the output and checkpoint, the
controller, and the batch's clock. The engine makes one :class:`RunContext`; feature modules
receive it (and the plan's :class:`~.bundle.Bundle`) instead of the engine.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .checkpoint import Checkpoint, OutputDir, batch_name
from .config import QueryConfig
from .hooks import BatchControl
from .profile import Profiler, Waterfall
from .sources import InputSpec, parquet_rows, read_files, table_paths
from .table_size import at_least_true_size

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..sql import Catalog

log = logging.getLogger("streamfold")


class Clock:
    """A batch's phases timed (``BatchResult.timings``) and, under ``profile``, its waterfall."""

    def __init__(self, profiler: Profiler | None) -> None:
        self.profiler = profiler
        self.timings: dict[str, float] = {}

    def begin(self) -> None:
        self.timings = {}
        if self.profiler is not None:
            self.profiler.begin()

    def end(self, batch: int) -> Callable[[], Waterfall] | None:
        return self.profiler.end(batch) if self.profiler is not None else None

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a part of the batch (reported in BatchResult.timings and by ``bench``)."""
        t = time.monotonic()
        try:
            with self.part(name):
                yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + time.monotonic() - t

    def part(self, name: str) -> AbstractContextManager[None]:
        """A span of the batch's waterfall only (a phase, or a part of one), when profiling."""
        return self.profiler.phase(name) if self.profiler is not None else nullcontext()

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Work after a batch's commit that is not the batch's: its phases are not counted."""
        kept, self.timings = self.timings, {}
        try:
            yield
        finally:
            self.timings = kept


@dataclass
class RunContext:
    """A run's shared parts. ``local``: the driver and the executors are one JVM (a local master)."""

    spark: SparkSession
    config: QueryConfig
    specs: dict[str, InputSpec]  # every input's spec, by lower-case name
    output: OutputDir
    checkpoint: Checkpoint
    control: BatchControl
    clock: Clock
    progress: Callable[[str], None]
    local: bool
    cores: int
    one_partition: bool = True  # small batches over small states may run in one partition (shape.py)
    heap: int = 0  # the JVM's heap in bytes when driver and executors are one JVM (shape.collects), else 0
    _tables: dict[str, DataFrame] = field(default_factory=dict)

    def point(self, batch: int, step: str) -> None:
        """A point inside a step (a loop's round): reported, and one where a pause may take effect."""
        self.progress(f"batch {batch_name(batch)}: {step}")
        self.control.step(batch, step)

    def table(self, catalog: Catalog, name: str) -> DataFrame:
        """A static table's rows (read once)."""
        if name not in self._tables:
            spec = self.specs[name.lower()]
            paths = table_paths(spec.path)
            df = self._tables[name] = read_files(self.spark, spec, catalog[name], paths)
            if spec.format == "parquet":  # the rows are in the footers; Spark estimates the bytes
                at_least_true_size(df, sum(parquet_rows(p) for p in paths))
        return self._tables[name]

    def close(self) -> None:
        self._tables.clear()


def size_on_disk(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)
