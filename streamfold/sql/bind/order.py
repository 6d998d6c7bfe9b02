"""Bind the top of a query block: its projection, DISTINCT, ORDER BY and LIMIT/OFFSET.

The block's top is ``Limit? ← Sort? ← Distinct? ← Project(select list [+ hidden sort columns])``.
An ORDER BY item names an output column (by position, by name, or by being the same expression
as a select item; ``ORDER BY ALL`` names every one, left to right) or else is an expression over
the block's input, computed in a hidden
``_sort<n>`` column that a last Project drops (not allowed with DISTINCT, whose rows it would
change). ORDER BY and LIMIT on a set operation or a parenthesised query see its output columns
only.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ...errors import BindError
from ...ir.expr import Column, Expr
from ...ir.rel import Distinct, Limit, Project, Rel, Sort, SortKey
from ..bind_expr import ExprBinder
from ..bind_expr.windows import sort_key
from ..scope import Scope, ScopeEntry
from .context import BindContext


def order_limit(ctx: BindContext, node: exp.Expr, rel: Rel, names: list[str]) -> tuple[Rel, list[str]]:
    """ORDER BY / LIMIT attached to a set operation or a parenthesised query: output columns only."""
    order = node.args.get("order")
    if order:
        scope = Scope([ScopeEntry.of("", [(n, f) for n, f in zip(names, rel.schema)])], ctx.sql)
        keys = []
        every = order_all(order, names)
        if every is not None:
            keys = [sort_key(every, f.ref()) for f in rel.schema]
        for o in order.expressions if every is None else []:
            e = _ordinal(ctx, o.this, [f.ref() for f in rel.schema]) or ExprBinder(scope, "ORDER BY").bind(o.this)
            keys.append(sort_key(o, e))
        rel = Sort(rel, tuple(keys))
    return _limit(ctx, node, rel), names


def bind_order(ctx: BindContext, node: exp.Select, exprs: list[tuple[str, Expr]], names: list[str],
               bind_fn: Callable[[exp.Expr], Expr]) -> list[tuple[SortKey, str | None]]:
    """Bind ORDER BY items: (key over the select output or the input, output column it names)."""
    order = node.args.get("order")
    every = order_all(order, names) if order else None
    if every is not None:  # ORDER BY ALL: every select item, left to right
        return [(sort_key(every, Column(n, e.type)), n) for n, e in exprs]
    out: list[tuple[SortKey, str | None]] = []
    for o in (order.expressions if order else []):
        target = o.this
        if isinstance(target, exp.Literal) and not target.is_string:
            pos = int(target.this)
            if not 1 <= pos <= len(exprs):
                raise ctx.err(BindError, "INVALID_ORDINAL", f"ORDER BY position {pos} is not in the select list",
                              target, f"the select list has {len(exprs)} items", position=pos)
            out.append((sort_key(o, Column(exprs[pos - 1][0], exprs[pos - 1][1].type)), exprs[pos - 1][0]))
            continue
        if isinstance(target, exp.Column) and not target.table:
            match = [i for i, n in enumerate(names) if n.lower() == target.name.lower()]
            if len(match) == 1:
                i = match[0]
                out.append((sort_key(o, Column(exprs[i][0], exprs[i][1].type)), exprs[i][0]))
                continue
        e = bind_fn(target)
        same = [n for n, x in exprs if x == e]
        if same:
            out.append((sort_key(o, Column(same[0], e.type)), same[0]))
        else:
            out.append((sort_key(o, e), None))
    return out


def finish(ctx: BindContext, node: exp.Select, rel: Rel, exprs: list[tuple[str, Expr]], names: list[str],
           distinct: bool, order_bind: Callable[[exp.Expr], Expr] | None,
           order: list[tuple[SortKey, str | None]] | None = None) -> tuple[Rel, list[str]]:
    """The block's top over ``rel``: the select list ``exprs``, then DISTINCT, ORDER BY (bound
    here with ``order_bind`` unless given bound as ``order``) and LIMIT."""
    if order is None:
        assert order_bind is not None
        order = bind_order(ctx, node, exprs, names, order_bind)
    hidden: list[tuple[str, Expr]] = []
    keys: list[SortKey] = []
    for key, out_name in order:
        if out_name is not None:
            keys.append(key)
            continue
        if distinct:
            raise ctx.err(BindError, "ORDER_BY_NOT_SELECTED",
                          "with SELECT DISTINCT, ORDER BY may only use selected columns",
                          node.args["order"], "add the expression to the select list")
        hidden_name = ctx.fresh("_sort")
        hidden.append((hidden_name, key.expr))
        keys.append(SortKey(Column(hidden_name, key.expr.type), key.descending, key.nulls_first))
    out: Rel = Project(rel, tuple(exprs) + tuple(hidden))
    if distinct:
        out = Distinct(out)
    if keys:
        out = Sort(out, tuple(keys))
    out = _limit(ctx, node, out)
    if hidden:
        out = Project(out, tuple((n, Column(n, e.type)) for n, e in exprs))
    return out, names


def order_all(order: exp.Order, names: list[str]) -> exp.Ordered | None:
    """The item of ``ORDER BY ALL [ASC|DESC] [NULLS …]`` (Spark: every output column, left to
    right), unless an output column is named ``all``; else None."""
    items = order.expressions
    if len(items) == 1 and isinstance(items[0].this, exp.Var) and items[0].this.name.upper() == "ALL" \
            and "all" not in (n.lower() for n in names):
        return items[0]
    return None


def _limit(ctx: BindContext, node: exp.Expr, rel: Rel) -> Rel:
    limit_node = node.args.get("limit")
    if limit_node is not None and isinstance(limit_node.expression, exp.Var) \
            and limit_node.expression.name.upper() == "ALL":
        limit_node = None  # LIMIT ALL: every row, as without LIMIT
    offset_node = node.args.get("offset")
    if limit_node is None and offset_node is None:
        return rel
    limit = _count(ctx, limit_node.expression, "LIMIT") if limit_node is not None else None
    offset = _count(ctx, offset_node.expression, "OFFSET") if offset_node is not None else 0
    return Limit(rel, limit, offset)


def _count(ctx: BindContext, node: exp.Expr, clause: str) -> int:
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    raise ctx.err(BindError, "INVALID_LIMIT", f"{clause} must be a non-negative whole number", node,
                  f"write {clause} n with a whole number n ≥ 0", clause=clause)


def _ordinal(ctx: BindContext, node: exp.Expr, refs: list[Column]) -> Expr | None:
    if isinstance(node, exp.Literal) and not node.is_string:
        pos = int(node.this)
        if not 1 <= pos <= len(refs):
            raise ctx.err(BindError, "INVALID_ORDINAL", f"ORDER BY position {pos} is out of range", node,
                          position=pos)
        return refs[pos - 1]
    return None


