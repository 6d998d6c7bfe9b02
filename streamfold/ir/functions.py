"""Scalar functions streamfold accepts: their result types and whether they are deterministic.

The list is the string, date, math, conditional and array functions that Spark SQL and DuckDB share,
and some of Spark's own that DuckDB spells otherwise; every one of them is covered by the DuckDB
oracle (the latter in ``tests/runtime/test_spark_functions.py``, written in DuckDB's words). A
function outside it is refused with ``UNSUPPORTED_FUNCTION`` at compile time; a non-deterministic
one (``rand``, ``now`` …) with ``NONDETERMINISTIC_FUNCTION``, since a continuous query must give
the batch query's answer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .types import (
    BIGINT, BOOLEAN, DATE, DOUBLE, INT, STRING, TIMESTAMP, DataType, arithmetic_type, array, common_type, decimal,
)

TypeRule = Callable[[Sequence[DataType]], DataType]


def _fixed(t: DataType) -> TypeRule:
    return lambda args: t


def _first(args: Sequence[DataType]) -> DataType:
    return args[0]


def _common(args: Sequence[DataType]) -> DataType:
    if not args:
        raise TypeError("it needs at least one argument")
    result = args[0]
    for a in args[1:]:
        c = common_type(result, a)
        if c is None:
            raise TypeError(f"arguments of types {result} and {a} have no common type")
        result = c
    return result


def _if(args: Sequence[DataType]) -> DataType:
    return _common(args[1:])


def _round(args: Sequence[DataType]) -> DataType:
    t = args[0]
    if t.is_decimal:
        assert t.precision is not None and t.scale is not None
        return decimal(t.precision, t.scale)  # Spark keeps the shape up to the requested scale
    return t


def _array_fn(t: DataType) -> TypeRule:
    def rule(args: Sequence[DataType]) -> DataType:
        if args[0].name != "ARRAY" and not args[0].is_null:
            raise TypeError(f"the argument must be an array, not {args[0]}")
        return t
    return rule


def _element(args: Sequence[DataType]) -> DataType:
    """An array's element type (array_max, array_min)."""
    if args[0].name != "ARRAY":
        raise TypeError(f"the argument must be an array, not {args[0]}")
    return args[0].element


def _flattened(args: Sequence[DataType]) -> DataType:
    """flatten(array of arrays): the inner array type."""
    inner = _element(args)
    if inner.name != "ARRAY":
        raise TypeError(f"the argument must be an array of arrays, not an array of {inner}")
    return inner


def _appended(args: Sequence[DataType]) -> DataType:
    """array_append(arr, x), array_prepend(arr, x): an array of the common type of its elements and x."""
    if len(args) != 2:
        raise TypeError("it takes an array and a value")
    element = _element(args[:1]) if not args[0].is_null else args[1]
    common = common_type(element, args[1])
    if common is None:
        raise TypeError(f"a {args[1]} cannot join an array of {element}")
    return array(common)


def _appended_at(args: Sequence[DataType]) -> DataType:
    """array_insert(arr, pos, x): as array_append, the position an integer."""
    if len(args) != 3 or not (args[1].is_integral or args[1].is_null):
        raise TypeError("it takes an array, an integer position and a value")
    return _appended([args[0], args[2]])


def _sequence(args: Sequence[DataType]) -> DataType:
    """sequence(start, stop[, step]) of integers: an array of their wider type."""
    if not all(a.is_integral or a.is_null for a in args) or len(args) not in (2, 3):
        raise TypeError("it takes two or three integers (a sequence of dates or timestamps is not supported)")
    return array(_common(args))


def _tried(op: str) -> TypeRule:
    """try_add, try_subtract, try_multiply: the operator's type (NULL on overflow); a date moved by
    whole days stays a date."""
    def rule(args: Sequence[DataType]) -> DataType:
        if op in "+-" and len(args) == 2 and args[0].name == "DATE" and args[1].is_integral:
            return DATE
        t = arithmetic_type(op, args[0], args[1]) if len(args) == 2 else None
        if t is None:
            raise TypeError(f"it needs two numbers, not {', '.join(str(a) for a in args)}")
        return t
    return rule


