"""Bind calls of scalar functions, typed by the function registry (:mod:`streamfold.ir.functions`).

A call keeps Spark's own text as a template, ``{i}`` where its i-th argument goes, so the printer
writes back exactly what sqlglot's Spark generator writes (``date_format``'s time format
included). A name the registry does not know is refused with the nearest known one, and a
nondeterministic function (``rand``, ``current_date`` …) is refused: a continuous query could
not keep the batch answer. Spark aggregates that sqlglot parses as anonymous calls are bound
here as aggregates. ``typeof(x)`` is known when the query compiles, a constant.
"""

from __future__ import annotations

import re

from sqlglot import exp

from ...errors import UnsupportedError, did_you_mean
from ...ir import functions
from ...ir.expr import Call, Expr, Literal
from ...ir.types import STRING, DataType, parse_type
from ..window_text import WINDOW_CALL
from .aggregates import ANON_AGGS, UNSUPPORTED_ANON_AGGS, bind_agg, unsupported_agg
from .context import ExprContext

_OPERATOR_NAMES: dict[type, str] = {exp.RegexpLike: "rlike", exp.RegexpILike: "rlike"}
_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\b")


def bind_call(ctx: ExprContext, node: exp.Func) -> Expr:
    template, arg_nodes = _sorted_array(node) if isinstance(node, exp.ArraySort) else _template(node)
    if isinstance(node, exp.FromJson):
        return _from_json(ctx, node)
    m = _NAME.match(template)
    # an operator-like call (`x RLIKE p`) has no name in its template: sqlglot's node names it
    name = m.group(1).lower() if m else _OPERATOR_NAMES.get(type(node), type(node).__name__.lower())
    if name == "typeof" and len(arg_nodes) == 1:  # known when the query compiles: a constant
        return Literal(_type_name(ctx.bind(arg_nodes[0]).type), STRING)
    if isinstance(node, exp.Anonymous) and name in (WINDOW_CALL, "session_window"):
        # the block's time window, computed under it (sql/bind/time_windows.py, session_windows.py)
        window = ctx.scope.time_window
        shown = "window" if name == WINDOW_CALL else name
        if window is None or window.name != shown:
            raise ctx.err(UnsupportedError, "UNSUPPORTED_WINDOW", f"{shown}(…) is not supported here", node,
                          f"use {shown}(ts, …) in the select list or GROUP BY of a query block",
                          construct=shown)
        return window.value
    if isinstance(node, exp.Anonymous) and name in ANON_AGGS:
        return bind_agg(ctx, node, ANON_AGGS[name])
    if isinstance(node, exp.Anonymous) and name in UNSUPPORTED_ANON_AGGS:
        raise unsupported_agg(ctx, node, name)
    if name in functions.NONDETERMINISTIC and not (name in functions.CLOCK_WITH_ARGUMENT and arg_nodes):
        raise ctx.err(
            UnsupportedError, "NONDETERMINISTIC_FUNCTION",
            f"`{name}` gives a different value each time it runs, so a continuous query cannot keep the batch answer",
            node, _nondeterministic_hint(name), function=name,
        )
    if not functions.is_known(name):
        known = sorted(functions.FUNCTIONS)
        raise ctx.err(
            UnsupportedError, "UNSUPPORTED_FUNCTION", f"function `{name}` is not supported", node,
            did_you_mean(name, known) or "see docs/sql.md for the supported functions", function=name,
        )
    args = tuple(ctx.bind(a) for a in arg_nodes)
    try:
        result = functions.result_type(name, [a.type for a in args])
    except (TypeError, IndexError) as e:
        raise ctx.mismatch(node, f"bad arguments to `{name}`: {e}", function=name) from None
    return Call(name, args, result, template)


def _sorted_array(node: exp.ArraySort) -> tuple[str, list[exp.Expr]]:
    """``array_sort(arr)`` (NULLs last) and ``sort_array(arr[, asc])`` (NULLs first ascending) as
    written: sqlglot would write the first as the second."""
    if node.args.get("asc") is None and node.args.get("nulls_first") == exp.false():
        return "array_sort({0})", [node.this]
    asc = node.args.get("asc")
    return ("sort_array({0}, {1})", [node.this, asc]) if asc is not None else ("sort_array({0})", [node.this])


