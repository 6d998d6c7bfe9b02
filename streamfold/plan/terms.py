"""Small IR builders the planner's rules share: weights, counts, the merge's touched flag.

Each builds one typed expression the rules would otherwise spell out again and again::

    sum_weights()            sum(_weight)           (BIGINT)
    coalesce0(e)             coalesce(e, 0)         (BIGINT)
    or_false(e)              coalesce(e, false)     a predicate with NULL read as false
    touched()                __touched = 1          the keys a state's merge touched
    positive(e)              e > 0
"""

from __future__ import annotations

from ..ir.expr import Agg, Call, Column, Expr, Literal
from ..ir.rel import WEIGHT
from ..ir.types import BIGINT, BOOLEAN, INT
from .model import TOUCHED

ZERO, ONE, MINUS_ONE = Literal(0, BIGINT), Literal(1, BIGINT), Literal(-1, BIGINT)


def weight(name: str = WEIGHT) -> Column:
    """The weight column of a row (BIGINT)."""
    return Column(name, BIGINT)


def sum_weights(name: str = WEIGHT) -> Agg:
    """``sum(name)``: the weights of a group's rows added up."""
    return Agg("sum", (weight(name),), False, BIGINT)


def coalesce0(e: Expr) -> Expr:
    """``coalesce(e, 0)``: a count that is NULL where there was no row."""
    return Call("coalesce", (e, ZERO), BIGINT, "coalesce({0}, {1})")


def or_false(e: Expr) -> Expr:
    """``coalesce(e, false)``: a predicate as a filter reads it (NULL is false)."""
    return Call("coalesce", (e, Literal(False, BOOLEAN)), BOOLEAN, "coalesce({0}, {1})")


def touched() -> Expr:
    """``__touched = 1``: true for the keys a batch had a delta row for (a merge's rows)."""
    return Call("=", (Column(TOUCHED, INT), Literal(1, INT)), BOOLEAN)


def positive(e: Expr) -> Expr:
    """``e > 0`` for a count."""
    return Call(">", (e, ZERO), BOOLEAN)


def nonzero(e: Expr) -> Expr:
    """``e <> 0`` for a count."""
    return Call("<>", (e, ZERO), BOOLEAN)
