"""The answer's key: the output columns that name at most one answer row each.

A sink that keeps the answer as a table (PostgreSQL) applies a batch's changes by key: the
changes of a key replace its row. The key is the query's GROUP BY key when every key column is
an output column (renamed or not): the answer rows are then read off an aggregate (or off an
aggregate state row by row) through projections and filters only, so one key gives one row at
most. Anything else — a join's rows, a projection that drops a key column, a DISTINCT over some
columns — has no such key and is kept as a multiset: every column, plus a count.

    SELECT k AS key, sum(v) AS s FROM S GROUP BY k      → ("key",)
    SELECT sum(v) FROM S                                → ()      (one row)
    SELECT sum(v) FROM S GROUP BY k                     → None    (k is not in the output)
    SELECT a, b FROM S JOIN T ON …                      → None
"""

from __future__ import annotations

from ..ir.expr import Column
from ..ir.rel import Aggregate, Filter, Project, Rel, StateScan
from .model import IncrementalPlan, StateRole


def answer_key(plan: IncrementalPlan) -> tuple[str, ...] | None:
    """The output names of the answer's key, ``()`` for a single-row answer, None for a multiset."""
    answer = plan.answer
    rel: Rel = answer.rows
    renames: list[dict[str, str]] = []  # per projection, top down: input column -> its output name
    while isinstance(rel, (Project, Filter)):
        if isinstance(rel, Project):
            renames.append({e.name: name for name, e in rel.exprs if isinstance(e, Column)})
        rel = rel.input
    if isinstance(rel, Aggregate):
        key = [name for name, _ in rel.keys]
    elif isinstance(rel, StateScan) and plan.state(rel.state).role is StateRole.AGGREGATE:
        key = list(plan.state(rel.state).key_names)
    else:
        return None
    for mapping in reversed(renames):
        if not all(k in mapping for k in key):
            return None
        key = [mapping[k] for k in key]
    shown = dict(zip(answer.output, answer.output_names))
    if not all(k in shown for k in key):
        return None
    return tuple(shown[k] for k in key)
