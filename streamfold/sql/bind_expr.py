"""Bind scalar sqlglot expressions to typed IR expressions, checking types as Spark would."""

from __future__ import annotations

import calendar
import datetime as dt
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from sqlglot import exp

from ..errors import BindError, SqlError, UnsupportedError, did_you_mean
from ..ir import functions
from ..ir.expr import ROW, Agg, Call, Case, Cast, Expr, Literal, SubqueryExpr
from ..ir.types import (
    BIGINT, BOOLEAN, DATE, DOUBLE, INT, NULL, STRING, TIMESTAMP, DataType, arithmetic_type, avg_type,
    common_type, decimal, parse_type, struct, sum_type,
)
from .parse import span_of, widen_to_call
from .scope import Scope

_ARITH = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%"}
_COMPARE = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
            exp.NullSafeEQ: "<=>"}
_AGGS: dict[type, str] = {
    exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
    exp.Stddev: "stddev", exp.StddevSamp: "stddev_samp", exp.StddevPop: "stddev_pop",
    exp.Variance: "variance", exp.VariancePop: "var_pop",
}
_ANON_AGGS = {"var_samp": "var_samp", "var_pop": "var_pop", "stddev_samp": "stddev_samp",
              "stddev_pop": "stddev_pop", "std": "stddev", "mean": "avg"}
# Spark's names for the aggregates sqlglot parses to a node of its own (others are named by the node)
_UNSUPPORTED_AGGS = {
    exp.ApproxDistinct: "approx_count_distinct", exp.ArrayAgg: "collect_list", exp.ArrayUniqueAgg: "collect_set",
    exp.Quantile: "percentile", exp.ApproxQuantile: "percentile_approx", exp.AnyValue: "any_value",
    exp.First: "first", exp.Last: "last", exp.CountIf: "count_if", exp.GroupConcat: "string_agg",
    exp.LogicalAnd: "bool_and", exp.LogicalOr: "bool_or", exp.ArgMin: "min_by", exp.ArgMax: "max_by",
    exp.BitwiseAndAgg: "bit_and", exp.BitwiseOrAgg: "bit_or",
}
# Spark aggregates sqlglot does not know (parsed as anonymous calls)
_UNSUPPORTED_ANON_AGGS = frozenset({
    "every", "some", "product", "try_sum", "try_avg", "histogram_numeric", "count_min_sketch", "hll_sketch_agg",
    "bit_xor", "regr_count", "regr_r2", "regr_sxx", "regr_sxy", "regr_syy", "regr_avgx", "regr_avgy",
    "regr_intercept", "approx_top_k",
})
_SUPPORTED_AGGS = "supported aggregates: count, sum, avg, min, max, count(DISTINCT), stddev, variance"
# What to write instead, where there is an exact spelling
_AGG_HINTS = {
    "approx_count_distinct": "count(DISTINCT x) is exact and maintained incrementally",
    "count_if": "write count(CASE WHEN p THEN 1 END), or count(*) FILTER (WHERE p)",
    "bool_and": "write min(CAST(p AS INT)) = 1 (NULL over no rows, as bool_and)",
    "every": "write min(CAST(p AS INT)) = 1 (NULL over no rows, as every)",
    "bool_or": "write max(CAST(p AS INT)) = 1 (NULL over no rows, as bool_or)",
    "some": "write max(CAST(p AS INT)) = 1 (NULL over no rows, as some)",
    "first": "which row is first depends on the order Spark reads the files; use min or max",
    "last": "which row is last depends on the order Spark reads the files; use min or max",
    "any_value": "which row it picks depends on the order Spark reads the files; use min or max",
    "percentile_cont": "a percentile is not maintained; the share of a group at or below a value t is: "
                       "avg(CASE WHEN x <= t THEN 1.0 ELSE 0.0 END)",
    "percentile_disc": "a percentile is not maintained; the share of a group at or below a value t is: "
                       "avg(CASE WHEN x <= t THEN 1.0 ELSE 0.0 END)",
}
# What to write instead of a window function, for every refusal of one (OVER, WINDOW, QUALIFY)
WINDOW_HINT = ("for a total per group use GROUP BY (joined back to the rows if they are needed); for the top rows "
               "use ORDER BY … LIMIT on the outermost query; for the top rows per group compare with the group's "
               "max/min in a subquery")
_OPERATOR_NAMES: dict[type, str] = {exp.RegexpLike: "rlike", exp.RegexpILike: "rlike"}
_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\b")

# Aggregates found while binding are handed to this callback, which returns their stand-in.
AggHook = Callable[[Agg, exp.Expr], Expr]
# Binds a subquery with the current scope as its enclosing one: (relation, output names).
SubqueryHook = Callable[[exp.Expr, Scope], tuple[Any, list[str]]]


