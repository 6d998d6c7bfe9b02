"""Bind generators: ``LATERAL VIEW [OUTER] explode(arr) t AS v`` and ``SELECT explode(arr) AS v``.

Both are an :class:`Explode` of one array, with a position column for ``posexplode``; OUTER
keeps a row whose array is empty or NULL. A LATERAL VIEW's columns join the FROM clause's scope
under its alias. A generator in the select list runs after WHERE, as in Spark: it must be a
whole select item, the only one of its SELECT, and not in an aggregate block; its columns are
select items, not names for the rest of the block.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.expr import Column
from ...ir.rel import Explode, Rel
from ..bind_expr import ExprBinder
from ..scope import Scope, ScopeEntry
from .context import BindContext
from .grouping import has_agg


def lateral_view(ctx: BindContext, node: exp.Lateral, rel: Rel, scope: Scope) -> Rel:
    """``LATERAL VIEW [OUTER] explode(arr) t AS v`` / ``posexplode(arr) t AS pos, v``."""
    gen = node.this
    if not node.args.get("view") or not isinstance(gen, exp.Explode):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_CLAUSE",
                      f"`{node.sql(dialect='spark').strip()}` is not supported", node,
                      "use LATERAL VIEW [OUTER] explode(array) or posexplode(array)", construct="lateral")
    alias = node.args.get("alias")
    view = alias.name if alias is not None and alias.name else ctx.fresh("_gen")
    names = [c.name for c in alias.columns] if alias is not None and alias.columns else []
    outer = bool(node.args.get("outer")) or _outer_generator(gen)
    return _explode(ctx, gen, rel, scope, view, names, outer, node)


def _explode(ctx: BindContext, gen: exp.Explode, rel: Rel, scope: Scope, view: str, names: list[str],
             outer: bool, node: exp.Expr) -> Explode:
    with_position = isinstance(gen, exp.Posexplode)
    fn = type(gen).__name__.lower().lstrip("_").replace("outer", "_outer")
    defaults = ["pos", "col"] if with_position else ["col"]
    if not names:
        names = defaults
    if len(names) != len(defaults):
        raise ctx.err(BindError, "GENERATOR_COLUMNS",
                      f"`{fn}` makes {len(defaults)} column(s), but {len(names)} name(s) are given", node,
                      f"name them like `AS {', '.join(defaults)}`", function=fn, expected=len(defaults))
    if gen.expressions:
        raise ctx.err(BindError, "WRONG_ARGUMENTS", f"`{fn}` takes one array", gen, function=fn)
    array = ExprBinder(scope, "LATERAL VIEW").bind(gen.this)
    if array.type.name != "ARRAY":
        raise ctx.err(BindError, "TYPE_MISMATCH", f"`{fn}` needs an array, but its argument is {array.type}",
                      gen, "explode works on ARRAY columns (MAP columns are not supported)",
                      expected="ARRAY", actual=array.type.sql())
    ctx.check_alias(view, node, scope)
    internal = ctx.unique_alias(view)
    cols = [f"{internal}.{n}" for n in names]
    out = Explode(rel, array, cols[-1], cols[0] if with_position else None, outer)
    scope.entries.append(ScopeEntry.of(view, [(n, out.field(c)) for n, c in zip(names, cols)]))
    return out


def select_generators(ctx: BindContext, node: exp.Select, rel: Rel,
                      scope: Scope) -> tuple[Rel, dict[int, list[tuple[str, Column]]]]:
    """``SELECT explode(arr) AS v …``: Spark's generator in the select list, which runs after
    WHERE. It becomes an Explode under the projection; the item reads its columns."""
    gens = [(i, item) for i, item in enumerate(node.expressions) if isinstance(_unalias_all(item), exp.Explode)]
    for item in node.expressions:
        for sub in item.walk():
            if isinstance(sub, (exp.Explode, exp.Inline)) and _unalias_all(item) is not sub:
                raise ctx.err(UnsupportedError, "UNSUPPORTED_GENERATOR",
                              "a generator must be a whole select item, not part of an expression", sub,
                              "explode in a LATERAL VIEW and use its column", construct="generator")
    if not gens:
        return rel, {}
    if len(gens) > 1:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_GENERATOR", "only one generator is allowed per SELECT",
                      gens[1][1], "use LATERAL VIEW for the others", construct="generator")
    has_group = node.args.get("group") is not None or node.args.get("having") is not None
    if has_group or has_agg([("", it, None) for it in node.expressions], node):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_GENERATOR",
                      "a generator cannot be combined with GROUP BY or aggregates in one SELECT", gens[0][1],
                      "explode in a LATERAL VIEW (or a subquery) and aggregate over its column",
                      construct="generator")
    i, item = gens[0]
    gen = _unalias_all(item)
    assert isinstance(gen, exp.Explode)
    if isinstance(item, exp.Aliases):
        names = [a.name for a in item.expressions]
    elif isinstance(item, exp.Alias):
        names = [item.alias]
    else:
        names = []
    out = _explode(ctx, gen, rel, scope, ctx.fresh("_gen"), names, _outer_generator(gen), item)
    entry = scope.entries.pop()  # its columns are select items, not names for the rest of the query
    return out, {i: [(entry.names[k], f.ref()) for k, f in entry.columns.items()]}


def _unalias_all(node: exp.Expr) -> exp.Expr:
    """A select item without its alias or aliases (``posexplode(a) AS (p, v)``)."""
    return node.this if isinstance(node, (exp.Alias, exp.Aliases)) else node


def _outer_generator(gen: exp.Expr) -> bool:
    """``explode_outer`` / ``posexplode_outer``."""
    return type(gen).__name__.lower().endswith("outer")
