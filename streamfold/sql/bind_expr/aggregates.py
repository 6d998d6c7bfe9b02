"""Bind aggregate calls: ``count``, ``sum``, ``avg``, ``min``, ``max``, ``stddev``, ``variance``
(and their spellings), with ``DISTINCT`` and ``FILTER (WHERE …)``.

An aggregate becomes an :class:`Agg` handed to the context's ``on_agg`` hook, which returns its
stand-in (a column of the Aggregate's output); without a hook an aggregate is refused, as is one
inside another. Rewrites keep the set of aggregates small::

    count(1)                      →  count(*)
    sum(b) FILTER (WHERE a > 1)   →  sum(CASE WHEN a > 1 THEN b END)
    count(DISTINCT a, b)          →  count(DISTINCT <one text per tuple, NULL if a member is>)

Spark's boolean aggregates are counts (sums of weights: exact under deletions, no multiset)::

    count_if(p)              →  count(CASE WHEN p THEN 1 END)
    bool_or(p), some(p),     →  CASE WHEN count(p) = 0 THEN NULL ELSE count(CASE WHEN p THEN 1 END) > 0 END
      any(p)
    bool_and(p), every(p)    →  CASE WHEN count(p) = 0 THEN NULL ELSE count(CASE WHEN NOT p THEN 1 END) = 0 END

``covar_pop``, ``covar_samp``, ``corr`` and ``regr_*`` are counts and sums too (:mod:`.covariance`). Every other
aggregate Spark knows is refused by name, with the exact rewrite where there is one.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, SqlError, UnsupportedError
from ...ir.expr import Agg, Expr, Literal
from ...ir.types import BIGINT, DOUBLE, DataType, array, avg_type, sum_type
from .context import ExprContext
from .covariance import bind_covariance, covariance

AGGS: dict[type, str] = {
    exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
    exp.Stddev: "stddev", exp.StddevSamp: "stddev_samp", exp.StddevPop: "stddev_pop",
    exp.Variance: "variance", exp.VariancePop: "var_pop",
    exp.BitwiseAndAgg: "bit_and", exp.BitwiseOrAgg: "bit_or", exp.BitwiseXorAgg: "bit_xor",
}
# Spark aggregates sqlglot parses as anonymous calls, by the name they are bound to
ANON_AGGS = {"var_samp": "var_samp", "var_pop": "var_pop", "stddev_samp": "stddev_samp",
             "stddev_pop": "stddev_pop", "std": "stddev", "mean": "avg"}
# Spark's names for the aggregates sqlglot parses to a node of its own (others are named by the node)
UNSUPPORTED_AGGS = {
    exp.ApproxDistinct: "approx_count_distinct", exp.ArrayAgg: "collect_list", exp.ArrayUniqueAgg: "collect_set",
    exp.ApproxQuantile: "percentile_approx", exp.AnyValue: "any_value",
    exp.First: "first", exp.Last: "last", exp.GroupConcat: "string_agg",
}
# Spark aggregates sqlglot does not know (parsed as anonymous calls)
UNSUPPORTED_ANON_AGGS = frozenset({
    "product", "try_sum", "try_avg", "histogram_numeric", "count_min_sketch", "hll_sketch_agg",
    "approx_top_k",
})
_SUPPORTED_AGGS = ("supported aggregates: count, sum, avg, min, max, count(DISTINCT), stddev, variance, count_if, "
                   "bool_and, bool_or, covar_pop, covar_samp, corr, regr_*, median, percentile, percentile_cont, "
                   "max_by, min_by, bit_and, bit_or, bit_xor")
# What to write instead, where there is an exact spelling
_AGG_HINTS = {
    "approx_count_distinct": "count(DISTINCT x) is exact and maintained incrementally",
    "first": "which row is first depends on the order Spark reads the files; use min or max, or min_by(x, ts) "
             "for the x of the earliest ts",
    "last": "which row is last depends on the order Spark reads the files; use min or max, or max_by(x, ts) "
            "for the x of the latest ts",
    "any_value": "which row it picks depends on the order Spark reads the files; use min or max",
    "percentile_disc": "percentile_disc(p) WITHIN GROUP (ORDER BY x) is maintained; so are percentile_cont(p) WITHIN "
                       "GROUP (ORDER BY x), percentile(x, p) and median(x)",
    "percentile_approx": "percentile(x, p) is exact and maintained incrementally",
    "collect_set": "the order of its elements depends on the order Spark reads the files; sort_array(collect_set(x)) "
                   "and size(collect_set(x)) are maintained",
    "collect_list": "the order of its elements depends on the order Spark reads the files; sort_array(collect_list(x)) "
                    "and listagg(x, ',') WITHIN GROUP (ORDER BY x) are maintained",
    "approx_percentile": "percentile(x, p) is exact and maintained incrementally",
}


# Spark's boolean aggregates by the name an anonymous call of them has (sqlglot parses the others
# to a node of its own: CountIf, LogicalAnd, LogicalOr; `any(p)` to Any)
_BOOLEAN_NAMES = {"count_if": "count_if", "bool_and": "bool_and", "every": "bool_and", "bool_or": "bool_or",
                  "some": "bool_or", "any": "bool_or"}


def boolean_aggregate(node: exp.Expr) -> tuple[str, exp.Expr] | None:
    """A call of one of Spark's boolean aggregates — (``count_if``, ``bool_and`` or ``bool_or``,
    its predicate) — else None. ``any(p)`` is ``bool_or`` unless it quantifies a subquery."""
    if isinstance(node, (exp.CountIf, exp.LogicalAnd, exp.LogicalOr)):
        name = {exp.CountIf: "count_if", exp.LogicalAnd: "bool_and", exp.LogicalOr: "bool_or"}[type(node)]
        return name, node.this
    if isinstance(node, exp.Anonymous) and node.name.lower() in _BOOLEAN_NAMES and len(node.expressions) == 1:
        return _BOOLEAN_NAMES[node.name.lower()], node.expressions[0]
    if isinstance(node, exp.Any) and not isinstance(node.parent, exp.Predicate):
        inner = node.this.unnest() if isinstance(node.this, exp.Paren) else node.this
        if not isinstance(inner, (exp.Query, exp.Subquery)):
            return "bool_or", inner
    return None


def boolean_counts(fn: str, predicate: exp.Expr) -> exp.Expr:
    """``fn`` (a :func:`boolean_aggregate`) over ``predicate`` as the counts that give it (module docstring)."""
    p = exp.paren(predicate.copy(), copy=False)
    if fn == "count_if":
        return exp.Count(this=exp.Case(ifs=[exp.If(this=p, true=exp.Literal.number(1))]))
    counted = exp.Count(this=exp.Case(ifs=[exp.If(this=p if fn == "bool_or" else exp.Not(this=p.copy()),
                                                  true=exp.Literal.number(1))]))
    value = exp.GT(this=counted, expression=exp.Literal.number(0)) if fn == "bool_or" \
        else exp.EQ(this=counted, expression=exp.Literal.number(0))
    none = exp.EQ(this=exp.Count(this=p.copy()), expression=exp.Literal.number(0))
    return exp.Case(ifs=[exp.If(this=none, true=exp.Null())], default=value)


def filtered(node: exp.Filter, x: exp.Expr) -> exp.Expr:
    """``x`` where the FILTER's condition holds, else NULL: ``CASE WHEN p THEN x END`` (copies)."""
    return exp.Case(ifs=[exp.If(this=node.expression.this.copy(), true=x.copy())])


