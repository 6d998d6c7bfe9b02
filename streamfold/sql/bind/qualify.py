"""QUALIFY: a filter on a block's rows after its window functions, before DISTINCT and ORDER BY.

``SELECT k, v FROM T QUALIFY row_number() OVER (PARTITION BY k ORDER BY v DESC) <= 3`` keeps the
rows whose window value passes, as the derived-table spelling ``SELECT k, v FROM (SELECT k, v,
row_number() OVER (…) AS r FROM T) WHERE r <= 3`` does. The condition is bound with the select
list's window hook, so a call written in both (or named by a select alias, ``QUALIFY r <= 3``)
is one column of the block's ``Window`` node, and the filter sits right over that node: the
shape the top-k rules (:mod:`streamfold.plan.topk_shape`) maintain in k rows and a reserve.

Names resolve as in Spark: a column of the block's input first, then a select alias. As in
Spark, a block with QUALIFY needs a window function in its select list or in the condition
(``QUALIFY_WITHOUT_WINDOW``), and the condition calls no aggregate but through a select alias
(``QUALIFY_AGGREGATE_NOT_ALLOWED``; ``SELECT k, sum(v) AS t … QUALIFY t > 10 AND …`` is fine).
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError
from ...ir.expr import Expr
from ...ir.rel import Filter, Rel
from ..bind_expr import ExprBinder
from ..scope import Scope
from .context import BindContext
from .over import WindowCalls
from .select_list import Item, aggregate_call, item_aliases


def condition(ctx: BindContext, node: exp.Select, items: list[Item], scope: Scope,
              binder: ExprBinder) -> Expr | None:
    """The block's QUALIFY condition bound by ``binder`` (the select list's hooks), or None."""
    clause = node.args.get("qualify")
    if clause is None:
        return None
    agg = next((sub for sub in clause.this.walk() if aggregate_call(sub, clause.this)), None)
    if agg is not None:
        raise ctx.err(BindError, "QUALIFY_AGGREGATE_NOT_ALLOWED", "QUALIFY cannot call an aggregate", agg,
                      "name the aggregate in the select list (… AS total) and use the name in QUALIFY")
    return binder.boolean(item_aliases(clause.this, items, scope))


def qualified(ctx: BindContext, node: exp.Select, rel: Rel, windows: WindowCalls, cond: Expr | None) -> Rel:
    """``rel`` (the block's rows with their window columns) filtered by the QUALIFY condition."""
    if cond is None:
        return rel
    if not windows.calls:
        raise ctx.err(BindError, "QUALIFY_WITHOUT_WINDOW", "QUALIFY needs a window function in the select list "
                      "or in its condition", node.args["qualify"],
                      "filter with WHERE (or HAVING after GROUP BY), or add the window function (… OVER (…))")
    return Filter(rel, cond)
