"""Split each aggregate into monoid partials kept in state (h) and a final expression (a).

Seed 000 §2: ``avg(x)`` is not a homomorphism, but ``(sum(x), count(x))`` is, and the division
moves to the answer function. The same holds for every aggregate here:

==========================  ==============================================  ====================
aggregate                   partials in state (monoid)                      final, in a
==========================  ==============================================  ====================
count(*)                    the row count ``_weight`` (+)                   ``_weight``
count(x)                    count(x) = Σ w·[x not null] (+)                 count(x)
sum(x)                      count(x), sum(x) = Σ w·x (+)                    NULL if count is 0
avg(x)                      count(x), sum(x) (+)                            sum / count
stddev, variance            count(x), sum(x), sumsq(x) = Σ w·x² (+)         the moment formula
min(x), max(x), no deletes  min(x) / max(x) (min / max)                     itself
min/max under deletions,    a multiset state of the values, keyed by        min/max/count/sum/avg
count/sum/avg(DISTINCT x)   (group, x) with its count (+)                   over the values present
percentile(x, p)            the same multiset                               percentile(value, p, count)
collect_set(x) (sorted)     the same multiset                               collect_set over the values
collect_list(x) (sorted)    the same multiset                               each value count times
bit_and(x), bit_or(x)       the same multiset                               itself over the values present
bit_xor(x)                  the same multiset                               over the values present an odd
                                                                            number of times
mode(x, true)               the same multiset                               min_by(value, (−count, value))
percentile_disc(p)          the same multiset                               the sorted (value, count) pairs walked
==========================  ==============================================  ====================

``w`` is a row's weight: +1 for an insert, −1 for a delete. Beyond the seed, which has no
deletions: min and max cannot be un-merged, so under deletions they keep the multiset of values
(seed 003 §11 requires deletions only of what was inserted; the multiset makes that enough).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import Agg, Call, Case, Cast, Column, Expr, Literal
from ..ir.printer import sql
from ..ir.types import (
    BIGINT, BOOLEAN, DOUBLE, INT, MAX_PRECISION, STRING, DataType, arithmetic_type, array, decimal,
    partial_sum_type, sum_type,
)
from ..ir.averages import decimal_average
from .model import Monoid
from .terms import coalesce0

ZERO = Literal(0, BIGINT)


@dataclass(frozen=True, slots=True)
class Partial:
    """One state column holding a partial aggregate of ``arg`` over the rows of a key."""

    kind: str  # count | sum | sumsq | min | max
    arg: Expr

    @property
    def name(self) -> str:
        return f"{self.kind}({sql(self.arg)})"

    @property
    def monoid(self) -> Monoid:
        return {"min": Monoid.MIN, "max": Monoid.MAX}.get(self.kind, Monoid.SUM)

    @property
    def type(self) -> DataType:
        t = self.arg.type
        if self.kind == "count":
            return BIGINT
        if self.kind == "sum":
            return partial_sum_type(t)
        if self.kind == "sumsq":
            if t.is_integral:
                return decimal(38, 0)
            if t.is_decimal:
                assert t.scale is not None
                return decimal(38, min(2 * t.scale, 38))
            return DOUBLE
        return t

    @property
    def meaning(self) -> str:
        return {
            "count": f"number of rows where {sql(self.arg)} is not NULL",
            "sum": f"sum of {sql(self.arg)}",
            "sumsq": f"sum of squares of {sql(self.arg)}",
            "min": f"least {sql(self.arg)}",
            "max": f"greatest {sql(self.arg)}",
        }[self.kind]

    def contribution(self, weight: Expr) -> Expr:
        """The value one row of weight ``weight`` adds (before summing with the monoid)."""
        a = self.arg
        if self.kind == "count":
            return Case(((Call("IS NULL", (a,), BOOLEAN), ZERO),), weight, BIGINT)
        if self.kind == "sum":
            return scale(a if a.type.is_decimal else cast(a, self.type), weight, self.type)
        if self.kind == "sumsq":
            t = self.type
            if a.type.is_integral:
                base: Expr = Cast(a, decimal(20, 0))
            elif a.type.is_decimal:
                base = a
            else:
                base = cast(a, DOUBLE)
            square_t = arithmetic_type("*", base.type, base.type)
            assert square_t is not None
            return scale(Call("*", (base, base), square_t), weight, t)
        return a  # min / max: weights are positive when these are used


def cast(e: Expr, t: DataType) -> Expr:
    """``CAST(e AS t)`` unless ``e`` has that type already."""
    return e if e.type == t else Cast(e, t)


def scale(value: Expr, weight: Expr, t: DataType) -> Expr:
    """``value × weight`` kept in type ``t`` (decimals multiplied without losing their scale)."""
    if isinstance(weight, Literal) and weight.value == 1:
        return cast(value, t)
    if t.is_decimal:
        return Cast(weighted_decimal(value, weight), t)
    return Call("*", (value, weight), t)


def weighted_decimal(value: Expr, weight: Expr) -> Expr:
    """``value × weight`` for a decimal ``value`` of type decimal(p, s), exactly, with scale s.

    Spark types ``decimal(p, s) × decimal(k, 0)`` as decimal(p + k + 1, s) and, past 38 digits,
    cuts the scale down to max(38 − integer digits, min(s, 6)) (its precision-loss rule): a
    state summing ``price × weight`` of a decimal(30, 8) price kept 6 decimals. With s ≤ 6
    nothing is cut; else the weight is cast to the k = 37 − p digits the product leaves it — all
    of a BIGINT's 19 when p ≤ 18 — and a weight too large for them fails the batch with its
    cause rather than losing digits; when p ≥ 37 only ±1 fit (unary minus keeps the type)."""
    vt = value.type
    assert vt.precision is not None and vt.scale is not None
    digits = min(MAX_PRECISION - 1 - vt.precision, 19)
    if digits >= 19 or vt.scale <= 6:
        return Call("*", (value, Cast(weight, decimal(19, 0))), decimal(vt.precision + 20, vt.scale))
    too_large = Cast(Call("raise_error", (Literal(
        f"a row weight too large to multiply a {vt.sql()} exactly", STRING),), vt, "raise_error({0})"), vt)
    neg = Call("neg", (value,), vt)
    one = Literal(1, BIGINT)
    if digits <= 0:
        return Case(((Call("=", (weight, one), BOOLEAN), value),
                     (Call("=", (weight, Literal(-1, BIGINT)), BOOLEAN), neg)), too_large, vt)
    product_t = decimal(vt.precision + digits + 1, vt.scale)
    fits = Call("<", (Call("abs", (weight,), BIGINT, "abs({0})"), Literal(10 ** digits, BIGINT)), BOOLEAN)
    return Case(((fits, Call("*", (value, Cast(weight, decimal(digits, 0))), product_t)),), too_large, product_t)


@dataclass(frozen=True, slots=True)
class AggSpec:
    """How one aggregate call is kept: partials in the group's state, or a multiset of values."""

    agg: Agg
    partials: tuple[Partial, ...]
    multiset: Expr | None  # the value whose multiset is kept, for DISTINCT / deletable min, max

    def final(self, weight: Expr) -> Expr:
        """The aggregate's value from partial columns (``Column(p.name)``) and the row count."""
        a = self.agg
        col = {p.kind: Column(p.name, p.type) for p in self.partials}
        if a.fn == "count" and not a.args:
            return Call("coalesce", (weight, ZERO), BIGINT, "coalesce({0}, {1})")
        if a.fn == "count":
            return Call("coalesce", (col["count"], ZERO), BIGINT, "coalesce({0}, {1})")
        if a.fn in ("min", "max"):
            return col[a.fn]
        count = col["count"]
        empty = Call("=", (Call("coalesce", (count, ZERO), BIGINT, "coalesce({0}, {1})"), ZERO), BOOLEAN)
        arg_t = a.args[0].type
        if a.fn == "sum":
            return Case(((empty, Literal(None, a.type)),), cast(col["sum"], sum_type(arg_t)), a.type)
        if a.fn == "avg":
            if arg_t.is_decimal:
                div: Expr = decimal_average(col["sum"], count, arg_t)
            else:
                div = Call("/", (cast(col["sum"], DOUBLE), cast(count, DOUBLE)), DOUBLE)
            return Case(((empty, Literal(None, a.type)),), div, a.type)
        return _moment(a.fn, count, col["sum"], col["sumsq"], arg_t)


