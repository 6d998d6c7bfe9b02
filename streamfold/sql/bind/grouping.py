"""Bind an aggregate SELECT block: GROUP BY, the aggregates, HAVING, and what reads them.

A block is an aggregate one when it has GROUP BY or HAVING, or an aggregate call in its select
list or ORDER BY. Its shape is ``Filter(HAVING)? ← Aggregate(keys, aggregate calls)``, under the
block's top (:func:`.order.finish`). A GROUP BY item is an expression, a select position, or a
select alias that is not a column of the input; ``GROUP BY ALL`` is every select item without an
aggregate. Each distinct aggregate call becomes one ``_agg<n>`` column.

The select list, HAVING and ORDER BY are bound over the input, then lifted over the Aggregate's
output (:class:`_Lifter`): a key expression becomes its key column, matched whole, and a column
left over is the classic mistake, ``NOT_AGGREGATED``.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, SqlError, UnsupportedError
from ...ir.expr import Agg, Column, Expr, SubqueryExpr, outer_columns
from ...ir.rel import Aggregate, Filter, Rel
from ..bind_expr import ExprBinder
from ..scope import Scope
from . import grouping_sets, qualify
from .context import BindContext, Cte
from .order import bind_order, finish
from .time_windows import window_keys
from .select_list import Item, aggregate_call, internal_name, item_aliases, unalias
from .over import WindowCalls


def has_agg(items: list[Item], node: exp.Select) -> bool:
    """Whether the select list (bar ``*``) or ORDER BY calls an aggregate."""
    nodes = [it for _, it, ref in items if ref is None]
    order = node.args.get("order")
    if order:
        nodes += order.expressions
    return any(aggregate_call(sub, n) for n in nodes for sub in n.walk())


def aggregate_select(ctx: BindContext, node: exp.Select, rel: Rel, scope: Scope, items: list[Item],
                     ctes: dict[str, Cte]) -> tuple[Rel, list[str]]:
    aggs: dict[Agg, str] = {}

    def on_agg(agg: Agg, agg_node: exp.Expr) -> Expr:
        if agg not in aggs:
            aggs[agg] = ctx.fresh("_agg")
        return Column(aggs[agg], agg.type)

    # GROUP BY keys: expressions, select positions, or select aliases
    keys: list[tuple[str, Expr]] = []
    key_binder = ExprBinder(scope, "GROUP BY")
    group = node.args.get("group")
    sets = grouping_sets.expand(group)
    key_of: dict[int, Expr] = {}  # id of a GROUP BY item → its bound key
    for g in group_items(group, items) if sets is None else _set_items(sets):
        if isinstance(g, Column):  # a column of `*` under GROUP BY ALL
            e: Expr = g
        else:
            e = key_binder.bind(group_target(ctx, g, items, scope))
            if any(isinstance(k, Column) and k.name in aggs.values() for k in e.walk()):
                raise ctx.err(BindError, "AGGREGATE_IN_GROUP_BY", "GROUP BY cannot refer to an aggregate", g)
        key_of[id(g)] = e
        if sets is not None and window_keys(e):
            raise ctx.err(UnsupportedError, "UNSUPPORTED_CLAUSE", "GROUPING SETS, ROLLUP and CUBE over a time "
                          "window are not maintained", g if isinstance(g, exp.Expr) else None,
                          hint="group by the window and the other keys, or write one query per grouping set")
        for part in window_keys(e) or (e,):
            if all(part != k for _, k in keys):
                name = part.name if isinstance(part, Column) else ctx.fresh("_key")
                keys.append((name, part))

    windows = WindowCalls(ctx)
    lift = _Lifter(keys, ctx, scope, aggs, windows)
    select_binder = ExprBinder(scope, "SELECT", on_agg, subquery=ctx.subquery_hook(ctes), on_window=windows)
    exprs: list[tuple[str, Expr]] = []
    for i, (name, item, ref) in enumerate(items):
        bound = ref if ref is not None else select_binder.bind(unalias(item))
        exprs.append((internal_name(name, i, exprs), lift(bound, item)))
    having_node = node.args.get("having")
    having = None
    if having_node is not None:
        condition = item_aliases(having_node.this, items, scope)
        having = lift(ExprBinder(scope, "HAVING", on_agg, subquery=ctx.subquery_hook(ctes)).boolean(condition),
                      having_node.this, having=True)

    cond = qualify.condition(ctx, node, items, scope, ExprBinder(
        scope, "QUALIFY", on_agg, subquery=ctx.subquery_hook(ctes), on_window=windows))
    if cond is not None:
        cond = lift(cond, node.args["qualify"].this)

    def order_bind(n: exp.Expr) -> Expr:
        return lift(ExprBinder(scope, "ORDER BY", on_agg).bind(n), n)

    # ORDER BY may add aggregates, so bind it before building the Aggregate node.
    order_exprs = bind_order(ctx, node, exprs, [n for n, _, _ in items], order_bind)
    agg_list = [(n, a) for a, n in aggs.items()]
    if sets is not None:
        assert group is not None
        members = [tuple(sorted({[k for _, k in keys].index(key_of[id(g)]) for g in s})) for s in sets]
        agg_rel: Rel = grouping_sets.relation(ctx, group, rel, keys, agg_list, members)
    else:
        grouping = next((a for a in aggs if a.fn in ("grouping", "grouping_id")), None)
        if grouping is not None:
            raise ctx.err(BindError, "GROUPING_NOT_ALLOWED", f"{grouping.fn}() needs GROUPING SETS, CUBE or ROLLUP",
                          group or node, "group by ROLLUP(…), CUBE(…) or GROUPING SETS (…)", function=grouping.fn)
        agg_rel = Aggregate(rel, tuple(keys), tuple(agg_list))
    if having is not None:
        agg_rel = Filter(agg_rel, having)
    names = [n for n, _, _ in items]
    distinct = node.args.get("distinct") is not None
    return finish(ctx, node, qualify.qualified(ctx, node, windows.over(agg_rel, lift), windows, cond), exprs, names,
                  distinct, None, order_exprs)


def group_items(group: exp.Group | None, items: list[Item]) -> list[exp.Expr | Column]:
    """The GROUP BY items; ``GROUP BY ALL`` (Spark) is every select item without an aggregate."""
    if group is None:
        return []
    if not group.args.get("all"):
        return list(group.expressions)
    return [ref if ref is not None else unalias(item) for _, item, ref in items
            if ref is not None or not any(aggregate_call(sub, item) for sub in item.walk())]


def _set_items(sets: list[list[exp.Expr]]) -> list[exp.Expr]:
    """Every item of the grouping sets, each once."""
    seen: dict[int, exp.Expr] = {}
    for s in sets:
        for g in s:
            seen.setdefault(id(g), g)
    return list(seen.values())


def group_target(ctx: BindContext, g: exp.Expr, items: list[Item], scope: Scope) -> exp.Expr:
    if isinstance(g, exp.Literal) and not g.is_string:
        pos = int(g.this)
        if not 1 <= pos <= len(items):
            raise ctx.err(BindError, "INVALID_ORDINAL", f"GROUP BY position {pos} is not in the select list",
                          g, f"the select list has {len(items)} items", position=pos)
        return unalias(items[pos - 1][1])
    if isinstance(g, exp.Column) and not g.table:
        name = g.name.lower()
        visible = any(name in e.columns for e in scope.entries) or name in scope.merged
        if not visible:
            for out_name, item, _ in items:
                if out_name.lower() == name and isinstance(item, exp.Alias):
                    return item.this
    return g


class _Lifter:
    """Rewrites a bound select/HAVING/ORDER BY expression over the Aggregate's output.

    Group-key expressions become references to the key column (matched whole, top-down), so
    ``x.A + 1`` in SELECT matches ``GROUP BY x.A + 1``. A column left over that is neither a key
    nor inside an aggregate is the classic mistake, reported as ``NOT_AGGREGATED``.
    """

    def __init__(self, keys: list[tuple[str, Expr]], ctx: BindContext, scope: Scope,
                 aggs: dict[Agg, str], windows: WindowCalls) -> None:
        self.keys = {e: Column(n, e.type) for n, e in keys}
        self.aggs = aggs
        self.windows = windows
        self.ctx = ctx
        self.scope = scope

    def __call__(self, e: Expr, node: exp.Expr, having: bool = False) -> Expr:
        return self._lift(e, node, having)

    def _lift(self, e: Expr, node: exp.Expr, having: bool = False) -> Expr:
        if e in self.keys:
            return self.keys[e]
        if isinstance(e, SubqueryExpr):
            self._correlated(e, node, having)
            return e.with_children(tuple(self._lift(k, node, having) for k in e.children())) if e.children() else e
        if isinstance(e, Column):
            if e.name in self.aggs.values() or e.name in self.windows.names:
                return e
            raise self._not_aggregated(e, node)
        kids = e.children()
        if not kids:
            return e
        return e.with_children(tuple(self._lift(k, node, having) for k in kids))

    def _correlated(self, e: SubqueryExpr, node: exp.Expr, having: bool) -> None:
        """A subquery after GROUP BY may read this block's group keys, in HAVING (as Spark allows):
        the Aggregate outputs a column key under its own name."""
        own = {f.name for entry in self.scope.entries for f in entry.columns.values()}
        own |= {f.name for f in self.scope.merged.values()}
        read = outer_columns(e.rel) & own
        if not read:
            return
        if not having:
            raise self.ctx.err(UnsupportedError, "UNSUPPORTED_SUBQUERY",
                               "a correlated subquery in the select list or ORDER BY after GROUP BY is not "
                               "supported", node, "correlate it in HAVING or WHERE (Spark refuses it here too)",
                               construct="subquery")
        keys = {k.name for x, k in self.keys.items() if isinstance(x, Column) and x.name == k.name}
        missing = sorted(read - keys)
        if missing:
            raise self._not_aggregated(Column(missing[0], e.type), node)

    def _not_aggregated(self, col: Column, node: exp.Expr) -> SqlError:
        short = col.name.split(".", 1)[-1]
        spot = next((c for c in node.find_all(exp.Column) if c.name.lower() == short.lower()), node)
        return self.ctx.err(
            BindError, "NOT_AGGREGATED",
            f"column `{col.name}` is neither in GROUP BY nor inside an aggregate", spot,
            f"add `{col.name}` to GROUP BY, or aggregate it (e.g. max({col.name}))", column=col.name,
        )
