"""Subqueries correlated by more than equalities, decorrelated into a theta join and an aggregate.

``(SELECT count(*) FROM t x WHERE x.b < t.b)`` cannot be grouped by a key of the inner rows: which
rows count depends on the outer value ``t.b`` through ``<``. It is computed per *distinct outer
value* instead — the textbook decorrelation (the "magic set" of the outer values)::

    D  = DISTINCT t.b AS o0 FROM t                            -- the outer values that occur
    A  = SELECT o0, count(match) AS rows                       -- one row per outer value
         FROM (SELECT D.o0, x.*, 1 AS match FROM D JOIN t x ON x.b < D.o0      -- theta join
               UNION ALL SELECT D.o0, NULL…, NULL FROM D)                      -- every value once
         GROUP BY o0
    t ⋈ A ON t.b <=> A.o0                                      -- each outer row gets its value

The padding rows (one per outer value, with NULL inner columns and no ``match``) give every
outer value its row of ``A`` even when no inner row matches, so the join back is an inner join
and an aggregate over no rows has the value SQL gives it (``count`` 0, ``sum`` NULL): the count
bug cannot arise. Aggregates ignore the padding: ``count(*)`` counts ``match``, every other
aggregate reads its argument only on matched rows (``count(1)`` would count the padding) and
skips the NULL it is elsewhere. Equalities among the predicates stay equi-join keys of the theta
join. ``EXISTS`` and ``IN`` are flags of the same aggregate (see :mod:`.subquery_values` for
IN's three-valued rules); they are kept as a DISTINCT of the flags, which changes only when a
flag flips. Every piece is an ordinary join, union and aggregate, maintained incrementally by
the planner (its inner join with a non-equality condition is a filtered cross join).
"""

from __future__ import annotations

from ..ir.expr import Agg, Call, Case, Column, Expr, Literal, and_all
from ..ir.rel import Aggregate, Distinct, Filter, Join, JoinKind, Project, Rel, Union
from ..ir.rename import freshen
from ..ir.types import BIGINT, BOOLEAN, INT
from .correlation import Correlation, localize

ZERO = Literal(0, BIGINT)


