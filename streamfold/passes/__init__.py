"""Normalization (seed 000 §6): rewrite the bound query into the shape incrementalization expects.

Each pass is a pure function ``Rel -> Rel`` in a module of its own, applied in the order of
``PIPELINE``. The result is the seed's normal form: a tree of joins and group-bys connected by
projections, with every filter as close to the sources as it can go.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.rel import Rel
from . import (
    fuse_projections, key_aggregates, nested_limits, outer_joins, prune_columns, pull_up_order, push_filters,
    semi_joins_above_aggregates, static_reductions, unnest_subqueries,
)

Pass = Callable[[Rel], Rel]

PIPELINE: tuple[tuple[str, Pass], ...] = (
    ("unnest_subqueries", unnest_subqueries.run),
    ("fuse_projections", fuse_projections.run),
    ("outer_joins", outer_joins.run),
    ("key_aggregates", key_aggregates.run),
    ("push_filters", push_filters.run),
    ("semi_joins_above_aggregates", semi_joins_above_aggregates.run),
    ("pull_up_order", pull_up_order.run),
    ("nested_limits", nested_limits.run),
    ("static_reductions", static_reductions.run),
    ("fuse_projections", fuse_projections.run),
    ("prune_columns", prune_columns.run),
)


def normalize(rel: Rel, *, push_down_groups: bool = True) -> Rel:
    """Apply every pass of ``PIPELINE`` in order; ``push_down_groups=False`` keeps filters on group
    keys above their GROUP BY (an A/B switch: what seed 004's predicate push-down buys)."""
    for name, run in PIPELINE:
        rel = push_filters.run(rel, groups=False) if name == "push_filters" and not push_down_groups else run(rel)
    return rel
