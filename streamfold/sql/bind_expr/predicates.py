"""Bind predicates: comparisons, ``AND``/``OR``/``NOT``, ``IS [NOT] NULL``, ``IN``, ``BETWEEN``
and ``[I]LIKE`` — each a BOOLEAN :class:`Call`.

Both sides of a comparison must have a common type, and a string literal compared with another
type must be castable to it (else Spark fails at run time). Rewrites
keep the IR small: ``a IS DISTINCT FROM b`` is ``NOT (a <=> b)``, ``BETWEEN`` two comparisons,
``x ILIKE p`` is ``lower(x) LIKE lower(p)``, and ``NOT`` folds into ``IS``, ``IN`` and ``LIKE``.
"""

from __future__ import annotations

import datetime as dt

from sqlglot import exp

from ...errors import UnsupportedError
from ...ir.expr import Call, Expr, Literal, SubqueryExpr, and_all, or_all
from ...ir.types import BOOLEAN, DataType, common_type
from .context import ExprContext
from .subqueries import bind_in_subquery

COMPARE = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
           exp.NullSafeEQ: "<=>"}


def bind_compare(ctx: ExprContext, node: exp.Binary, op: str) -> Expr:
    left, right = ctx.bind(node.this), ctx.bind(node.expression)
    for side_node, side, other in ((node.this, left, right), (node.expression, right, left)):
        if isinstance(side, Literal) and side.type.is_string and not _castable(side.value, other.type):
            raise ctx.mismatch(
                side_node, f"cannot compare {other.type} with the string '{side.value}'",
                f"'{side.value}' cannot be read as {other.type}; compare with a value of that type",
                operator=op,
                left=left.type.sql(), right=right.type.sql(),
            )
    if common_type(left.type, right.type) is None:
        raise ctx.mismatch(
            node, f"cannot compare {left.type} with {right.type}",
            "CAST one side so both have the same type", operator=op,
            left=left.type.sql(), right=right.type.sql(),
        )
    return Call(op, (left, right), BOOLEAN)


def _castable(text: str, target: DataType) -> bool:
    """Whether Spark can cast the string literal ``text`` to ``target`` (else it fails at run time)."""
    value = text.strip()
    try:
        if target.is_integral:
            int(value)
        elif target.is_numeric:
            float(value)
        elif target.name == "DATE":
            dt.date.fromisoformat(value[:10])
        elif target.name in ("TIMESTAMP", "TIMESTAMP_NTZ"):
            dt.datetime.fromisoformat(value)
        elif target.name == "BOOLEAN":
            return value.lower() in ("true", "false", "t", "f", "yes", "no", "y", "n", "1", "0")
    except ValueError:
        return False
    return True


def bind_distinct_from(ctx: ExprContext, node: exp.NullSafeNEQ) -> Expr:
    """``a IS DISTINCT FROM b`` is ``NOT (a <=> b)``."""
    return Call("NOT", (bind_compare(ctx, node, "<=>"),), BOOLEAN)


def _logic(ctx: ExprContext, node: exp.Expr, op: str) -> Expr:
    args = []
    for side in (node.this, node.expression):
        e = ctx.bind(side)
        if e.type != BOOLEAN and not e.type.is_null:
            raise ctx.mismatch(side, f"{op} needs boolean operands, but this is {e.type}",
                               operator=op, actual=e.type.sql())
        args.append(e)
    return Call(op, tuple(args), BOOLEAN)


def bind_and(ctx: ExprContext, node: exp.And) -> Expr:
    return _logic(ctx, node, "AND")


def bind_or(ctx: ExprContext, node: exp.Or) -> Expr:
    return _logic(ctx, node, "OR")


def bind_not(ctx: ExprContext, node: exp.Not) -> Expr:
    inner_node = node.this
    if isinstance(inner_node, exp.Is):
        e = bind_is(ctx, inner_node)
        assert isinstance(e, Call)
        return Call("IS NOT NULL", e.args, BOOLEAN)
    if isinstance(inner_node, exp.In):
        e = bind_in(ctx, inner_node)
        if isinstance(e, SubqueryExpr):
            return Call("NOT", (e,), BOOLEAN)
        assert isinstance(e, Call)
        return Call("NOT IN", e.args, BOOLEAN)
    if isinstance(inner_node, exp.Like):
        e = bind_like(ctx, inner_node)
        assert isinstance(e, Call)
        return Call("LIKE" if e.op == "NOT LIKE" else "NOT LIKE", e.args, BOOLEAN)
    inner = ctx.bind(inner_node)
    if inner.type != BOOLEAN and not inner.type.is_null:
        raise ctx.mismatch(node, f"NOT needs a boolean operand, but this is {inner.type}",
                           operator="NOT", actual=inner.type.sql())
    return Call("NOT", (inner,), BOOLEAN)


def bind_is(ctx: ExprContext, node: exp.Is) -> Expr:
    if not isinstance(node.expression, exp.Null):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_EXPRESSION", "only IS [NOT] NULL is supported", node,
                      "compare with = (or IS [NOT] DISTINCT FROM)", construct="IS")
    return Call("IS NOT NULL" if node.args.get("negate") else "IS NULL", (ctx.bind(node.this),), BOOLEAN)