def _type_name(t: DataType) -> str:
    """A type as Spark's ``typeof`` names it: ``int``, ``decimal(10,2)``, ``struct<a:int>``."""
    if t.name == "ARRAY":
        return f"array<{_type_name(t.element)}>"
    if t.name == "STRUCT":
        return "struct<" + ",".join(f"{n}:{_type_name(ft)}" for n, ft in t.params) + ">"
    return t.sql().lower()


def _from_json(ctx: ExprContext, node: exp.FromJson) -> Expr:
    """``from_json(s, 'a INT, b STRING')``: a STRUCT of the schema given as a literal (DDL, or a
    ``STRUCT<…>`` or ``ARRAY<…>`` type)."""
    schema = node.expression
    if not (isinstance(schema, exp.Literal) and schema.is_string) or node.args.get("options"):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_FUNCTION", "from_json needs its schema as a string literal, "
                      "without options", node, "write from_json(s, 'a INT, b STRING')", function="from_json")
    text = schema.this.strip()
    if text.upper().startswith("MAP<"):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_TYPE", "from_json into a MAP is not supported (MAP values are "
                      "not)", schema, "name the fields you read: from_json(s, 'a INT, b STRING'), or "
                      "get_json_object(s, '$.a')", function="from_json")
    try:
        whole = text.upper().startswith(("STRUCT<", "ARRAY<"))
        struct = parse_type(text if whole else f"STRUCT<{_ddl_fields(text)}>")
    except ValueError as e:
        raise ctx.mismatch(schema, f"from_json cannot read the schema `{text}`: {e}",
                           "give column names and types: 'a INT, b ARRAY<STRING>'", function="from_json") from None
    value = ctx.bind(node.this)
    if not (value.type.is_string or value.type.is_null):
        raise ctx.mismatch(node, f"from_json reads a STRING, not {value.type}", "pass the JSON text",
                           function="from_json")
    return Call("from_json", (value,), struct, f"from_json({{0}}, {_string(text)})")


def _ddl_fields(text: str) -> str:
    """``a INT, b STRING`` as STRUCT fields ``a: INT, b: STRING`` (commas inside <> kept)."""
    fields, depth, start = [], 0, 0
    for i, ch in enumerate(text + ","):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            name, _, kind = text[start:i].strip().partition(" ")
            fields.append(f"{name.strip('`')}: {kind.strip()}")
            start = i + 1
    return ", ".join(fields)


def _string(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _template(node: exp.Func) -> tuple[str, list[exp.Expr]]:
    """Spark SQL text for a function call with ``{i}`` where its i-th argument goes."""
    args: list[exp.Expr] = []
    clone = node.copy()

    def placeholder(original: exp.Expr) -> exp.Expr:
        args.append(original)
        return exp.column(f"__sfarg{len(args) - 1}__")

    for key, value in node.args.items():
        if key == "format" and isinstance(value, exp.Literal):
            continue  # a time format, kept in strftime letters by sqlglot: Spark's generator writes Spark's back
        if isinstance(value, exp.TimeStrToTime):  # sqlglot's view of date_format's argument, not a call of ours
            clone.set(key, exp.TimeStrToTime(this=placeholder(value.this)))
        elif isinstance(value, exp.Expr) and not isinstance(value, (exp.Var, exp.DataType, exp.JSONPath)):
            clone.set(key, placeholder(value))
        elif isinstance(value, list):
            clone.set(key, [placeholder(v) if isinstance(v, exp.Expr) else v for v in value])
    text = clone.sql(dialect="spark").replace("{", "{{").replace("}", "}}")
    text = re.sub(r"__sfarg(\d+)__", lambda m: "{" + m.group(1) + "}", text)
    return text, args


# The clock functions a time bound reads: the hint names the bound, the one exact use of the clock.
_CLOCKS = frozenset({"current_date", "curdate", "current_timestamp", "now", "localtimestamp", "unix_timestamp",
                     "current_timezone"})


def _nondeterministic_hint(name: str) -> str:
    hint = "compute the value once and pass it in as a literal or a static table"
    if name in _CLOCKS:
        return (f"to keep only recent rows, bound the event time from below in WHERE: `ts > current_timestamp() "
                f"- INTERVAL 7 DAYS`, or a DATE `day >= current_date() - INTERVAL 7 DAYS` (rows leave as the clock "
                f"passes; docs/windows.md); otherwise {hint}")
    return hint
