"""Which filters are a top-k per group: over rows that are only inserted (:mod:`.rules_topk`), or
that may be deleted (:mod:`.rules_topk_reserve`).

Decided on the query's shape alone, so that a join body (:mod:`.body`) leaves such a filter to
its own rule rather than folding it into its predicates.
"""

from __future__ import annotations

from ..ir.expr import Call, Column, Expr, Literal, SubqueryExpr, conjuncts, reads_clock
from ..ir.rel import Explode, Filter, Join, JoinKind, Project, Rel, Scan
from ..ir.window import Window
from .window_keys import keyed, partition_columns

RANKS = frozenset({"row_number", "rank", "dense_rank"})


def top_k_shape(rel: Rel) -> tuple[Window, int] | None:
    """``rel``'s window and the largest rank it keeps, when ``rel`` is ``σ_{rank ≤ k} Window(R)``
    with one ranking call and R only ever gains rows; else None."""
    shape = ranking_filter(rel)
    return shape if shape is not None and inserts_only(shape[0].input) else None


def reserve_shape(rel: Rel) -> tuple[Window, int, tuple[str, ...]] | None:
    """``rel``'s window, k and partition columns when ``rel`` is ``σ_{rank ≤ k} Window(R)`` over
    an R that may delete, partitioned by nothing or by plain columns that
    :func:`.window_keys.keyed` makes NULL-free (:mod:`.rules_topk_reserve`); else None."""
    shape = ranking_filter(rel)
    if shape is None or inserts_only(shape[0].input):
        return None
    window, k = shape
    call = window.calls[0][1]
    if not all(isinstance(p, Column) for p in call.partition):
        return None
    part = partition_columns(window)
    if keyed(window.input, part)[2]:
        return None  # a nullable partition column kept as it is: looked up null-safely apart
    return window, k, part


def is_top_k(rel: Rel) -> bool:
    """Whether a top-k rule maintains ``rel`` (a join body then leaves it whole, an input)."""
    return top_k_shape(rel) is not None or reserve_shape(rel) is not None


def ranking_filter(rel: Rel) -> tuple[Window, int] | None:
    """``rel``'s window and the largest rank it keeps, when ``rel`` is ``σ_{rank ≤ k} Window(R)``
    with one ranking call over a stream; else None."""
    if not isinstance(rel, Filter) or not isinstance(rel.input, Window) or reads_clock(rel.condition):
        return None
    window = rel.input
    if len(window.calls) != 1 or window.calls[0][1].fn not in RANKS:
        return None
    if not any(isinstance(s, Scan) and not s.static for s in window.input.walk()):
        return None  # static: computed once, no rule
    k = rank_bound(rel.condition, window.calls[0][0])
    return (window, k) if k is not None else None


def inserts_only(rel: Rel) -> bool:
    """Whether ``rel``'s rows are only ever added: scans of sources without ``_weight`` through
    projections, filters without the clock or a subquery, inner joins and explodes."""
    if isinstance(rel, Scan):
        return not rel.weighted
    if isinstance(rel, Project):
        return not any(_subquery(e) for _, e in rel.exprs) and inserts_only(rel.input)
    if isinstance(rel, Filter):
        return not reads_clock(rel.condition) and not _subquery(rel.condition) and inserts_only(rel.input)
    if isinstance(rel, Join) and rel.kind in (JoinKind.INNER, JoinKind.CROSS):
        return (rel.condition is None or not _subquery(rel.condition)) and all(inserts_only(i) for i in rel.inputs())
    if isinstance(rel, Explode):
        return inserts_only(rel.input)
    return False


def _subquery(e: Expr) -> bool:
    return any(isinstance(x, SubqueryExpr) for x in e.walk())


def rank_bound(condition: Expr, column: str) -> int | None:
    """The largest rank a conjunct of ``condition`` lets through (``c <= k``, ``c < k``, ``c = 1``,
    either way round), or None without one."""
    best: int | None = None
    for c in conjuncts(condition):
        if not isinstance(c, Call) or len(c.args) != 2:
            continue
        left, right = c.args
        op = c.op
        if isinstance(left, Literal) and isinstance(right, Column):
            left, right = right, left
            op = {"<=": ">=", ">=": "<=", "<": ">", ">": "<"}.get(op, op)
        if not (isinstance(left, Column) and left.name == column and isinstance(right, Literal)
                and isinstance(right.value, int) and not isinstance(right.value, bool)):
            continue
        k = {"<=": right.value, "<": right.value - 1, "=": right.value if right.value == 1 else None}.get(op)
        if k is not None and k >= 1:
            best = k if best is None else min(best, k)
    return best