def bind_in(ctx: ExprContext, node: exp.In) -> Expr:
    if node.args.get("query") is not None:
        return bind_in_subquery(ctx, node)
    if isinstance(node.this, exp.Tuple):
        return _row_in_list(ctx, node)
    value = ctx.bind(node.this)
    items = [ctx.bind(i) for i in node.expressions]
    for item_node, item in zip(node.expressions, items):
        if common_type(value.type, item.type) is None:
            raise ctx.mismatch(item_node, f"IN list item of type {item.type} cannot be compared with {value.type}",
                               left=value.type.sql(), right=item.type.sql())
    return Call("IN", (value, *items), BOOLEAN)


def _row_in_list(ctx: ExprContext, node: exp.In) -> Expr:
    """``(a, b) IN ((1, 2), (3, 4))``: Spark compares the rows as structs, field by field with NULL
    equal to NULL, so it is ``(a <=> 1 AND b <=> 2) OR (a <=> 3 AND b <=> 4)`` — never NULL. As in
    Spark, each row of the list has the left side's types."""
    left = [ctx.bind(v) for v in node.this.expressions]
    rows: list[Expr] = []
    for row_node in node.expressions:
        values = list(row_node.expressions) if isinstance(row_node, exp.Tuple) else [row_node]
        if len(values) != len(left):
            raise ctx.mismatch(row_node, f"IN compares {len(left)} value(s) with a row of {len(values)}",
                               f"list rows of {len(left)} value(s)")
        bound = [ctx.bind(v) for v in values]
        for v_node, v, col in zip(values, bound, left):
            if v.type != col.type:  # a NULL too: Spark types it VOID, another struct type
                raise ctx.mismatch(v_node, f"IN compares rows as structs, and Spark asks for one type: {v.type} "
                                   f"against {col.type}", f"write the value as a {col.type.sql()}, e.g. "
                                   f"CAST(… AS {col.type.sql()})", left=col.type.sql(), right=v.type.sql())
        rows.append(and_all([Call("<=>", (c, v), BOOLEAN) for c, v in zip(left, bound)]) or Literal(True, BOOLEAN))
    return or_all(rows) or Literal(False, BOOLEAN)


def bind_between(ctx: ExprContext, node: exp.Between) -> Expr:
    value = ctx.bind(node.this)
    low, high = ctx.bind(node.args["low"]), ctx.bind(node.args["high"])
    for side_node, side in ((node.args["low"], low), (node.args["high"], high)):
        if common_type(value.type, side.type) is None:
            raise ctx.mismatch(side_node, f"cannot compare {value.type} with {side.type}",
                               left=value.type.sql(), right=side.type.sql())
    return Call("AND", (Call(">=", (value, low), BOOLEAN), Call("<=", (value, high), BOOLEAN)), BOOLEAN)


def bind_like(ctx: ExprContext, node: exp.Like) -> Expr:
    if isinstance(node.expression, (exp.Any, exp.All)):
        return ctx.bind(_quantified_like(node))
    value, pattern = ctx.bind(node.this), ctx.bind(node.expression)
    for side_node, side in ((node.this, value), (node.expression, pattern)):
        if not (side.type.is_string or side.type.is_null):
            raise ctx.mismatch(side_node, f"LIKE needs strings, but this is {side.type}", actual=side.type.sql())
    # sqlglot parses ``x NOT LIKE p`` as a Like marked ``negate``
    return Call("NOT LIKE" if node.args.get("negate") else "LIKE", (value, pattern), BOOLEAN)


def _quantified_like(node: exp.Like | exp.ILike) -> exp.Expr:
    """Spark's ``x [NOT] LIKE ANY|SOME|ALL (p1, p2, …)`` as what it means: each pattern's
    ``x [NOT] LIKE p`` joined by OR (ANY, SOME) or AND (ALL), NULLs as OR and AND treat them."""
    quantifier = node.expression
    inner = quantifier.this
    patterns = inner.expressions if isinstance(inner, exp.Tuple) else [inner.this if isinstance(inner, exp.Paren)
                                                                       else inner]
    each = [type(node)(this=node.this.copy(), expression=p.copy(), negate=node.args.get("negate")) for p in patterns]
    joined = exp.or_(*each) if isinstance(quantifier, exp.Any) else exp.and_(*each)
    return exp.Paren(this=joined)


def bind_ilike(ctx: ExprContext, node: exp.ILike) -> Expr:
    """``x ILIKE p`` is Spark's ``lower(x) LIKE lower(p)``."""
    if isinstance(node.expression, (exp.Any, exp.All)):
        return ctx.bind(_quantified_like(node))
    like = bind_like(ctx, node)  # type: ignore[arg-type]
    assert isinstance(like, Call)
    lowered = tuple(Call("lower", (a,), a.type, "LOWER({0})") for a in like.args)
    return Call(like.op, lowered, BOOLEAN)
