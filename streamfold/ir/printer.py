"""Render scalar expressions as SQL text: exact Spark SQL, or readable SQL for ``explain``.

``sql(expr, spark=True)`` is what the runtime hands to Spark (every column name quoted, literals
typed exactly). ``sql(expr)`` is for people: ``x.A + 1`` instead of ```x.A` + 1``.
Relational programs are printed by :mod:`.sqltext`.
"""

from __future__ import annotations

import datetime as dt
import decimal as pydecimal
import math
import re
from collections.abc import Callable
from typing import Any

from .expr import Agg, Call, Case, Cast, Column, Expr, LambdaVar, Literal, OuterColumn, SubqueryExpr
from .window import WindowCall

_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DISPLAY_NAME = re.compile(r"[A-Za-z_Δ][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")

_TOLERANT = {"/": "try_divide", "%": "try_mod"}
_INFIX = {"+", "-", "*", "/", "%", "=", "<>", "<", "<=", ">", ">=", "<=>", "AND", "OR", "||", "div", "LIKE"}


def quote(name: str) -> str:
    """A name as Spark SQL reads it back: backquoted unless it is a plain identifier."""
    if _SIMPLE_NAME.fullmatch(name):
        return name
    return "`" + name.replace("`", "``") + "`"


def display_name(name: str) -> str:
    return name if _DISPLAY_NAME.fullmatch(name) else "`" + name.replace("`", "``") + "`"


def literal_sql(value: object, type_sql: str, type_name: str) -> str:
    """A literal that Spark parses back to the same value and type."""
    if value is None:
        return "NULL" if type_name == "NULL" else f"CAST(NULL AS {type_sql})"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if type_name == "STRING":
        text = str(value).replace("\\", "\\\\").replace("'", "\\'")
        return f"'{text}'"
    if type_name == "DATE":
        return f"DATE '{value.isoformat() if isinstance(value, dt.date) else value}'"
    if type_name in ("TIMESTAMP", "TIMESTAMP_NTZ"):
        text = value.isoformat(sep=" ") if isinstance(value, dt.datetime) else str(value)
        return f"{type_name} '{text}'"
    if type_name in ("DOUBLE", "FLOAT"):
        f = float(value)  # type: ignore[arg-type]
        if math.isnan(f) or math.isinf(f):
            return f"CAST('{f}' AS {type_name})"
        return f"CAST({f!r} AS {type_name})"
    if type_name == "DECIMAL":
        return f"{pydecimal.Decimal(str(value))}BD"
    if type_name == "BIGINT":
        return f"{int(value)}L"  # type: ignore[call-overload]
    if type_name == "SMALLINT":
        return f"{int(value)}S"  # type: ignore[call-overload]
    if type_name == "TINYINT":
        return f"{int(value)}Y"  # type: ignore[call-overload]
    return str(value)


def sql(e: Expr, spark: bool = False) -> str:
    """Render a scalar expression. ``spark=True``: exact Spark SQL; otherwise for reading."""
    return ExprPrinter(spark).expr(e, top=True)


