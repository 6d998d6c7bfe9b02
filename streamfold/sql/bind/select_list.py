"""Bind the names of a select list: its items, their output names, and aliases used as names.

Each item is ``(output name, node, column)``: ``*`` and ``t.*`` expand here to one item per
column, and a generator's columns (:mod:`.generators`) come pre-resolved, both with the column
set; other items are bound later, by a plain or an aggregate select. Output names follow Spark's
closely enough for ``explain`` (the alias, a column's own spelling, else the expression's text);
the runtime takes the exact names from Spark's analysis.

An alias may stand for its expression where Spark allows it — a later select item (a lateral
column alias) and HAVING — unless the name is a column of the input, and never inside a
subquery, whose names are its own.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.expr import Column, Expr
from ..batch_text import spark_spellings
from ..parse import span_of
from ..scope import Scope
from ..bind_expr.aggregates import ANON_AGGS
from ..bind_expr.listagg import spark_name as listagg_name
from ..bind_expr.value_sets import spark_name, value_set
from ..window_text import WINDOW_CALL

# (output name, node, pre-resolved column for * and generators)
Item = tuple[str, exp.Expr, Column | None]


def select_items(node: exp.Select, scope: Scope, generated: dict[int, list[tuple[str, Column]]]) -> list[Item]:
    """The select list as items, ``*`` and a generator expanded to one item per column."""
    out: list[Item] = []
    for i, item in enumerate(node.expressions):
        if i in generated:
            out.extend((name, item, ref) for name, ref in generated[i])
            continue
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
            table = item.table if isinstance(item, exp.Column) and item.table else None
            expanded = scope.star(table, span_of(item))
            dropped = _excepted(item.this if isinstance(item, exp.Column) else item, table, expanded, scope)
            for name, ref in expanded:
                if ref not in dropped:
                    out.append((name, item, ref))
            continue
        # a lateral column alias (Spark): an earlier item's alias names its expression
        item = with_aliases(item, {n.lower(): i.this for n, i, ref in out
                                   if ref is None and isinstance(i, exp.Alias)}, scope)
        out.append((_output_name(item, scope), item, None))
    return out


def _excepted(star: exp.Star, table: str | None, expanded: list[tuple[str, Column]], scope: Scope) -> set[Column]:
    """The columns ``* EXCEPT (a, t.b)`` leaves out (Spark's form), each one the star has; a name
    under ``t.* EXCEPT (…)`` is ``t``'s."""
    for other in ("replace", "rename"):
        if star.args.get(other):
            raise UnsupportedError(f"* {other.upper()} (…) is not Spark SQL", code="UNSUPPORTED_CLAUSE",
                                   sql=scope.sql, span=span_of(star), hint="list the columns, or * EXCEPT (…) them")
    dropped: set[Column] = set()
    for col in star.args.get("except_") or star.args.get("except") or []:
        ref = scope.resolve(col.table or table, col.name, span_of(col)) if isinstance(col, exp.Column) else None
        if not isinstance(ref, Column) or all(ref != r for _, r in expanded):
            raise BindError(f"`{col.sql(dialect='spark')}` in * EXCEPT (…) is not a column of the star",
                            code="UNKNOWN_COLUMN", sql=scope.sql, span=span_of(col),
                            hint="name columns the star lists: " + ", ".join(n for n, _ in expanded))
        dropped.add(ref)
    return dropped


def _output_name(item: exp.Expr, scope: Scope) -> str:
    if isinstance(item, exp.Alias):
        return item.alias
    if isinstance(item, exp.Column):
        parts = [p.name for p in item.parts]
        entry = scope.entry(parts[0]) if len(parts) == 2 else None
        if entry is not None and parts[-1].lower() in entry.names:
            return entry.names[parts[-1].lower()]
        for e in scope.entries:
            if parts[-1].lower() in e.names:
                return e.names[parts[-1].lower()]
        return parts[-1]
    return _pretty(item)


def _pretty(item: exp.Expr) -> str:
    """An approximation of the name Spark gives an unaliased select expression."""
    if isinstance(item, exp.Anonymous) and item.name.lower() == WINDOW_CALL:  # window(…), renamed for the parser
        return "window"
    if isinstance(item, exp.GroupConcat):
        return listagg_name(item, _pretty)
    collected = value_set(item)
    if collected is not None and not isinstance(collected[1], exp.Filter):
        return spark_name(item, _pretty(collected[1].this)) or ""
    clone = item.copy()
    for col in clone.find_all(exp.Column):
        col.set("table", None)
    text = spark_spellings(clone).sql(dialect="spark")
    if type(item) is exp.Quantile and text.endswith(")"):  # Spark names percentile(x, p) with its frequency
        text = text[:-1] + ", 1)"
    if isinstance(item, (exp.Func, exp.WithinGroup)) and "(" in text:
        head, rest = text.split("(", 1)
        text = head.lower() + "(" + rest
    if text.lower().startswith("count(*)"):
        text = "count(1)" + text[8:]
    return text


def with_aliases(node: exp.Expr, aliases: dict[str, exp.Expr], scope: Scope) -> exp.Expr:
    """``node`` with each unqualified name of an alias in ``aliases`` (lower-case) replaced by the
    aliased expression: a name that is a column of the input stays that column, and names inside
    a subquery are the subquery's own (Spark's rule for lateral column aliases and HAVING)."""
    def aliased(n: exp.Expr) -> bool:
        return (isinstance(n, exp.Column) and not n.table and isinstance(n.this, exp.Identifier)
                and n.name.lower() in aliases and not inside_subquery(n, node)
                and not any(n.name.lower() in e.columns for e in scope.entries) and n.name.lower() not in scope.merged)

    if not aliases or not any(aliased(n) for n in node.walk()):
        return node
    return node.transform(lambda n: aliases[n.name.lower()].copy() if aliased(n) else n, copy=True)


def item_aliases(condition: exp.Expr, items: list[Item], scope: Scope) -> exp.Expr:
    """``condition`` (HAVING, QUALIFY) naming a select item by its alias, as in Spark (``SELECT a,
    sum(b) AS t … HAVING t > 1`` is ``HAVING sum(b) > 1``); an input column of the name stays it."""
    return with_aliases(condition, {name.lower(): item.this for name, item, _ in items
                                    if isinstance(item, exp.Alias)}, scope)


def aggregate_call(sub: exp.Expr, root: exp.Expr) -> bool:
    """Whether ``sub`` calls an aggregate of ``root``'s block: not inside a subquery of ``root``,
    and not the function of an OVER clause (``sum(x) OVER (…)`` aggregates no group)."""
    if not isinstance(sub, exp.AggFunc) and not (isinstance(sub, exp.Anonymous) and sub.name.lower() in ANON_AGGS):
        return False
    node: exp.Expr = sub
    while isinstance(node.parent, (exp.IgnoreNulls, exp.RespectNulls)):
        node = node.parent
    return not (isinstance(node.parent, exp.Window) and node.parent.this is node) and not inside_subquery(sub, root)


def inside_subquery(sub: exp.Expr, root: exp.Expr) -> bool:
    """Whether ``sub`` is inside a subquery of ``root``."""
    if sub is root:
        return False
    p = sub.parent
    while p is not None and p is not root:
        if isinstance(p, (exp.Subquery, exp.Select)):
            return True
        p = p.parent
    return False


def unalias(node: exp.Expr) -> exp.Expr:
    return node.this if isinstance(node, exp.Alias) else node


def internal_name(name: str, index: int, taken: list[tuple[str, Expr]]) -> str:
    """The column name of select item ``index`` in the block's Project: its output name, unless
    an earlier item took it or it could clash with the binder's own ``_sort``/``_agg``/``_key``/``_win``."""
    used = {n for n, _ in taken}
    return name if name not in used and not name.startswith(("_sort", "_agg", "_key", "_win")) else f"_col{index}"
