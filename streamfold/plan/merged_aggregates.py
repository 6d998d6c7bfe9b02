"""Global aggregates of one source, each under its own WHERE, as one aggregate.

TPC-DS Q9 asks fifteen scalar subqueries of ``store_sales``, three for each of five bands of
``ss_quantity``; Q28 six of them, one per band. Kept apart, each is a state a batch updates and a
job's share of fixed cost. An aggregate's filter moves into its arguments —
``agg(x)`` over ``σ_p(S)`` is ``agg(CASE WHEN p THEN x END)`` over ``S``, ``count(*)`` is
``count(CASE WHEN p THEN 1 END)``, since these aggregates skip NULLs — so the aggregates of
one source are one aggregate over the rows any of their filters keeps, and one state.
"""

from __future__ import annotations

from ..ir.expr import Agg, Case, Column, Expr, Literal, and_all, or_all
from ..ir.rel import Aggregate, Field, Filter, Project, Rel, Scan
from ..ir.types import BOOLEAN, INT

# aggregates that skip NULL arguments and are the same whichever rows come first
MERGEABLE = frozenset({"count", "sum", "avg", "min", "max"})


def merge(aggregates: list[Aggregate]) -> dict[Aggregate, tuple[Aggregate, tuple[str, ...]]]:
    """For each global aggregate (no GROUP BY) that shares its source with another, the merged
    aggregate and the names its columns have there (in the order of its own); the others are left
    out."""
    groups: dict[tuple[str, bool, bool], list[tuple[Aggregate, Scan, Expr | None]]] = {}
    for agg in dict.fromkeys(aggregates):
        split = _filtered_scan(agg.input)
        if agg.keys or split is None or not all(a.fn in MERGEABLE for _, a in agg.aggs):
            continue
        scan, condition = split
        groups.setdefault((scan.table, scan.static, scan.weighted), []).append((agg, scan, condition))
    merged: dict[Aggregate, tuple[Aggregate, tuple[str, ...]]] = {}
    for members in groups.values():
        if len(members) > 1:
            merged.update(_merged(members))
    return merged


def column_of(merged: Aggregate, names: tuple[str, ...], original: Aggregate, rows: Rel) -> Rel:
    """The original aggregate's one row, out of the merged aggregate's ``rows``."""
    types = {n: f.type for n, f in zip(merged.names, merged.schema)}
    return Project(rows, tuple((own, Column(name, types[name])) for own, name in zip(original.names, names)))


def _filtered_scan(rel: Rel) -> tuple[Scan, Expr | None] | None:
    conditions: list[Expr] = []
    while isinstance(rel, Filter):
        conditions.append(rel.condition)
        rel = rel.input
    return (rel, and_all(conditions)) if isinstance(rel, Scan) else None


def _merged(members: list[tuple[Aggregate, Scan, Expr | None]]) -> dict[Aggregate, tuple[Aggregate, tuple[str, ...]]]:
    first = members[0][1]
    columns: dict[str, Field] = {}  # source column → the merged scan's field
    for _, scan, _ in members:
        for f, c in zip(scan.fields, scan.columns):
            columns.setdefault(c, Field(f"{first.alias}.{c}", f.type, f.nullable))
    base = Scan(first.table, first.alias, tuple(columns.values()), tuple(columns), first.static, first.weighted)
    aggs: list[tuple[str, Agg]] = []
    names: dict[Aggregate, tuple[str, ...]] = {}
    conditions: list[Expr] = []
    for i, (agg, scan, condition) in enumerate(members):
        mapping: dict[str, Expr] = {f.name: columns[c].ref() for f, c in zip(scan.fields, scan.columns)}
        cond = condition.substitute(mapping) if condition is not None else None
        conditions.append(cond if cond is not None else Literal(True, BOOLEAN))
        own = []
        for name, a in agg.aggs:
            args = tuple(x.substitute(mapping) for x in a.args) or (Literal(1, INT),)
            if cond is not None:
                args = tuple(Case(((cond, x),), None, x.type) for x in args)
            aggs.append((f"_m{i}_{name}", Agg(a.fn, args, a.distinct, a.type)))
            own.append(f"_m{i}_{name}")
        names[agg] = tuple(own)
    kept = or_all(conditions) if all(c is not None for _, _, c in members) else None
    merged = Aggregate(Filter(base, kept) if kept is not None else base, (), tuple(aggs))
    return {agg: (merged, names[agg]) for agg, _, _ in members}

