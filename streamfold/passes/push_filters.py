"""Push filters towards the sources, and turn cross products with an equality into joins.

Before::

    Filter[x.B = y.C AND x.A > 5](Join cross (Scan S1 x, Scan S2 y))

After::

    Join inner ON x.B = y.C (Filter[x.A > 5](Scan S1 x), Scan S2 y)

A conjunct that reads only a GROUP BY's keys moves below it (seed 004 §4.1's predicate push-down,
Fig. 5: every row of a group has the group's key, so filtering the rows and then grouping keeps
exactly the groups filtering the groups keeps — and the group state then holds only those keys);
a global aggregate (one row even over no rows), a time bound, and a GROUP BY the query reads in
several places (a ROLLUP's shared partials) keep their place.
A conjunct that reads only a row's own columns moves below a LATERAL VIEW. A conjunct that reads one side of an inner join moves into that side; one that reads both
becomes part of the join condition. For outer joins only conjuncts on the preserved side move
below a filter, and only ON-conjuncts on the other side move into it, which keeps NULL-padding
exactly as the batch query has it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from ..ir.expr import Agg, Expr, SubqueryExpr, and_all, conjuncts, reads_clock
from ..ir.rel import Aggregate, Distinct, Explode, Filter, Join, JoinKind, Project, Rel, Union


Into = Callable[[Aggregate], bool]  # whether a filter may move below this GROUP BY


def run(rel: Rel, groups: bool = True) -> Rel:
    """``rel`` with its filters pushed; ``groups=False`` keeps them above GROUP BYs (the A/B switch
    ``STREAMFOLD_PUSH_DOWN_GROUPS``). A GROUP BY found more than once in the query (the finest
    partials a ROLLUP's coarser sets roll up) keeps its filters above too, so its state stays one."""
    shared = frozenset(a for a, n in Counter(x for x in rel.walk() if isinstance(x, Aggregate)).items() if n > 1)
    into: Into = (lambda a: a not in shared) if groups else (lambda a: False)
    return rel.transform(lambda node: _rewrite(node, into))


def _rewrite(node: Rel, groups: Into) -> Rel | None:
    if isinstance(node, Filter):
        return _push(node.input, list(conjuncts(node.condition)), groups)
    if isinstance(node, Join) and node.kind in ("inner", "left", "right", "semi", "anti") and node.condition is not None:
        return _push_join_condition(node, groups)
    return None


def _wrap(rel: Rel, preds: list[Expr], groups: Into) -> Rel:
    cond = and_all(preds)
    if cond is None:
        return rel
    pushed = _push(rel, preds, groups)
    return pushed if pushed is not None else Filter(rel, cond)


def _push(rel: Rel, preds: list[Expr], groups: Into) -> Rel | None:
    """``Filter(rel, AND preds)`` with the predicates pushed as far down as they may go."""
    if not preds:
        return rel
    if isinstance(rel, Filter):
        return _push(rel.input, list(conjuncts(rel.condition)) + preds, groups)
    if isinstance(rel, Project):
        mapping = dict(rel.exprs)
        inner = [p.substitute(mapping) for p in preds]
        return Project(_wrap(rel.input, inner, groups), rel.exprs)
    if isinstance(rel, Distinct):
        return Distinct(_wrap(rel.input, preds, groups))
    if isinstance(rel, Union):
        items = []
        for item in rel.items:
            names = {f.name: g.name for f, g in zip(rel.schema, item.schema)}
            items.append(_wrap(item, [p.rename(names) for p in preds], groups))
        return Union(tuple(items))
    if isinstance(rel, Join):
        return _push_into_join(rel, preds, groups)
    if isinstance(rel, Aggregate) and rel.keys and groups(rel):
        return _push_into_aggregate(rel, preds, groups)
    if isinstance(rel, Explode):
        made = {rel.element} | ({rel.position} if rel.position else set())
        below = [p for p in preds if not p.columns() & made]
        if below:
            pushed = Explode(_wrap(rel.input, below, groups), rel.expr, rel.element, rel.position, rel.outer)
            cond = and_all([p for p in preds if p.columns() & made])
            return Filter(pushed, cond) if cond is not None else pushed
    cond = and_all(preds)
    assert cond is not None
    return Filter(rel, cond)


def _push_into_aggregate(rel: Aggregate, preds: list[Expr], groups: Into) -> Rel:
    keys = dict(rel.keys)
    below = [p for p in preds if _reads_keys_only(p, keys)]
    cond = and_all([p for p in preds if not _reads_keys_only(p, keys)])
    grouped: Rel = rel
    if below:
        grouped = Aggregate(_wrap(rel.input, [p.substitute(keys) for p in below], groups), rel.keys, rel.aggs)
    return Filter(grouped, cond) if cond is not None else grouped


def _reads_keys_only(p: Expr, keys: dict[str, Expr]) -> bool:
    cols = p.columns()
    return (bool(cols) and cols <= keys.keys() and not reads_clock(p)
            and not any(isinstance(e, (Agg, SubqueryExpr)) for e in p.walk()))


def _sides(rel: Join, p: Expr) -> tuple[bool, bool]:
    cols = p.columns()
    return bool(cols & set(rel.left.names)), bool(cols & set(rel.right.names))


def _push_into_join(rel: Join, preds: list[Expr], groups: Into) -> Rel:
    left, right, stay, into_condition = [], [], [], []
    for p in preds:
        on_left, on_right = _sides(rel, p)
        if rel.kind in ("inner", "cross"):
            if on_left and not on_right:
                left.append(p)
            elif on_right and not on_left:
                right.append(p)
            elif on_left and on_right:
                into_condition.append(p)
            else:
                stay.append(p)
        elif rel.kind in ("left", "semi", "anti", "null_aware_anti") and not on_right:
            left.append(p)
        elif rel.kind == "right" and not on_left:
            right.append(p)
        else:
            stay.append(p)
    kind = rel.kind
    condition = rel.condition
    if into_condition:
        condition = and_all(list(conjuncts(condition)) + into_condition)
        if kind == "cross":
            kind = JoinKind.INNER
    joined: Rel = Join(_wrap(rel.left, left, groups), _wrap(rel.right, right, groups), kind, condition)
    if kind == "inner" and condition is not None:
        joined = _push_join_condition(joined, groups) or joined  # type: ignore[arg-type]
    cond = and_all(stay)
    return Filter(joined, cond) if cond is not None else joined


def _push_join_condition(rel: Join, groups: Into) -> Rel | None:
    """Move ON-conjuncts that read one input only into that input (where the join kind allows)."""
    left, right, keep = [], [], []
    for p in conjuncts(rel.condition):
        on_left, on_right = _sides(rel, p)
        if on_left and not on_right and rel.kind in ("inner", "right"):
            left.append(p)
        elif on_right and not on_left and rel.kind in ("inner", "left", "semi", "anti"):
            right.append(p)
        else:
            keep.append(p)
    if not left and not right:
        return None
    condition = and_all(keep)
    kind = rel.kind
    if condition is None and kind == "inner":
        kind = JoinKind.CROSS
    return Join(_wrap(rel.left, left, groups), _wrap(rel.right, right, groups), kind, condition)
