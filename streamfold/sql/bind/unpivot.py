"""``UNPIVOT``: a table reference ``X UNPIVOT [INCLUDE|EXCLUDE NULLS] (v FOR name IN (c1 [AS a1],
…))`` as a query over ``X`` that gives each row once per listed column::

    SELECT * FROM (
      SELECT g1, g2, …,
             CASE pos WHEN 0 THEN 'a1' WHEN 1 THEN 'c2' … END AS name,
             CASE pos WHEN 0 THEN CAST(c1 AS T) WHEN 1 THEN CAST(c2 AS T) … END AS v
      FROM X, LATERAL explode(array(0, 1, …)) AS u(pos))
    WHERE v IS NOT NULL                          -- EXCLUDE NULLS, the default

Spark's analyzer makes of it an ``Expand`` of the same shape: the ids are X's columns that are
not unpivoted, in X's order, then the name column, then the value columns. Several value columns
go together — ``(v, w) FOR name IN ((c1, d1) AS a, (c2, d2))`` — and a row is dropped (EXCLUDE
NULLS) only when all of them are NULL. A name is the alias, else the column's name, else the
names of a group joined by ``_``. Each value column takes the widest type of its columns, without
a string's promotion: a string among numbers is Spark's error too (``TYPE_MISMATCH``).

The query is stateless over ``X``: a batch unpivots its own rows, deletions as deletions, so it
adds nothing to maintain; it is bound as any derived table is.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp, parse_one

from ...errors import BindError, SqlError, UnsupportedError
from ...ir.types import DataType, common_type
from ..scope import Scope
from .context import BindContext

_SOURCE = "__unpivot_source"
_POS = "__unpivot_pos"


def unpivot_query(ctx: BindContext, node: exp.Expr, columns_of: Callable[[exp.Expr, Scope], list[str]],
                  types_of: Callable[[exp.Select], list[DataType]]) -> exp.Subquery:
    """The derived table ``node`` (a table or subquery with an UNPIVOT) stands for (module
    docstring); ``columns_of`` binds a table reference in a scope of its own and lists its
    columns, ``types_of`` binds a query and lists its output types."""
    pivots = node.args["pivots"]
    pivot = pivots[0]
    if len(pivots) > 1:
        raise _refuse(ctx, pivots[1], "several PIVOT/UNPIVOT clauses on one table are not supported",
                      "unpivot in a derived table, then pivot (or unpivot) its result: FROM (SELECT * FROM t "
                      "UNPIVOT (…)) UNPIVOT (…)")
    values = [_name(v) for v in _items(pivot.expressions)]
    field = pivot.args["fields"][0]
    name_column = field.this.name
    groups = [_group(ctx, item, len(values)) for item in field.expressions]
    stripped = node.copy()
    stripped.set("pivots", None)
    unpivoted = {column.name.lower() for columns, _ in groups for column in columns}
    ids = [c for c in columns_of(stripped, Scope([], ctx.sql)) if c.lower() not in unpivoted]
    listed = exp.select(*(c.copy() for columns, _ in groups for c in columns)).from_(stripped.copy())
    types = types_of(listed)
    width = len(values)
    value_types = [_widest(ctx, [types[g * width + i] for g in range(len(groups))], groups, i, field)
                   for i in range(width)]

    def case(branches: list[str], then: str) -> str:
        return f"CASE {_quoted(_POS)} " + " ".join(f"WHEN {p} THEN {b}" for p, b in enumerate(branches)) \
            + f" END AS {_quoted(then)}"

    items = [_quoted(c) for c in ids]
    items.append(case([_string(label) for _, label in groups], name_column))
    for i, value in enumerate(values):
        items.append(case([f"CAST({columns[i].sql(dialect='spark')} AS {value_types[i]})" for columns, _ in groups],
                          value))
    positions = ", ".join(str(p) for p in range(len(groups)))
    inner = f"SELECT {', '.join(items)} FROM {_SOURCE}, LATERAL explode(array({positions})) AS __u({_quoted(_POS)})"
    query = f"SELECT * FROM ({inner}) AS __unpivoted"
    if not pivot.args.get("include_nulls"):
        query += " WHERE " + " OR ".join(f"{_quoted(v)} IS NOT NULL" for v in values)
    select = parse_one(query, read="spark")
    source = next(t for t in select.find_all(exp.Table) if t.name == _SOURCE)
    source.replace(stripped)
    alias = pivot.alias or node.alias or (node.name if isinstance(node, exp.Table) else "")
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(alias)) if alias else None)


def _items(expressions: list[exp.Expr]) -> list[exp.Expr]:
    """The value columns' names: one identifier, or a parenthesised list."""
    if len(expressions) == 1 and isinstance(expressions[0], exp.Tuple):
        return list(expressions[0].expressions)
    return list(expressions)


def _name(node: exp.Expr) -> str:
    return node.name if isinstance(node, (exp.Identifier, exp.Column)) else node.sql(dialect="spark")


def _group(ctx: BindContext, item: exp.Expr, width: int) -> tuple[list[exp.Column], str]:
    """One entry of ``IN (…)``: its columns (one per value column) and the name it gives its rows."""
    alias = item.alias if isinstance(item, (exp.PivotAlias, exp.Alias)) else ""
    body = item.this if isinstance(item, (exp.PivotAlias, exp.Alias)) else item
    columns = list(body.expressions) if isinstance(body, exp.Tuple) else [body.unnest()]
    if not all(isinstance(c, exp.Column) for c in columns):
        raise _refuse(ctx, item, "an UNPIVOT lists columns of the table, not expressions",
                      "compute the expression in a derived table and unpivot its column")
    if len(columns) != width:
        raise ctx.err(BindError, "UNPIVOT_ARITY",
                      f"`{item.sql(dialect='spark')}` gives {len(columns)} value(s) for {width} value column(s)",
                      item, f"list {width} column(s) in each group, as the value columns are")
    return [c for c in columns if isinstance(c, exp.Column)], alias or "_".join(c.name for c in columns)


def _widest(ctx: BindContext, types: list[DataType], groups: list[tuple[list[exp.Column], str]], i: int,
            node: exp.Expr) -> DataType:
    """The type of value column ``i``: the widest of its columns' types, a string never promoted."""
    widest = types[0]
    for t, (columns, _) in zip(types[1:], groups[1:]):
        mixed = (widest.is_string or t.is_string) and not (widest.is_string and t.is_string) \
            and not (widest.is_null or t.is_null)
        wider = None if mixed else common_type(widest, t)
        if wider is None:
            raise ctx.err(BindError, "TYPE_MISMATCH",
                          f"UNPIVOT cannot put `{columns[i].sql(dialect='spark')}` ({t}) in one column with {widest}",
                          node, "cast the columns to one type in a derived table first, e.g. CAST(x AS STRING)")
        widest = wider
    return widest


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _refuse(ctx: BindContext, node: exp.Expr, message: str, hint: str) -> SqlError:
    return ctx.err(UnsupportedError, "UNSUPPORTED_CLAUSE", message, node, hint, construct="UNPIVOT")
