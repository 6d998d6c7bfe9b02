"""Bind generators: ``LATERAL VIEW [OUTER] explode(arr) t AS v``, ``FROM s, LATERAL explode(arr)
AS t(v)`` and ``SELECT explode(arr) AS v``.

All are an :class:`Explode` of one array, with a position column for ``posexplode`` (``inline``,
``stack`` and ``json_tuple``: of an array of structs, then its fields, :mod:`.row_generators`); OUTER
keeps a row whose array is empty or NULL. A lateral generator's columns join the FROM clause's
scope under its alias. Joined (Spark's ``LATERAL`` in a join), a comma, CROSS or INNER JOIN
explodes; ``ON cond`` filters the exploded rows; ``LEFT JOIN … ON true`` keeps a row whose array
is empty, as ``explode_outer`` does (another LEFT JOIN condition is refused: a row whose
elements all fail it keeps one row with NULLs, which a filter cannot give).

A generator in the select list runs after WHERE, as in Spark: it must be a whole select item,
the only one of its SELECT, and not in an aggregate block; its columns are select items, not
names for the rest of the block.
"""

from __future__ import annotations

from typing import NoReturn

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.expr import Column
from ...ir.rel import Explode, Filter, Rel
from ..bind_expr import ExprBinder
from ..scope import Scope, ScopeEntry
from .context import BindContext
from .grouping import has_agg
from .row_generators import explode_rows, row_generator


def lateral_view(ctx: BindContext, node: exp.Lateral, rel: Rel, scope: Scope) -> Rel:
    """``LATERAL VIEW [OUTER] explode(arr) t AS v`` / ``posexplode(arr) t AS pos, v``."""
    gen = node.this
    if not node.args.get("view") or not _is_generator(gen):
        _refuse_lateral(ctx, node)
    view, names = _named(ctx, node)
    outer = bool(node.args.get("outer")) or _outer_generator(gen)
    return _generate(ctx, gen, rel, scope, view, names, outer, node)


def lateral_join(ctx: BindContext, join: exp.Join, rel: Rel, scope: Scope) -> Rel:
    """``FROM s, LATERAL explode(arr) [AS] t[(v)]`` (or ``[CROSS|INNER|LEFT] JOIN LATERAL …``)."""
    node = join.this
    assert isinstance(node, exp.Lateral)
    gen = node.this
    if not _is_generator(gen):
        _refuse_lateral(ctx, node)
    side, kind = (join.side or "").lower(), (join.kind or "").lower()
    on = join.args.get("on")
    if join.args.get("using") or join.args.get("method") or kind in ("semi", "anti") or side in ("right", "full"):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_JOIN",
                      f"`{join.sql(dialect='spark').strip()}`: a LATERAL generator is joined by a comma, CROSS, "
                      "INNER or LEFT JOIN", join, "write `FROM s, LATERAL explode(arr) AS t(v)`",
                      construct="lateral join")
    always = on is None or (isinstance(on, exp.Boolean) and on.this is True)
    if side == "left" and not always:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_JOIN",
                      "LEFT JOIN LATERAL with a condition other than ON true is not supported", on,
                      "LEFT JOIN LATERAL … ON true (explode_outer), or an inner JOIN LATERAL … ON cond",
                      construct="lateral join")
    view, names = _named(ctx, node)
    outer = side == "left" or _outer_generator(gen)
    out: Rel = _generate(ctx, gen, rel, scope, view, names, outer, node)
    if on is not None and not always:
        out = Filter(out, ExprBinder(scope, "ON").boolean(on))
    return out


def _refuse_lateral(ctx: BindContext, node: exp.Lateral) -> NoReturn:
    what = "a LATERAL subquery" if isinstance(node.this, exp.Subquery) else f"`{node.sql(dialect='spark').strip()}`"
    raise ctx.err(UnsupportedError, "UNSUPPORTED_CLAUSE", f"{what} is not supported", node,
                  "explode an array column with LATERAL VIEW [OUTER] explode(arr) t AS v, or "
                  "FROM s, LATERAL explode(arr) AS t(v) (posexplode for positions)", construct="lateral")


def _named(ctx: BindContext, node: exp.Lateral) -> tuple[str, list[str]]:
    """The generator's alias and its column names (none given: the defaults)."""
    alias = node.args.get("alias")
    view = alias.name if alias is not None and alias.name else ctx.fresh("_gen")
    return view, [c.name for c in alias.columns] if alias is not None and alias.columns else []


def _is_generator(node: exp.Expr) -> bool:
    return isinstance(node, exp.Explode) or row_generator(node) is not None


def _generate(ctx: BindContext, gen: exp.Expr, rel: Rel, scope: Scope, view: str, names: list[str],
              outer: bool, node: exp.Expr) -> Rel:
    if row_generator(gen) is not None:  # rows of several columns (row_generators.py)
        return explode_rows(ctx, gen, rel, scope, view, names, outer, node)
    assert isinstance(gen, exp.Explode)
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
    gens = [(i, item) for i, item in enumerate(node.expressions) if _is_generator(_unalias_all(item))]
    for item in node.expressions:
        for sub in item.walk():  # (a generator of a subquery's own FROM or select list is its own)
            if (_is_generator(sub) and _unalias_all(item) is not sub
                    and sub.find_ancestor(exp.Select) is node):
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
    if isinstance(item, exp.Aliases):
        names = [a.name for a in item.expressions]
    elif isinstance(item, exp.Alias):
        names = [item.alias]
    else:
        names = []
    out = _generate(ctx, gen, rel, scope, ctx.fresh("_gen"), names, _outer_generator(gen), item)
    entry = scope.entries.pop()  # its columns are select items, not names for the rest of the query
    return out, {i: [(entry.names[k], f.ref()) for k, f in entry.columns.items()]}


def _unalias_all(node: exp.Expr) -> exp.Expr:
    """A select item without its alias or aliases (``posexplode(a) AS (p, v)``)."""
    return node.this if isinstance(node, (exp.Alias, exp.Aliases)) else node


def _outer_generator(gen: exp.Expr) -> bool:
    """``explode_outer`` / ``posexplode_outer``."""
    return type(gen).__name__.lower().endswith("outer")
