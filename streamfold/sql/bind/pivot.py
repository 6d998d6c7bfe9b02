"""``PIVOT``: a table reference ``X PIVOT (agg, … FOR col IN (v1 [AS a1], …))`` as the grouped
query Spark evaluates it as (its analyzer's ``ResolvePivot``)::

    SELECT g1, g2, …, agg(IF(col <=> v1, arg, NULL)) AS v1, agg(IF(col <=> v2, arg, NULL)) AS v2, …
    FROM X GROUP BY g1, g2, …

The groups are X's columns that neither the pivot column nor an aggregate reads, in X's order;
each aggregate's arguments are kept only on the rows whose pivot column is the value (NULL-safe:
a NULL value picks the rows whose column is NULL; ``count(*)`` counts them). When every aggregate
gives a number or a boolean, Spark aggregates per group and value first and then picks each
value's row, so a group without a row of the value answers NULL even for a count; the rewrite
says so (``CASE WHEN count(IF(col <=> v, 1, NULL)) > 0 THEN … END``). Otherwise a count of such a
group is 0, as the one-step form gives. The output columns
go value by value: named by the value's alias, else its text (``null`` for NULL), and with
several aggregates ``<value>_<aggregate's alias>``. The query that comes out is bound as any
derived table is, so every aggregate keeps its own incremental rules.

Refused (``UNSUPPORTED_CLAUSE``, with the spelling to use): a pivot over several columns, values
that are not constants, several aggregates without an alias each (Spark names those by the
aggregate's SQL text), and ``UNPIVOT``.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ...errors import SqlError, UnsupportedError
from ...ir.types import DataType
from ..scope import Scope
from .context import BindContext


def pivot_query(ctx: BindContext, node: exp.Expr, columns_of: Callable[[exp.Expr, Scope], list[str]],
                types_of: Callable[[exp.Select], list[DataType]]) -> exp.Subquery:
    """The derived table ``node`` (a table or subquery with a PIVOT) stands for (module docstring);
    ``columns_of`` binds a table reference in a scope of its own and lists its columns,
    ``types_of`` binds a query and lists its output types."""
    pivots = node.args["pivots"]
    pivot = pivots[0]
    fields = pivot.args.get("fields") or []
    if len(pivots) > 1 or len(fields) != 1 or not isinstance(fields[0], exp.In) \
            or not isinstance(fields[0].this, exp.Column):
        raise _refuse(ctx, pivot, "a PIVOT over several columns (or several PIVOTs) is not supported",
                      "pivot one column; for several, pivot their concatenation: FOR k IN (…) over "
                      "concat_ws('_', a, b) AS k in a derived table")
    column = fields[0].this.name
    values = [_value(ctx, v) for v in fields[0].expressions]
    aggregates = list(pivot.expressions)
    if len(aggregates) > 1 and not all(isinstance(a, exp.Alias) for a in aggregates):
        raise _refuse(ctx, pivot, "a PIVOT of several aggregates needs an alias for each",
                      "name each aggregate, e.g. sum(amt) AS total, count(*) AS n: the columns are then "
                      "<value>_total, <value>_n")
    stripped = node.copy()
    stripped.set("pivots", None)
    read = {column.lower()} | {c.name.lower() for a in aggregates for c in a.find_all(exp.Column)}
    groups = [c for c in columns_of(stripped, Scope([], ctx.sql)) if c.lower() not in read]

    def grouped(present_only: bool) -> exp.Select:
        items: list[exp.Expr] = [exp.column(g, quoted=True) for g in groups]
        for value, name in values:
            for aggregate in aggregates:
                body = aggregate.this if isinstance(aggregate, exp.Alias) else aggregate
                kept = body.copy().transform(lambda n, v=value: _only_where(n, column, v))
                if present_only:  # NULL, not a count of 0, where the group has no row of the value
                    rows = exp.Count(this=exp.If(this=_is(column, value), true=exp.Literal.number(1), false=exp.Null()))
                    kept = exp.Case(ifs=[exp.If(this=exp.GT(this=rows, expression=exp.Literal.number(0)), true=kept)])
                title = name if len(aggregates) == 1 else f"{name}_{aggregate.alias}"
                items.append(exp.alias_(kept, title, quoted=True))
        select = exp.select(*items).from_(stripped.copy())
        return select.group_by(*(exp.column(g, quoted=True) for g in groups)) if groups else select

    # Spark aggregates in two steps — per group and value, then each value's row picked, NULL for
    # none — when every aggregate is a number or a boolean; otherwise over the kept rows at once
    select = grouped(False)
    if all(t.is_numeric or t.name == "BOOLEAN" for t in types_of(select)[len(groups):]):
        select = grouped(True)
    alias = pivot.alias or node.alias or (node.name if isinstance(node, exp.Table) else "")
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias)) if alias else None)


def _value(ctx: BindContext, node: exp.Expr) -> tuple[exp.Expr, str]:
    """A pivot value and the name its columns take: its alias, else its text as Spark casts it."""
    alias = node.alias if isinstance(node, (exp.PivotAlias, exp.Alias)) else ""
    value = node.this if isinstance(node, (exp.PivotAlias, exp.Alias)) else node
    if isinstance(value, exp.Null):
        return value, alias or "null"
    if isinstance(value, exp.Boolean):
        return value, alias or ("true" if value.this else "false")
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal) and not value.this.is_string:
        return value, alias or f"-{value.this.this}"
    if isinstance(value, exp.Literal):
        return value, alias or value.this
    raise _refuse(ctx, node, "a PIVOT value must be a constant", "list the values as literals: IN ('a', 'b', 1)")


def _only_where(node: exp.Expr, column: str, value: exp.Expr) -> exp.Expr:
    """An aggregate function's arguments kept on the rows whose pivot column is ``value``."""
    if not isinstance(node, exp.AggFunc):
        return node
    condition = _is(column, value)
    changed = node.copy()
    for arg in ("this", "expression"):
        inner = changed.args.get(arg)
        if inner is None or not isinstance(inner, exp.Expr):
            continue
        distinct = isinstance(inner, exp.Distinct)
        target = inner.expressions[0] if distinct and len(inner.expressions) == 1 else inner
        kept = exp.If(this=condition.copy(), true=exp.Literal.number(1) if isinstance(target, exp.Star)
                      else target.copy(), false=exp.Null())
        changed.set(arg, exp.Distinct(expressions=[kept]) if distinct else kept)
    return changed


def _is(column: str, value: exp.Expr) -> exp.Expr:
    return exp.NullSafeEQ(this=exp.column(column, quoted=True), expression=value.copy())


def _refuse(ctx: BindContext, node: exp.Expr, message: str, hint: str) -> SqlError:
    return ctx.err(UnsupportedError, "UNSUPPORTED_CLAUSE", message, node, hint, construct="PIVOT")
