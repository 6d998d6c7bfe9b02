"""Bind conditionals: ``CASE [x] WHEN … THEN … [ELSE …] END`` and ``IF(c, a, b)``, both a :class:`Case`.

``CASE x WHEN v`` compares with ``x = v``; the result type is the common type of every branch
(NULL for none), and branches with no common type are a ``TYPE_MISMATCH``.
"""

from __future__ import annotations

from sqlglot import exp

from ...ir.expr import Call, Case, Expr
from ...ir.types import BOOLEAN, NULL, DataType, common_type
from .context import ExprContext


def bind_case(ctx: ExprContext, node: exp.Case) -> Expr:
    subject = ctx.bind(node.this) if node.this is not None else None
    whens: list[tuple[Expr, Expr]] = []
    for if_node in node.args.get("ifs") or []:
        cond_node = if_node.this
        if subject is not None:
            operand = ctx.bind(cond_node)
            if common_type(subject.type, operand.type) is None:
                raise ctx.mismatch(cond_node, f"cannot compare {subject.type} with {operand.type}",
                                   left=subject.type.sql(), right=operand.type.sql())
            cond: Expr = Call("=", (subject, operand), BOOLEAN)
        else:
            cond = ctx.boolean(cond_node)
        whens.append((cond, ctx.bind(if_node.args["true"])))
    default = ctx.bind(node.args["default"]) if node.args.get("default") is not None else None
    result = _common(ctx, [v for _, v in whens] + ([default] if default else []), node, "CASE branches")
    return Case(tuple(whens), default, result)


def bind_if(ctx: ExprContext, node: exp.If) -> Expr:
    cond = ctx.boolean(node.this)
    true = ctx.bind(node.args["true"])
    false = ctx.bind(node.args["false"]) if node.args.get("false") is not None else None
    result = _common(ctx, [true] + ([false] if false else []), node, "IF branches")
    return Case(((cond, true),), false, result)


def _common(ctx: ExprContext, values: list[Expr], node: exp.Expr, what: str) -> DataType:
    result = NULL
    for v in values:
        c = common_type(result, v.type)
        if c is None:
            raise ctx.mismatch(node, f"{what} have incompatible types {result} and {v.type}",
                               left=result.sql(), right=v.type.sql())
        result = c
    return result
