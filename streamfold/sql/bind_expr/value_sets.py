"""Bind ``collect_set(x)`` where its order does not matter: ``sort_array(collect_set(x) [, asc])``,
``array_sort(collect_set(x))``, ``size(collect_set(x))`` and ``cardinality(collect_set(x))`` — and
the same of ``collect_list(x)``, whose values come as often as their rows.

The elements of ``collect_set`` come in the order Spark's hash set happens to hold them, which
depends on the order the rows were read; alone it is refused (aggregates.py), with this spelling
as the hint. Sorted or counted, its answer is the group's set of distinct non-NULL values — the
multiset state that ``count(DISTINCT x)`` keeps (plan/aggregates.py) — so deletions are exact: a
value leaves the set when its last row is deleted. A group whose values are all NULL answers
``[]`` (and size 0), as Spark does. ``collect_list`` keeps the same multiset, and its answer
repeats each value by its count (plan/aggregates.py).

Elements of FLOAT and DOUBLE are refused (Spark's hash set keeps ``-0.0`` beside ``0.0`` and each
NaN apart, where the state's grouping makes them one), as are nested types.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import UnsupportedError
from ...ir.expr import Call, Expr, Literal
from ...ir.types import BOOLEAN, INT
from .aggregates import bind_agg, filtered, refuse_inexact
from .context import ExprContext

FN = "collect_set"


def value_set(node: exp.Expr) -> tuple[str, exp.Expr, bool] | None:
    """``(consumer, the collect_set call (or its FILTER), ascending)`` when ``node`` sorts or
    counts a ``collect_set``: consumer ``sort_array`` or ``size``; else None."""
    inner = node.this if isinstance(node, (exp.ArraySort, exp.ArraySize)) else \
        node.expressions[0] if isinstance(node, exp.Anonymous) and node.name.lower() == "cardinality" \
        and len(node.expressions) == 1 else None
    agg = inner.this if isinstance(inner, exp.Filter) else inner
    if inner is None or not isinstance(agg, (exp.ArrayUniqueAgg, exp.ArrayAgg)):
        return None
    if isinstance(node, exp.ArraySort):
        if node.args.get("expression") is not None:  # array_sort(arr, comparator)
            return None
        asc = node.args.get("asc")
        return "sort_array", inner, not (isinstance(asc, exp.Boolean) and not asc.this)
    return "size", inner, True


def bind_value_set(ctx: ExprContext, node: exp.Expr, consumer: str, call: exp.Expr, ascending: bool) -> Expr:
    """The sorted (or counted) set as a call over the aggregate's stand-in."""
    asc = node.args.get("asc") if isinstance(node, exp.ArraySort) else None
    if asc is not None and not isinstance(asc, exp.Boolean):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE", "sort_array's order must be TRUE or FALSE", node,
                      "write sort_array(collect_set(x)) or sort_array(collect_set(x), FALSE)", function=FN)
    agg_node = call.this if isinstance(call, exp.Filter) else call
    x = agg_node.this
    if isinstance(x, exp.Distinct):
        x = x.expressions[0] if len(x.expressions) == 1 else x
    if isinstance(call, exp.Filter):  # the value NULL where the filter fails: a set skips NULLs
        x = filtered(call, x)
    stand_in = collected(ctx, agg_node, collected_fn(agg_node), x, "collect a column of a simple type")
    if consumer == "size":
        return Call("size", (stand_in,), INT, "size({0})")
    return sorted_values(stand_in, ascending)


def collected(ctx: ExprContext, node: exp.Expr, fn: str, argument: exp.Expr, hint: str) -> Expr:
    """``fn`` (collect_set or collect_list) of ``argument`` as an aggregate's stand-in, its values
    of a type the multiset keeps exactly (else refused with ``hint``)."""
    stand_in = bind_agg(ctx, node, fn, argument=argument)
    refuse_inexact(ctx, node, fn, stand_in.type.element, hint)
    return stand_in


def sorted_values(values: Expr, ascending: bool) -> Call:
    return Call("sort_array", (values, Literal(ascending, BOOLEAN)), values.type, "sort_array({0}, {1})")


def collected_fn(agg: exp.Expr) -> str:
    """``collect_list`` for ``collect_list(x)`` (each value as often as its rows), else ``collect_set``
    (``collect_set(x)``, ``collect_list(DISTINCT x)``)."""
    return "collect_list" if isinstance(agg, exp.ArrayAgg) and not isinstance(agg.this, exp.Distinct) else FN


# the comparator Spark's array_sort(arr) is given, as it appears in the column's name
_ARRAY_SORT_LAMBDA = (
    "lambdafunction((IF(((namedlambdavariable() IS NULL) AND (namedlambdavariable() IS NULL)), 0, "
    "(IF((namedlambdavariable() IS NULL), 1, (IF((namedlambdavariable() IS NULL), -1, (IF((namedlambdavariable() < "
    "namedlambdavariable()), -1, (IF((namedlambdavariable() > namedlambdavariable()), 1, 0)))))))))), "
    "namedlambdavariable(), namedlambdavariable())")


def spark_name(node: exp.Expr, inner: str) -> str | None:
    """The name Spark gives an unaliased :func:`value_set` item whose ``collect_set(…)`` reads
    ``inner`` as Spark names it; None for any other item."""
    found = value_set(node)
    if found is None:
        return None
    agg = found[1].this if isinstance(found[1], exp.Filter) else found[1]
    collected = f"{'collect_list' if isinstance(agg, exp.ArrayAgg) else FN}({inner})"
    if isinstance(node, exp.ArraySort):
        if node.args.get("nulls_first") is not None and node.args.get("asc") is None \
                and not node.args["nulls_first"].this:  # array_sort(arr): Spark's default comparator
            return f"array_sort({collected}, {_ARRAY_SORT_LAMBDA})"
        return f"sort_array({collected}, {'true' if found[2] else 'false'})"
    return f"{'size' if isinstance(node, exp.ArraySize) else 'cardinality'}({collected})"
