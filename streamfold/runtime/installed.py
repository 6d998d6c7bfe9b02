"""A plan installed between two batches whose first batch is not committed yet.

A reconfiguration (``features/reconfiguration.py``) and a rebuild of stale states
(``features/strategies.py``) both make a new :class:`~.bundle.Bundle` the engine's for the next
batch, keeping the old one here: if that batch fails, the engine puts the old bundle back and the
old plan runs the batch; once it commits, the old plan's states the new one does not use are
freed. The batch takes its changes from the answer before it (:meth:`Installed.before_answer`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import lowering
from .bundle import Bundle
from .views import Views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass
class Installed:
    old: Bundle  # the plan before, put back if the new one fails on its first batch
    reset: bool  # the answer's columns changed: its first changes are all of its rows
    before: str | None  # the last committed snapshot, the changes' starting point
    whole: bool  # its first batch writes the states whole (they are not the old plan's)
    answer_only: bool = False  # h is the old plan's: without new files its first batch runs no h
    on_failure: Callable[[BaseException], None] | None = None
    ran_h: bool = True  # whether its first batch ran h (set by the batch)
    rebuild: bool = False  # the same plan, its stale states rebuilt (the cost model's rebuild)

    def before_answer(self, spark: SparkSession, states: Mapping[str, DataFrame | str],
                      views: Views) -> DataFrame | str | None:
        """The answer the first batch's changes start from (None: from nothing). When h did not
        run (an answer-only change, no new file), the states are those the last snapshot was
        computed from, so the old plan's answer over them is that snapshot — computed where the
        states lie, in the job that writes the batch, rather than read back and shuffled against
        the new answer. Otherwise the last snapshot is read back (its columns known: no job to
        infer them)."""
        if self.before is None or self.reset:
            return None
        if self.answer_only and not self.ran_h:
            return lowering.subquery(self.old.answer.snapshot(states, views))
        return spark.read.schema(self.old.output_schema).parquet(self.before)

    def committed(self, new: Bundle) -> None:
        """The first batch is committed: free the old plan's states the new one does not use."""
        self.old.store.release_except(new.store.backings())

    def failed(self, new: Bundle, error: BaseException) -> Bundle:
        """The first batch failed: the new plan's states are freed; the old bundle, to put back."""
        new.store.release_except(self.old.store.backings())
        if self.on_failure is not None:
            self.on_failure(error)
        return self.old