class ExprBinder:
    """Binds expressions of one query block against a :class:`Scope`.

    ``on_agg`` receives each aggregate call; without it aggregates are an error (as in WHERE).
    ``clause`` names the clause for messages ("WHERE", "GROUP BY" …).
    """

    def __init__(self, scope: Scope, clause: str, on_agg: AggHook | None = None,
                 subquery: SubqueryHook | None = None) -> None:
        self.scope = scope
        self.sql = scope.sql
        self.clause = clause
        self.on_agg = on_agg
        self.subquery = subquery
        self._in_agg = False

    # -- errors ----------------------------------------------------------------------------------
    def _err(self, cls: type[SqlError], code: str, message: str, node: exp.Expr | None,
             hint: str | None = None, **params: object) -> SqlError:
        return cls(message, code=code, sql=self.sql, span=widen_to_call(self.sql, span_of(node)),
                   hint=hint, params=params)

    def _mismatch(self, node: exp.Expr, what: str, hint: str | None = None, **params: object) -> SqlError:
        return self._err(BindError, "TYPE_MISMATCH", what, node, hint, **params)

    # -- entry -----------------------------------------------------------------------------------
    def bind(self, node: exp.Expr) -> Expr:
        method = getattr(self, "_bind_" + type(node).__name__, None)
        if method is not None:
            return method(node)  # type: ignore[no-any-return]
        for cls, op in _ARITH.items():
            if isinstance(node, cls):
                return self._arith(node, op)
        for cls, op in _COMPARE.items():
            if isinstance(node, cls):
                return self._compare(node, op)
        for agg_cls, fn in _AGGS.items():
            if type(node) is agg_cls:
                return self._agg(node, fn)
        if isinstance(node, (exp.Subquery, exp.Exists)):
            return self._subquery_expr(node)
        if isinstance(node, (exp.All, exp.Any)):
            word = "ALL" if isinstance(node, exp.All) else "ANY"
            raise self._err(UnsupportedError, "UNSUPPORTED_SUBQUERY",
                            f"a comparison with {word} (subquery) is not supported (Spark does not accept it)", node,
                            "write `x = ANY (…)` as `x IN (…)`, `x > ALL (SELECT c …)` as `x > (SELECT max(c) …)` "
                            "or with NOT EXISTS (SELECT … WHERE c >= x)", construct=f"{word} (subquery)")
        if isinstance(node, exp.Window):
            raise self._err(UnsupportedError, "UNSUPPORTED_WINDOW",
                            "window functions (OVER …) are not supported in a continuous query", node,
                            WINDOW_HINT, construct="window")
        if isinstance(node, exp.WithinGroup):  # percentile_cont(p) WITHIN GROUP (ORDER BY x), …
            inner = node.this
            raise self._unsupported_agg(node, inner.sql_name().lower() if isinstance(inner, exp.Func) else "WITHIN GROUP")
        if isinstance(node, exp.AggFunc):  # every aggregate not bound above
            raise self._unsupported_agg(node, _UNSUPPORTED_AGGS.get(type(node)) or node.sql_name().lower())
        if isinstance(node, exp.Func):
            return self._function(node)
        raise self._err(UnsupportedError, "UNSUPPORTED_EXPRESSION",
                        f"expression `{node.sql(dialect='spark')}` is not supported", node,
                        "docs/sql.md lists the supported expressions and functions", construct=type(node).__name__)

    def boolean(self, node: exp.Expr) -> Expr:
        e = self.bind(node)
        if e.type != BOOLEAN and not e.type.is_null:
            raise self._mismatch(node, f"{self.clause} needs a boolean condition, but this is {e.type}",
                                 "compare it, e.g. `x > 0`", expected="BOOLEAN", actual=e.type.sql())
        return e

    # -- leaves ----------------------------------------------------------------------------------
    def _bind_Column(self, node: exp.Column) -> Expr:
        if isinstance(node.this, exp.Star):
            raise self._err(BindError, "MISPLACED_STAR", "`*` is only allowed in the SELECT list or count(*)", node)
        return self._name([p.name for p in node.parts], node)

    def _name(self, parts: list[str], node: exp.Expr) -> Expr:
        """``col``, ``alias.col``, then any ``.field`` of a STRUCT: ``p.a`` is field ``a`` of column
        ``p`` when no table in scope is called ``p`` (Spark's rule)."""
        span = span_of(node)
        if len(parts) == 1:
            return self.scope.resolve(None, parts[0], span)
        base: Expr
        base, rest = self.scope.resolve_path(parts, span)
        if len(rest) == len(parts) - 1 and base.type.name != "STRUCT" and self._outer_alias(parts[0]):
            raise self._mismatch(node, f"`{parts[0]}` here is the column `{parts[0]}` of the subquery's own "
                                 f"table, a {base.type}, not the enclosing query's table `{parts[0]}`",
                                 f"Spark looks in the subquery's tables first: give the outer `{parts[0]}` "
                                 "another alias and use it", actual=base.type.sql())
        for name in rest:
            base = self._field(base, name, node)
        return base

    def _outer_alias(self, alias: str) -> bool:
        scope = self.scope.parent
        while scope is not None:
            if scope.entry(alias) is not None:
                return True
            scope = scope.parent
        return False

    def _field(self, base: Expr, name: str, node: exp.Expr) -> Expr:
        """Field ``name`` of the STRUCT ``base``."""
        t = base.type.field_type(name)
        if t is None:
            if base.type.name != "STRUCT":
                raise self._mismatch(node, f"`.{name}` needs a STRUCT, but `{node.sql(dialect='spark')}` reads a {base.type}",
                                     "field access works on STRUCT columns", actual=base.type.sql())
            fields = [n for n, _ in base.type.params]
            raise self._err(BindError, "UNKNOWN_FIELD", f"the struct has no field `{name}`", node,
                            did_you_mean(name, fields) or f"its fields are {', '.join(fields)}", field=name)
        spelled = next(n for n, _ in base.type.params if n.lower() == name.lower())
        return Call("field", (base,), t, "{0}.`" + spelled.replace("`", "``") + "`")

    def _bind_Dot(self, node: exp.Dot) -> Expr:
        parts = _dotted(node)
        if parts is not None:
            return self._name(parts, node)
        return self._field(self.bind(node.this), node.expression.name, node)

    def _bind_Bracket(self, node: exp.Bracket) -> Expr:
        """``arr[i]`` (from 0) and ``element_at(arr, i)`` (from 1): NULL past the end, as in DuckDB
        (Spark's ANSI mode would stop the query with an error on one bad row)."""
        if len(node.expressions) != 1:
            raise self._err(UnsupportedError, "UNSUPPORTED_EXPRESSION", "an index takes one value", node,
                            construct="index")
        base, index = self.bind(node.this), self.bind(node.expressions[0])
        if base.type.name != "ARRAY":
            raise self._mismatch(node, f"only arrays can be indexed, but this is {base.type}",
                                 "MAP columns are not supported", actual=base.type.sql())
        if not (index.type.is_integral or index.type.is_null):
            raise self._mismatch(node, f"an array index must be a whole number, not {index.type}", actual=index.type.sql())
        one_based = node.args.get("offset") == 1
        if one_based and isinstance(index, Literal) and index.value == 0:
            raise self._err(BindError, "INVALID_ARRAY_INDEX", "element_at counts from 1, so index 0 is invalid", node,
                            "use 1 for the first element, -1 for the last")
        template = "try_element_at({0}, {1})" if one_based else "get({0}, {1})"
        return Call("element_at" if one_based else "index", (base, index), base.type.element, template)

    def _bind_Paren(self, node: exp.Paren) -> Expr:
        return self.bind(node.this)

    def _bind_Literal(self, node: exp.Literal) -> Expr:
        text = node.this
        if node.is_string:
            return Literal(text, STRING)
        return number_literal(text)

    def _bind_Boolean(self, node: exp.Boolean) -> Expr:
        return Literal(bool(node.this), BOOLEAN)

    def _bind_Null(self, node: exp.Null) -> Expr:
        return Literal(None, NULL)

    def _bind_Neg(self, node: exp.Neg) -> Expr:
        inner = self.bind(node.this)
        if isinstance(inner, Literal) and inner.value is not None and inner.type.is_numeric:
            return Literal(-inner.value, inner.type)
        if not (inner.type.is_numeric or inner.type.is_null):
            raise self._mismatch(node, f"cannot negate a value of type {inner.type}", actual=inner.type.sql())
        return Call("neg", (inner,), inner.type)

    # -- operators -------------------------------------------------------------------------------
    def _arith(self, node: exp.Binary, op: str) -> Expr:
        left_node, right_node = node.this, node.expression
        if isinstance(right_node, exp.Interval) or isinstance(left_node, exp.Interval):
            return self._interval_arith(node, op)
        left, right = self.bind(left_node), self.bind(right_node)
        if op in "+-" and left.type.name == "DATE" and right.type.is_integral:
            fn = "date_add" if op == "+" else "date_sub"
            return Call(fn, (left, right), DATE, f"{fn}({{0}}, {{1}})")
        if op == "-" and left.type.name == "DATE" and right.type.name == "DATE":
            return Call("datediff", (left, right), INT, "datediff({0}, {1})")
        t = arithmetic_type(op, left.type, right.type)
        if t is None:
            raise self._mismatch(
                node, f"cannot apply `{op}` to {left.type} and {right.type}",
                "arithmetic needs numbers; CAST a string column if it holds numbers",
                operator=op, left=left.type.sql(), right=right.type.sql(),
            )
        return Call(op, (left, right), t)

    def _interval_arith(self, node: exp.Binary, op: str) -> Expr:
        if op not in "+-" or not isinstance(node.expression, exp.Interval):
            raise self._err(UnsupportedError, "UNSUPPORTED_EXPRESSION",
                            "only `date ± INTERVAL n unit` is supported", node, construct="interval")
        base = self.bind(node.this)
        interval = node.expression
        amount_node = interval.this
        unit = (interval.unit.name if interval.unit is not None else "DAY").upper().rstrip("S")
        try:
            amount = int(amount_node.name if isinstance(amount_node, exp.Literal) else str(amount_node))
        except ValueError:
            raise self._err(UnsupportedError, "UNSUPPORTED_EXPRESSION",
                            "an INTERVAL must have a constant whole number", interval, construct="interval") from None
        if op == "-":
            amount = -amount
        if base.type.name not in ("DATE", "TIMESTAMP"):
            raise self._mismatch(node, f"cannot add an interval to {base.type}", actual=base.type.sql())
        if unit not in ("DAY", "MONTH", "YEAR", "WEEK"):
            raise self._err(UnsupportedError, "UNSUPPORTED_EXPRESSION", f"INTERVAL unit {unit} is not supported",
                            interval, "use DAY, WEEK, MONTH or YEAR", construct="interval")
        if isinstance(base, Literal) and isinstance(base.value, dt.date) and base.type.name == "DATE":
            return Literal(_shift_date(base.value, amount, unit), DATE)
        if unit in ("DAY", "WEEK"):
            days = amount * (7 if unit == "WEEK" else 1)
            return Call("date_add", (base, Literal(days, INT)), DATE, "date_add({0}, {1})")
        months = amount * (12 if unit == "YEAR" else 1)
        return Call("add_months", (base, Literal(months, INT)), DATE, "add_months({0}, {1})")

    def _compare(self, node: exp.Binary, op: str) -> Expr:
        left, right = self.bind(node.this), self.bind(node.expression)
        for side_node, side, other in ((node.this, left, right), (node.expression, right, left)):
            if isinstance(side, Literal) and side.type.is_string and not _castable(side.value, other.type):
                raise self._mismatch(
                    side_node, f"cannot compare {other.type} with the string '{side.value}'",
                    f"'{side.value}' cannot be read as {other.type}; compare with a value of that type",
                    operator=op,
                    left=left.type.sql(), right=right.type.sql(),
                )
        if common_type(left.type, right.type) is None:
            raise self._mismatch(
                node, f"cannot compare {left.type} with {right.type}",
                "CAST one side so both have the same type", operator=op,
                left=left.type.sql(), right=right.type.sql(),
            )
        return Call(op, (left, right), BOOLEAN)

    def _bind_NullSafeNEQ(self, node: exp.NullSafeNEQ) -> Expr:
        """``a IS DISTINCT FROM b`` is ``NOT (a <=> b)``."""
        return Call("NOT", (self._compare(node, "<=>"),), BOOLEAN)

    def _logic(self, node: exp.Expr, op: str) -> Expr:
        args = []
        for side in (node.this, node.expression):
            e = self.bind(side)
            if e.type != BOOLEAN and not e.type.is_null:
                raise self._mismatch(side, f"{op} needs boolean operands, but this is {e.type}",
                                     operator=op, actual=e.type.sql())
            args.append(e)
        return Call(op, tuple(args), BOOLEAN)

    def _bind_And(self, node: exp.And) -> Expr:
        return self._logic(node, "AND")

    def _bind_Or(self, node: exp.Or) -> Expr:
        return self._logic(node, "OR")

    def _bind_Not(self, node: exp.Not) -> Expr:
        inner_node = node.this
        if isinstance(inner_node, exp.Is):
            e = self._bind_Is(inner_node)
            assert isinstance(e, Call)
            return Call("IS NOT NULL", e.args, BOOLEAN)
        if isinstance(inner_node, exp.In):
            e = self._bind_In(inner_node)
            if isinstance(e, SubqueryExpr):
                return Call("NOT", (e,), BOOLEAN)
            assert isinstance(e, Call)
            return Call("NOT IN", e.args, BOOLEAN)
        if isinstance(inner_node, exp.Like):
            e = self._bind_Like(inner_node)
            assert isinstance(e, Call)
            return Call("LIKE" if e.op == "NOT LIKE" else "NOT LIKE", e.args, BOOLEAN)
        inner = self.bind(inner_node)
        if inner.type != BOOLEAN and not inner.type.is_null:
            raise self._mismatch(node, f"NOT needs a boolean operand, but this is {inner.type}",
                                 operator="NOT", actual=inner.type.sql())
        return Call("NOT", (inner,), BOOLEAN)

    def _bind_Is(self, node: exp.Is) -> Expr:
        if not isinstance(node.expression, exp.Null):
            raise self._err(UnsupportedError, "UNSUPPORTED_EXPRESSION", "only IS [NOT] NULL is supported", node,
                            "compare with = (or IS [NOT] DISTINCT FROM)", construct="IS")
        return Call("IS NOT NULL" if node.args.get("negate") else "IS NULL", (self.bind(node.this),), BOOLEAN)

    def _subquery_rel(self, node: exp.Expr) -> tuple[Any, list[str]]:
        if self.subquery is None or self._in_agg:
            where = "inside an aggregate" if self._in_agg else f"in {self.clause}"
            raise self._err(UnsupportedError, "UNSUPPORTED_SUBQUERY", f"a subquery {where} is not supported", node,
                            "subqueries work in WHERE, HAVING and the select list", construct="subquery")
        query = node.this if isinstance(node, (exp.Subquery, exp.Exists)) else node
        return self.subquery(query, self.scope)

    def _subquery_expr(self, node: exp.Expr) -> Expr:
        rel, names = self._subquery_rel(node)
        if isinstance(node, exp.Exists):
            return SubqueryExpr("exists", rel, None, BOOLEAN)
        if len(rel.schema) != 1:
            raise self._err(BindError, "SUBQUERY_WIDTH", f"a scalar subquery must return one column, not {len(rel.schema)}",
                            node, "select exactly one value", columns=len(rel.schema))
        return SubqueryExpr("scalar", rel, None, rel.schema[0].type)

    def _bind_In(self, node: exp.In) -> Expr:
        if node.args.get("query") is not None:
            row = node.this.expressions if isinstance(node.this, exp.Tuple) else [node.this]
            values = [self.bind(v) for v in row]
            rel, _ = self._subquery_rel(node.args["query"])
            if len(rel.schema) != len(values):
                raise self._err(BindError, "SUBQUERY_WIDTH",
                                f"IN (subquery) must select {len(values)} column(s), as many as it is compared with",
                                node, columns=len(rel.schema))
            for v, f in zip(values, rel.schema):
                if common_type(v.type, f.type) is None:
                    raise self._mismatch(node, f"cannot compare {v.type} with {f.type} in IN",
                                         left=v.type.sql(), right=f.type.sql())
            if len(values) == 1 and not isinstance(node.this, exp.Tuple):
                return SubqueryExpr("in", rel, values[0], BOOLEAN)
            row_type = struct([(f"col{i + 1}", v.type) for i, v in enumerate(values)])
            template = "(" + ", ".join(f"{{{i}}}" for i in range(len(values))) + ")"
            return SubqueryExpr("in", rel, Call(ROW, tuple(values), row_type, template), BOOLEAN)
        value = self.bind(node.this)
        items = [self.bind(i) for i in node.expressions]
        for item_node, item in zip(node.expressions, items):
            if common_type(value.type, item.type) is None:
                raise self._mismatch(item_node, f"IN list item of type {item.type} cannot be compared with {value.type}",
                                     left=value.type.sql(), right=item.type.sql())
        return Call("IN", (value, *items), BOOLEAN)

    def _bind_Between(self, node: exp.Between) -> Expr:
        value = self.bind(node.this)
        low, high = self.bind(node.args["low"]), self.bind(node.args["high"])
        for side_node, side in ((node.args["low"], low), (node.args["high"], high)):
            if common_type(value.type, side.type) is None:
                raise self._mismatch(side_node, f"cannot compare {value.type} with {side.type}",
                                     left=value.type.sql(), right=side.type.sql())
        return Call("AND", (Call(">=", (value, low), BOOLEAN), Call("<=", (value, high), BOOLEAN)), BOOLEAN)

    def _bind_Like(self, node: exp.Like) -> Expr:
        value, pattern = self.bind(node.this), self.bind(node.expression)
        for side_node, side in ((node.this, value), (node.expression, pattern)):
            if not (side.type.is_string or side.type.is_null):
                raise self._mismatch(side_node, f"LIKE needs strings, but this is {side.type}", actual=side.type.sql())
        # sqlglot parses ``x NOT LIKE p`` as a Like marked ``negate``
        return Call("NOT LIKE" if node.args.get("negate") else "LIKE", (value, pattern), BOOLEAN)

    def _bind_ILike(self, node: exp.ILike) -> Expr:
        """``x ILIKE p`` is Spark's ``lower(x) LIKE lower(p)``."""
        like = self._bind_Like(node)  # type: ignore[arg-type]
        assert isinstance(like, Call)
        lowered = tuple(Call("lower", (a,), a.type, "LOWER({0})") for a in like.args)
        return Call(like.op, lowered, BOOLEAN)

    def _bind_DPipe(self, node: exp.DPipe) -> Expr:
        left, right = self.bind(node.this), self.bind(node.expression)
        return Call("concat", (left, right), STRING, "concat({0}, {1})")

    def _bind_IntDiv(self, node: exp.IntDiv) -> Expr:
        left, right = self.bind(node.this), self.bind(node.expression)
        if not (left.type.is_integral or left.type.is_decimal) or not (right.type.is_integral or right.type.is_decimal):
            raise self._mismatch(node, f"DIV needs whole numbers, not {left.type} and {right.type}",
                                 left=left.type.sql(), right=right.type.sql())
        return Call("div", (left, right), BIGINT)

    def _bind_Case(self, node: exp.Case) -> Expr:
        subject = self.bind(node.this) if node.this is not None else None
        whens: list[tuple[Expr, Expr]] = []
        for if_node in node.args.get("ifs") or []:
            cond_node = if_node.this
            if subject is not None:
                operand = self.bind(cond_node)
                if common_type(subject.type, operand.type) is None:
                    raise self._mismatch(cond_node, f"cannot compare {subject.type} with {operand.type}",
                                         left=subject.type.sql(), right=operand.type.sql())
                cond: Expr = Call("=", (subject, operand), BOOLEAN)
            else:
                cond = self.boolean(cond_node)
            whens.append((cond, self.bind(if_node.args["true"])))
        default = self.bind(node.args["default"]) if node.args.get("default") is not None else None
        result = self._common([v for _, v in whens] + ([default] if default else []), node, "CASE branches")
        return Case(tuple(whens), default, result)

    def _bind_If(self, node: exp.If) -> Expr:
        cond = self.boolean(node.this)
        true = self.bind(node.args["true"])
        false = self.bind(node.args["false"]) if node.args.get("false") is not None else None
        result = self._common([true] + ([false] if false else []), node, "IF branches")
        return Case(((cond, true),), false, result)

    def _common(self, values: list[Expr], node: exp.Expr, what: str) -> DataType:
        result = NULL
        for v in values:
            c = common_type(result, v.type)
            if c is None:
                raise self._mismatch(node, f"{what} have incompatible types {result} and {v.type}",
                                     left=result.sql(), right=v.type.sql())
            result = c
        return result

    def _bind_Cast(self, node: exp.Cast) -> Expr:
        to = node.args["to"]
        try:
            target = parse_type(to.sql(dialect="spark"))
        except ValueError as e:
            raise self._err(UnsupportedError, "UNSUPPORTED_TYPE", str(e), to,
                            "a DECIMAL has at most 38 digits, its scale at most its precision" if "DECIMAL" in str(e)
                            else "cast to a simple type (INT, BIGINT, DOUBLE, DECIMAL(p, s), STRING, DATE, TIMESTAMP, "
                            "BOOLEAN), an ARRAY or a STRUCT", construct="type") from None
        inner_node = node.this
        # try_cast: NULL where the value does not convert. (sqlglot reads Spark's CAST as a TryCast
        # too — without ANSI mode Spark's cast is lenient — and marks only try_cast `safe`.)
        safe = bool(node.args.get("safe"))
        if isinstance(inner_node, exp.Literal) and inner_node.is_string and target.name in ("DATE", "TIMESTAMP"):
            return self._typed_literal(inner_node, target, safe)
        inner = self.bind(inner_node)
        return Cast(inner, target, safe=safe)

    _bind_TryCast = _bind_Cast

    def _typed_literal(self, node: exp.Literal, target: DataType, safe: bool = False) -> Expr:
        text = node.this.strip()
        try:
            if target.name == "DATE":
                return Literal(dt.date.fromisoformat(text), DATE)
            return Literal(dt.datetime.fromisoformat(text), TIMESTAMP)
        except ValueError:
            if safe:
                return Literal(None, target)
            raise self._mismatch(node, f"`{text}` is not a valid {target.name.lower()}",
                                 "write dates as 'YYYY-MM-DD'", expected=target.sql()) from None

    # -- functions -------------------------------------------------------------------------------
    def _function(self, node: exp.Func) -> Expr:
        template, arg_nodes = _template(node)
        m = _NAME.match(template)
        # an operator-like call (`x RLIKE p`) has no name in its template: sqlglot's node names it
        name = m.group(1).lower() if m else _OPERATOR_NAMES.get(type(node), type(node).__name__.lower())
        if isinstance(node, exp.Anonymous) and name in _ANON_AGGS:
            return self._agg(node, _ANON_AGGS[name])
        if isinstance(node, exp.Anonymous) and name in _UNSUPPORTED_ANON_AGGS:
            raise self._unsupported_agg(node, name)
        if name in functions.NONDETERMINISTIC:
            raise self._err(
                UnsupportedError, "NONDETERMINISTIC_FUNCTION",
                f"`{name}` gives a different value each time it runs, so a continuous query cannot keep the batch answer",
                node, "compute the value once and pass it in as a literal or a static table", function=name,
            )
        if not functions.is_known(name):
            known = sorted(functions.FUNCTIONS)
            raise self._err(
                UnsupportedError, "UNSUPPORTED_FUNCTION", f"function `{name}` is not supported", node,
                did_you_mean(name, known) or "see docs/sql.md for the supported functions", function=name,
            )
        args = tuple(self.bind(a) for a in arg_nodes)
        try:
            result = functions.result_type(name, [a.type for a in args])
        except (TypeError, IndexError) as e:
            raise self._mismatch(node, f"bad arguments to `{name}`: {e}", function=name) from None
        return Call(name, args, result, template)

    # -- aggregates ------------------------------------------------------------------------------
    def _bind_Filter(self, node: exp.Filter) -> Expr:
        """``agg(x) FILTER (WHERE p)`` is ``agg(CASE WHEN p THEN x END)``: every supported aggregate
        skips NULLs, and ``count(*) FILTER (WHERE p)`` counts ``CASE WHEN p THEN 1 END``::

            sum(b) FILTER (WHERE a > 1)  →  sum(CASE WHEN a > 1 THEN b END)
        """
        agg: exp.Expr = node.this
        anonymous = isinstance(agg, exp.Anonymous) and agg.name.lower() in _ANON_AGGS
        if not (anonymous or type(agg) in _AGGS):
            if isinstance(agg, exp.AggFunc) or (isinstance(agg, exp.Anonymous)
                                                and agg.name.lower() in _UNSUPPORTED_ANON_AGGS):
                return self.bind(agg)  # its own UNSUPPORTED_AGGREGATE
            raise self._err(UnsupportedError, "UNSUPPORTED_EXPRESSION", "FILTER (WHERE …) applies only to an aggregate",
                            node, "write the condition in WHERE or in a CASE", construct="FILTER")
        cond = node.expression.this

        def guard(x: exp.Expr) -> exp.Expr:
            return exp.Case(ifs=[exp.If(this=cond.copy(), true=x)])

        guarded = agg.copy()
        inner = guarded.expressions[0] if anonymous and guarded.expressions else None if anonymous else guarded.this
        if inner is None or isinstance(inner, exp.Star):
            replacement: exp.Expr = guard(exp.Literal.number(1))
        elif isinstance(inner, exp.Distinct):
            replacement = exp.Distinct(expressions=[guard(e) for e in inner.expressions])
        else:
            replacement = guard(inner.copy())
        if inner is None and anonymous:
            guarded.set("expressions", [replacement])
        elif inner is None:
            guarded.set("this", replacement)
        else:
            inner.replace(replacement)
        return self._agg(guarded, _ANON_AGGS[agg.name.lower()] if anonymous else _AGGS[type(agg)])

    def _unsupported_agg(self, node: exp.Expr, fn: str) -> SqlError:
        return self._err(UnsupportedError, "UNSUPPORTED_AGGREGATE",
                         f"aggregate `{fn}` is not supported in a continuous query", node,
                         _AGG_HINTS.get(fn, _SUPPORTED_AGGS), function=fn)

    def _agg(self, node: exp.Expr, fn: str) -> Expr:
        if self.on_agg is None:
            raise self._err(
                BindError, "AGGREGATE_NOT_ALLOWED", f"aggregate `{fn}` is not allowed in {self.clause}", node,
                "filter groups with HAVING instead of WHERE" if self.clause == "WHERE" else None,
                function=fn, clause=self.clause,
            )
        if self._in_agg:
            raise self._err(BindError, "NESTED_AGGREGATE", f"aggregate `{fn}` inside another aggregate", node,
                            "compute the inner aggregate in a subquery", function=fn)
        distinct = False
        inner = node.this if not isinstance(node, exp.Anonymous) else (node.expressions[0] if node.expressions else None)
        if isinstance(inner, exp.Distinct):
            distinct = True
            if len(inner.expressions) != 1 or isinstance(inner.expressions[0], exp.Star):
                inner = self._distinct_tuple(node, fn, inner)
            else:
                inner = inner.expressions[0]
        self._in_agg = True
        try:
            if inner is None or isinstance(inner, exp.Star):
                if fn != "count":
                    raise self._err(BindError, "WRONG_ARGUMENTS", f"`{fn}(*)` is not valid", node, function=fn)
                args: tuple[Expr, ...] = ()
            else:
                args = (self.bind(inner),)
        finally:
            self._in_agg = False
        if fn == "count" and args and isinstance(args[0], Literal) and args[0].value is not None and not distinct:
            args = ()  # count(1) is count(*)
        agg = Agg(fn, args, distinct, self._agg_type(node, fn, args))
        return self.on_agg(agg, node)

    def _distinct_tuple(self, node: exp.Expr, fn: str, distinct: exp.Distinct) -> exp.Expr:
        """``count(DISTINCT a, b, …)`` counts the distinct tuples without a NULL: it is the count of
        one distinct value per tuple, NULL where a member is NULL — the members' texts, each but
        the last prefixed by its length, which tells the tuples apart when their texts are equal
        run together::

            count(DISTINCT a, b)  →  count(DISTINCT CASE WHEN a IS NOT NULL AND b IS NOT NULL
                                       THEN concat(length(CAST(a AS STRING)), ':', CAST(a AS STRING), ':', CAST(b AS STRING)) END)

        That is exact where a value's text is the value: not for FLOAT and DOUBLE (Spark counts -0.0
        as 0.0 and every NaN as one, their texts differ) nor nested types, which are refused."""
        members = list(distinct.expressions)
        if fn != "count" or any(isinstance(m, exp.Star) for m in members):
            raise self._err(UnsupportedError, "UNSUPPORTED_AGGREGATE", f"{fn}(DISTINCT …) over several columns is not "
                            "supported", node, "name the columns: count(DISTINCT a, b, …) counts the distinct tuples"
                            if fn == "count" else "only count(DISTINCT …) takes several columns", function=fn)
        self._in_agg = True
        try:
            types = [self.bind(m).type for m in members]
        finally:
            self._in_agg = False
        for m, t in zip(members, types):
            if not (t.is_integral or t.is_decimal or t.is_string or t.is_datetime or t.name in ("BOOLEAN", "NULL")):
                raise self._err(UnsupportedError, "UNSUPPORTED_AGGREGATE",
                                f"count(DISTINCT …) over several columns with a {t.sql()} column (`{m.sql('spark')}`) "
                                "is not supported", node,
                                "count the rows of a SELECT DISTINCT in a derived table, without the rows with a NULL "
                                "(which count(DISTINCT a, b) skips): SELECT count(*) FROM (SELECT DISTINCT a, b FROM … "
                                "WHERE a IS NOT NULL AND b IS NOT NULL) t", function=fn, actual=t.sql())
        texts = [exp.cast(m.copy(), "STRING") for m in members]
        parts: list[exp.Expr] = []
        for text in texts[:-1]:
            parts += [exp.Length(this=text.copy()), exp.Literal.string(":"), text, exp.Literal.string(":")]
        parts.append(texts[-1])
        present = exp.and_(*(exp.Not(this=exp.Is(this=m.copy(), expression=exp.Null())) for m in members))
        return exp.Case(ifs=[exp.If(this=present, true=exp.Concat(expressions=parts))])

    def _agg_type(self, node: exp.Expr, fn: str, args: tuple[Expr, ...]) -> DataType:
        if fn == "count":
            return BIGINT
        t = args[0].type
        if fn in ("min", "max"):
            if not t.is_orderable:
                raise self._mismatch(node, f"{fn} cannot order values of type {t}", function=fn, actual=t.sql())
            return t
        if t.is_string:
            raise self._mismatch(node, f"`{fn}` needs numbers, but its argument is {t}",
                                 "CAST the argument to a number", function=fn, actual=t.sql())
        if not (t.is_numeric or t.is_null):
            raise self._mismatch(node, f"`{fn}` needs numbers, but its argument is {t}",
                                 "CAST the argument to a number" if t.name != "DATE" else
                                 "aggregate a number of days, e.g. datediff(d, DATE '2020-01-01')",
                                 function=fn, actual=t.sql())
        if fn == "sum":
            return sum_type(t)
        if fn == "avg":
            return avg_type(t)
        return DOUBLE


