"""``min`` and ``max`` of a GROUP BY key are the key: read from the group, not kept as a multiset.

Before::

    Aggregate[keys: g = t.g; aggs: n = count(*), lo = min(t.g)](Scan t)

After::

    Project[g, n, lo = g](Aggregate[keys: g = t.g; aggs: n = count(*)](Scan t))

Every row of a group has the group's key, so the smallest and the largest of it are the key (and
NULL in the group of NULL keys, as ``min`` over NULLs is). Under deletions ``min`` and ``max``
keep each group's values as a multiset (``plan/aggregates.py``); of a key there is nothing to
keep. TPC-DS Q35 asks ``min(cd_dep_count), max(cd_dep_count)`` grouped by ``cd_dep_count``, three
times over: six multisets of 1.9 million demographics rows' groups, each merged every batch.
"""

from __future__ import annotations

from ..ir.expr import Cast, Column, Expr
from ..ir.rel import Aggregate, Project, Rel


def run(rel: Rel) -> Rel:
    return rel.transform(_rewrite)


def _rewrite(node: Rel) -> Rel | None:
    if not isinstance(node, Aggregate) or not node.keys:
        return None
    of_keys: dict[str, str] = {}
    for name, a in node.aggs:
        if a.fn in ("min", "max") and len(a.args) == 1:
            key = next((k for k, e in node.keys if e == a.args[0]), None)
            if key is not None:
                of_keys[name] = key
    if not of_keys:
        return None
    grouped = Aggregate(node.input, node.keys, tuple((n, a) for n, a in node.aggs if n not in of_keys))
    types = {f.name: f.type for f in grouped.schema}
    exprs: list[tuple[str, Expr]] = []
    for f in node.schema:
        if f.name in of_keys:
            key = of_keys[f.name]
            value: Expr = Column(key, types[key])
            exprs.append((f.name, value if types[key] == f.type else Cast(value, f.type)))
        else:
            exprs.append((f.name, Column(f.name, f.type)))
    return Project(grouped, tuple(exprs))


__all__ = ["run"]
