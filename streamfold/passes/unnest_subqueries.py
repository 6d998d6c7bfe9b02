"""Unnest subqueries into joins (seed 000 §6: "the query unnesting is done with a … join").

Before::

    Filter[x.D > (SELECT sum(y.C) FROM Y y WHERE x.A = y.B)](Scan X x)

After::

    Project[x.*](Filter[x.D > _sq0.value](
        Join inner ON x.A = _sq0.key0 (Scan X x,
            Project[sum AS _sq0.value, y.B AS _sq0.key0](Aggregate[y.B; sum(y.C)](Scan Y y)))))

* A subquery that is a whole condition of WHERE (a conjunct) filters rows by whether they have
  a match: ``EXISTS (…)`` and ``v IN (…)`` become semi joins, ``NOT EXISTS`` an anti join,
  an uncorrelated ``v NOT IN (…)`` a null-aware anti join (NOT IN's NULL rules). The
  subquery's correlated predicates — equalities or not — move into the join condition.
* Every other subquery is a value: under OR, NOT or CASE, in the select list or HAVING, a
  scalar subquery anywhere, a correlated NOT IN. :mod:`.subquery_values` joins each outer row
  with its match flags or aggregate (grouped by the correlation keys; through a theta join,
  :mod:`.decorrelate`, when the correlation is not only equalities) and the expression reads
  the joined columns, keeping SQL's three-valued logic exact.

Subqueries nest: a subquery's own subqueries are unnested first, inside it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial

from ..ir.expr import ARITHMETIC, COMPARISONS, Call, Column, Expr, Literal, SubqueryExpr, and_all, conjuncts
from ..ir.rel import Aggregate, Filter, Join, JoinKind, Project, Rel
from ..ir.types import BOOLEAN, INT
from .correlation import Correlation, correlate, localize, unsupported
from .subquery_values import in_row, unnest_values



def run(rel: Rel) -> Rel:
    names = itertools.count()
    return _unnest(rel, names)


def _unnest(rel: Rel, names: Iterator[int]) -> Rel:
    def rewrite(node: Rel) -> Rel | None:
        if isinstance(node, Filter) and _has_subquery(node.condition):
            return _filter(node, names)
        if isinstance(node, Project) and any(_has_subquery(e) for _, e in node.exprs):
            return _project(node, names)
        if isinstance(node, Join) and node.condition is not None and _has_subquery(node.condition):
            raise unsupported("a subquery in a JOIN condition", "move it to WHERE")
        if isinstance(node, Aggregate) and any(_has_subquery(e) for _, e in node.keys + node.aggs):
            raise unsupported("a subquery in GROUP BY or inside an aggregate", "compute it in WHERE or a derived table")
        return None

    return rel.transform(rewrite)


def _has_subquery(e: Expr) -> bool:
    return any(isinstance(x, SubqueryExpr) for x in e.walk())


def _filter(node: Filter, names: Iterator[int]) -> Rel:
    rel = node.input
    kept: list[Expr] = []
    inner = partial(_unnest, names=names)
    for c in conjuncts(node.condition):
        joined = _match_join(c, rel, names)
        if joined is not None:
            rel = joined
            continue
        c, rel = unnest_values(c, rel, names, inner, strict=_null_rejecting(c))
        kept.append(c)
    cond = and_all(kept)
    out: Rel = Filter(rel, cond) if cond is not None else rel
    return Project(out, tuple((f.name, f.ref()) for f in node.input.schema))


def _project(node: Project, names: Iterator[int]) -> Rel:
    rel = node.input
    exprs = []
    inner = partial(_unnest, names=names)
    for n, e in node.exprs:
        e, rel = unnest_values(e, rel, names, inner)
        exprs.append((n, e))
    return Project(rel, tuple(exprs))


# -- a whole condition: semi and anti joins -------------------------------------------------------
def _match_join(c: Expr, rel: Rel, names: Iterator[int]) -> Rel | None:
    """``rel`` semi/anti-joined with the subquery that is the condition ``c`` (or NOT of it); None
    when ``c`` is not one, or is a NOT IN that only a value can express (a correlated one)."""
    negated = isinstance(c, Call) and c.op == "NOT" and isinstance(c.args[0], SubqueryExpr)
    sq = c.args[0] if negated else c  # type: ignore[attr-defined]
    if not (isinstance(sq, SubqueryExpr) and sq.kind in ("exists", "in")):
        return None
    if sq.arg is not None and _has_subquery(sq.arg):
        return None  # `(SELECT …) IN (…)`: the value first, so IN is a value too
    corr = correlate(_unnest(sq.rel, names), rel)
    if negated and sq.kind == "in" and (corr.preds or len(in_row(sq.arg)) > 1):  # type: ignore[arg-type]
        return None  # NOT IN's NULL rules per correlation key: evaluated as a value
    n = next(names)
    return Join(rel, *_match_side(sq, corr, n, negated))


def _match_side(sq: SubqueryExpr, corr: Correlation, n: int, negated: bool) -> tuple[Rel, JoinKind, Expr | None]:
    """The right side of the semi/anti join, its kind and its condition."""
    sub = corr.rel
    conds = [localize(p) for p in corr.preds]
    # The right side keeps only what the join reads: IN's value and the correlated columns.
    needed = sorted({c for p in corr.preds for c in p.columns()} & set(sub.names))
    exprs: list[tuple[str, Expr]] = [(c, sub.field(c).ref()) for c in needed]
    if sq.kind == "in":
        assert sq.arg is not None
        row = in_row(sq.arg)
        compared = [(f"_sq{n}.in{i}" if len(row) > 1 else f"_sq{n}.in", f) for i, f in enumerate(sub.schema[:len(row)])]
        exprs[:0] = [(name, f.ref()) for name, f in compared]
        conds[:0] = [Call("=", (x, Column(name, f.type)), BOOLEAN) for x, (name, f) in zip(row, compared)]
    right = Project(sub, tuple(exprs) or ((f"_sq{n}.one", Literal(1, INT)),))
    if negated and sq.kind == "in":
        return right, JoinKind.NULL_AWARE_ANTI, and_all(conds)
    return right, JoinKind.ANTI if negated else JoinKind.SEMI, and_all(conds)


def _null_rejecting(c: Expr) -> frozenset[int]:
    """The scalar subqueries of the condition ``c`` that make it false or NULL whenever they are
    NULL (then an inner join, which drops keys with no rows, gives the same answer as a left
    join): those on a path of arithmetic from a comparison's side."""
    if not (isinstance(c, Call) and c.op in COMPARISONS):
        return frozenset()
    found: set[int] = set()

    def strict(e: Expr) -> None:
        if isinstance(e, SubqueryExpr) and e.kind == "scalar":
            found.add(id(e))
        elif isinstance(e, Call) and e.op in ARITHMETIC:
            for a in e.args:
                strict(a)

    for a in c.args:
        strict(a)
    return frozenset(found)


__all__ = ["run"]
