"""Fuse cascaded projections (seed 000 §6, rule (4): cMap(f, cMap(g, S)) → cMap(f∘g, S)).

Before::

    Project[t.x AS x](Project[S.x AS t.x, S.y AS t.y](Filter[S.y > 0](Scan S)))

After::

    Project[S.x AS x](Filter[S.y > 0](Scan S))

A filter above a projection moves below it, its condition rewritten over the projection's
input, so filters and projections end up in the order scan → filter → project.
"""

from __future__ import annotations

from ..ir.expr import Column
from ..ir.rel import Filter, Project, Rel


def run(rel: Rel) -> Rel:
    return rel.transform(_rewrite)


def _rewrite(node: Rel) -> Rel | None:
    if isinstance(node, Project):
        inner = node.input
        if isinstance(inner, Project):
            mapping = dict(inner.exprs)
            return _rewrite(Project(inner.input, tuple((n, e.substitute(mapping)) for n, e in node.exprs))) or \
                Project(inner.input, tuple((n, e.substitute(mapping)) for n, e in node.exprs))
        if _is_identity(node):
            return inner
        return None
    if isinstance(node, Filter) and isinstance(node.input, Project):
        proj = node.input
        mapping = dict(proj.exprs)
        moved = Filter(proj.input, node.condition.substitute(mapping))
        return Project(_rewrite(moved) or moved, proj.exprs)
    if isinstance(node, Filter) and isinstance(node.input, Filter):
        from ..ir.expr import and_all

        merged = and_all([node.input.condition, node.condition])
        assert merged is not None
        return Filter(node.input.input, merged)
    return None


def _is_identity(p: Project) -> bool:
    """A projection that passes every input column through unchanged, in order."""
    names = p.input.names
    if len(p.exprs) != len(names):
        return False
    return all(isinstance(e, Column) and e.name == n == name for (n, e), name in zip(p.exprs, names))
