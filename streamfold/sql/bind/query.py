"""The entry point: bind a whole query text, dispatching each query within it by its kind.

A query is a SELECT block (:mod:`.select`), a set operation (:mod:`.setops`), or a parenthesised
query with its own ORDER BY/LIMIT (:mod:`.order`); any of them may open with a WITH clause
(:mod:`.ctes`). Derived tables, CTEs and subqueries of expressions come back here through
:meth:`.context.BindContext.query`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from ...errors import BindError, SqlError, UnsupportedError
from ...ir.rel import Rel
from ..catalog import Catalog
from ..parse import ParsedQuery, parse_query
from ..scope import Scope
from .foreign import refuse_foreign
from .context import BindContext, Cte
from .ctes import with_clause
from .order import order_limit
from .select import select
from .setops import union


@dataclass(frozen=True)
class BoundQuery:
    """A bound query: its logical plan, the output column names, and what it was bound against."""

    rel: Rel
    output_names: tuple[str, ...]
    sql: str
    catalog: Catalog


def bind(query: str | ParsedQuery, catalog: Catalog) -> BoundQuery:
    """Bind ``query`` (its text, parsed here, or parsed already) against ``catalog``; raises a
    coded :class:`SqlError` on a mistake."""
    parsed = query if isinstance(query, ParsedQuery) else parse_query(query)
    sql = parsed.written
    try:
        binder = _QueryBinder(parsed, catalog)
        for tree in (parsed.tree, *parsed.steps.values()):
            refuse_foreign(binder, tree)
        rel, names = binder.query(parsed.tree, {})
    except SqlError as e:
        raise e.with_sql(sql) from None
    check_output_names(names, sql)
    return BoundQuery(rel, tuple(names), sql, catalog)


def check_output_names(names: list[str], sql: str) -> None:
    """Refuse two output columns with one name (outputs are Parquet files). The runtime checks
    Spark's own names too, which for unnamed subqueries (``scalarsubquery(k)``) can collide."""
    lowered = [n.lower() for n in names]
    for n in names:
        if lowered.count(n.lower()) > 1:
            raise BindError(
                f"the query outputs two columns named `{n}`", code="DUPLICATE_OUTPUT_COLUMN", sql=sql,
                params={"column": n}, hint="give them distinct names with AS; outputs are written as Parquet",
            )


class _QueryBinder(BindContext):
    def query(self, node: exp.Expr, ctes: dict[str, Cte], parent: Scope | None = None) -> tuple[Rel, list[str]]:
        ctes = with_clause(self, node, ctes)
        if isinstance(node, exp.Subquery):
            rel, names = self.query(node.this, ctes, parent)
            return order_limit(self, node, rel, names)
        if isinstance(node, exp.Select):
            return select(self, node, ctes, parent)
        if isinstance(node, (exp.Union, exp.Intersect, exp.Except)):
            return union(self, node, ctes, parent)
        raise self.err(UnsupportedError, "UNSUPPORTED_QUERY", f"{node.key.upper()} is not supported", node,
                       construct=node.key)
