"""Subqueries used as values — anywhere in an expression — unnested into joined columns.

A subquery that is a whole condition of WHERE becomes a semi or anti join
(:mod:`.unnest_subqueries`). Anywhere else — under OR, NOT or CASE, in the select list, in a
comparison — it is a value each outer row needs: the subquery is aggregated per correlation key,
joined to the outer rows (a LEFT JOIN: a key with no inner rows gets NULLs), and the expression
reads the joined columns. Seed 000 §6 unnests the same way ("the query unnesting is done with a
left-outer join"). Before::

    Project[a, EXISTS (SELECT 1 FROM u WHERE u.k = t.a)](Scan t)

After::

    Project[a, _sq0.present IS NOT NULL](
        Join left ON t.a = _sq0.key0 (Scan t,
            Distinct(Project[u.k AS _sq0.key0, TRUE AS _sq0.present](Scan u))))

Per kind, with the subquery's correlation keys (none when it is uncorrelated):

* ``EXISTS`` — the distinct keys of the subquery's rows; a row exists when its key joins.
  Never NULL. (Uncorrelated: one row, ``count(*) > 0``, cross-joined.)
* ``x IN (SELECT y …)`` — SQL's three-valued rules exactly: TRUE if some ``y = x``; else FALSE if
  the subquery has no rows (for this key); else NULL if ``x`` is NULL or some ``y`` is NULL;
  else FALSE. So two relations join: the distinct non-NULL ``(key, y)`` (is there a match?) and
  per key whether it has rows and whether one has a NULL ``y``. ``NOT IN`` is ``NOT`` of it.
* scalar ``(SELECT agg …)`` — the aggregate grouped by the key; a key with no rows gets the
  aggregate over no rows (``count`` 0: the "count bug"), every other aggregate NULL.

The flag relations are DISTINCTs of what the expression reads, so a batch changes them (and
re-joins outer rows) only when a flag flips, not whenever a count moves. A subquery correlated
by anything but equalities is decorrelated through a theta join (:mod:`.decorrelate`).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..ir.expr import ROW, Agg, Call, Case, Cast, Column, Expr, Literal, SubqueryExpr, and_all, conjuncts
from ..ir.rel import Aggregate, DeltaScan, Distinct, Filter, Join, JoinKind, Project, Rel, Scan, StateScan
from ..ir.types import BIGINT, BOOLEAN, STRING
from . import decorrelate
from .first_row import first_of
from .correlation import (
    Correlation, Unnest, correlate, is_correlated, localize, outer_columns, outside_where, unsupported,
)

COUNT_STAR = Agg("count", (), False, BIGINT)
TRUE = Literal(True, BOOLEAN)
ZERO = Literal(0, BIGINT)


def unnest_values(e: Expr, rel: Rel, names: Iterator[int], unnest: Unnest,
                  strict: frozenset[int] = frozenset()) -> tuple[Expr, Rel]:
    """``e`` with every subquery replaced by an expression over columns joined to ``rel``.

    ``strict`` holds the ids of scalar subqueries whose NULL makes the whole filter condition
    drop the row: an inner join (dropping keys without rows) serves them as well as a left join.
    """
    current = [rel]

    def replace(x: Expr) -> Expr | None:
        if not isinstance(x, SubqueryExpr):
            return None
        value, current[0] = _value(x, current[0], next(names), unnest, id(x) in strict)
        return value

    out = e.transform(replace)
    return out, current[0]


def _value(sq: SubqueryExpr, rel: Rel, n: int, unnest: Unnest, strict: bool) -> tuple[Expr, Rel]:
    sub = unnest(sq.rel)
    if sq.kind == "scalar":
        first = first_of(sub, rel, n)  # ORDER BY … LIMIT 1 (.first_row)
        if first is not None:
            return _scalar(*first, rel, n, strict)
        agg, value = aggregate_of(sub)
        if is_correlated(value) or any(is_correlated(a) for _, a in agg.aggs):
            raise outside_where()
        corr = correlate(agg.input, rel)
        if corr.pairs is None:
            cols, joined = decorrelate.theta("scalar", corr, rel, n, agg=agg, value=value)
            return cols["value"], joined
        return _scalar(corr, agg, value, rel, n, strict)
    corr = correlate(sub, rel)
    if sq.kind == "exists":
        if corr.pairs is None:
            cols, joined = decorrelate.theta("exists", corr, rel, n)
            return cols["exists"], joined
        return _exists(corr, rel, n)
    assert sq.kind == "in" and sq.arg is not None
    if len(in_row(sq.arg)) > 1:
        raise unsupported("a row IN (subquery) inside an expression, or a row NOT IN",
                          "use `(a, b) IN (SELECT …)` as a condition of WHERE, or write EXISTS (SELECT … WHERE "
                          "x = a AND y = b): Spark's NULL rules for comparing rows differ from SQL's")
    if corr.pairs is None:
        cols, joined = decorrelate.theta("in", corr, rel, n, arg=sq.arg)
        return in_value(sq.arg, cols["found"], cols["nonempty"], cols["nulls"]), joined
    return _in(sq.arg, corr, rel, n)


def in_row(arg: Expr) -> tuple[Expr, ...]:
    """The values IN compares with the subquery's columns: one, or a row's."""
    return arg.args if isinstance(arg, Call) and arg.op == ROW else (arg,)


def in_value(x: Expr, found: Expr, nonempty: Expr, nulls: Expr) -> Expr:
    """``x IN (subquery)`` from whether a value equals ``x`` (``found``), whether the subquery has
    rows (``nonempty``) and whether one of its values is NULL (``nulls``); NULL flags read as false."""
    def true(flag: Expr) -> Expr:
        return Call("coalesce", (flag, Literal(False, BOOLEAN)), BOOLEAN, "coalesce({0}, {1})")

    unknown = Call("OR", (Call("IS NULL", (x,), BOOLEAN), true(nulls)), BOOLEAN)
    return Case(((true(found), TRUE), (Call("NOT", (true(nonempty),), BOOLEAN), Literal(False, BOOLEAN)),
                 (unknown, Literal(None, BOOLEAN))), Literal(False, BOOLEAN), BOOLEAN)


def _keys(corr: Correlation, n: int, name: str = "key") -> tuple[tuple[tuple[str, Expr], ...], list[Expr]]:
    """The correlation keys as named inner expressions, and the join conditions outer = key."""
    assert corr.pairs is not None
    keys = tuple((f"_sq{n}.{name}{i}", inner) for i, (inner, _) in enumerate(corr.pairs))
    conds: list[Expr] = [Call("=", (localize(outer), Column(k, inner.type)), BOOLEAN)
                         for (k, inner), (_, outer) in zip(keys, corr.pairs)]
    return keys, conds


def _key_cols(keys: tuple[tuple[str, Expr], ...]) -> tuple[tuple[str, Expr], ...]:
    return tuple((k, Column(k, e.type)) for k, e in keys)


def _attach(rel: Rel, flags: Rel, conds: list[Expr]) -> Rel:
    """Each outer row with its key's row of ``flags`` (NULLs if none); one row per outer row."""
    cond = and_all(conds)
    return Join(rel, flags, JoinKind.LEFT, cond) if cond is not None else Join(rel, flags, JoinKind.CROSS, None)


