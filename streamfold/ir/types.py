"""SQL data types as Spark SQL has them, and the coercion rules the compiler needs.

The compiler infers types to check a query and to choose state column types. The runtime then
casts every answer column to the type Spark gives the batch query, so small differences in
decimal precision rules here never reach a user's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_FRACTIONAL = ("FLOAT", "DOUBLE")
_SIMPLE = _INTEGRAL + _FRACTIONAL + (
    "BOOLEAN", "STRING", "DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "BINARY", "NULL",
)
_RANK = {name: i for i, name in enumerate(("TINYINT", "SMALLINT", "INT", "BIGINT", "DECIMAL", "FLOAT", "DOUBLE"))}
_INTEGRAL_DIGITS = {"TINYINT": 3, "SMALLINT": 5, "INT": 10, "BIGINT": 20}
MAX_PRECISION = 38


@dataclass(frozen=True, slots=True)
class DataType:
    """A Spark SQL type. ``params`` holds element types of ARRAY/MAP and (name, type) of STRUCT."""

    name: str
    precision: int | None = None
    scale: int | None = None
    params: tuple = ()

    def __post_init__(self) -> None:
        if self.name == "DECIMAL":
            if self.precision is None or self.scale is None:
                raise ValueError("DECIMAL needs precision and scale")
            if not 0 <= self.scale <= self.precision <= MAX_PRECISION:
                raise ValueError(f"invalid DECIMAL({self.precision},{self.scale})")
        elif self.name not in _SIMPLE and self.name not in ("ARRAY", "MAP", "STRUCT"):
            raise ValueError(f"unknown type {self.name}")

    # -- classification -----------------------------------------------------------------------
    @property
    def is_integral(self) -> bool:
        return self.name in _INTEGRAL

    @property
    def is_numeric(self) -> bool:
        return self.name in _RANK

    @property
    def is_fractional(self) -> bool:
        return self.name in _FRACTIONAL

    @property
    def is_decimal(self) -> bool:
        return self.name == "DECIMAL"

    @property
    def is_string(self) -> bool:
        return self.name == "STRING"

    @property
    def is_datetime(self) -> bool:
        return self.name in ("DATE", "TIMESTAMP", "TIMESTAMP_NTZ")

    @property
    def is_null(self) -> bool:
        return self.name == "NULL"

    @property
    def is_orderable(self) -> bool:
        return self.name not in ("MAP",)

    def field_type(self, name: str) -> DataType | None:
        """The type of a STRUCT's field ``name`` (case-insensitive), or None."""
        for n, t in self.params if self.name == "STRUCT" else ():
            if n.lower() == name.lower():
                return t  # type: ignore[no-any-return]
        return None

    @property
    def element(self) -> DataType:
        """An ARRAY's element type."""
        assert self.name == "ARRAY"
        return self.params[0]  # type: ignore[no-any-return]

    def sql(self) -> str:
        """The type as Spark SQL writes it, e.g. ``DECIMAL(10,2)`` or ``ARRAY<INT>``."""
        if self.name == "DECIMAL":
            return f"DECIMAL({self.precision},{self.scale})"
        if self.name == "ARRAY":
            return f"ARRAY<{self.params[0].sql()}>"
        if self.name == "MAP":
            return f"MAP<{self.params[0].sql()},{self.params[1].sql()}>"
        if self.name == "STRUCT":
            return "STRUCT<" + ",".join(f"`{n}`:{t.sql()}" for n, t in self.params) + ">"
        if self.name == "NULL":
            return "VOID"
        return self.name

    def __str__(self) -> str:
        return self.sql()


BOOLEAN = DataType("BOOLEAN")
TINYINT = DataType("TINYINT")
SMALLINT = DataType("SMALLINT")
INT = DataType("INT")
BIGINT = DataType("BIGINT")
FLOAT = DataType("FLOAT")
DOUBLE = DataType("DOUBLE")
STRING = DataType("STRING")
DATE = DataType("DATE")
TIMESTAMP = DataType("TIMESTAMP")
TIMESTAMP_NTZ = DataType("TIMESTAMP_NTZ")
BINARY = DataType("BINARY")
NULL = DataType("NULL")


