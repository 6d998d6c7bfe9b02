"""Bind scalar sqlglot expressions to typed IR expressions, checking types as Spark would.

:class:`ExprBinder` (:mod:`.binder`) dispatches each node to the module for its kind: names
(:mod:`.names`), literals and casts (:mod:`.literals`), arithmetic and dates (:mod:`.arithmetic`),
predicates (:mod:`.predicates`), CASE and IF (:mod:`.conditionals`), function calls
(:mod:`.calls`), aggregates (:mod:`.aggregates`) and subqueries (:mod:`.subqueries`). Each binds
with an :class:`.context.ExprContext`: the block's scope, the clause, and the query binder's
hooks for aggregates and subqueries.
"""

from .binder import ExprBinder
from .literals import number_literal

__all__ = ["ExprBinder", "number_literal"]
