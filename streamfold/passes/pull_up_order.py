"""Pull the query's ORDER BY / LIMIT above the projection that renames or computes over it.

``SELECT * FROM (SELECT a, b FROM t ORDER BY 2, 1) AS q(c1, c2)`` binds to a projection that
renames the ordered rows (``a AS c1``). The answer function orders the rows it keeps by the
sort keys, so the rows must be the ones the keys are over and the output names must be among
their columns. A projection is row by row, so it commutes with ORDER BY and LIMIT: it moves
below them, and the sort keys it does not output ride along as hidden columns that a final
projection drops (the shape the binder gives ``ORDER BY`` of an unselected expression).

Before::

    Project[a AS c1, b AS c2](Sort[b, a](Project[t.a AS a, t.b AS b](Scan t)))

After (before ``fuse_projections`` merges the two lower projections)::

    Sort[c2, c1](Project[a AS c1, b AS c2](Project[t.a AS a, t.b AS b](Scan t)))

Only the outermost chain matters: ORDER BY inside a derived table read by more than a
projection is no order of the answer (and is dropped), and a LIMIT there is refused.
"""

from __future__ import annotations

from ..ir.expr import Column, Expr
from ..ir.rel import Limit, Project, Rel, Sort, SortKey


def run(rel: Rel) -> Rel:
    if not isinstance(rel, Project) or _selects(rel):
        return rel
    node = rel.input
    limit = node if isinstance(node, Limit) else None
    node = limit.input if limit is not None else node
    sort = node if isinstance(node, Sort) else None
    node = sort.input if sort is not None else node
    if limit is None and sort is None:
        return rel
    taken = set(rel.names)
    hidden: list[tuple[str, Expr]] = []
    keys: list[SortKey] = []
    for k in sort.keys if sort is not None else ():
        same = [n for n, e in rel.exprs if e == k.expr]
        if same:
            name = same[0]
        else:
            name = _fresh("_order", taken)
            hidden.append((name, k.expr))
        keys.append(SortKey(Column(name, k.expr.type), k.descending, k.nulls_first))
    out: Rel = Project(node, rel.exprs + tuple(hidden))
    if sort is not None:
        out = Sort(out, tuple(keys))
    if limit is not None:
        out = Limit(out, limit.limit, limit.offset)
    if hidden:
        out = Project(out, tuple((n, Column(n, e.type)) for n, e in rel.exprs))
    return out


def _selects(p: Project) -> bool:
    """A projection that only picks input columns under their own names (drops hidden ones)."""
    return all(isinstance(e, Column) and e.name == n for n, e in p.exprs)


def _fresh(base: str, taken: set[str]) -> str:
    k = 0
    while f"{base}{k}" in taken:
        k += 1
    taken.add(f"{base}{k}")
    return f"{base}{k}"


__all__ = ["run"]
