"""What the programs of one batch read, and running a batch's independent jobs side by side.

A program's leaves are the batch's rows of a stream (``DeltaScan``), a static table (``Scan``),
a version of a state (``StateScan``: before the batch, its delta, after the merge, the merge
itself), a static relation as a delta (``Once``) and, inside a loop, the loop's own leaves.
:class:`BatchReads` holds the versions stepped so far and resolves each leaf to a DataFrame or
to SQL text over temp views; the engine and the loop interpreters share it.
"""

from __future__ import annotations

import contextvars

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..ir.expr import Call, Column, Expr
from ..ir.rel import DeltaScan, Filter, Once, Rel, Scan, StateScan
from ..sql import Catalog
from . import lowering
from .views import Resolve, Views, to_sql

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True, slots=True)
class TailScan(StateScan):
    """A version of a state kept as a base and a tail read only for its rows with a NULL in a key
    column, while its base holds no such key: the tail's rows of that version, not the base's."""


@dataclass
class BatchReads:
    """What a batch's programs read: its rows, the static tables, and the state versions so far.

    ``current`` are the states before the batch; ``deltas``, ``new`` and ``merged`` fill in as
    steps merge. ``first`` marks batch 0 (when a ``Once`` relation's rows arrive). ``loops`` are
    the leaves a diffusion loop's body reads as streams (the round's change of the iteration).
    """

    catalog: Catalog
    table: Callable[[str], DataFrame]  # a static table's rows, by source name
    current: dict[str, DataFrame]
    frames: dict[str, DataFrame]  # each stream's rows in this batch, by source name
    rows: dict[str, int]  # the rows each stream gave this batch
    first: bool
    single: bool = False  # a small batch over small states: read as one partition (see state.py)
    deltas: dict[str, DataFrame | str] = field(default_factory=dict)
    new: dict[str, DataFrame | str] = field(default_factory=dict)
    merged: dict[str, DataFrame] = field(default_factory=dict)
    # a state kept as a base and a tail: its merge as programs read it (steps.Steps.settle)
    merged_views: dict[str, DataFrame] = field(default_factory=dict)
    loops: dict[str, DataFrame] = field(default_factory=dict)
    # the states (and temps) this batch leaves as they were: nothing they read changed (steps.py)
    unchanged: set[str] = field(default_factory=set)
    merge_all: bool = False  # every step runs, changed or not (a capture of prepared plans)
    # a state kept as a base and a tail: its key columns in which the base holds no NULL, and the
    # SQL of its tail's rows in each version ("old", "new"): all its rows with a NULL in those
    null_free: dict[str, tuple[frozenset[str], dict[str, str]]] = field(default_factory=dict)

    def with_loop(self, name: str, change: DataFrame) -> BatchReads:
        """A copy for one pass of a loop's body, reading ``change`` as the stream ``name``."""
        return replace(self, deltas=dict(self.deltas), new=dict(self.new), merged=dict(self.merged),
                       merged_views=dict(self.merged_views), loops={**self.loops, name: change})

    def resolver(self, views: Views) -> Resolve:
        """Where a program's leaves come from."""

        def resolve(rel: Rel) -> DataFrame | str:
            if isinstance(rel, DeltaScan):
                if rel.table in self.loops:
                    return self.loops[rel.table]
                return self.frames[self.catalog[rel.table].name]
            if isinstance(rel, Scan):
                return self.table(self.catalog[rel.table].name)
            if isinstance(rel, TailScan):
                return self.null_free[rel.state][1][rel.version]
            if isinstance(rel, StateScan):
                if rel.version == "delta":
                    return self.deltas[rel.state]
                if rel.version == "merged":
                    return self.merged_views.get(rel.state, self.merged[rel.state])
                if rel.version == "new" and rel.state in self.new:
                    return self.new[rel.state]
                return self.current[rel.state]  # old, or a static state (one version)
            if isinstance(rel, Once):
                inner = to_sql(rel.input, resolve, views)
                return lowering.once(inner, [f.name for f in rel.input.schema], keep=self.first != rel.later)
            raise TypeError(f"no input for {type(rel).__name__}")

        return resolve

    def sql(self, rel: Rel, views: Views) -> str:
        """The statement of the program ``rel`` over this batch's leaves."""
        return to_sql(rel.transform(self._null_keys_from_tail) if self.null_free else rel, self.resolver(views), views)

    def _null_keys_from_tail(self, rel: Rel) -> Rel | None:
        """A filter that keeps only rows with a NULL in a key column (a window's NULL partition,
        ``plan/rules_windows.py``) over a version of a state whose base holds no NULL in that
        column reads the tail's rows of that version: no scan of the base
        (``StateStore.tail_versions``)."""
        if not (isinstance(rel, Filter) and type(rel.input) is StateScan and rel.input.state in self.null_free
                and rel.input.version in ("old", "new")):
            return None
        scan = rel.input
        keys = self.null_free[scan.state][0]
        if not _some_key_null(rel.condition, keys):
            return None
        return Filter(TailScan(scan.state, scan.version, scan.fields), rel.condition)


def parallel(spark: SparkSession, jobs: list[Callable[[], Any]]) -> list[Any]:
    """Run independent Spark jobs of ``spark`` side by side (Spark schedules concurrent jobs);
    results in order.

    Each job's thread carries the calling thread's Spark local properties (a controller cancels a
    step's jobs by their job tag) and the session's tags. (Given no session, PySpark warns on
    stderr, once per process: a line of noise after every restart.)"""
    if len(jobs) <= 1:
        return [job() for job in jobs]
    from pyspark.util import inheritable_thread_target

    carry = inheritable_thread_target(spark)
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:  # each job in a copy of this thread's context
        futures = [pool.submit(contextvars.copy_context().run, carry(job)) for job in jobs]
        return [f.result() for f in futures]


def _some_key_null(condition: Expr, keys: frozenset[str]) -> bool:
    """Whether ``condition`` holds only of rows with a NULL in one of the columns ``keys``:
    ``k IS NULL``, or a disjunction of such tests."""
    if isinstance(condition, Call) and condition.op == "OR":
        return all(_some_key_null(a, keys) for a in condition.args)
    return (isinstance(condition, Call) and condition.op == "IS NULL" and isinstance(condition.args[0], Column)
            and condition.args[0].name in keys)