def number_literal(text: str) -> Literal:
    """Type a numeric literal as Spark does: INT, then BIGINT, then DECIMAL; exponent means DOUBLE."""
    lowered = text.lower()
    if "e" in lowered:
        return Literal(float(text), DOUBLE)
    if "." not in text:
        value = int(text)
        if -(2**31) <= value < 2**31:
            return Literal(value, INT)
        if -(2**63) <= value < 2**63:
            return Literal(value, BIGINT)
        return Literal(Decimal(text), decimal(len(text.lstrip("-")), 0))
    try:
        d = Decimal(text)
    except InvalidOperation:
        return Literal(float(text), DOUBLE)
    digits = text.lstrip("-").replace(".", "")
    scale = len(text.split(".")[1])
    precision = max(len(digits.lstrip("0")) if digits.strip("0") else 1, scale)
    if precision > 38:
        return Literal(float(text), DOUBLE)
    return Literal(d, decimal(max(precision, 1), scale))


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


def _dotted(node: exp.Expr) -> list[str] | None:
    """``a.b.c.d`` as names, or None if the chain starts at something other than a name."""
    if isinstance(node, exp.Column):
        return [p.name for p in node.parts]
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
        head = _dotted(node.this)
        return None if head is None else head + [node.expression.name]
    return None


def _shift_date(d: dt.date, amount: int, unit: str) -> dt.date:
    if unit in ("DAY", "WEEK"):
        return d + dt.timedelta(days=amount * (7 if unit == "WEEK" else 1))
    months = amount * (12 if unit == "YEAR" else 1)
    month_index = d.month - 1 + months
    year, month = d.year + month_index // 12, month_index % 12 + 1
    return dt.date(year, month, min(d.day, calendar.monthrange(year, month)[1]))


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
        elif isinstance(value, exp.Expr) and not isinstance(value, (exp.Var, exp.DataType)):
            clone.set(key, placeholder(value))
        elif isinstance(value, list):
            clone.set(key, [placeholder(v) if isinstance(v, exp.Expr) else v for v in value])
    text = clone.sql(dialect="spark").replace("{", "{{").replace("}", "}}")
    text = re.sub(r"__sfarg(\d+)__", lambda m: "{" + m.group(1) + "}", text)
    return text, args
