"""Bind ``listagg(x, sep) WITHIN GROUP (ORDER BY x)`` (and ``string_agg``, its other name).

The answer is the group's non-NULL values of ``x`` in order, each as a string, joined by ``sep``
— NULL when there are none. Ordered by the value itself, the string depends only on the
group's multiset of values, so it is kept the way ``count(DISTINCT x)`` and a percentile are
(plan/aggregates.py): a multiset state of ``(group, x)`` with each value's count, exact under
deletions. Bound as::

    listagg(x, sep) WITHIN GROUP (ORDER BY x [DESC])
      → CASE WHEN size(a) = 0 THEN NULL
             ELSE array_join(CAST(a AS ARRAY<STRING>), sep) END
        where a = sort_array(collect_list(x), asc)        (DISTINCT: collect_set)

Spark's forms that depend on the order rows were read in are refused (``UNSUPPORTED_AGGREGATE``)
with the spelling that does not: no ``WITHIN GROUP``, or an order by something else first (rows
that tie on it come in any order). Values of FLOAT and DOUBLE are refused too (the state's
grouping makes ``-0.0`` and ``0.0`` one value, where Spark writes each as it is), and BINARY
(``array_join`` joins strings).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ...errors import UnsupportedError
from ...ir.expr import Call, Case, Cast, Expr, Literal
from ...ir.types import BOOLEAN, INT, STRING, array
from .aggregates import filtered
from .context import ExprContext
from .value_sets import collected, sorted_values

FN = "listagg"


def listagg(node: exp.Expr) -> exp.GroupConcat | None:
    """The ``listagg``/``string_agg`` call of ``node`` (itself or under FILTER), else None."""
    call = node.this if isinstance(node, exp.Filter) else node
    return call if isinstance(call, exp.GroupConcat) else None


def bind_listagg(ctx: ExprContext, node: exp.Expr, call: exp.GroupConcat) -> Expr:
    order = call.this if isinstance(call.this, exp.Order) else None
    value = order.this if order is not None else call.this
    distinct = isinstance(value, exp.Distinct)
    x = value.expressions[0] if distinct and len(value.expressions) == 1 else value
    separator = call.args.get("separator")
    sep_text = separator.sql(dialect="spark") if isinstance(separator, exp.Literal) else "', '"
    spelled = f"listagg({'DISTINCT ' if distinct else ''}{x.sql(dialect='spark')}, {sep_text}) WITHIN GROUP " \
              f"(ORDER BY {x.sql(dialect='spark')})"
    if isinstance(x, exp.Distinct):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE", "listagg joins one value per row", call,
                      "concatenate the columns first: listagg(DISTINCT concat_ws(':', a, b), ', ')", function=FN)
    if order is None:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE", "listagg without WITHIN GROUP (ORDER BY …) joins "
                      "the values in the order Spark happens to read the rows", node,
                      f"order by the value: {spelled}", function=FN)
    first = order.expressions[0]
    ctx.in_agg = True  # (bound as the argument will be: an aggregate inside is NESTED_AGGREGATE)
    try:
        bound, key = ctx.bind(x), ctx.bind(first.this)
    finally:
        ctx.in_agg = False
    if key != bound:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE", "listagg ordered by something other than its "
                      "value joins rows that tie on the order in the order Spark happens to read them", first,
                      f"order by the value itself: {spelled}", function=FN)
    if separator is not None and not (isinstance(separator, exp.Literal) and separator.is_string) \
            and not isinstance(separator, exp.Null):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE", "listagg's separator must be a string literal",
                      separator, "write the separator as a string, e.g. ', '", function=FN)
    argument = filtered(node, x) if isinstance(node, exp.Filter) else x
    stand_in = collected(ctx, call, "collect_set" if distinct else "collect_list", argument,
                         "CAST the values to a STRING")
    values = sorted_values(stand_in, not first.args.get("desc"))
    texts = values if bound.type.is_string else Cast(values, array(STRING))
    sep = Literal(separator.this if isinstance(separator, exp.Literal) else "", STRING)
    joined = Call("array_join", (texts, sep), STRING, "array_join({0}, {1})")
    empty = Call("=", (Call("size", (values,), INT, "size({0})"), Literal(0, INT)), BOOLEAN)
    return Case(((empty, Literal(None, STRING)),), joined, STRING)


def spark_name(call: exp.GroupConcat, pretty: Callable[[exp.Expr], str]) -> str:
    """The name Spark gives an unaliased ``listagg`` (``pretty`` names its value as Spark does):
    ``listagg(s, ,) WITHIN GROUP (ORDER BY s ASC NULLS FIRST)``."""
    order = call.this if isinstance(call.this, exp.Order) else None
    value = order.this if order is not None else call.this
    distinct = "DISTINCT " if isinstance(value, exp.Distinct) else ""
    x = value.expressions[0] if isinstance(value, exp.Distinct) else value
    separator = call.args.get("separator")
    text = f"listagg({distinct}{pretty(x)}, {separator.this if isinstance(separator, exp.Literal) else 'NULL'})"
    if order is None:
        return text
    keys = ", ".join(f"{pretty(o.this)} {'DESC' if o.args.get('desc') else 'ASC'} "
                     f"NULLS {'FIRST' if o.args.get('nulls_first') else 'LAST'}" for o in order.expressions)
    return f"{text} WITHIN GROUP (ORDER BY {keys})"
