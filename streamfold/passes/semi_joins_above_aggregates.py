"""Move a semi or anti join on group keys above the GROUP BY it feeds.

A semi join keeps a row when its match exists; when the condition reads, of the left side, only
columns the aggregate groups by, every row of a group has the same match, so the group is either
kept whole or dropped whole: filtering the rows and then grouping equals grouping and then
filtering the groups. TPC-H Q18 (``o_orderkey IN (SELECT l_orderkey … HAVING sum(l_quantity) >
300)`` under ``GROUP BY …, o_orderkey, …``) is the example. Incrementally this matters: the semi
join's left side is kept as a bag of rows (its old rows meet the keys whose match flipped), and
above the aggregate those rows are one per group — per order, not per line item of the
customer ⋈ orders ⋈ lineitem join.

Before::

    Aggregate[o.k AS o.k, sum(l.q)](Join semi[o.k = _sq0.in](Join(o, l), subquery))

After::

    Join semi[o.k = _sq0.in](Aggregate[o.k AS o.k, sum(l.q)](Join(o, l)), subquery)

Applies to SEMI and ANTI joins under an Aggregate with group keys, when every left column the
condition reads is a group key that is a plain column; a global aggregate (one row even over
no rows) and ``NOT IN`` (its NULL rules read the whole subquery) are left as they are.
"""

from __future__ import annotations

from ..ir.expr import Column, Expr
from ..ir.rel import Aggregate, Join, JoinKind, Rel


def run(rel: Rel) -> Rel:
    return rel.transform(_rewrite)


def _rewrite(rel: Rel) -> Rel | None:
    if not isinstance(rel, Aggregate) or not rel.keys:
        return None
    join = rel.input
    if not isinstance(join, Join) or join.kind not in (JoinKind.SEMI, JoinKind.ANTI) or join.condition is None:
        return None
    left_names = set(join.left.names)
    used = join.condition.columns() & left_names
    as_key: dict[str, Expr] = {}
    for name, e in rel.keys:
        if isinstance(e, Column) and e.name in left_names:
            as_key.setdefault(e.name, Column(name, e.type))
    if not used <= set(as_key):
        return None
    grouped = Aggregate(join.left, rel.keys, rel.aggs)
    if set(grouped.names) & set(join.right.names):
        return None
    return Join(grouped, join.right, join.kind, join.condition.substitute(as_key))


__all__ = ["run"]
