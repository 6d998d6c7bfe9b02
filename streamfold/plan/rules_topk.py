"""Top-k per group over rows that are only inserted: the window keeps k rows per partition.

``SELECT … FROM (SELECT …, row_number() OVER (PARTITION BY g ORDER BY v DESC) AS rn FROM R) t
WHERE rn <= k`` (also ``rank``, ``dense_rank``; ``rn < k``, ``rn = 1``). The general rule
(:mod:`.rules_windows`) keeps every row of the window's input and recomputes the touched
partitions whole. When the input only ever inserts rows (its delta removes none) a row's rank
never improves: rows ranked above it stay, and new ones can only come before it. So a row that
falls out of the top k never comes back, and the state keeps only the rows ranked ≤ k — each
partition's top k, ties at the boundary included (Feldera's and RisingWave's top-k, whose reserve
is for deletions, which this input has none of)::

    T' = T ⊗ ΔT      ΔT = top_k(T[touched] ∪ ΔR) − T[touched]      touched = π_g ΔR
    Δout = σ_cond ΔT

The rows ranked ≤ k over ``T[touched] ∪ ΔR`` are those ranked ≤ k over the whole partition:
every row ranked above such a row ranks ≤ k itself, so it is kept in T or new. A batch then
reads its touched partitions' k rows, not their every row. T keeps each row with its rank (a
row whose rank moves leaves with the old and comes back with the new), so T is the filter's
answer before its other conjuncts: the query's change is ΔT filtered, with no second look-up
and no ranking of the rows before the batch. With deletions a row below the top k
may have to come back: :mod:`.rules_topk_reserve` keeps the partition, and reads it only to refill
a prefix that deletions left short.
"""

from __future__ import annotations

from ..ir.expr import Call, Literal
from ..ir.printer import display_name
from ..ir.rel import WEIGHT, Aggregate, Expand, Field, Filter, Project, Rel, StateScan, StateVersion, Union
from ..ir.types import BIGINT, BOOLEAN
from . import rules_expiry
from .context import PlanContext
from .model import Compiled, Monoid, State, StateColumn, StateRole
from .rules_windows import (
    keyed, look_up, over_keyed, partition_columns, refuse_ties, surrogates, touched_keys, with_surrogates,
)
from .terms import MINUS_ONE, ONE, sum_weights
from .rules_topk_reserve import top_k_reserve
from .topk_shape import top_k_shape


def filter_rule(ctx: PlanContext, rel: Rel) -> Compiled:
    """A filter: a top-k per group kept as k rows (below) or as each partition's first rows
    (:mod:`.rules_topk_reserve`), else a filter (:mod:`.rules_expiry`)."""
    return top_k(ctx, rel) or top_k_reserve(ctx, rel) or rules_expiry.time_filter(ctx, rel)


def top_k(ctx: PlanContext, rel: Rel) -> Compiled | None:
    """The change of ``σ_{rank ≤ k} Window(R)`` keeping k rows per partition, or None where the
    shape does not hold (:func:`.topk_shape.top_k_shape`)."""
    shape = top_k_shape(rel)
    if shape is None:
        return None
    assert isinstance(rel, Filter)
    window, k = shape
    name = window.calls[0][0]
    child = ctx.compile(window.input)
    if child.static or child.weighted:
        return None  # (static: no stream below; the general rule refuses or keeps it)
    refuse_ties(window)
    base = window.input
    part = partition_columns(window)
    keyed_base, key, nullable = keyed(base, part)
    rank = window.field(name)
    cols = tuple((f.name, f.ref()) for f in keyed_base.schema)
    fields = tuple(Field(f.name, f.type) for f in keyed_base.schema) + (Field(rank.name, rank.type), Field(WEIGHT, BIGINT))
    ranked_cols = cols + ((rank.name, rank.ref()),)
    state = ctx.plan.name("topk")
    arrived = with_surrogates(child.program, surrogates(base, part))
    touched = touched_keys(arrived, key) if key else None
    # the touched partitions' kept rows before the batch, each with its rank (the whole state
    # without PARTITION BY)
    old = look_up(state, fields, key, nullable, StateVersion.OLD, touched) if touched is not None \
        else StateScan(state, StateVersion.OLD, fields)
    candidates = Aggregate(Union((Project(old, cols + ((WEIGHT, old.field(WEIGHT).ref()),)),
                                  Project(arrived, cols + ((WEIGHT, arrived.field(WEIGHT).ref()),)))),
                           cols, ((WEIGHT, sum_weights()),))
    # the candidates ranked: those ranked ≤ k are the touched partitions' new top k, each with its
    # rank over the whole partition (module docstring)
    ranking = over_keyed(window, Expand(candidates, WEIGHT), keyed_base.names)
    ranked = Filter(ranking, Call("<=", (rank.ref(), Literal(k, rank.type)), BOOLEAN))
    top = Aggregate(Project(ranked, ranked_cols + ((WEIGHT, ONE),)), ranked_cols, ((WEIGHT, sum_weights()),))
    gone = Project(old, ranked_cols + ((WEIGHT, Call("*", (old.field(WEIGHT).ref(), MINUS_ONE), BIGINT)),))
    ctx.plan.add_state(
        State(state, StateRole.OUTPUT, tuple(f for f in fields if f.name != WEIGHT),
              (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "multiplicity of the row"),),
              note=f"each partition's rows ranked ≤ {k}, with their rank and multiplicity (the input only inserts, "
                   "so a row that falls out never comes back)", partition=key or None),
        Aggregate(Union((top, gone)), ranked_cols, ((WEIGHT, sum_weights()),)))
    # the query's change: the state's, filtered (its rows are those ranked ≤ k, with their ranks)
    change = Filter(StateScan(state, StateVersion.DELTA, fields), rel.condition)
    program = Project(change, tuple((f.name, f.ref()) for f in rel.schema) + ((WEIGHT, change.field(WEIGHT).ref()),))

    shown = ", ".join(display_name(p) for p in part) or "one partition"
    ctx.plan.note(f"OVER: top-{k} per partition ({shown}) of rows that are only inserted: {state} keeps each "
                  f"partition's rows ranked ≤ {k}; each batch ranks the touched partitions' kept rows with its new "
                  "rows, keeps the top with their ranks, and hands on the difference")
    return Compiled(program, static=False, weighted=True)