def _floor_ceil(args: Sequence[DataType]) -> DataType:
    t = args[0]
    if t.is_decimal:
        assert t.precision is not None and t.scale is not None
        return decimal(t.precision - t.scale + 1, 0)
    return BIGINT


def _epoch_seconds(args: Sequence[DataType]) -> DataType:
    if len(args) != 1 or args[0].name not in ("TIMESTAMP", "NULL"):
        raise TypeError("it reads one TIMESTAMP (a date or a string is read in the session's time zone: "
                        "CAST it to a TIMESTAMP first)")
    return BIGINT


_STRING_FUNCS = (
    "upper", "lower", "ucase", "lcase", "substring", "substr", "concat", "concat_ws", "trim", "ltrim",
    "rtrim", "btrim", "replace", "lpad", "rpad", "left", "right", "repeat", "initcap",
    "split_part", "regexp_replace", "regexp_extract", "translate", "date_format",
)
_INT_FUNCS = (
    "length", "char_length", "character_length", "instr", "locate", "position", "ascii",
    "year", "month", "day", "dayofmonth", "quarter", "dayofweek", "dayofyear", "weekofyear",
    "hour", "minute", "datediff",
)
_DOUBLE_FUNCS = (
    "sqrt", "exp", "ln", "log10", "log2", "log", "power", "pow", "sin", "cos", "tan", "asin",
    "acos", "atan", "atan2", "degrees", "radians", "cbrt", "sign", "signum",
)
_BOOL_FUNCS = ("startswith", "endswith", "contains", "starts_with", "ends_with", "rlike", "regexp_like")

