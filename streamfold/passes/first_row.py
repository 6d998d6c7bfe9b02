"""A scalar subquery that keeps its first row: ``(SELECT price FROM P WHERE P.item = o.item ORDER
BY P.ts DESC LIMIT 1)``, the latest price of each order's item.

Spark evaluates it for each outer row: NULL when the subquery has no row, else the value of its
first row in that order. ``LIMIT 1`` promises one row at most, so, unlike a scalar subquery that
is no aggregate, it never fails. Unnested (:mod:`.subquery_values`), the first row of each
correlation key is the row numbered 1 in that order among the key's rows — a top-k per key, which
the window rules maintain — and the value is ``max`` over that one row: the scalar aggregate
subquery the unnesting already joins, NULL for a key without rows::

    (SELECT v FROM T WHERE T.k = o.k ORDER BY s LIMIT 1)
        →  (SELECT max(v) FROM (SELECT …, row_number() OVER (PARTITION BY T.k ORDER BY s) AS rank
            FROM T) WHERE rank <= 1 AND T.k = o.k)

Which row is first among rows that tie on the ORDER BY is the order Spark reads them in, so the
ORDER BY (with the correlation keys) must leave ties only between rows equal in every column the
subquery reads for its value (``LIMIT_ORDER_NOT_TOTAL``, by the rank's name).
"""

from __future__ import annotations

from ..ir.expr import Agg, Call, Column, Expr, Literal
from ..ir.rel import Aggregate, Filter, Limit, Project, Rel, Sort, SortKey
from ..ir.types import BIGINT, BOOLEAN
from ..ir.window import LIMIT_RANK, Window, WindowCall
from .correlation import Correlation, correlate, is_correlated, outside_where, unsupported


def first_row(sub: Rel) -> tuple[Rel, Expr, tuple[SortKey, ...]] | None:
    """The rows below the LIMIT, the value over them and the ORDER BY of a scalar subquery
    ``… ORDER BY … LIMIT 1``; None for any other subquery."""
    node, value = sub, None
    if isinstance(node, Project) and len(node.exprs) == 1 and isinstance(node.input, Limit):
        value, node = node.exprs[0][1], node.input
    if not (isinstance(node, Limit) and node.limit == 1 and node.offset == 0 and isinstance(node.input, Sort)):
        return None
    rows = node.input.input
    if value is None:
        if len(rows.schema) != 1:
            return None
        value = rows.schema[0].ref()
    return rows, value, node.input.keys


def first_of(sub: Rel, outer: Rel, n: int) -> tuple[Correlation, Aggregate, Expr] | None:
    """For a scalar subquery ``… ORDER BY … LIMIT 1``: its rows numbered 1 per correlation key,
    ``max(value)`` over them and that value, as :func:`.subquery_values._scalar` joins a scalar
    aggregate; None for any other subquery."""
    first = first_row(sub)
    if first is None:
        return None
    rows, value, keys = first
    if is_correlated(value):
        raise outside_where()
    corr = correlate(rows, outer)
    if corr.pairs is None:
        raise unsupported("a scalar subquery with ORDER BY … LIMIT 1 correlated by other than equalities",
                          "correlate it by equalities (inner = outer), or aggregate its value (max, min)")
    if not value.type.is_orderable:
        raise unsupported(f"a scalar subquery with ORDER BY … LIMIT 1 whose value is a {value.type.sql()}",
                          "return a value that has an order (a column, not an array or map)")
    rank = f"{LIMIT_RANK}sq{n}"
    call = WindowCall("row_number", (), tuple(inner for inner, _ in corr.pairs), keys, None, BIGINT)
    ranked = Filter(Window(corr.rel, ((rank, call),)),
                    Call("<=", (Column(rank, BIGINT), Literal(1, BIGINT)), BOOLEAN))
    name = f"_sq{n}.first"
    agg = Aggregate(ranked, (), ((name, Agg("max", (value,), False, value.type)),))
    return Correlation(ranked, corr.preds, corr.pairs), agg, Column(name, value.type)


__all__ = ["first_of"]
