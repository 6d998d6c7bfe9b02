"""Prune the columns nothing reads (projection push-down: seed 000 §6 keeps "only what is needed").

A join's states keep each input pre-aggregated on its lineage — the columns the consumer above
the join reads. When that consumer is a projection of every column of the join (a ``FROM a, b``
whose rows a subquery predicate filters before the select list picks four columns: TPC-H Q16,
Q21), every column of every input became lineage: Q16's ``part`` state kept all nine columns of
the table, comments included, and Q21's join states 36 columns each.

Before::

    Project[p_brand](Filter[ps_suppkey NOT IN (…)](Project[every column](Join(partsupp, part))))

After::

    Project[p_brand](Filter[ps_suppkey NOT IN (…)](Project[p_brand, ps_suppkey](Join(Scan partsupp[ps_partkey, ps_suppkey], Scan part[p_partkey, p_brand]))))

Which columns a node must produce is the union of what each place reading it needs (a plan is
a DAG: a relation read twice keeps one shape, so the states it compiles to are still shared).
Projections drop the expressions nobody reads, scans the fields; a join, filter or sort asks its
inputs for what its parents need and what its own expressions read; a window (OVER) asks for
what its parents need of its input's columns and what its calls read. A node whose meaning
depends on all its columns — DISTINCT, a set operation, UNION ALL, an iteration, the query's
answer — asks for all of them; so does every node not named here (the pass is conservative).
A projection or scan keeps at least one column (``SELECT count(*)`` still reads rows).
"""

from __future__ import annotations

from collections import defaultdict

from ..ir.expr import Expr
from ..ir.rel import Aggregate, Filter, Join, JoinKind, Limit, Project, Rel, Scan, Sort
from ..ir.window import Window

ALL = None  # every column of the node is needed
Need = frozenset[str] | None

_LEFT_ONLY = (JoinKind.SEMI, JoinKind.ANTI, JoinKind.NULL_AWARE_ANTI)


def run(rel: Rel) -> Rel:
    need = _needs(rel)
    done: dict[Rel, Rel] = {}

    def rebuild(node: Rel) -> Rel:
        if node not in done:
            kids = tuple(rebuild(k) for k in node.inputs())
            done[node] = _narrow(node, need.get(node, ALL), kids)
        return done[node]

    return rebuild(rel)


def _needs(root: Rel) -> dict[Rel, Need]:
    """What each node must produce: the union over the places that read it (parents before
    children, in topological order of the DAG)."""
    parents: dict[Rel, int] = defaultdict(int)
    seen: set[Rel] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        for k in node.inputs():
            parents[k] += 1
            stack.append(k)
    need: dict[Rel, Need] = {root: ALL}
    ready = [root]
    while ready:
        node = ready.pop()
        for child, wanted in zip(node.inputs(), _asks(node, need[node])):
            have = need.get(child, frozenset())
            need[child] = ALL if have is ALL or wanted is ALL else have | wanted
            parents[child] -= 1
            if parents[child] == 0:
                ready.append(child)
    return need


def _asks(node: Rel, need: Need) -> list[Need]:
    """What ``node`` needs of each input to produce ``need``."""
    if isinstance(node, Project):
        kept = [e for n, e in node.exprs if need is ALL or n in need] or [node.exprs[0][1]]
        return [_reads(kept)]
    if isinstance(node, Aggregate):
        return [_reads([e for _, e in node.keys] + [a for _, a in node.aggs])]
    if isinstance(node, Filter):
        return [ALL if need is ALL else need | node.condition.columns()]
    if isinstance(node, Sort):
        return [ALL if need is ALL else need | _reads([k.expr for k in node.keys])]
    if isinstance(node, Limit):
        return [need]
    if isinstance(node, Window):  # its input's columns read above, and what its calls read
        calls = _reads([c for _, c in node.calls])
        return [ALL if need is ALL else frozenset(need & set(node.input.names)) | calls]
    if isinstance(node, Join):
        cond = _reads([node.condition] if node.condition is not None else [])
        left, right = set(node.left.names), set(node.right.names)
        if need is ALL:
            return [ALL, (cond & right) if node.kind in _LEFT_ONLY else ALL]
        return [frozenset((need | cond) & left), frozenset((need | cond) & right)]
    return [ALL for _ in node.inputs()]


def _reads(exprs: list[Expr]) -> frozenset[str]:
    out: set[str] = set()
    for e in exprs:
        out |= e.columns()
    return frozenset(out)


def _narrow(node: Rel, need: Need, kids: tuple[Rel, ...]) -> Rel:
    """``node`` over its pruned inputs ``kids``, producing only what is needed of it (at least
    one column) where it can drop any."""
    if isinstance(node, Project) and need is not ALL:
        exprs = tuple((n, e) for n, e in node.exprs if n in need) or node.exprs[:1]
        if len(exprs) < len(node.exprs) or kids != node.inputs():
            return Project(kids[0], exprs)
        return node
    if kids != node.inputs():
        node = node.with_inputs(kids)
    if need is ALL:
        return node
    if isinstance(node, Scan):
        keep = [i for i, f in enumerate(node.fields) if f.name in need] or [0]
        if len(keep) == len(node.fields):
            return node
        return Scan(node.table, node.alias, tuple(node.fields[i] for i in keep), tuple(node.columns[i] for i in keep),
                    node.static, node.weighted)
    return node
