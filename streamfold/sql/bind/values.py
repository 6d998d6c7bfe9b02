"""An inline table: ``VALUES (1, 'a'), (2, 'b') AS v(x, y)`` in FROM or a join (or as a CTE's
body), as the query over one row that gives its rows::

    SELECT r.x AS x, r.y AS y
    FROM <one row> LATERAL VIEW explode(array(named_struct('x', CAST(1 AS T1), 'y', CAST('a' AS T2)),
                                              named_struct('x', CAST(2 AS T1), …))) t AS r

The one row is a global count over a source, as a SELECT without FROM is
(``from_clause._one_row``): a static table when there is one (its count never changes, so the
rows cost nothing after the first batch), else a stream the query reads, whose count is a
one-row state each batch updates and whose change the rows' change cancels. Columns are named as written in
the alias, else ``col1``, ``col2`` … as Spark names them, and each takes the widest type of its
values (a NULL-only column stays NULL). Rows of different widths are ``VALUES_WIDTH``; a value
that reads a column is an unknown column, as in Spark.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp, parse_one

from ...errors import BindError
from ...ir.types import DataType, common_type
from .context import BindContext

ONE_ROW = "__streamfold_one_row"


def values_query(ctx: BindContext, node: exp.Values, source: str,
                 types_of: Callable[[exp.Select], list[DataType]]) -> exp.Subquery:
    """The derived table the inline table ``node`` stands for (module docstring), its one row
    counted over ``source``; ``types_of`` binds a query and lists its output types."""
    one_row = exp.to_identifier(f"{ONE_ROW}:{source}", quoted=True).sql(dialect="spark")
    rows = [list(t.expressions) if isinstance(t, exp.Tuple) else [t] for t in node.expressions]
    width = len(rows[0])
    for row, written in zip(rows, node.expressions):
        if len(row) != width:
            raise ctx.err(BindError, "VALUES_WIDTH", f"a row of VALUES has {len(row)} value(s), the first {width}",
                          written, f"give every row {width} value(s)")
    alias = node.args.get("alias")
    written_names = [c.name for c in alias.columns] if alias is not None and alias.columns else []
    if written_names and len(written_names) != width:
        raise ctx.err(BindError, "VALUES_WIDTH", f"VALUES names {len(written_names)} column(s) for {width} value(s)",
                      alias, f"name {width} column(s): AS t(c1, …)")
    names = written_names or [f"col{i + 1}" for i in range(width)]
    probe = exp.select(*(exp.alias_(v.copy(), f"__v{r}_{c}", quoted=True) for r, row in enumerate(rows)
                         for c, v in enumerate(row))).from_(exp.Table(this=exp.to_identifier(f"{ONE_ROW}:{source}", quoted=True)))
    types = types_of(probe)
    columns: list[DataType] = []
    for c in range(width):
        widest = types[c]
        for r in range(1, len(rows)):
            wider = common_type(widest, types[r * width + c])
            if wider is None:
                raise ctx.err(BindError, "TYPE_MISMATCH", f"column {names[c]} of VALUES holds a {widest} and a "
                              f"{types[r * width + c]}", rows[r][c], "give the column's values one type, e.g. "
                              "with CAST")
            widest = wider
        columns.append(widest)

    def field(c: int, value: exp.Expr) -> str:
        text = value.sql(dialect="spark")
        return f"'{names[c]}', " + (text if columns[c].is_null else f"CAST({text} AS {columns[c]})")

    structs = ", ".join("named_struct(" + ", ".join(field(c, v) for c, v in enumerate(row)) + ")" for row in rows)
    items = ", ".join(f"`__row`.`{n.replace('`', '``')}` AS `{n.replace('`', '``')}`" for n in names)
    select = parse_one(f"SELECT {items} FROM {one_row} LATERAL VIEW explode(array({structs})) `__rows` AS `__row`",
                       read="spark")
    name = alias.name if alias is not None and alias.name else ""
    return exp.Subquery(this=select, alias=exp.TableAlias(this=exp.to_identifier(name)) if name else None)