class ExprPrinter:
    """Expressions as SQL: for reading, or (``spark``) exact Spark SQL; ``sqltext`` prints relations with it.

    ``relation`` prints a subquery's relation (``sqltext`` gives it; a bound query has
    subqueries until the ``unnest_subqueries`` pass, and the pass fixtures show them)."""

    def __init__(self, spark: bool, relation: Callable[[Any], str] | None = None) -> None:
        self.spark = spark
        self.relation = relation

    def name(self, n: str) -> str:
        return quote(n) if self.spark else display_name(n)

    def expr(self, e: Expr, top: bool = False) -> str:
        if isinstance(e, Column):
            return self.name(e.name)
        if isinstance(e, Literal):
            if not self.spark and e.type.name in ("BIGINT", "SMALLINT", "TINYINT") and e.value is not None:
                return str(e.value)
            if not self.spark and e.type.name in ("DOUBLE", "FLOAT") and e.value is not None:
                return repr(float(e.value))
            if not self.spark and e.type.name == "DECIMAL" and e.value is not None:
                return str(e.value)
            return literal_sql(e.value, e.type.sql(), e.type.name)
        if isinstance(e, Cast):
            fn = "TRY_CAST" if e.safe else "CAST"
            return f"{fn}({self.expr(e.expr, True)} AS {e.type.sql()})"
        if isinstance(e, Case):
            parts = ["CASE"]
            for cond, value in e.whens:
                parts.append(f"WHEN {self.expr(cond, True)} THEN {self.expr(value, True)}")
            if e.default is not None:
                parts.append(f"ELSE {self.expr(e.default, True)}")
            parts.append("END")
            return " ".join(parts)
        if isinstance(e, Agg):
            if not e.args:
                return f"{e.fn}(*)" if e.fn == "count" else f"{e.fn}()"
            inner = ", ".join(self.expr(a, True) for a in e.args)
            if e.fn in ("percentile_disc", "percentile_disc_desc"):
                x, p = (self.expr(a, True) for a in e.args)
                return f"percentile_disc({p}) WITHIN GROUP (ORDER BY {x}{' DESC' if e.fn.endswith('desc') else ''})"
            if e.fn in ("mode", "mode_desc"):  # ties broken by the value, as Spark spells it
                return f"mode() WITHIN GROUP (ORDER BY {inner}{' DESC' if e.fn == 'mode_desc' else ''})"
            return f"{e.fn}({'DISTINCT ' if e.distinct else ''}{inner})"
        if isinstance(e, Call):
            return self.call(e, top)
        if isinstance(e, WindowCall):
            return self.window(e)
        if isinstance(e, OuterColumn):  # a correlated reference reads as in SQL: by its name
            return self.name(e.name)
        if isinstance(e, LambdaVar):  # a lambda's parameter, named as its call's template names it
            return quote(e.name)
        if isinstance(e, SubqueryExpr) and self.relation is not None:  # before unnesting: for people only
            inner = "(" + " ".join(line.strip() for line in self.relation(e.rel).split("\n")) + ")"
            if e.kind == "exists":
                return "EXISTS " + inner
            if e.kind == "in":
                assert e.arg is not None
                text = f"{self.expr(e.arg)} IN {inner}"
                return text if top else f"({text})"
            return inner
        raise TypeError(f"cannot print {type(e).__name__}")

    def window(self, e: WindowCall) -> str:
        """``f(args) OVER (PARTITION BY … ORDER BY … frame)``; for Spark NULL ordering explicit."""
        args = ", ".join(self.expr(a, True) for a in e.args) or ("*" if e.fn == "count" else "")
        spec = []
        if e.partition:
            spec.append("PARTITION BY " + ", ".join(self.expr(p, True) for p in e.partition))
        if e.order:
            keys = []
            for k in e.order:
                text = self.expr(k.expr, True) + (" DESC" if k.descending else "")
                if self.spark or (k.nulls_first is not None and k.nulls_first != (not k.descending)):
                    text += " NULLS FIRST" if k.effective_nulls_first else " NULLS LAST"
                keys.append(text)
            spec.append("ORDER BY " + ", ".join(keys))
        if e.frame is not None:
            spec.append(e.frame.sql())
        return f"{e.fn}({args}) OVER ({' '.join(spec)})"

    def call(self, e: Call, top: bool) -> str:
        op = e.op
        args = e.args
        if op.startswith("window(") and not self.spark:  # a time window's start (sql/bind/time_windows.py)
            return op.format(*(self.expr(a, True) for a in args))
        if op == "batch_time" and not self.spark:  # the batch's recorded time (expr.CLOCK_OP)
            return "max_event_time()" if args else "batch_time()"
        if op == "field" and not self.spark and e.template is not None:
            name = e.template[len("{0}.`"):-1].replace("``", "`")
            return f"{self.expr(args[0])}.{display_name(name)}"
        if op == "by_pair" and not self.spark:  # max_by/min_by's pair, ordered by its first member (BY_PAIR_OP)
            return f"struct({self.expr(args[0], True)}, {self.expr(args[1], True)})"
        if e.template is not None:
            return e.template.format(*(self.expr(a, True) for a in args))
        if self.spark and op in _TOLERANT and len(args) == 2:
            # An incremental plan also evaluates expressions over rows the batch query never has
            # at the end (a group's old value, an empty prefix): dividing by a zero count there
            # must not stop the query, so division runs in its NULL-on-zero form.
            return f"{_TOLERANT[op]}({self.expr(args[0], True)}, {self.expr(args[1], True)})"
        if self.spark and op == "div" and len(args) == 2 and not (isinstance(args[1], Literal) and args[1].value):
            # (no try_ form: a zero divisor made NULL; a literal one is not zero)
            text = f"{self.expr(args[0])} DIV nullif({self.expr(args[1], True)}, 0)"
            return text if top else f"({text})"
        if op in _INFIX and len(args) == 2:
            text = f"{self.expr(args[0])} {op.upper() if op == 'div' else op} {self.expr(args[1])}"
            return text if top else f"({text})"
        if op == "NOT":
            return f"NOT {self.expr(args[0])}" if top else f"(NOT {self.expr(args[0])})"
        if op == "neg":
            return f"(- {self.expr(args[0])})"
        if op in ("IS NULL", "IS NOT NULL"):
            text = f"{self.expr(args[0])} {op}"
            return text if top else f"({text})"
        if op in ("IN", "NOT IN"):
            items = ", ".join(self.expr(a, True) for a in args[1:])
            text = f"{self.expr(args[0])} {op} ({items})"
            return text if top else f"({text})"
        if op == "NOT LIKE":
            text = f"{self.expr(args[0])} NOT LIKE {self.expr(args[1])}"
            return text if top else f"({text})"
        return f"{op}({', '.join(self.expr(a, True) for a in args)})"