def bind_filter(ctx: ExprContext, node: exp.Filter) -> Expr:
    """``agg(x) FILTER (WHERE p)`` is ``agg(CASE WHEN p THEN x END)``: every supported aggregate
    skips NULLs, and ``count(*) FILTER (WHERE p)`` counts ``CASE WHEN p THEN 1 END``::

        sum(b) FILTER (WHERE a > 1)  →  sum(CASE WHEN a > 1 THEN b END)
    """
    agg: exp.Expr = node.this
    boolean = boolean_aggregate(agg)
    if boolean is not None:  # the predicate NULL where the filter fails: each of them skips it
        fn, p = boolean
        return ctx.bind(boolean_counts(fn, filtered(node, p)))
    two = covariance(agg)
    if two is not None:  # each argument NULL where the filter fails: a pair with a NULL is skipped
        fn, x, y = two
        return bind_covariance(ctx, node, fn, *(None if e is None else filtered(node, e) for e in (x, y)))
    anonymous = isinstance(agg, exp.Anonymous) and agg.name.lower() in ANON_AGGS
    if not (anonymous or type(agg) in AGGS):
        if isinstance(agg, exp.AggFunc) or (isinstance(agg, exp.Anonymous)
                                            and agg.name.lower() in UNSUPPORTED_ANON_AGGS):
            return ctx.bind(agg)  # its own UNSUPPORTED_AGGREGATE
        raise ctx.err(UnsupportedError, "UNSUPPORTED_EXPRESSION", "FILTER (WHERE …) applies only to an aggregate",
                      node, "write the condition in WHERE or in a CASE", construct="FILTER")
    guarded = agg.copy()
    inner = guarded.expressions[0] if anonymous and guarded.expressions else None if anonymous else guarded.this
    if inner is None or isinstance(inner, exp.Star):
        replacement: exp.Expr = filtered(node, exp.Literal.number(1))
    elif isinstance(inner, exp.Distinct):
        replacement = exp.Distinct(expressions=[filtered(node, e) for e in inner.expressions])
    else:
        replacement = filtered(node, inner)
    if inner is None and anonymous:
        guarded.set("expressions", [replacement])
    elif inner is None:
        guarded.set("this", replacement)
    else:
        inner.replace(replacement)
    return bind_agg(ctx, guarded, ANON_AGGS[agg.name.lower()] if anonymous else AGGS[type(agg)])