FUNCTIONS: dict[str, TypeRule] = {}
FUNCTIONS.update({f: _fixed(STRING) for f in _STRING_FUNCS})
FUNCTIONS.update({f: _fixed(INT) for f in _INT_FUNCS})
FUNCTIONS.update({f: _fixed(DOUBLE) for f in _DOUBLE_FUNCS})
FUNCTIONS.update({f: _fixed(BOOLEAN) for f in _BOOL_FUNCS})
FUNCTIONS.update({
    "abs": _first, "negative": _first, "positive": _first,
    "round": _round, "bround": _round, "floor": _floor_ceil, "ceil": _floor_ceil, "ceiling": _floor_ceil,
    "mod": _common, "pmod": _common, "greatest": _common, "least": _common,
    "coalesce": _common, "nvl": _common, "ifnull": _common, "nullif": _first, "if": _if,
    "nvl2": lambda a: _common(a[1:]),
    "reverse": _first,
    "date_add": _fixed(DATE), "date_sub": _fixed(DATE), "add_months": _fixed(DATE),
    "last_day": _fixed(DATE), "to_date": _fixed(DATE), "make_date": _fixed(DATE), "trunc": _fixed(DATE),
    "date_trunc": _fixed(TIMESTAMP), "to_timestamp": _fixed(TIMESTAMP),
    "extract": _fixed(INT), "date_part": _fixed(INT), "second": _fixed(INT),
    "hash": _fixed(INT),
    # arrays (nested data)
    "size": _array_fn(INT), "cardinality": _array_fn(INT), "array_contains": _array_fn(BOOLEAN),
    "split": _fixed(array(STRING)),  # split(s, regex[, limit]): the pieces, read with element_at or [i]
    "unix_timestamp": _epoch_seconds,  # of a TIMESTAMP (without one: the clock, refused)
    "array": lambda a: array(_common(a)),  # array(x, y, …): its arguments' common type (explode(array(a, b)))
    "array_join": _array_fn(STRING), "array_max": _element, "array_min": _element, "slice": _first,
    "flatten": _flattened,
    "md5": _fixed(STRING), "sha": _fixed(STRING), "sha1": _fixed(STRING), "sha2": _fixed(STRING),
    "hex": _fixed(STRING), "bin": _fixed(STRING), "chr": _fixed(STRING),
    "levenshtein": _fixed(INT), "regexp_count": _fixed(INT), "factorial": _fixed(BIGINT),
    "pi": _fixed(DOUBLE), "cot": _fixed(DOUBLE), "sinh": _fixed(DOUBLE), "cosh": _fixed(DOUBLE),
    "tanh": _fixed(DOUBLE), "asinh": _fixed(DOUBLE),
    "make_timestamp": _fixed(TIMESTAMP), "next_day": _fixed(DATE),
    # Spark's own, beyond what DuckDB shares (tests/runtime/test_spark_functions.py spells each in DuckDB)
    "substring_index": _fixed(STRING), "base64": _fixed(STRING), "from_unixtime": _fixed(STRING),
    "weekday": _fixed(INT), "octet_length": _fixed(INT), "bit_length": _fixed(INT), "unix_date": _fixed(INT),
    "unix_seconds": _fixed(BIGINT), "unix_millis": _fixed(BIGINT), "unix_micros": _fixed(BIGINT),
    "date_from_unix_date": _fixed(DATE), "timestamp_seconds": _fixed(TIMESTAMP),
    "timestamp_millis": _fixed(TIMESTAMP), "log1p": _fixed(DOUBLE), "expm1": _fixed(DOUBLE),
    "isnan": _fixed(BOOLEAN), "nanvl": _common,
    "array_position": _array_fn(BIGINT), "array_append": _appended, "array_prepend": _appended,
    "array_compact": _first, "array_repeat": lambda a: array(a[0]),
    "array_distinct": _first, "array_remove": _first, "array_union": _common, "array_except": _common,
    "array_intersect": _common, "dayname": _fixed(STRING), "monthname": _fixed(STRING),
    "regexp_substr": _fixed(STRING),
    "try_add": _tried("+"), "try_subtract": _tried("-"), "try_multiply": _tried("*"),
    "months_between": _fixed(DOUBLE), "format_number": _fixed(STRING), "format_string": _fixed(STRING),
    "printf": _fixed(STRING), "acosh": _fixed(DOUBLE), "atanh": _fixed(DOUBLE), "hypot": _fixed(DOUBLE),
    "rint": _fixed(DOUBLE), "e": _fixed(DOUBLE), "sec": _fixed(DOUBLE), "csc": _fixed(DOUBLE),
    "overlay": _fixed(STRING), "mask": _fixed(STRING), "find_in_set": _fixed(INT), "timestampdiff": _fixed(BIGINT),
    "regexp_extract_all": _fixed(array(STRING)), "array_insert": _appended_at, "arrays_overlap": _fixed(BOOLEAN),
    "sort_array": _first, "array_sort": _first, "sequence": _sequence, "bit_count": _fixed(INT),
    "get_json_object": _fixed(STRING), "to_json": _fixed(STRING), "json_array_length": _fixed(INT),
    "json_object_keys": _fixed(array(STRING)),
})

NONDETERMINISTIC = frozenset({
    "rand", "random", "randn", "uuid", "shuffle", "current_date", "current_timestamp", "now",
    "localtimestamp", "current_timezone", "monotonically_increasing_id", "spark_partition_id",
    "input_file_name", "curdate", "unix_timestamp", "current_time", "uniform", "randstr",
})


# the clock's functions that, given a value, read it rather than the clock (unix_timestamp(ts))
CLOCK_WITH_ARGUMENT = frozenset({"unix_timestamp"})


def result_type(name: str, args: Sequence[DataType]) -> DataType:
    """The type ``name(args)`` returns; raises KeyError for an unknown function, TypeError on bad args."""
    return FUNCTIONS[name](args)


def is_known(name: str) -> bool:
    return name in FUNCTIONS
