"""Bind subquery expressions: scalar subqueries, ``EXISTS`` and ``IN (subquery)``.

The query binder binds the subquery itself (the context's ``subquery`` hook, with this block's
scope as the enclosing one, so it may read this block's columns); this module checks its width
and types and wraps it in a :class:`SubqueryExpr`. A subquery is refused where the clause has no
hook and inside an aggregate; ``ANY``/``ALL`` comparisons are refused, with their rewrites.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from ...errors import BindError, SqlError, UnsupportedError
from ...ir.expr import ROW, Call, Expr, SubqueryExpr
from ...ir.types import BOOLEAN, common_type, struct
from .context import ExprContext


def _subquery_rel(ctx: ExprContext, node: exp.Expr) -> tuple[Any, list[str]]:
    if ctx.subquery is None or ctx.in_agg:
        where = "inside an aggregate" if ctx.in_agg else f"in {ctx.clause}"
        raise ctx.err(UnsupportedError, "UNSUPPORTED_SUBQUERY", f"a subquery {where} is not supported", node,
                      "subqueries work in WHERE, HAVING and the select list", construct="subquery")
    query = node.this if isinstance(node, (exp.Subquery, exp.Exists)) else node
    return ctx.subquery(query, ctx.scope)


def bind_subquery(ctx: ExprContext, node: exp.Subquery | exp.Exists) -> Expr:
    """A scalar subquery (one column) or ``EXISTS (…)``."""
    rel, names = _subquery_rel(ctx, node)
    if isinstance(node, exp.Exists):
        return SubqueryExpr("exists", rel, None, BOOLEAN)
    if len(rel.schema) != 1:
        raise ctx.err(BindError, "SUBQUERY_WIDTH", f"a scalar subquery must return one column, not {len(rel.schema)}",
                      node, "select exactly one value", columns=len(rel.schema))
    return SubqueryExpr("scalar", rel, None, rel.schema[0].type)


def bind_in_subquery(ctx: ExprContext, node: exp.In) -> Expr:
    """``x IN (SELECT …)``, or ``(x, y) IN (SELECT …)`` with a row of the values."""
    row = node.this.expressions if isinstance(node.this, exp.Tuple) else [node.this]
    values = [ctx.bind(v) for v in row]
    rel, _ = _subquery_rel(ctx, node.args["query"])
    if len(rel.schema) != len(values):
        raise ctx.err(BindError, "SUBQUERY_WIDTH",
                      f"IN (subquery) must select {len(values)} column(s), as many as it is compared with",
                      node, columns=len(rel.schema))
    for v, f in zip(values, rel.schema):
        if common_type(v.type, f.type) is None:
            raise ctx.mismatch(node, f"cannot compare {v.type} with {f.type} in IN",
                               left=v.type.sql(), right=f.type.sql())
    if len(values) == 1 and not isinstance(node.this, exp.Tuple):
        return SubqueryExpr("in", rel, values[0], BOOLEAN)
    row_type = struct([(f"col{i + 1}", v.type) for i, v in enumerate(values)])
    template = "(" + ", ".join(f"{{{i}}}" for i in range(len(values))) + ")"
    return SubqueryExpr("in", rel, Call(ROW, tuple(values), row_type, template), BOOLEAN)


def quantified_refusal(ctx: ExprContext, node: exp.All | exp.Any) -> SqlError:
    word = "ALL" if isinstance(node, exp.All) else "ANY"
    return ctx.err(UnsupportedError, "UNSUPPORTED_SUBQUERY",
                   f"a comparison with {word} (subquery) is not supported (Spark does not accept it)", node,
                   "write `x = ANY (…)` as `x IN (…)`, `x > ALL (SELECT c …)` as `x > (SELECT max(c) …)` "
                   "or with NOT EXISTS (SELECT … WHERE c >= x)", construct=f"{word} (subquery)")
