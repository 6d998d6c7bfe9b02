"""The expression binder: dispatch a sqlglot node to the module that binds its kind.

A node is bound by the rule for its exact type in :data:`_RULES`; else by its family (arithmetic
and comparison operators by ``isinstance``, aggregates by exact type); else, if it is a
subquery, a window, or an aggregate or function no rule took, by the refusal or the generic
function call for it. Anything else is ``UNSUPPORTED_EXPRESSION`` — never silently passed
through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from ...errors import UnsupportedError
from ...ir.expr import Expr
from .aggregates import AGGS, UNSUPPORTED_AGGS, bind_agg, boolean_aggregate, boolean_counts, unsupported_agg
from .arithmetic import ARITH, bind_arith, bind_concat, bind_int_div, bind_neg
from .calls import bind_call
from .conditionals import bind_case, bind_if
from .context import ExprContext
from .covariance import bind_covariance, covariance
from .extremes import bind_extreme, extreme
from .percentiles import bind_filtered, bind_percentile, bind_percentile_disc, percentile, percentile_disc
from .listagg import bind_listagg, listagg
from .modes import bind_mode, mode
from .respell import bind_bitwise, bitwise, respelled
from .value_sets import bind_value_set, value_set
from .grouping import bind_grouping
from .lambdas import bind_higher_order, lambda_call
from .literals import bind_boolean, bind_cast, bind_literal, bind_null
from .names import bind_bracket, bind_column, bind_dot, bind_identifier, bind_struct
from .predicates import (
    COMPARE, bind_and, bind_between, bind_compare, bind_distinct_from, bind_ilike, bind_in, bind_is, bind_like,
    bind_not, bind_or,
)
from .subqueries import bind_subquery, quantified_refusal
from .timezones import bind_convert_timezone, bind_time_zone
from .windows import bind_window

_RULES: dict[type[exp.Expr], Callable[[ExprContext, Any], Expr]] = {
    exp.Column: bind_column, exp.Identifier: bind_identifier, exp.Dot: bind_dot, exp.Bracket: bind_bracket, exp.Struct: bind_struct,
    exp.Paren: lambda ctx, node: ctx.bind(node.this),
    exp.Literal: bind_literal, exp.Boolean: bind_boolean, exp.Null: bind_null,
    exp.Cast: bind_cast, exp.TryCast: bind_cast,
    exp.Neg: bind_neg, exp.IntDiv: bind_int_div, exp.DPipe: bind_concat,
    exp.NullSafeNEQ: bind_distinct_from, exp.And: bind_and, exp.Or: bind_or, exp.Not: bind_not,
    exp.Is: bind_is, exp.In: bind_in, exp.Between: bind_between, exp.Like: bind_like, exp.ILike: bind_ilike,
    exp.Case: bind_case, exp.If: bind_if,
    exp.Filter: bind_filtered,
    exp.Grouping: bind_grouping, exp.GroupingId: bind_grouping,
    exp.AtTimeZone: bind_time_zone, exp.FromTimeZone: bind_time_zone, exp.ConvertTimezone: bind_convert_timezone,
}


# Aggregates of a shape of their own (under FILTER too, for listagg and mode): the shape's parts,
# or None, and the binder of those parts
_AGGREGATE_SHAPES: tuple[tuple[Callable[[exp.Expr], tuple[Any, ...] | None], Callable[..., Expr]], ...] = (
    (lambda n: (found,) if (found := listagg(n)) is not None else None, bind_listagg),
    (mode, bind_mode), (covariance, bind_covariance), (percentile_disc, bind_percentile_disc),
    (percentile, bind_percentile), (value_set, bind_value_set), (extreme, bind_extreme),
)


class ExprBinder(ExprContext):
    """An :class:`ExprContext` that binds each node by the rule for its kind."""

    def bind(self, node: exp.Expr) -> Expr:
        higher_order = lambda_call(node)
        if higher_order is not None:
            return bind_higher_order(self, node, *higher_order)
        boolean = boolean_aggregate(node)
        if boolean is not None:
            return self.bind(boolean_counts(*boolean))
        for shape, bind_shape in _AGGREGATE_SHAPES:
            found = shape(node)
            if found is not None:
                return bind_shape(self, node, *found)
        meant = respelled(node)
        if meant is not None:
            return self.bind(meant)
        if bitwise(node):
            return bind_bitwise(self, node)
        rule = _RULES.get(type(node))
        if rule is not None:
            return rule(self, node)
        for cls, op in ARITH.items():
            if isinstance(node, cls):
                return bind_arith(self, node, op)
        for cls, op in COMPARE.items():
            if isinstance(node, cls):
                return bind_compare(self, node, op)
        for agg_cls, fn in AGGS.items():
            if type(node) is agg_cls:
                return bind_agg(self, node, fn)
        if isinstance(node, (exp.Subquery, exp.Exists)):
            return bind_subquery(self, node)
        if isinstance(node, (exp.All, exp.Any)):
            raise quantified_refusal(self, node)
        if isinstance(node, exp.Window):
            return bind_window(self, node)
        if isinstance(node, exp.WithinGroup):  # percentile_cont(p) WITHIN GROUP (ORDER BY x), …
            inner = node.this
            name = inner.sql_name().lower() if isinstance(inner, exp.Func) else "WITHIN GROUP"
            raise unsupported_agg(self, node, name)
        if isinstance(node, (exp.IgnoreNulls, exp.RespectNulls)) and isinstance(node.this, exp.AggFunc):
            raise unsupported_agg(self, node, UNSUPPORTED_AGGS.get(type(node.this)) or node.this.sql_name().lower())
        if isinstance(node, exp.AggFunc):  # every aggregate not bound above
            raise unsupported_agg(self, node, UNSUPPORTED_AGGS.get(type(node)) or node.sql_name().lower())
        if isinstance(node, exp.Func):
            return bind_call(self, node)
        raise self.err(UnsupportedError, "UNSUPPORTED_EXPRESSION",
                       f"expression `{node.sql(dialect='spark')}` is not supported", node,
                       "docs/sql.md lists the supported expressions and functions", construct=type(node).__name__)
