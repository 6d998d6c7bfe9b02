"""Every SQL statement the runtime hands to Spark, as text, in one package (no Spark needed).

The runtime turns DataFrames into temp view names (``runtime/views.py``) and asks this package for
the text of each statement over those names. One module per concern:

* :mod:`.programs` — a plan's program with its physical join hints;
* :mod:`.states` — a state's merge ⊗ and the views of its result, a base and a tail, a state
  carried over to a reconfigured plan;
* :mod:`.durability` — the states' changelogs packed, and read back by a restart;
* :mod:`.answer` — the answer's snapshot and changes;
* :mod:`.outputs` — a batch's outputs stacked into one job;
* :mod:`.matrices` — join matrices: one copy of each row, a migration, the counts Algorithm 2 needs;
* :mod:`.loops` — fixpoints, exact iterations, diffusion;
* :mod:`.netting` — a stream's Z-set made a bag for a query from scratch;
* :mod:`.control` — a breakpoint's rows.

Nothing here imports pyspark or looks at a DataFrame, so ``tests/fixtures/lowering/`` holds the
text for each query as golden files, each statement parsed by sqlglot's Spark dialect, and a
change to any statement shows there; ``tests/compiler/test_layers.py`` checks that no other
runtime module writes SQL. The names used here (view names, FROM items) are given by the caller:
``relation`` arguments are FROM items (a view name, or a parenthesised statement from
:func:`.text.subquery`).

Invariants the text keeps:

* a state's merge keeps the old state's hash partitioning: both sides of its UNION ALL rename
  the key (``__g0`` …), and a delta is conformed to the state's types and ``DISTRIBUTE BY`` its
  partition key, so only the batch's rows move;
* every view of a merge's result reads that one result (no second job over the state);
* answers carry Spark's own output names and types (the batch query's), changes a ``_weight``.

The names below are the package's index, so that a caller writes ``lowering.merge(…)``.
"""

from .answer import AnswerLowering
from .control import breakpoint_rows
from .durability import changelogs, latest, pack, pack_columns, summed_logs
from .loops import DIFFUSION_KEY, DiffusionLowering, exact_change, fixpoint_found, fixpoint_old, fixpoint_rows, weighted
from .matrices import HybridLayout, canonical, key_frequencies, matrix_sizes, migrate, state_sizes
from .outputs import snapshot_of, stack, stack_parts, stacked, stacked_width
from .programs import is_delta_side, join_hint, once, program, without_broadcasts
from .states import (StateTable, appended, carried_over, changelog, conform, delta_rows, merge, null_columns,
                     multiplicity_change, new_rows, no_rows, runs, runs_merged, runs_touched, summed, tail_rows,
                     touched_new, touched_old, unchanged, whole_merge)
from .text import Columns, Leaf, select_all, subquery, union_all

__all__ = [
    "DIFFUSION_KEY", "AnswerLowering", "Columns", "DiffusionLowering", "HybridLayout", "Leaf", "StateTable",
    "appended", "breakpoint_rows", "canonical", "carried_over", "changelog", "changelogs", "conform", "delta_rows",
    "exact_change", "null_columns", "fixpoint_found", "fixpoint_old", "fixpoint_rows", "is_delta_side",
    "join_hint", "key_frequencies", "latest", "matrix_sizes", "merge", "migrate", "multiplicity_change",
    "new_rows", "no_rows", "once", "pack", "pack_columns", "program", "runs", "runs_merged", "runs_touched",
    "select_all", "snapshot_of", "stack", "stack_parts", "stacked", "stacked_width", "state_sizes", "subquery", "summed",
    "summed_logs", "tail_rows", "touched_new", "touched_old", "unchanged", "union_all", "weighted",
    "whole_merge", "without_broadcasts",
]
