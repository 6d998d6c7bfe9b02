"""Spark functions that are another expression spelled shorter, bound as that expression, and
Spark's bitwise operators.

::

    try_divide(a, b)            →  a / b            (streamfold's division is NULL for a zero divisor)
    decode(k, s1, r1, …, d)     →  CASE WHEN k <=> s1 THEN r1 … ELSE d END   (NULL matches NULL)
    equal_null(a, b)            →  a <=> b
    isnull(x), isnotnull(x)     →  x IS NULL, x IS NOT NULL
    zeroifnull(x), nullifzero(x) → coalesce(x, 0), nullif(x, 0)
    bigint(x), smallint(x), tinyint(x), decimal(x)  →  CAST(x AS BIGINT) …, CAST(x AS DECIMAL(10,0))

Written out, each is typed and maintained as what it means, and the oracle (DuckDB) reads it too.
The bitwise operators ``& | ^ ~``, ``shiftleft`` and ``shiftright`` keep Spark's types: the operands' common
integral type (a shift's at least INT).
"""

from __future__ import annotations

from sqlglot import exp

from ...ir.expr import Call, Expr
from ...ir.types import INT, common_type
from .context import ExprContext


# Spark's cast functions that sqlglot reads as anonymous calls (it reads int(x), double(x) … as casts)
_CAST_FUNCTIONS = {"bigint": "BIGINT", "smallint": "SMALLINT", "tinyint": "TINYINT", "decimal": "DECIMAL(10,0)"}


def respelled(node: exp.Expr) -> exp.Expr | None:
    """What ``node`` means as other SQL, when it is one of the spellings above; else None."""
    if isinstance(node, exp.SafeDivide):
        return exp.Div(this=node.this.copy(), expression=node.expression.copy())
    if isinstance(node, exp.EqualNull):
        return exp.NullSafeEQ(this=node.this.copy(), expression=node.expression.copy())
    if isinstance(node, exp.DecodeCase) and len(node.expressions) >= 3:
        k, *rest = node.expressions
        pairs, default = (rest, None) if len(rest) % 2 == 0 else (rest[:-1], rest[-1])
        ifs = [exp.If(this=exp.NullSafeEQ(this=k.copy(), expression=s.copy()), true=r.copy())
               for s, r in zip(pairs[::2], pairs[1::2])]
        return exp.Case(ifs=ifs, default=default.copy() if default is not None else None)
    if isinstance(node, exp.Anonymous) and len(node.expressions) == 1:
        x = node.expressions[0].copy()
        name = node.name.lower()
        if name in _CAST_FUNCTIONS:
            return exp.Cast(this=x, to=exp.DataType.build(_CAST_FUNCTIONS[name], dialect="spark"))
        if name == "isnull":
            return exp.Is(this=x, expression=exp.Null())
        if name == "isnotnull":
            return exp.Not(this=exp.Is(this=x, expression=exp.Null()))
        if name == "zeroifnull":
            return exp.Coalesce(this=x, expressions=[exp.Literal.number(0)])
        if name == "nullifzero":
            return exp.Nullif(this=x, expression=exp.Literal.number(0))
    return None


_BITWISE: dict[type[exp.Expr], str] = {exp.BitwiseAnd: "&", exp.BitwiseOr: "|", exp.BitwiseXor: "^", exp.BitwiseRightShift: ">>",
                                          exp.BitwiseLeftShift: "<<"}


def bitwise(node: exp.Expr) -> bool:
    return type(node) in _BITWISE or isinstance(node, exp.BitwiseNot)


def bind_bitwise(ctx: ExprContext, node: exp.Expr) -> Expr:
    operands = [node.this] if isinstance(node, exp.BitwiseNot) else [node.this, node.expression]
    args = tuple(ctx.bind(o) for o in operands)
    if not all(a.type.is_integral or a.type.is_null for a in args):
        raise ctx.mismatch(node, "bitwise operators take integers, not "
                           + " and ".join(str(a.type) for a in args), "CAST the operands to INT or BIGINT")
    if isinstance(node, exp.BitwiseNot):
        return Call("~", args, args[0].type, "(~ {0})")
    if isinstance(node, (exp.BitwiseRightShift, exp.BitwiseLeftShift)):
        t = args[0].type if args[0].type.name == "BIGINT" else INT
        name = "shiftright" if isinstance(node, exp.BitwiseRightShift) else "shiftleft"
        return Call(name, args, t, f"{name}({{0}}, {{1}})")
    common = common_type(args[0].type, args[1].type)
    assert common is not None
    op = _BITWISE[type(node)]
    return Call(op, args, common, f"({{0}} {op} {{1}})")