def _moment(fn: str, n: Expr, s: Expr, q: Expr, arg_t: DataType) -> Expr:
    """Variance and standard deviation from count, sum and sum of squares.

    For integer and decimal input the numerator n·Σx² − (Σx)² is computed exactly in DECIMAL
    and only then turned into a DOUBLE, so no cancellation creeps in.
    """
    exact = arg_t.is_integral or arg_t.is_decimal
    if exact:
        wide = decimal(38, q.type.scale or 0)
        nq = Call("*", (Cast(n, decimal(20, 0)), Cast(q, wide)), wide)
        ss = Call("*", (Cast(s, decimal(38, (q.type.scale or 0) // 2)), Cast(s, decimal(38, (q.type.scale or 0) // 2))), wide)
        num: Expr = Cast(Call("-", (nq, ss), wide), DOUBLE)
    else:
        nd = Cast(n, DOUBLE)
        num = Call("-", (Call("*", (nd, q), DOUBLE), Call("*", (s, s), DOUBLE)), DOUBLE)
    num = Call("greatest", (num, Literal(0.0, DOUBLE)), DOUBLE, "greatest({0}, {1})")
    nd = Cast(n, DOUBLE)
    population = fn in ("var_pop", "stddev_pop")
    denominator = Call("*", (nd, nd), DOUBLE) if population else \
        Call("*", (nd, Call("-", (nd, Literal(1.0, DOUBLE)), DOUBLE)), DOUBLE)
    value: Expr = Call("/", (num, denominator), DOUBLE)
    if fn.startswith("stddev"):
        value = Call("sqrt", (value,), DOUBLE, "sqrt({0})")
    too_few = Call("<=", (Call("coalesce", (n, ZERO), BIGINT, "coalesce({0}, {1})"),
                          Literal(0 if population else 1, BIGINT)), BOOLEAN)
    return Case(((too_few, Literal(None, DOUBLE)),), value, DOUBLE)


# aggregates kept over the values' multiset whatever the input, and those whose answer reads each
# value's count (its rows)
MULTISET_FNS = frozenset({"percentile", "collect_set", "collect_list", "mode", "mode_desc", "percentile_disc",
                          "percentile_disc_desc", "bit_and", "bit_or", "bit_xor"})
COUNTED = frozenset({"percentile", "collect_list", "mode", "mode_desc", "percentile_disc", "percentile_disc_desc",
                     "bit_xor"})


def decompose(agg: Agg, deletions: bool) -> AggSpec:
    """Choose the partials (or multiset) for ``agg``; ``deletions`` if its input may lose rows."""
    fn = agg.fn
    if not agg.args:
        return AggSpec(agg, (), None)
    arg = agg.args[0]
    if fn in MULTISET_FNS:  # the values' multiset (each value's count read by COUNTED)
        return AggSpec(agg, (), arg)
    if agg.distinct and fn not in ("min", "max"):
        return AggSpec(agg, (), arg)
    if fn in ("min", "max"):
        return AggSpec(agg, (), arg) if deletions else AggSpec(agg, (Partial(fn, arg),), None)
    if fn == "count":
        return AggSpec(agg, (Partial("count", arg),), None)
    if fn in ("sum", "avg"):
        return AggSpec(agg, (Partial("count", arg), Partial("sum", arg)), None)
    return AggSpec(agg, (Partial("count", arg), Partial("sum", arg), Partial("sumsq", arg)), None)


def multiset_final(agg: Agg, value: Column, count: Column) -> Agg:
    """The aggregate that a over a multiset state computes: the same function over distinct values
    — a percentile over them with each one's ``count`` (its rows) as its frequency."""
    fn = agg.fn
    if fn == "percentile":
        return Agg(fn, (value, agg.args[1], count), False, agg.type)
    if fn in ("mode", "mode_desc"):  # the most frequent value, ties to the lowest (DESC: the highest)
        sign = "-" if fn == "mode" else ""
        key = Call("named_struct", (count, value), DataType("STRUCT", params=(("c", BIGINT), ("v", value.type))),
                   f"IF({{1}} IS NULL, NULL, named_struct('c', {sign}({{0}}), 'v', {{1}}))")
        return Agg("min_by" if fn == "mode" else "max_by", (value, key), False, agg.type)
    if fn in ("percentile_disc", "percentile_disc_desc"):  # the (value, count) pairs, walked in the answer
        pair = DataType("STRUCT", params=(("v", value.type), ("c", BIGINT)))
        paired = Call("named_struct", (value, count), pair, "IF({0} IS NULL, NULL, named_struct('v', {0}, 'c', {1}))")
        return Agg("collect_list", (paired,), False, array(pair))
    if fn == "bit_xor":  # a value present an even number of times cancels out (0); NULL stays NULL
        even = Call("=", (Call("%", (count, Literal(2, BIGINT)), BIGINT), Literal(0, BIGINT)), BOOLEAN)
        cancelled = Call("AND", (even, Call("IS NOT NULL", (value,), BOOLEAN)), BOOLEAN)
        return Agg(fn, (Case(((cancelled, Literal(0, value.type)),), value, value.type),), False, agg.type)
    if fn == "collect_list":  # each value as often as it occurs: collect_list(array_repeat(v, count)), flattened
        repeated = Call("array_repeat", (value, Cast(count, INT)), array(value.type), "array_repeat({0}, {1})")
        present = Case(((Call("IS NULL", (value,), BOOLEAN), Literal(None, repeated.type)),), repeated, repeated.type)
        return Agg(fn, (present,), False, array(repeated.type))
    if fn in ("stddev", "stddev_samp", "stddev_pop", "variance", "var_samp", "var_pop") and not agg.distinct:
        raise ValueError("moments are never kept as multisets")
    return Agg(fn, (value,), False, agg.type)


def multiset_answer(agg: Agg, merged: Column) -> Expr:
    """The answer of ``agg`` from ``merged``, the column :func:`multiset_final`'s aggregate fills."""
    if agg.fn == "count":  # NULL where the group has no value
        return coalesce0(merged)
    if agg.fn == "collect_list":  # its values' arrays, each repeated by its count
        return Call("flatten", (merged,), agg.type, "flatten({0})")
    if agg.fn in ("percentile_disc", "percentile_disc_desc"):  # its (value, count) pairs, walked
        return _discrete_percentile(merged, agg.args[1], agg.fn.endswith("desc"))
    return merged


def _discrete_percentile(pairs: Expr, fraction: Expr, descending: bool) -> Expr:
    """``percentile_disc`` over a group's (value, count) pairs: sorted (descending: from the top),
    the first value whose running count reaches ``max(1, ceil(p · n))``, as a DOUBLE; NULL for none."""
    walk = ("aggregate(sort_array({0}, %s), named_struct('seen', CAST(0 AS BIGINT), 'val', CAST(NULL AS DOUBLE)), "
            "(_pd_acc, _pd_e) -> IF(_pd_acc.val IS NOT NULL, _pd_acc, named_struct('seen', _pd_acc.seen + _pd_e.c, "
            "'val', IF(_pd_acc.seen + _pd_e.c >= greatest(1, ceil({1} * aggregate({0}, CAST(0 AS BIGINT), "
            "(_pd_n, _pd_y) -> _pd_n + _pd_y.c))), CAST(_pd_e.v AS DOUBLE), CAST(NULL AS DOUBLE)))), "
            "_pd_acc -> _pd_acc.val)") % ("false" if descending else "true")
    return Call("percentile_disc", (pairs, fraction), DOUBLE, walk)
