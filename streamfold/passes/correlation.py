"""Correlated subqueries taken apart: the subquery without its correlated predicates, and them.

A correlated subquery reads columns of the query around it as :class:`OuterColumn`. Unnesting
(seed 000 §6) needs those predicates out of the subquery, where a join can evaluate them:
``pull`` lifts every conjunct that reads an outer column out of the subquery's filters, and
keeps the inner columns they read as extra output columns of the subquery. ``Correlation``
then says how they relate the two sides: by equalities ``inner = outer`` only (the subquery
can be grouped by its inner sides), or by anything else (a theta join).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UnsupportedError
from ..ir.expr import Call, Column, Expr, OuterColumn, and_all, conjuncts, outer_columns
from ..ir.rel import Aggregate, Distinct, Filter, Project, Rel, Sort
from ..ir.types import BOOLEAN

Unnest = Callable[[Rel], Rel]  # unnests the subqueries inside a subquery (the pass itself)


def unsupported(what: str, hint: str) -> UnsupportedError:
    return UnsupportedError(f"{what} is not supported", code="UNSUPPORTED_SUBQUERY", params={"construct": what},
                            hint=hint)


@dataclass(frozen=True)
class Correlation:
    """A subquery ``rel`` whose correlated conjuncts ``preds`` were pulled out of it.

    ``pairs`` are the predicates as (inner, outer) expressions when every one is an equality
    ``inner = outer``; None when some predicate is anything else.
    """

    rel: Rel
    preds: tuple[Expr, ...]
    pairs: tuple[tuple[Expr, Expr], ...] | None

    @property
    def outer_names(self) -> tuple[str, ...]:
        """The outer columns the predicates read, in a fixed order."""
        return tuple(sorted({x.name for p in self.preds for x in p.walk() if isinstance(x, OuterColumn)}))


def correlate(sub: Rel, outer: Rel) -> Correlation:
    """``sub`` taken apart; refused when it reads columns ``outer`` does not have (a query
    further out), since only the enclosing query's rows can be joined with it."""
    inner, preds = pull(sub)
    if outer_columns(inner):
        raise outside_where()
    beyond = sorted({x.name for p in preds for x in p.walk() if isinstance(x, OuterColumn)} - set(outer.names))
    if beyond:
        raise unsupported("a subquery correlated with a query further out than the one around it",
                          f"join the columns it reads ({', '.join(beyond)}) into the query around it")
    pairs = [equality(p) for p in preds]
    ok = all(p is not None for p in pairs)
    return Correlation(inner, tuple(preds), tuple(p for p in pairs if p is not None) if ok else None)


def pull(rel: Rel) -> tuple[Rel, list[Expr]]:
    """Take the correlated conjuncts out of a subquery: (the subquery without them, them).

    The subquery keeps (as extra output columns) the columns those conjuncts read.
    """
    if isinstance(rel, Filter):
        inner, preds = pull(rel.input)
        mine = [c for c in conjuncts(rel.condition) if is_correlated(c)]
        rest = and_all([c for c in conjuncts(rel.condition) if not is_correlated(c)])
        return (Filter(inner, rest) if rest is not None else inner), preds + mine
    if isinstance(rel, Project):
        inner, preds = pull(rel.input)
        if not preds:
            return Project(inner, rel.exprs), preds
        out = {n for n, _ in rel.exprs}
        extra = []
        for p in preds:
            for name in sorted(p.columns()):
                if name not in out:
                    extra.append((name, inner.field(name).ref()))
                    out.add(name)
        return Project(inner, rel.exprs + tuple(extra)), preds
    if isinstance(rel, Distinct):
        inner, preds = pull(rel.input)
        return Distinct(inner), preds
    if isinstance(rel, Sort):
        return pull(rel.input)
    if isinstance(rel, Aggregate) and rel.keys:
        return _pull_through_group_by(rel)
    if outer_columns(rel):
        if isinstance(rel, Aggregate):
            raise unsupported("a correlated reference under an aggregate without GROUP BY inside a subquery",
                              "such a subquery has one row: compare its value instead, "
                              "`(SELECT count(*) … WHERE …) > 1`")
        raise unsupported(f"a correlated reference under a {type(rel).__name__.lower()} inside a subquery",
                          "correlate in the subquery's own WHERE, above any join, union or derived table in it")
    return rel, []


def _pull_through_group_by(rel: Aggregate) -> tuple[Rel, list[Expr]]:
    """Correlated equalities below a GROUP BY, taken above it: ``inner = outer`` holds for all the
    rows an outer row meets, so grouping by ``inner`` as well splits no group it sees::

        Aggregate[g.pid; count(*)](Filter[g.cid = outer.cid](Scan F g))
          →  Aggregate[g.pid, g.cid; count(*)](Scan F g), with g.cid = outer.cid pulled

    Any other correlation would change what is grouped: refused."""
    inner, preds = pull(rel.input)
    if not preds:
        return Aggregate(inner, rel.keys, rel.aggs), preds
    keys = list(rel.keys)
    taken = {n for n, _ in rel.keys} | {n for n, _ in rel.aggs}
    lifted: list[Expr] = []
    for p in preds:
        pair = equality(p)
        if pair is None:
            raise unsupported("a subquery with GROUP BY correlated by something other than an equality",
                              "correlate the grouped subquery by equalities (inner = outer), or aggregate in a "
                              "derived table and correlate with that")
        inside, outside = pair
        name = next((n for n, e in keys if e == inside), None)
        if name is None:
            name = inside.name if isinstance(inside, Column) and inside.name not in taken else f"_corr{len(keys)}"
            while name in taken:
                name = "_" + name
            keys.append((name, inside))
            taken.add(name)
        lifted.append(Call("=", (Column(name, inside.type), outside), BOOLEAN))
    return Aggregate(inner, tuple(keys), rel.aggs), lifted


def outside_where() -> UnsupportedError:
    """An outer column read where no join can evaluate it: the subquery's output or aggregate."""
    return unsupported("a correlated reference outside the subquery's WHERE and HAVING (in its select list "
                       "or an aggregate)", "compute that part in the query around the subquery, or correlate "
                       "in the subquery's WHERE")


def is_correlated(e: Expr) -> bool:
    return any(isinstance(x, OuterColumn) for x in e.walk())


def localize(e: Expr, names: dict[str, str] | None = None) -> Expr:
    """A correlated predicate as a join condition: outer references become plain columns
    (renamed by ``names`` when given)."""
    def plain(x: Expr) -> Expr | None:
        if isinstance(x, OuterColumn):
            return Column(names.get(x.name, x.name) if names else x.name, x.type)
        return None

    return e.transform(plain)


def equality(p: Expr) -> tuple[Expr, Expr] | None:
    """``inner = outer`` as (inner expression, outer expression), if ``p`` is one."""
    if not (isinstance(p, Call) and p.op == "="):
        return None

    def outer_only(e: Expr) -> bool:
        return is_correlated(e) and not e.columns()

    def inner_only(e: Expr) -> bool:
        return not is_correlated(e) and bool(e.columns())

    a, b = p.args
    if inner_only(a) and outer_only(b):
        return a, b
    if inner_only(b) and outer_only(a):
        return b, a
    return None
