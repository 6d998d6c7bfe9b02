"""What binding one expression of a query block needs, shared by every kind of expression.

An :class:`ExprContext` holds the block's :class:`Scope`, the clause being bound (for messages:
"WHERE", "GROUP BY" …), and two hooks the query binder gives it: ``on_agg``, which receives each
aggregate call and returns its stand-in (without it an aggregate is an error, as in WHERE), and
``subquery``, which binds a subquery with this scope as its enclosing one (without it a subquery
is refused). The modules of this package bind one kind of expression each, as functions of the
context; they bind their operands through :meth:`ExprContext.bind`, which
:class:`.binder.ExprBinder` implements by dispatching on the node's type — so no kind module
imports the dispatcher.

*Invariant:* a mistake is a coded :class:`SqlError`; :meth:`ExprContext.err` gives it the span of the
node it is about (to the closing parenthesis of a call).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from ...errors import BindError, SqlError
from ...ir.expr import Agg, Expr
from ...ir.types import BOOLEAN
from ..parse import span_of, widen_to_call
from ..scope import Scope

# Aggregates found while binding are handed to this callback, which returns their stand-in.
AggHook = Callable[[Agg, exp.Expr], Expr]
# Window calls found while binding are handed to this callback, which returns their stand-in.
WindowHook = Callable[[Any, exp.Expr], Expr]
# Binds a subquery with the current scope as its enclosing one: (relation, output names).
SubqueryHook = Callable[[exp.Expr, Scope], tuple[Any, list[str]]]


class ExprContext(ABC):
    """Binds expressions of one query block against a :class:`Scope`.

    ``on_agg`` receives each aggregate call; without it aggregates are an error (as in WHERE).
    ``on_window`` receives each window call (a select list's); without it OVER is refused.
    ``clause`` names the clause for messages ("WHERE", "GROUP BY" …).
    """

    def __init__(self, scope: Scope, clause: str, on_agg: AggHook | None = None,
                 subquery: SubqueryHook | None = None, on_window: WindowHook | None = None) -> None:
        self.scope = scope
        self.on_window = on_window
        self.sql = scope.sql
        self.clause = clause
        self.on_agg = on_agg
        self.subquery = subquery
        self.in_agg = False  # binding an aggregate's argument: no aggregate or subquery inside
        self.lambdas: dict[str, Expr] = {}  # the parameters of the lambdas around, by lower-case name

    @abstractmethod
    def bind(self, node: exp.Expr) -> Expr:
        """``node`` as a typed IR expression."""

    def boolean(self, node: exp.Expr) -> Expr:
        e = self.bind(node)
        if e.type != BOOLEAN and not e.type.is_null:
            raise self.mismatch(node, f"{self.clause} needs a boolean condition, but this is {e.type}",
                                "compare it, e.g. `x > 0`", expected="BOOLEAN", actual=e.type.sql())
        return e

    def err(self, cls: type[SqlError], code: str, message: str, node: exp.Expr | None,
            hint: str | None = None, **params: object) -> SqlError:
        return cls(message, code=code, sql=self.sql, span=widen_to_call(self.sql, span_of(node)),
                   hint=hint, params=params)

    def mismatch(self, node: exp.Expr, what: str, hint: str | None = None, **params: object) -> SqlError:
        return self.err(BindError, "TYPE_MISMATCH", what, node, hint, **params)
