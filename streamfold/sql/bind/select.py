"""Bind one SELECT block, clause by clause, in the order Spark evaluates them.

::

    Limit? ← Sort? ← Project(select list [+ hidden sort columns]) ← Filter(HAVING)?
        ← Aggregate(GROUP BY keys, aggregate calls)?  ← Explode? ← Filter(WHERE)? ← FROM

FROM (:mod:`.from_clause`) builds the scope the other clauses read; WHERE is bound over it; a
generator in the select list (:mod:`.generators`) comes next; then the block is an aggregate one
(:mod:`.grouping`) or a plain one, its window calls (OVER) in a ``Window`` node under the select
list (:mod:`.over`), filtered by QUALIFY (:mod:`.qualify`), and :func:`.order.finish` puts the
top on it. Clauses the binder does not
support are refused, never ignored: PIVOT, CONNECT BY,
TABLESAMPLE, DISTINCT ON, GROUPING SETS, CUBE and ROLLUP.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import UnsupportedError
from ...ir.expr import Expr
from ...ir.rel import Filter, Rel
from ..bind_expr import ExprBinder
from ..scope import Scope
from .context import BindContext, Cte
from .from_clause import from_clause
from .generators import select_generators
from .grouping import aggregate_select, has_agg
from .order import finish
from .expiry import bind_where, reads_now
from . import named_windows, qualify
from .over import WindowCalls
from .select_list import Item, internal_name, select_items, unalias
from .session_windows import session_window
from .time_windows import time_window


def select(ctx: BindContext, node: exp.Select, ctes: dict[str, Cte],
           parent: Scope | None = None) -> tuple[Rel, list[str]]:
    named_windows.inline(ctx, node)  # WINDOW w AS (…): each OVER w written out
    for unsupported in ("pivots", "connect", "sample"):
        if node.args.get(unsupported):
            raise ctx.err(UnsupportedError, "UNSUPPORTED_CLAUSE", f"{unsupported.upper()} is not supported yet",
                          node.args[unsupported] if not isinstance(node.args[unsupported], list)
                          else node.args[unsupported][0], "docs/sql.md lists what is supported",
                          construct=unsupported)
    if node.args.get("distinct") and node.args["distinct"].args.get("on"):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_CLAUSE", "DISTINCT ON is not supported",
                      node.args["distinct"], construct="DISTINCT ON")
    rel, scope = from_clause(ctx, node, ctes, parent)
    where = node.args.get("where")
    if where is not None and reads_now(where.this):  # time bounds (sql/bind/expiry.py)
        rel = Filter(rel, bind_where(ctx, where.this, scope, ctes))
    elif where is not None:
        rel = Filter(rel, ExprBinder(scope, "WHERE", subquery=ctx.subquery_hook(ctes)).boolean(where.this))
    rel = time_window(ctx, node, rel, scope)
    rel = session_window(ctx, node, rel, scope)
    rel, generated = select_generators(ctx, node, rel, scope)
    items = select_items(node, scope, generated)
    group = node.args.get("group")
    having = node.args.get("having")
    if group is not None or having is not None or has_agg(items, node):
        return aggregate_select(ctx, node, rel, scope, items, ctes)
    return _plain_select(ctx, node, rel, scope, items, ctes)


def _plain_select(ctx: BindContext, node: exp.Select, rel: Rel, scope: Scope, items: list[Item],
                  ctes: dict[str, Cte]) -> tuple[Rel, list[str]]:
    windows = WindowCalls(ctx)
    binder = ExprBinder(scope, "SELECT", subquery=ctx.subquery_hook(ctes), on_window=windows)
    exprs: list[tuple[str, Expr]] = []
    for i, (name, item, ref) in enumerate(items):
        e = ref if ref is not None else binder.bind(unalias(item))
        exprs.append((internal_name(name, i, exprs), e))
    cond = qualify.condition(ctx, node, items, scope, ExprBinder(
        scope, "QUALIFY", subquery=ctx.subquery_hook(ctes), on_window=windows))
    names = [n for n, _, _ in items]
    distinct = node.args.get("distinct") is not None
    return finish(ctx, node, qualify.qualified(ctx, node, windows.over(rel), windows, cond), exprs, names, distinct,
                  lambda n: ExprBinder(scope, "ORDER BY").bind(n))