def decimal(precision: int, scale: int) -> DataType:
    """A DECIMAL, bounded as Spark bounds it: at most 38 digits, keeping up to 6 of scale."""
    if precision > MAX_PRECISION:
        int_digits = precision - scale
        min_scale = min(scale, 6)
        scale = max(MAX_PRECISION - int_digits, min_scale)
        precision = MAX_PRECISION
    return DataType("DECIMAL", precision, scale)


def bounded_decimal(precision: int, scale: int) -> DataType:
    """A DECIMAL cut to 38 digits of precision and of scale, each on its own — Spark's
    ``DecimalType.bounded``, which types sum, avg and the widening of two decimals (the rule of
    :func:`decimal`, which gives up scale, is for arithmetic results only)."""
    return DataType("DECIMAL", min(precision, MAX_PRECISION), min(scale, MAX_PRECISION))


def array(element: DataType) -> DataType:
    return DataType("ARRAY", params=(element,))


def struct(fields: list[tuple[str, DataType]] | tuple[tuple[str, DataType], ...]) -> DataType:
    return DataType("STRUCT", params=tuple(fields))


def split_top(text: str) -> list[str]:
    """Split ``a INT, b DECIMAL(10,2), c STRUCT<d: INT, e: INT>`` at the commas outside
    parentheses, angle brackets and backquoted names."""
    parts: list[str] = []
    depth, current, quoted = 0, "", False
    for ch in text:
        if ch == "`":  # a quoted name (`order id`) may hold any character; `` is a backtick
            quoted = not quoted
        if quoted:
            current += ch
            continue
        if ch in "(<":
            depth += 1
        elif ch in ")>":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    if current.strip():
        parts.append(current)
    return parts


_ALIASES = {
    "INTEGER": "INT", "LONG": "BIGINT", "SHORT": "SMALLINT", "BYTE": "TINYINT", "REAL": "FLOAT",
    "TEXT": "STRING", "VARCHAR": "STRING", "CHAR": "STRING", "BOOL": "BOOLEAN",
    "DATETIME": "TIMESTAMP", "TIMESTAMP_LTZ": "TIMESTAMP", "NUMERIC": "DECIMAL", "DEC": "DECIMAL",
    "VOID": "NULL", "INT64": "BIGINT", "INT32": "INT", "FLOAT64": "DOUBLE", "FLOAT32": "FLOAT",
}


def parse_type(text: str) -> DataType:
    """Parse a Spark SQL type string such as ``bigint``, ``decimal(10, 2)``, ``array<int>``."""
    src = text.strip()
    upper = src.upper()
    m = re.fullmatch(r"(DECIMAL|NUMERIC|DEC)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?", upper)
    if m:
        precision = int(m.group(2)) if m.group(2) else 10
        scale = int(m.group(3)) if m.group(3) else 0
        return DataType("DECIMAL", precision, scale)
    m = re.fullmatch(r"(VARCHAR|CHAR)\s*\(\s*\d+\s*\)", upper)
    if m:
        return STRING
    m = re.fullmatch(r"ARRAY\s*<(.*)>", upper, flags=re.S)
    if m:
        return array(parse_type(src[src.index("<") + 1 : src.rindex(">")]))
    m = re.fullmatch(r"STRUCT\s*<(.*)>", upper, flags=re.S)
    if m:
        inner = src[src.index("<") + 1 : src.rindex(">")]
        fields = []
        for part in split_top(inner):
            name, _, type_text = part.partition(":")
            if not type_text:
                name, _, type_text = part.strip().partition(" ")
            fields.append((name.strip().strip("`"), parse_type(type_text)))
        return struct(fields)
    if upper.startswith("MAP"):
        raise ValueError(f"type {text!r} is not supported in a schema yet")
    name = _ALIASES.get(upper, upper)
    try:
        return DataType(name)
    except ValueError:
        raise ValueError(f"unknown type {text!r}") from None


# -- coercion ---------------------------------------------------------------------------------
def as_decimal(t: DataType) -> DataType:
    """The decimal that holds every value of an integral or decimal type exactly."""
    if t.is_decimal:
        return t
    if t.is_integral:
        return DataType("DECIMAL", _INTEGRAL_DIGITS[t.name], 0)
    raise ValueError(f"{t} has no exact decimal form")


