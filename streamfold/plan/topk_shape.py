"""Which filters are a top-k per group over rows that are only inserted (:mod:`.rules_topk`).

Decided on the query's shape alone, so that a join body (:mod:`.body`) leaves such a filter to
its own rule rather than folding it into its predicates.
"""

from __future__ import annotations

from ..ir.expr import Call, Column, Expr, Literal, SubqueryExpr, conjuncts, reads_clock
from ..ir.rel import Explode, Filter, Join, JoinKind, Project, Rel, Scan
from ..ir.window import Window

RANKS = frozenset({"row_number", "rank", "dense_rank"})


def top_k_shape(rel: Rel) -> tuple[Window, int] | None:
    """``rel``'s window and the largest rank it keeps, when ``rel`` is ``σ_{rank ≤ k} Window(R)``
    with one ranking call and R only ever gains rows; else None."""
    if not isinstance(rel, Filter) or not isinstance(rel.input, Window) or reads_clock(rel.condition):
        return None
    window = rel.input
    if len(window.calls) != 1 or window.calls[0][1].fn not in RANKS or not inserts_only(window.input):
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
