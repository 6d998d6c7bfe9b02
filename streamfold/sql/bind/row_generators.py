"""Generators that give rows of several columns: ``inline(arr)`` (``inline_outer``) of an array of
structs, ``stack(n, e1, e2, …)`` and ``json_tuple(json, 'k1', 'k2', …)`` — in a LATERAL VIEW, a
LATERAL join or the select list, as :mod:`.generators` places ``explode``.

Each is an :class:`Explode` of an array of structs, one struct per row it gives, then the
struct's fields as columns:

* ``inline(arr)``: the array itself; columns named by the struct's fields;
* ``stack(n, e1, …, ek)``: ``n`` rows of ``ceil(k / n)`` columns, ``col0``, ``col1`` …, filled
  row by row, the last padded with NULLs, each column of one type (Spark's rule);
* ``json_tuple(j, 'k1', …)``: one row, ``c0``, ``c1`` …, each ``get_json_object(j, '$['k']')``
  (a field's text, NULL when absent or when ``j`` is not JSON), as Spark reads them.

A row's rows depend on that row alone, so a deleted row takes back what it gave.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError
from ...ir.expr import Call, Cast, Column, Expr, Literal
from ...ir.rel import Explode, Project, Rel
from ...ir.types import NULL, STRING, DataType, array
from ..bind_expr import ExprBinder
from ..scope import Scope, ScopeEntry
from .context import BindContext


def row_generator(node: exp.Expr) -> str | None:
    """``inline``, ``inline_outer``, ``stack`` or ``json_tuple`` if ``node`` calls one, else None."""
    if isinstance(node, exp.Inline):
        return "inline"
    if isinstance(node, exp.Stack):
        return "stack"
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in ("inline_outer", "json_tuple"):
        return str(node.this).lower()
    return None


def explode_rows(ctx: BindContext, gen: exp.Expr, rel: Rel, scope: Scope, view: str, names: list[str],
                 outer: bool, node: exp.Expr) -> Rel:
    """``rel`` with the rows ``gen`` gives for each of its rows, its columns under ``view`` in ``scope``."""
    fn = row_generator(gen)
    assert fn is not None
    binder = ExprBinder(scope, "LATERAL VIEW")
    if fn in ("inline", "inline_outer"):
        arg = gen.this if isinstance(gen, exp.Inline) else (gen.expressions[0] if len(gen.expressions) == 1 else None)
        if arg is None:
            raise ctx.err(BindError, "WRONG_ARGUMENTS", f"`{fn}` takes one array of structs", gen, function=fn)
        rows = binder.bind(arg)
        if rows.type.name != "ARRAY" or rows.type.element.name != "STRUCT":
            raise ctx.err(BindError, "TYPE_MISMATCH", f"`{fn}` needs an array of structs, not {rows.type}", gen,
                          "inline an ARRAY<STRUCT<…>>; explode an array of other values", actual=rows.type.sql())
        outer = outer or fn == "inline_outer"
    elif fn == "stack":
        rows = _stack(ctx, gen, binder)
    else:
        rows = _json_tuple(ctx, gen, binder)
    fields = list(rows.type.element.params)
    names = names or [n for n, _ in fields]
    if len(names) != len(fields):
        raise ctx.err(BindError, "GENERATOR_COLUMNS", f"`{fn}` makes {len(fields)} column(s), but {len(names)} "
                      "name(s) are given", node, f"name them like `AS {', '.join(n for n, _ in fields)}`",
                      function=fn, expected=len(fields))
    ctx.check_alias(view, node, scope)
    internal = ctx.unique_alias(view)
    row = f"{internal}.__row"
    exploded = Explode(rel, rows, row, None, outer)
    struct = Column(row, rows.type.element)
    columns = [(f"{internal}.{n}", Call("field", (struct,), t, "{0}.`" + f.replace("`", "``") + "`"))
               for n, (f, t) in zip(names, fields)]
    out = Project(exploded, tuple((f.name, f.ref()) for f in rel.schema) + tuple(columns))
    scope.entries.append(ScopeEntry.of(view, [(n, out.field(c)) for n, (c, _) in zip(names, columns)]))
    return out


def _stack(ctx: BindContext, gen: exp.Expr, binder: ExprBinder) -> Expr:
    count = gen.this
    if not (isinstance(count, exp.Literal) and not count.is_string and str(count.this).isdigit()
            and int(count.this) > 0):
        raise ctx.err(BindError, "WRONG_ARGUMENTS", "stack's first argument is its number of rows, a positive "
                      "integer literal", gen, "write stack(2, a, b, c, d)", function="stack")
    n = int(count.this)
    values = [binder.bind(e) for e in gen.expressions]
    width = max(1, -(-len(values) // n))
    cells: list[list[Expr]] = [[values[r * width + c] if r * width + c < len(values) else Literal(None, NULL)
                                for c in range(width)] for r in range(n)]
    types: list[DataType] = []
    for c in range(width):
        t = cells[0][c].type
        for r in range(1, n):  # one type, as Spark asks of stack (a NULL takes the column's)
            other = cells[r][c].type
            wider = other if t.is_null else t if other.is_null or other == t else None
            if wider is None:
                raise ctx.err(BindError, "TYPE_MISMATCH", f"column col{c} of stack holds a {t} and a "
                              f"{cells[r][c].type}", gen, "give each column's values one type, e.g. with CAST",
                              function="stack")
            t = wider
        types.append(t)
    return _structs(ctx, [[v if v.type == t else Cast(v, t) for v, t in zip(row, types)] for row in cells],
                    [f"col{c}" for c in range(width)], types)


def _json_tuple(ctx: BindContext, gen: exp.Expr, binder: ExprBinder) -> Expr:
    args = list(gen.expressions)
    keys = args[1:]
    if not keys or not all(isinstance(k, exp.Literal) and k.is_string for k in keys):
        raise ctx.err(BindError, "WRONG_ARGUMENTS", "json_tuple takes the JSON text and its fields' names as "
                      "string literals", gen, "write json_tuple(j, 'a', 'b')", function="json_tuple")
    text = binder.bind(args[0])
    if not (text.type.is_string or text.type.is_null):
        raise ctx.err(BindError, "TYPE_MISMATCH", f"json_tuple reads a STRING, not {text.type}", gen,
                      "pass the JSON text", function="json_tuple")
    values: list[Expr] = []
    for key in keys:
        path = "$['" + str(key.this) + "']"
        quoted = path.replace("\\", "\\\\").replace("'", "\\'").replace("{", "{{").replace("}", "}}")
        values.append(Call("get_json_object", (text,), STRING, f"get_json_object({{0}}, '{quoted}')"))
    return _structs(ctx, [values], [f"c{i}" for i in range(len(values))], [STRING] * len(values))


def _structs(ctx: BindContext, rows: list[list[Expr]], names: list[str], types: list[DataType]) -> Expr:
    """``array(named_struct(…), …)``: one struct of ``names`` per row."""
    struct_t = DataType("STRUCT", params=tuple(zip(names, types)))
    template = "named_struct(" + ", ".join(f"'{n}', {{{i}}}" for i, n in enumerate(names)) + ")"
    structs = [Call("named_struct", tuple(row), struct_t, template) for row in rows]
    return Call("array", tuple(structs), array(struct_t), "array(" + ", ".join(f"{{{i}}}" for i in range(len(rows)))
                + ")")