def wider_decimal(a: DataType, b: DataType) -> DataType:
    a, b = as_decimal(a), as_decimal(b)
    assert a.scale is not None and b.scale is not None and a.precision is not None and b.precision is not None
    scale = max(a.scale, b.scale)
    int_digits = max(a.precision - a.scale, b.precision - b.scale)
    return bounded_decimal(int_digits + scale, scale)


def common_numeric(a: DataType, b: DataType) -> DataType:
    """The type both numeric operands are widened to (Spark's numeric precedence)."""
    if a.is_null:
        return b
    if b.is_null:
        return a
    if a.is_decimal or b.is_decimal:
        if a.is_fractional or b.is_fractional:
            return DOUBLE
        return wider_decimal(a, b)
    return a if _RANK[a.name] >= _RANK[b.name] else b


def common_type(a: DataType, b: DataType) -> DataType | None:
    """The type two values are compared or unioned as; None when Spark would refuse."""
    if a == b:
        return a
    if a.is_null:
        return b
    if b.is_null:
        return a
    if a.is_numeric and b.is_numeric:
        return common_numeric(a, b)
    if {a.name, b.name} == {"DATE", "TIMESTAMP"}:
        return TIMESTAMP
    if {a.name, b.name} == {"DATE", "TIMESTAMP_NTZ"}:
        return TIMESTAMP_NTZ
    # Spark casts a string to the other side in comparisons (string vs numeric/date).
    if a.is_string and (b.is_numeric or b.is_datetime or b.name == "BOOLEAN"):
        return b
    if b.is_string and (a.is_numeric or a.is_datetime or a.name == "BOOLEAN"):
        return a
    if a.name == "ARRAY" and b.name == "ARRAY":
        element = common_type(a.params[0], b.params[0])
        return array(element) if element is not None else None
    return None


def arithmetic_type(op: str, a: DataType, b: DataType) -> DataType | None:
    """Result type of ``a op b`` for op in + - * / %, following Spark; None if invalid."""
    if a.is_null and b.is_null:
        return DOUBLE if op == "/" else NULL
    if a.is_string and b.is_numeric or b.is_string and a.is_numeric:
        # Spark (ANSI) casts a string operand to DOUBLE in arithmetic with numbers.
        return DOUBLE
    if not (a.is_numeric or a.is_null) or not (b.is_numeric or b.is_null):
        return None
    if a.is_null:
        a = b
    if b.is_null:
        b = a
    if op == "/":
        if a.is_decimal or b.is_decimal:
            if a.is_fractional or b.is_fractional:
                return DOUBLE
            return _decimal_arith(op, as_decimal(a), as_decimal(b))
        return DOUBLE
    t = common_numeric(a, b)
    if t.is_decimal and (a.is_decimal or b.is_decimal):
        return _decimal_arith(op, as_decimal(a), as_decimal(b))
    return t


def _decimal_arith(op: str, a: DataType, b: DataType) -> DataType:
    p1, s1, p2, s2 = a.precision, a.scale, b.precision, b.scale
    assert p1 is not None and s1 is not None and p2 is not None and s2 is not None
    if op in "+-":
        scale = max(s1, s2)
        return decimal(max(p1 - s1, p2 - s2) + scale + 1, scale)
    if op == "*":
        return decimal(p1 + p2 + 1, s1 + s2)
    if op == "/":
        scale = max(6, s1 + p2 + 1)
        return decimal(p1 - s1 + s2 + scale, scale)
    # remainder
    scale = max(s1, s2)
    return decimal(min(p1 - s1, p2 - s2) + scale, scale)


def sum_type(t: DataType) -> DataType:
    """Spark's result type of sum(t)."""
    if t.is_integral:
        return BIGINT
    if t.is_decimal:
        assert t.precision is not None and t.scale is not None
        return bounded_decimal(t.precision + 10, t.scale)
    return DOUBLE


def avg_type(t: DataType) -> DataType:
    """Spark's result type of avg(t)."""
    if t.is_decimal:
        assert t.precision is not None and t.scale is not None
        return bounded_decimal(t.precision + 4, t.scale + 4)
    return DOUBLE


def partial_sum_type(t: DataType) -> DataType:
    """The type a partial sum of ``t`` is kept in inside state: wide enough to merge many batches."""
    if t.is_integral:
        return BIGINT
    if t.is_decimal:
        return DataType("DECIMAL", MAX_PRECISION, t.scale)
    return DOUBLE