def theta(kind: str, corr: Correlation, rel: Rel, n: int, arg: Expr | None = None,
          agg: Aggregate | None = None, value: Expr | None = None) -> tuple[dict[str, Expr], Rel]:
    """``rel`` joined with the subquery's aggregate per outer value, and the columns it adds.

    ``kind`` is ``exists`` (column ``exists``), ``in`` (``found``, ``nonempty``, ``nulls``:
    ``arg`` is IN's left side) or ``scalar`` (``value``: ``value`` over ``agg``'s aggregates).
    """
    prefix = f"_sq{n}."
    outer = corr.outer_names
    # D reads a copy of the outer rows under names of its own: the plan keeps one set of states
    # per name, and the copy's are keyed differently (by the outer values alone).
    suffix = f"@sq{n}"
    needed = set(outer) | (arg.columns() if arg is not None else set())
    copy = freshen(_outer_rows(rel, needed), suffix)
    d_names = {o: f"{prefix}o{i}" for i, o in enumerate(outer)}
    d_exprs: list[tuple[str, Expr]] = [(d_names[o], copy.field(o + suffix).ref()) for o in outer]
    links: list[Expr] = [Call("<=>", (rel.field(o).ref(), Column(d_names[o], rel.field(o).type)), BOOLEAN)
                         for o in outer]
    if arg is not None:
        d_exprs.append((f"{prefix}x", arg.rename({c: c + suffix for c in arg.columns()})))
        links.append(Call("<=>", (arg, Column(f"{prefix}x", arg.type)), BOOLEAN))
    outer_values = Distinct(Project(copy, tuple(d_exprs)))
    d_cols = tuple((f.name, f.ref()) for f in outer_values.schema)

    matched = Join(outer_values, corr.rel, JoinKind.INNER, and_all([localize(p, d_names) for p in corr.preds]))
    match = Column(f"{prefix}match", INT)
    # the inner columns the aggregate reads: IN's value, the scalar's arguments, none for EXISTS
    read = {corr.rel.schema[0].name} if kind == "in" else set()
    if agg is not None:
        read |= {c for _, a in agg.aggs for c in a.columns()}
    inner_cols = tuple(f for f in corr.rel.schema if f.name in read)
    rows = Union((
        Project(matched, d_cols + tuple((f.name, f.ref()) for f in inner_cols) + ((match.name, Literal(1, INT)),)),
        Project(outer_values, d_cols + tuple((f.name, Literal(None, f.type)) for f in inner_cols)
                + ((match.name, Literal(None, INT)),)),
    ))
    count_rows = Agg("count", (match,), False, BIGINT)
    out: dict[str, Expr]
    if kind == "scalar":
        assert agg is not None and value is not None
        aggs = tuple((name, _over_matches(a, match)) for name, a in agg.aggs)
        grouped: Rel = Aggregate(rows, d_cols, aggs)
        out = {"value": value}
    else:
        aggs_: list[tuple[str, Agg]] = [(f"{prefix}rows", count_rows)]
        rows_col = Column(f"{prefix}rows", BIGINT)
        if kind == "exists":
            out = {"exists": Call(">", (rows_col, ZERO), BOOLEAN)}
        else:
            assert arg is not None
            y = corr.rel.schema[0].ref()
            hit = Case(((Call("=", (y, Column(f"{prefix}x", arg.type)), BOOLEAN), Literal(1, INT)),), None, INT)
            aggs_ += [(f"{prefix}values", Agg("count", (y,), False, BIGINT)),
                      (f"{prefix}hits", Agg("count", (hit,), False, BIGINT))]
            out = {
                "found": Call(">", (Column(f"{prefix}hits", BIGINT), ZERO), BOOLEAN),
                "nonempty": Call(">", (rows_col, ZERO), BOOLEAN),
                "nulls": Call(">", (rows_col, Column(f"{prefix}values", BIGINT)), BOOLEAN),
            }
        grouped = Aggregate(rows, d_cols, tuple(aggs_))
    per_value: Rel = Project(grouped, tuple((name, Column(name, e.type)) for name, e in d_cols)
                             + tuple((prefix + name, e) for name, e in out.items()))
    if kind != "scalar":
        per_value = Distinct(per_value)
    joined = Join(rel, per_value, JoinKind.INNER, and_all(links))
    return {name: Column(prefix + name, e.type) for name, e in out.items()}, joined


def _outer_rows(rel: Rel, needed: set[str]) -> Rel:
    """The part of ``rel`` that D's copy reads: ``rel`` without the filters and the joins an
    earlier subquery of the same query added on top of it, as long as it keeps the ``needed``
    columns. Their values there are a superset of those in ``rel`` (a filter on subquery columns,
    or a join that adds them to the left rows, drops rows, it never makes values), and a D value
    no outer row has joins nothing back. Without this, each subquery would copy every earlier one: a
    plan exponential in their number::

        rel = Join(Join(F, A0), A1)  →  D₂ reads F, not a copy of F ⋈ A0 ⋈ A1
    """
    while True:
        if (isinstance(rel, Filter) and needed <= set(rel.input.names)
                and any(c.startswith("_sq") for c in rel.condition.columns())):
            rel = rel.input
        elif (isinstance(rel, Join) and needed <= set(rel.left.names)
              and (rel.kind in _KEEPS_LEFT_ONLY or (rel.kind in (JoinKind.INNER, JoinKind.LEFT)
                                                    and all(name.startswith("_sq") for name in rel.right.names)))):
            rel = rel.left
        else:
            return rel


# joins whose output rows are left rows (a semi or anti join of an unnested condition)
_KEEPS_LEFT_ONLY = (JoinKind.SEMI, JoinKind.ANTI, JoinKind.NULL_AWARE_ANTI)


def _over_matches(a: Agg, match: Column) -> Agg:
    """An aggregate of the subquery that reads only the matched rows: ``count(*)`` counts
    ``match``; any other argument is NULL on a padding row."""
    if not a.args:
        return Agg(a.fn, (match,), a.distinct, a.type)
    matched = Call("IS NOT NULL", (match,), BOOLEAN)
    return Agg(a.fn, tuple(Case(((matched, x),), None, x.type) for x in a.args), a.distinct, a.type)


__all__ = ["theta"]
