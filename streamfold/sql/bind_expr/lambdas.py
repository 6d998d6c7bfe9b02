"""Bind Spark's higher-order functions over arrays: a function with a lambda argument, such as
``transform(arr, x -> x + 1)``.

==========================================  =============================  =====================
call                                        the lambda's parameters        value
==========================================  =============================  =====================
``transform(arr, (x[, i]) -> v)``           element, index (INT)           ``ARRAY<type of v>``
``filter(arr, (x[, i]) -> cond)``           element, index                 ``arr``'s type
``exists(arr, x -> cond)``, ``forall``      element                        BOOLEAN (three-valued)
``aggregate(arr, zero, (acc, x) -> v         accumulator (zero's type),     the accumulator, or
[, acc -> r])`` (``reduce``)                element                        ``r``
``zip_with(a, b, (x, y) -> v)``             element of a, element of b     ``ARRAY<type of v>``
``array_sort(arr, (l, r) -> n)``            two elements                   ``arr``'s type
==========================================  =============================  =====================

A parameter is a :class:`LambdaVar` (printed ``λx``, a name no column has); the body may read the
row's columns too. Spark evaluates the call on each row by itself, so it is kept exactly as any
expression is, in whatever operator the plan puts it. As in Spark, ``aggregate``'s merge must give
the zero's type (``TYPE_MISMATCH`` with a cast to write otherwise). An aggregate, a window or a
subquery inside a lambda is refused.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import UnsupportedError
from ...ir.expr import Agg, Call, Expr, LambdaVar, SubqueryExpr
from ...ir.window import WindowCall
from ...ir.printer import quote
from ...ir.types import BOOLEAN, INT, DataType, array
from .context import ExprContext

# the parameters each function's lambdas take: 'e' an element of the array argument (of the k-th
# for 'e0'/'e1'), 'i' an index, 'a' the accumulator
_PARAMS = {"transform": ("ei",), "filter": ("ei",), "exists": ("e",), "forall": ("e",),
           "aggregate": ("ae", "a"), "zip_with": ("e0e1",), "array_sort": ("ee",)}
_NAMES: dict[type[exp.Expr], str] = {exp.Transform: "transform", exp.ArrayFilter: "filter", exp.Exists: "exists", exp.Reduce: "aggregate",
          exp.ArraySort: "array_sort"}


def lambda_call(node: exp.Expr) -> tuple[str, list[exp.Expr]] | None:
    """The higher-order function ``node`` calls and its arguments in order, or None if it takes no lambda."""
    if isinstance(node, exp.Anonymous):
        args = list(node.expressions)
        name = str(node.this).lower()
    elif isinstance(node, exp.Reduce):
        args = [a for a in (node.this, node.args.get("initial"), node.args.get("merge"), node.args.get("finish")) if a]
        name = "aggregate"
    elif type(node) in _NAMES:
        args = [a for a in (node.this, node.args.get("expression")) if a is not None]
        name = _NAMES[type(node)]
    else:
        return None
    return (name, args) if any(isinstance(a, exp.Lambda) for a in args) else None


def bind_higher_order(ctx: ExprContext, node: exp.Expr, name: str, arg_nodes: list[exp.Expr]) -> Expr:
    if name not in _PARAMS:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_FUNCTION",
                      f"the higher-order function `{name}` (with a lambda, `x -> …`) is not supported", node,
                      "supported with a lambda: transform, filter, exists, forall, aggregate (reduce), zip_with, "
                      "array_sort; maps are not supported", function=name)
    values = [ctx.bind(a) for a in arg_nodes if not isinstance(a, exp.Lambda)]
    lambdas = [a for a in arg_nodes if isinstance(a, exp.Lambda)]
    arrays = values[:2] if name == "zip_with" else values[:1]
    for value, written in zip(arrays, arg_nodes):
        if value.type.name != "ARRAY" and not value.type.is_null:
            raise ctx.mismatch(written, f"`{name}` needs an array, but its argument is {value.type}",
                               "pass an ARRAY column or array(…)", function=name)
    if len(lambdas) > len(_PARAMS[name]) or len(values) != (2 if name in ("aggregate", "zip_with") else 1):
        raise ctx.mismatch(node, f"`{name}` takes other arguments", _usage(name), function=name)
    element = [_element(v.type) for v in arrays]
    accumulator = values[1].type if name == "aggregate" else None
    bodies: list[Expr] = []
    params_text: list[str] = []
    for lam, kinds in zip(lambdas, _PARAMS[name]):
        names = [p.name for p in lam.expressions]
        slots = _slots(kinds)
        if len(names) > len(slots) or (len(names) < len(slots) and not (kinds == "ei" and len(names) == 1)):
            raise ctx.mismatch(lam, f"the lambda of `{name}` takes {len(slots)} parameter(s), not {len(names)}",
                               _usage(name), function=name)
        types = {"e": element[0], "e0": element[0], "e1": element[-1], "i": INT, "a": accumulator}
        variables = [LambdaVar("λ" + n, types[slot] or element[0]) for n, slot in zip(names, slots)]
        body = _bind_body(ctx, lam, {n.lower(): v for n, v in zip(names, variables)})
        bodies.append(body)
        params_text.append(_params(variables))
    result = _result(ctx, node, name, values, bodies, accumulator)
    texts = [f"{{{i}}}" for i in range(len(values))]
    texts += [f"{p} -> {{{len(values) + i}}}" for i, p in enumerate(params_text)]
    return Call(name, tuple(values) + tuple(bodies), result, f"{name}({', '.join(texts)})")


def _bind_body(ctx: ExprContext, lam: exp.Lambda, variables: dict[str, LambdaVar]) -> Expr:
    if lam.this.find(exp.AggFunc, exp.Window, exp.Subquery, exp.Select) is not None:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_FUNCTION", "an aggregate, a window or a subquery inside a "
                      "lambda is not supported", lam, "compute it outside the call and read it in the lambda "
                      "as a column", function="lambda")
    outer = ctx.lambdas
    ctx.lambdas = {**outer, **variables}
    try:
        body = ctx.bind(lam.this)
    finally:
        ctx.lambdas = outer
    assert not any(isinstance(e, (Agg, WindowCall, SubqueryExpr)) for e in body.walk())
    return body


def _result(ctx: ExprContext, node: exp.Expr, name: str, values: list[Expr], bodies: list[Expr],
            accumulator: DataType | None) -> DataType:
    body = bodies[0]
    if name in ("filter", "exists", "forall") and body.type != BOOLEAN and not body.type.is_null:
        raise ctx.mismatch(node, f"the lambda of `{name}` must give a boolean, not {body.type}",
                           "compare the element, e.g. x -> x > 0", function=name)
    if name in ("transform", "zip_with"):
        return array(body.type)
    if name in ("exists", "forall"):
        return BOOLEAN
    if name == "array_sort":
        if not (body.type.is_integral or body.type.is_null):
            raise ctx.mismatch(node, f"the comparator of `array_sort` must give an integer, not {body.type}",
                               "return -1, 0 or 1: (l, r) -> CASE WHEN l < r THEN -1 WHEN l > r THEN 1 ELSE 0 END",
                               function=name)
        return values[0].type
    if name == "aggregate":
        assert accumulator is not None
        if body.type != accumulator and not body.type.is_null:
            raise ctx.mismatch(node, f"the merge of `aggregate` gives {body.type}, but its start value is "
                               f"{accumulator}", f"give the start value the merge's type, e.g. "
                               f"aggregate(arr, CAST(0 AS {body.type.sql()}), …)", function=name)
        return bodies[1].type if len(bodies) > 1 else accumulator
    return values[0].type  # filter


def _slots(kinds: str) -> list[str]:
    """'e0e1' → ['e0', 'e1']; 'ei' → ['e', 'i']."""
    out: list[str] = []
    for ch in kinds:
        if ch.isdigit():
            out[-1] += ch
        else:
            out.append(ch)
    return out


def _element(t: DataType) -> DataType:
    return t.element if t.name == "ARRAY" else t


def _params(variables: list[LambdaVar]) -> str:
    names = [quote(v.name) for v in variables]
    return names[0] if len(names) == 1 else f"({', '.join(names)})"


def _usage(name: str) -> str:
    return {"transform": "transform(arr, x -> …) or transform(arr, (x, i) -> …)",
            "filter": "filter(arr, x -> cond) or filter(arr, (x, i) -> cond)",
            "exists": "exists(arr, x -> cond)", "forall": "forall(arr, x -> cond)",
            "aggregate": "aggregate(arr, start, (acc, x) -> …[, acc -> …])",
            "zip_with": "zip_with(a, b, (x, y) -> …)", "array_sort": "array_sort(arr, (l, r) -> …)"}[name]