def unsupported_agg(ctx: ExprContext, node: exp.Expr, fn: str) -> SqlError:
    return ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE",
                   f"aggregate `{fn}` is not supported in a continuous query", node,
                   _AGG_HINTS.get(fn, _SUPPORTED_AGGS), function=fn)


def aggregate_allowed(ctx: ExprContext, node: exp.Expr, fn: str) -> None:
    """``AGGREGATE_NOT_ALLOWED`` in a clause that does not aggregate (WHERE, GROUP BY …),
    ``NESTED_AGGREGATE`` inside another aggregate's argument."""
    if ctx.on_agg is None:
        raise ctx.err(
            BindError, "AGGREGATE_NOT_ALLOWED", f"aggregate `{fn}` is not allowed in {ctx.clause}", node,
            "filter groups with HAVING instead of WHERE" if ctx.clause == "WHERE" else None,
            function=fn, clause=ctx.clause,
        )
    if ctx.in_agg:
        raise ctx.err(BindError, "NESTED_AGGREGATE", f"aggregate `{fn}` inside another aggregate", node,
                      "compute the inner aggregate in a subquery", function=fn)


def bind_agg(ctx: ExprContext, node: exp.Expr, fn: str, argument: exp.Expr | None = None,
             constants: tuple[Expr, ...] = ()) -> Expr:
    """``fn`` over its argument (``argument``, else the node's own), then ``constants`` (a
    percentile's fraction), as an :class:`Agg` handed to the context's hook."""
    aggregate_allowed(ctx, node, fn)
    distinct = False
    inner = argument if argument is not None else node.this if not isinstance(node, exp.Anonymous) \
        else (node.expressions[0] if node.expressions else None)
    if isinstance(inner, exp.Distinct):
        distinct = True
        if len(inner.expressions) != 1 or isinstance(inner.expressions[0], exp.Star):
            inner = _distinct_tuple(ctx, node, fn, inner)
        else:
            inner = inner.expressions[0]
    ctx.in_agg = True
    try:
        if inner is None or isinstance(inner, exp.Star):
            if fn != "count":
                raise ctx.err(BindError, "WRONG_ARGUMENTS", f"`{fn}(*)` is not valid", node, function=fn)
            args: tuple[Expr, ...] = ()
        else:
            args = (ctx.bind(inner),)
    finally:
        ctx.in_agg = False
    if fn == "count" and args and isinstance(args[0], Literal) and args[0].value is not None and not distinct:
        args = ()  # count(1) is count(*)
    agg = Agg(fn, args + constants, distinct, agg_type(ctx, node, fn, args))
    assert ctx.on_agg is not None  # (aggregate_allowed)
    return ctx.on_agg(agg, node)


