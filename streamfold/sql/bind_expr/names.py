"""Bind names: columns (``col``, ``alias.col``), fields of a STRUCT (``p.a``) and array elements.

A dotted name is resolved in Spark's order: ``a.b`` is column ``b`` of the table ``a`` if one is
in scope, else field ``b`` of the STRUCT column ``a``; only when it is neither here is it looked
up in the enclosing query (:meth:`Scope.resolve_path`).
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, UnsupportedError, did_you_mean
from ...ir.expr import Call, Expr, Literal
from ...ir.types import DataType
from ..parse import span_of
from .context import ExprContext


def bind_column(ctx: ExprContext, node: exp.Column) -> Expr:
    if isinstance(node.this, exp.Star):
        raise ctx.err(BindError, "MISPLACED_STAR", "`*` is only allowed in the SELECT list or count(*)", node)
    return _name(ctx, [p.name for p in node.parts], node)


def bind_identifier(ctx: ExprContext, node: exp.Identifier) -> Expr:
    """A bare name where sqlglot reads no column: a lambda's parameter (``x`` in ``x -> x + 1``)."""
    return _name(ctx, [node.name], node)


def _name(ctx: ExprContext, parts: list[str], node: exp.Expr) -> Expr:
    """``col``, ``alias.col``, then any ``.field`` of a STRUCT: ``p.a`` is field ``a`` of column
    ``p`` when no table in scope is called ``p`` (Spark's rule)."""
    span = span_of(node)
    variable = ctx.lambdas.get(parts[0].lower())
    if variable is not None:  # a lambda's parameter hides a column of its name, as in Spark
        for name in parts[1:]:
            variable = _field(ctx, variable, name, node)
        return variable
    window = ctx.scope.time_window
    if window is not None and parts[0].lower() == window.name and (len(parts) == 1 or ctx.scope.entry(parts[0]) is None):
        # the block's time window (GROUP BY window(ts, …)) is read as a column named `window`
        value = window.value
        for name in parts[1:]:
            value = _field(ctx, value, name, node)
        return value
    if len(parts) == 1:
        return ctx.scope.resolve(None, parts[0], span)
    base: Expr
    base, rest = ctx.scope.resolve_path(parts, span)
    if len(rest) == len(parts) - 1 and base.type.name != "STRUCT" and _outer_alias(ctx, parts[0]):
        raise ctx.mismatch(node, f"`{parts[0]}` here is the column `{parts[0]}` of the subquery's own "
                           f"table, a {base.type}, not the enclosing query's table `{parts[0]}`",
                           f"Spark looks in the subquery's tables first: give the outer `{parts[0]}` "
                           "another alias and use it", actual=base.type.sql())
    for name in rest:
        base = _field(ctx, base, name, node)
    return base


def _outer_alias(ctx: ExprContext, alias: str) -> bool:
    scope = ctx.scope.parent
    while scope is not None:
        if scope.entry(alias) is not None:
            return True
        scope = scope.parent
    return False


def _field(ctx: ExprContext, base: Expr, name: str, node: exp.Expr) -> Expr:
    """Field ``name`` of the STRUCT ``base``."""
    t = base.type.field_type(name)
    if t is None:
        if base.type.name != "STRUCT":
            raise ctx.mismatch(node, f"`.{name}` needs a STRUCT, but `{node.sql(dialect='spark')}` reads a {base.type}",
                               "field access works on STRUCT columns", actual=base.type.sql())
        fields = [n for n, _ in base.type.params]
        raise ctx.err(BindError, "UNKNOWN_FIELD", f"the struct has no field `{name}`", node,
                      did_you_mean(name, fields) or f"its fields are {', '.join(fields)}", field=name)
    spelled = next(n for n, _ in base.type.params if n.lower() == name.lower())
    if isinstance(base, Call) and base.op == "named_struct":  # a field of a struct built here: the value itself
        return base.args[[n for n, _ in base.type.params].index(spelled)]
    return Call("field", (base,), t, "{0}.`" + spelled.replace("`", "``") + "`")