def _exists(corr: Correlation, rel: Rel, n: int) -> tuple[Expr, Rel]:
    prefix = f"_sq{n}."
    if not corr.pairs:
        counted = Aggregate(corr.rel, (), ((f"{prefix}rows", COUNT_STAR),))
        flag = Distinct(Project(counted, ((f"{prefix}exists", Call(">", (Column(f"{prefix}rows", BIGINT), ZERO),
                                                                        BOOLEAN)),)))
        return Column(f"{prefix}exists", BOOLEAN), Join(rel, flag, JoinKind.CROSS, None)
    keys, conds = _keys(corr, n)
    present = Distinct(Project(corr.rel, keys + ((f"{prefix}present", TRUE),)))
    return Call("IS NOT NULL", (Column(f"{prefix}present", BOOLEAN),), BOOLEAN), _attach(rel, present, conds)


def _in(x: Expr, corr: Correlation, rel: Rel, n: int) -> tuple[Expr, Rel]:
    prefix = f"_sq{n}."
    y = corr.rel.schema[0].ref()
    keys, conds = _keys(corr, n)
    rows, values = Column(f"{prefix}rows", BIGINT), Column(f"{prefix}values", BIGINT)
    counted = Aggregate(corr.rel, keys, ((rows.name, COUNT_STAR), (values.name, Agg("count", (y,), False, BIGINT))))
    totals = Distinct(Project(counted, _key_cols(keys) + (
        (f"{prefix}nonempty", Call(">", (rows, ZERO), BOOLEAN)),
        (f"{prefix}nulls", Call(">", (rows, values), BOOLEAN)))))
    value = Column(f"{prefix}value", y.type)
    hit_keys, hit_conds = _keys(corr, n, "hkey")
    present = Filter(corr.rel, Call("IS NOT NULL", (y,), BOOLEAN))
    hits = Distinct(Project(present, hit_keys + ((value.name, y), (f"{prefix}found", TRUE))))
    # hits first: the left join's rows are then the outer rows themselves, and a flip of the
    # totals (an uncorrelated subquery's one row) reaches the outer rows once, in the last join
    joined: Rel = Join(rel, hits, JoinKind.LEFT, and_all(hit_conds + [Call("=", (x, value), BOOLEAN)]))
    joined = _attach(joined, totals, conds)
    return in_value(x, Column(f"{prefix}found", BOOLEAN), Column(f"{prefix}nonempty", BOOLEAN),
                    Column(f"{prefix}nulls", BOOLEAN)), joined