def _distinct_tuple(ctx: ExprContext, node: exp.Expr, fn: str, distinct: exp.Distinct) -> exp.Expr:
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
        raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE", f"{fn}(DISTINCT …) over several columns is not "
                      "supported", node, "name the columns: count(DISTINCT a, b, …) counts the distinct tuples"
                      if fn == "count" else "only count(DISTINCT …) takes several columns", function=fn)
    ctx.in_agg = True
    try:
        types = [ctx.bind(m).type for m in members]
    finally:
        ctx.in_agg = False
    for m, t in zip(members, types):
        if not keyed_exactly(t):
            raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE",
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


def keyed_exactly(t: DataType) -> bool:
    """Whether values of ``t`` are kept exactly as a multiset's key (or a text): not FLOAT or DOUBLE
    (grouping makes -0.0 and 0.0 one value, and every NaN, where Spark keeps them apart) nor nested."""
    return t.is_integral or t.is_decimal or t.is_string or t.is_datetime or t.name in ("BOOLEAN", "NULL")


def refuse_inexact(ctx: ExprContext, node: exp.Expr, fn: str, t: DataType, hint: str) -> None:
    """``UNSUPPORTED_AGGREGATE`` unless :func:`keyed_exactly` (``hint`` for a type that is not a float)."""
    if not keyed_exactly(t):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_AGGREGATE", f"{fn} of {t.sql()} values is not supported", node,
                      "CAST the values to a DECIMAL or a STRING: Spark keeps -0.0 beside 0.0 and every NaN apart"
                      if t.name in ("FLOAT", "DOUBLE") else hint, function=fn, actual=t.sql())


def agg_type(ctx: ExprContext, node: exp.Expr, fn: str, args: tuple[Expr, ...]) -> DataType:
    if fn == "count":
        return BIGINT
    t = args[0].type
    if fn in ("mode", "mode_desc"):  # (modes.py checks the type)
        return t
    if fn in ("collect_set", "collect_list"):  # (only sorted or counted: value_sets.py, listagg.py check the type)
        return array(t)
    if fn in ("bit_and", "bit_or", "bit_xor"):
        if not (t.is_integral or t.is_null):
            raise ctx.mismatch(node, f"`{fn}` needs integers, but its argument is {t}", "CAST the argument to "
                               "INT or BIGINT", function=fn, actual=t.sql())
        return t
    if fn in ("min", "max"):
        if not t.is_orderable:
            raise ctx.mismatch(node, f"{fn} cannot order values of type {t}", function=fn, actual=t.sql())
        return t
    if t.is_string:
        raise ctx.mismatch(node, f"`{fn}` needs numbers, but its argument is {t}",
                           "CAST the argument to a number", function=fn, actual=t.sql())
    if not (t.is_numeric or t.is_null):
        raise ctx.mismatch(node, f"`{fn}` needs numbers, but its argument is {t}",
                           "CAST the argument to a number" if t.name != "DATE" else
                           "aggregate a number of days, e.g. datediff(d, DATE '2020-01-01')",
                           function=fn, actual=t.sql())
    if fn == "sum":
        return sum_type(t)
    if fn == "avg":
        return avg_type(t)
    return DOUBLE