def bind_dot(ctx: ExprContext, node: exp.Dot) -> Expr:
    parts = _dotted(node)
    if parts is not None:
        return _name(ctx, parts, node)
    return _field(ctx, ctx.bind(node.this), node.expression.name, node)


def bind_bracket(ctx: ExprContext, node: exp.Bracket) -> Expr:
    """``arr[i]`` (from 0) and ``element_at(arr, i)`` (from 1): NULL past the end, as in DuckDB
    (Spark's ANSI mode would stop the query with an error on one bad row)."""
    if len(node.expressions) != 1:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_EXPRESSION", "an index takes one value", node,
                      construct="index")
    base, index = ctx.bind(node.this), ctx.bind(node.expressions[0])
    if base.type.name != "ARRAY":
        raise ctx.mismatch(node, f"only arrays can be indexed, but this is {base.type}",
                           "MAP columns are not supported", actual=base.type.sql())
    if not (index.type.is_integral or index.type.is_null):
        raise ctx.mismatch(node, f"an array index must be a whole number, not {index.type}", actual=index.type.sql())
    one_based = node.args.get("offset") == 1
    if one_based and isinstance(index, Literal) and index.value == 0:
        raise ctx.err(BindError, "INVALID_ARRAY_INDEX", "element_at counts from 1, so index 0 is invalid", node,
                      "use 1 for the first element, -1 for the last")
    template = "try_element_at({0}, {1})" if one_based else "get({0}, {1})"
    return Call("element_at" if one_based else "index", (base, index), base.type.element, template)


def _dotted(node: exp.Expr) -> list[str] | None:
    """``a.b.c.d`` as names, or None if the chain starts at something other than a name."""
    if isinstance(node, exp.Column):
        return [p.name for p in node.parts]
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
        head = _dotted(node.this)
        return None if head is None else head + [node.expression.name]
    return None


def bind_struct(ctx: ExprContext, node: exp.Struct) -> Expr:
    """``struct(a, b + 1, c AS n)`` and ``named_struct('n', v, …)``: a STRUCT of the fields as Spark
    names them (a column's name, an alias, ``col<i>`` for another expression; sqlglot has named
    them so). Spark orders structs field by field (NULL first), so ``max(struct(ts, v)).v`` is the
    ``v`` of the latest ``ts``."""
    names: list[str] = []
    values: list[Expr] = []
    for item in node.expressions:
        if not isinstance(item, exp.PropertyEQ) or not isinstance(item.this, exp.Identifier):
            raise ctx.err(UnsupportedError, "UNSUPPORTED_EXPRESSION", f"struct field `{item.sql(dialect='spark')}` "
                          "is not supported", item, "name each field: named_struct('name', value, …)")
        if item.this.name.lower() in (n.lower() for n in names):
            raise ctx.err(BindError, "DUPLICATE_FIELD", f"the struct names field `{item.this.name}` twice", item,
                          f"give each field its own name, e.g. {item.this.name} AS {item.this.name}_2",
                          field=item.this.name)
        names.append(item.this.name)
        values.append(ctx.bind(item.expression))
    if not values:
        raise ctx.err(BindError, "WRONG_ARGUMENTS", "a struct needs at least one field", node,
                      "write struct(a, b, …)", function="struct")
    literals = ("'" + n.replace("\\", "\\\\").replace("'", "\\'").replace("{", "{{").replace("}", "}}") + "'"
                for n in names)  # (braces doubled: the template is formatted)
    template = "named_struct(" + ", ".join(f"{text}, {{{i}}}" for i, text in enumerate(literals)) + ")"
    t = DataType("STRUCT", params=tuple((n, v.type) for n, v in zip(names, values)))
    return Call("named_struct", tuple(values), t, template)
