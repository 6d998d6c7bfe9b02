"""The answer function a at run time: the snapshot after a batch, and the batch's changes.

Both are single SQL statements over the states (:class:`.lowering.AnswerLowering` writes them).
The snapshot is a over the new states, in ORDER BY order, with Spark's output names and types.
The changes depend on the plan:

* ``delta`` — the output state's own change: touched rows with new − old multiplicity;
* ``keyed`` — a over the touched keys' new rows minus a over their old rows (both come from
  the merge's result, so a never reads the whole state for them);
* ``global`` — a over all new states minus a over all old states (small answers only).

This module only names the DataFrames the statements read (as temp views).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..ir.rel import Rel, StateScan
from ..plan.model import IncrementalPlan
from .lowering import AnswerLowering
from .state import StateStore
from .views import Views, leaf_hint

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType


class AnswerSql:
    def __init__(self, plan: IncrementalPlan, output_schema: StructType, store: StateStore) -> None:
        self.answer = plan.answer
        self.lowering = AnswerLowering(plan.answer, [(f.name, f.dataType.simpleString()) for f in output_schema.fields],
                                       store.table)

    def columns(self, weight: bool = False) -> list[tuple[str, str]]:
        """(name, Spark type) of the snapshot's columns (and ``_weight`` for changes)."""
        return self.lowering.output_columns(weight)

    def snapshot(self, states: Mapping[str, DataFrame | str], views: Views) -> str:
        def leaf(rel: Rel) -> str:
            assert isinstance(rel, StateScan), f"a reads states only, not {type(rel).__name__}"
            return views.relation(states[rel.state], leaf_hint(rel))

        return self.lowering.snapshot(leaf)

    def changes(self, first: bool, merged: Mapping[str, DataFrame], new: Mapping[str, DataFrame | str],
                old: Mapping[str, DataFrame | str], views: Views) -> str:
        """The batch's changes, from the merges' results and the new and old state versions."""
        return self.lowering.changes(
            first, merged=lambda name: views.name(merged[name], "merged_" + name),
            new=lambda name: views.relation(new[name], "new_" + name),
            old=lambda name: views.relation(old[name], "old_" + name))

    def changes_between(self, snapshot: str, before: DataFrame | str | None, views: Views) -> str:
        """The changes from ``before`` (an answer with the same columns: read back, or the SQL that
        computes it) to the answer ``snapshot`` computes, by comparing the two whole (the first
        batch under a new plan, whose answer before it the old plan gave). Without ``before``
        every row enters."""
        return self.lowering.changes_between(snapshot, None if before is None else views.relation(before, "before"))
