"""Tidy generated programs so ``explain`` shows, and Spark runs, the fewest nested blocks.

Before::

    Aggregate[S.x; sum(w)](Project[S.x, _weight AS w](Filter[S.y > 0](ΔS)))

After::

    Aggregate[S.x; sum(_weight)](Filter[S.y > 0](ΔS))
"""

from __future__ import annotations

from ..ir.expr import Agg
from ..ir.rel import Aggregate, Project, Rel
from ..passes import fuse_projections


def simplify(rel: Rel) -> Rel:
    return fuse_projections.run(rel).transform(_into_aggregate)


def _into_aggregate(node: Rel) -> Rel | None:
    if isinstance(node, Aggregate) and isinstance(node.input, Project):
        mapping = dict(node.input.exprs)
        keys = tuple((n, e.substitute(mapping)) for n, e in node.keys)
        aggs = []
        for n, a in node.aggs:
            new = a.substitute(mapping)
            assert isinstance(new, Agg)
            aggs.append((n, new))
        return Aggregate(node.input.input, keys, tuple(aggs))
    return None
