"""Render IR as SQL text: exact Spark SQL for execution, or readable SQL for ``explain``.

``sql(expr, spark=True)`` is what the runtime hands to Spark (every column name quoted, literals
typed exactly). ``sql(expr)`` is for people: ``x.A + 1`` instead of ```x.A` + 1``.
``rel_sql(rel)`` prints a relational program as one SELECT statement with nested blocks.
"""

from __future__ import annotations

import datetime as dt
import decimal as pydecimal
import math
import re
from dataclasses import dataclass, field, replace

from .expr import Agg, Call, Case, Cast, Column, Expr, Literal
from .rel import (
    Aggregate, DeltaScan, Distinct, Expand, Filter, Join, Limit, Project, Rel, Scan, Sort, StateScan, Union,
)

_SIMPLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DISPLAY_NAME = re.compile(r"[A-Za-z_Δ][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")

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
    return _Printer(spark).expr(e, top=True)


class _Printer:
    def __init__(self, spark: bool) -> None:
        self.spark = spark

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
            return f"{e.fn}({'DISTINCT ' if e.distinct else ''}{inner})"
        if isinstance(e, Call):
            return self.call(e, top)
        raise TypeError(f"cannot print {type(e).__name__}")

    def call(self, e: Call, top: bool) -> str:
        op = e.op
        args = e.args
        if e.template is not None:
            return e.template.format(*(self.expr(a, True) for a in args))
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


# -- relations -----------------------------------------------------------------------------------
@dataclass
class _Block:
    """One SELECT being assembled while printing a relation."""

    source: str
    select: list[str] | None = None  # None: SELECT *
    where: list[str] = field(default_factory=list)
    group: list[str] | None = None
    having: list[str] = field(default_factory=list)
    order: list[str] = field(default_factory=list)
    limit: str | None = None
    distinct: bool = False
    union: bool = False

    @property
    def closed(self) -> bool:
        return self.limit is not None or self.union

    def text(self, indent: str = "") -> str:
        if self.union:
            return self.source
        lines = [("SELECT DISTINCT " if self.distinct else "SELECT ") + (", ".join(self.select) if self.select else "*")]
        lines.append("FROM " + self.source)
        if self.where:
            lines.append("WHERE " + " AND ".join(self.where))
        if self.group is not None:
            if self.group:
                lines.append("GROUP BY " + ", ".join(self.group))
        if self.having:
            lines.append("HAVING " + " AND ".join(self.having))
        if self.order:
            lines.append("ORDER BY " + ", ".join(self.order))
        if self.limit is not None:
            lines.append(self.limit)
        return ("\n" + indent).join(lines)


def rel_sql(rel: Rel, names: dict[str, str] | None = None) -> str:
    """Print a relational program as readable SQL. ``names`` renames leaves (e.g. a state to ``Δagg``)."""
    return _RelPrinter(names or {}).block(rel).text()


class _RelPrinter:
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names
        self.p = _Printer(spark=False)

    def e(self, e: Expr) -> str:
        return self.p.expr(e, top=True)

    def sub(self, rel: Rel) -> str:
        inner = self.block(rel)
        if inner.select is None and not inner.where and inner.group is None and not inner.order and not inner.closed and not inner.distinct:
            return inner.source
        body = "\n".join("  " + line for line in inner.text().split("\n"))
        return "(\n" + body + "\n)"

    def block(self, rel: Rel) -> _Block:  # noqa: C901 - one case per node kind
        if isinstance(rel, Scan):
            label = self.names.get(rel.table, rel.table)
            return _Block(label if rel.alias == rel.table else f"{label} {rel.alias}")
        if isinstance(rel, DeltaScan):
            label = self.names.get("Δ" + rel.table, "Δ" + rel.table)
            return _Block(f"{label} {rel.alias}")
        if isinstance(rel, StateScan):
            key = {"old": rel.state, "new": rel.state + "'", "delta": "Δ" + rel.state}[rel.version]
            return _Block(self.names.get(key, key))
        if isinstance(rel, Expand):
            inner = self.sub(rel.input)
            cols = ", ".join(display_name(f.name) for f in rel.schema)
            return _Block(f"{inner} REPEATED {display_name(rel.weight)} TIMES", select=[cols] if cols else None)
        if isinstance(rel, Filter):
            b = self.block(rel.input)
            cond = self.e(rel.condition)
            if b.closed or b.distinct:
                return _Block(self.sub(rel.input), where=[cond])
            if b.group is not None:
                # a filter over aggregate output reads the aggregate's output names
                b = _Block(self.sub(rel.input))
                b.where.append(cond)
                return b
            if b.select is not None:
                return _Block(self.sub(rel.input), where=[cond])
            b.where.append(cond)
            return b
        if isinstance(rel, Project):
            b = self.block(rel.input)
            items = [self._item(n, e) for n, e in rel.exprs]
            if b.select is not None or b.closed or b.distinct or b.order:
                return _Block(self.sub(rel.input), select=items)
            b.select = items
            return b
        if isinstance(rel, Aggregate):
            b = self.block(rel.input)
            if b.select is not None or b.closed or b.group is not None or b.distinct:
                b = _Block(self.sub(rel.input))
            b.group = [self.e(e) for _, e in rel.keys]
            b.select = [self._item(n, e) for n, e in rel.keys] + [self._item(n, a) for n, a in rel.aggs]
            return b
        if isinstance(rel, Join):
            left = self.sub(rel.left)
            right = self.sub(rel.right)
            kind = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL JOIN",
                    "semi": "LEFT SEMI JOIN", "anti": "LEFT ANTI JOIN", "cross": "CROSS JOIN"}[rel.kind]
            on = f" ON {self.e(rel.condition)}" if rel.condition is not None else ""
            return _Block(f"{left}\n{kind} {right}{on}")
        if isinstance(rel, Sort):
            b = self.block(rel.input)
            if b.closed:
                b = _Block(self.sub(rel.input))
            b.order = [self._order(k) for k in rel.keys]
            return b
        if isinstance(rel, Limit):
            b = self.block(rel.input)
            if b.closed:
                b = _Block(self.sub(rel.input))
            text = f"LIMIT {rel.limit}" if rel.limit is not None else ""
            if rel.offset:
                text = (text + f" OFFSET {rel.offset}").strip()
            b.limit = text
            return b
        if isinstance(rel, Distinct):
            b = self.block(rel.input)
            if b.closed or b.distinct:
                b = _Block(self.sub(rel.input))
            return replace(b, distinct=True)
        if isinstance(rel, Union):
            parts = [self.block(item).text() for item in rel.items]
            return _Block("\nUNION ALL\n".join(parts), union=True)
        raise TypeError(f"cannot print {type(rel).__name__}")

    def _item(self, name: str, e: Expr) -> str:
        text = self.e(e)
        return text if isinstance(e, Column) and e.name == name else f"{text} AS {display_name(name)}"

    def _order(self, k: object) -> str:
        from .rel import SortKey

        assert isinstance(k, SortKey)
        text = self.e(k.expr) + (" DESC" if k.descending else "")
        if k.nulls_first is not None and k.nulls_first != (not k.descending):
            text += " NULLS FIRST" if k.nulls_first else " NULLS LAST"
        return text