def _scalar(corr: Correlation, agg: Aggregate, value: Expr, rel: Rel, n: int, strict: bool) -> tuple[Expr, Rel]:
    """A scalar aggregate subquery, grouped by its correlation keys and left-joined (uncorrelated:
    its one row, cross-joined)."""
    out_name = f"_sq{n}.value"
    if not corr.pairs:
        single = Project(Aggregate(corr.rel, (), agg.aggs), ((out_name, value),))
        return single.schema[0].ref(), Join(rel, single, JoinKind.CROSS, None)
    keys, conds = _keys(corr, n)
    grouped = Aggregate(corr.rel, keys, agg.aggs)
    exprs: list[tuple[str, Expr]] = [(out_name, value), *_key_cols(keys)]
    empty = over_no_rows(value, agg)
    count_bug = not (isinstance(empty, Literal) and empty.value is None)
    if count_bug:
        exprs.append((f"_sq{n}.present", TRUE))
    derived = Project(grouped, tuple(exprs))
    column = Column(out_name, value.type)
    if not count_bug and strict:
        return column, Join(rel, derived, JoinKind.INNER, and_all(conds))
    joined = Join(rel, derived, JoinKind.LEFT, and_all(conds))
    if not count_bug:
        return column, joined
    absent = Call("IS NULL", (Column(f"_sq{n}.present", BOOLEAN),), BOOLEAN)
    return Case(((absent, empty),), column, value.type), joined


def aggregate_of(sub: Rel) -> tuple[Aggregate, Expr]:
    """A scalar subquery's aggregate and its value over that aggregate's output."""
    if isinstance(sub, Project) and len(sub.exprs) == 1:
        value, inner = sub.exprs[0][1], sub.input
        while isinstance(inner, Project):  # a CTE's projection read by the subquery's: TPC-DS Q14
            value, inner = value.substitute(dict(inner.exprs)), inner.input
        if isinstance(inner, Aggregate) and not inner.keys:
            return inner, value
        if isinstance(inner, Aggregate) and _one_group(inner, value):
            return Aggregate(inner.input, (), inner.aggs), value
    static = single_static_row(sub)
    if static is not None:
        return static
    raise unsupported("a scalar subquery that is not an aggregate without GROUP BY",
                      "make it return one aggregate value (e.g. SELECT max(x) …): Spark stops a query whose "
                      "scalar subquery returns two rows, which a continuous query cannot promise never happens")


def _one_group(agg: Aggregate, value: Expr) -> bool:
    """Whether a grouped scalar subquery is its aggregate without GROUP BY: every key is a column
    its input's WHERE sets equal to a constant (TPC-DS Q44's ``… WHERE ss_store_sk = 4 … GROUP BY
    ss_store_sk``), so there is one group at most, and its value reads only the aggregates and is
    NULL over no rows (no ``count``), as a subquery with no row is."""
    fixed: set[str] = set()
    node = agg.input
    while isinstance(node, Filter):
        for c in conjuncts(node.condition):
            if isinstance(c, Call) and c.op == "=" and len(c.args) == 2:
                for col, other in (c.args, c.args[::-1]):
                    constant = other.expr if isinstance(other, Cast) else other
                    if isinstance(col, Column) and isinstance(constant, Literal) and constant.value is not None:
                        fixed.add(col.name)
        node = node.input
    if not all(isinstance(e, Column) and e.name in fixed for _, e in agg.keys):
        return False
    if not value.columns() <= {n for n, _ in agg.aggs}:
        return False
    empty = over_no_rows(value, agg)
    return isinstance(empty, Literal) and empty.value is None


def single_static_row(sub: Rel) -> tuple[Aggregate, Expr] | None:
    """A scalar subquery over static tables only, uncorrelated, that is no aggregate — TPC-DS's
    ``(SELECT d_month_seq FROM date_dim WHERE d_year = 2001 AND d_moy = 1)`` — as Spark evaluates
    it: NULL over no rows, the value of its one row, and over two rows the error Spark raises
    (at the first batch, as the tables never change). So it is the aggregate ``count(*)`` and
    ``max(x)`` (the value, when there is one row) with ``raise_error`` past one row; ``None``
    for a subquery that reads a stream or an outer column, or whose value has no order."""
    if outer_columns(sub) or not all(node.static for node in sub.walk() if isinstance(node, Scan)) \
            or any(isinstance(node, (DeltaScan, StateScan)) for node in sub.walk()):
        return None
    field = sub.schema[0]
    if not field.type.is_orderable:
        return None
    rows, value = f"{field.name}#rows", f"{field.name}#value"
    agg = Aggregate(sub, (), ((rows, COUNT_STAR), (value, Agg("max", (field.ref(),), False, field.type))))
    error = Call("raise_error", (Literal("[SCALAR_SUBQUERY_TOO_MANY_ROWS] more than one row returned by a subquery "
                                         "used as an expression", STRING),), field.type, "raise_error({0})")
    return agg, Case(((Call(">", (Column(rows, BIGINT), Literal(1, BIGINT)), BOOLEAN), Cast(error, field.type)),),
                     Column(value, field.type), field.type)


def over_no_rows(value: Expr, agg: Aggregate) -> Expr:
    """The subquery's value for a key with no rows: count is 0, every other aggregate NULL."""
    counts = {n for n, a in agg.aggs if a.fn == "count"} & value.columns()
    if not counts:
        return Literal(None, value.type)
    return value.substitute({n: Literal(0 if n in counts else None, a.type) for n, a in agg.aggs})


__all__ = ["aggregate_of", "in_row", "in_value", "over_no_rows", "unnest_values"]
