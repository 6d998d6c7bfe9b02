"""What binding one query text needs, shared by every clause: the catalog, the names given so far.

A :class:`BindContext` lives for one call of :func:`.query.bind`. It hands out internal names
that are unique across the whole query (``fresh``, ``unique_alias``), so blocks bound apart can
later be joined: a subquery may reuse an alias of the outer query, and every block has a
``_agg0``. The clause modules of this package are functions of the context; they bind nested
queries (derived tables, CTEs, subqueries) through :meth:`BindContext.query`, which
:mod:`.query` implements by dispatching on the query's kind — so no clause module imports it.

*Invariant:* a mistake is a coded :class:`SqlError`; :meth:`BindContext.err` gives it the span of the
node it is about (to the closing parenthesis of a call).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from ...errors import BindError, SqlError
from ...ir.rel import Rel
from ..catalog import Catalog
from ..iterate import Iterative
from ..parse import ParsedQuery, span_of, widen_to_call
from ..scope import Scope


@dataclass
class Cte:
    """A common table expression in scope, bound each time it is read."""

    node: exp.Expr | None
    ctes: dict[str, Cte]
    columns: list[str] | None = None  # WITH t (a, b) AS (…): the names it gives the columns
    loop: Iterative | None = None  # WITH ITERATIVE: the step and its count
    bound: tuple[Rel, list[str]] | None = None  # inside a step: the iteration's previous value
    recursive: bool = False  # WITH RECURSIVE, and the CTE reads itself


class BindContext(ABC):
    """The state of binding one query text; :mod:`.query` supplies :meth:`query`."""

    def __init__(self, parsed: ParsedQuery, catalog: Catalog) -> None:
        self.sql, self.loops, self.steps = parsed.written, parsed.loops, parsed.steps  # (each loop's step parsed)
        self.catalog = catalog
        self._auto_alias = 0
        # Internal names are unique across the whole query, so blocks can later be joined
        # (a subquery may reuse an alias of the outer query, and every block has a _agg0).
        self._names: dict[str, int] = {}
        self._aliases: set[str] = set()

    @abstractmethod
    def query(self, node: exp.Expr, ctes: dict[str, Cte], parent: Scope | None = None) -> tuple[Rel, list[str]]:
        """A query (SELECT, set operation, parenthesised query) as (relation, output names);
        ``parent`` is the enclosing query's scope when it is a subquery of an expression."""

    def subquery_hook(self, ctes: dict[str, Cte]) -> Callable[[exp.Expr, Scope], tuple[Rel, list[str]]]:
        """Binds subqueries of expressions: the current scope encloses them."""
        return lambda node, scope: self.query(node, ctes, scope)

    def fresh(self, prefix: str) -> str:
        n = self._names.get(prefix, 0)
        self._names[prefix] = n + 1
        return f"{prefix}{n}"

    def unique_alias(self, alias: str) -> str:
        """The internal alias for a table alias: itself, or ``alias#2`` … if another scope has it."""
        if alias.lower() not in self._aliases:
            self._aliases.add(alias.lower())
            return alias
        k = 2
        while f"{alias}#{k}".lower() in self._aliases:
            k += 1
        self._aliases.add(f"{alias}#{k}".lower())
        return f"{alias}#{k}"

    def derived_alias(self) -> str:
        """The alias of a derived table written without one: ``_sub1``, ``_sub2`` …"""
        self._auto_alias += 1
        return f"_sub{self._auto_alias}"

    def check_alias(self, alias: str, node: exp.Expr, scope: Scope) -> None:
        if scope.entry(alias) is not None:
            raise self.err(BindError, "DUPLICATE_ALIAS", f"`{alias}` names two tables in FROM", node,
                           "give each occurrence its own alias, e.g. `S a JOIN S b`", alias=alias)

    def err(self, cls: type[SqlError], code: str, message: str, node: exp.Expr | None,
            hint: str | None = None, **params: object) -> SqlError:
        return cls(message, code=code, sql=self.sql, span=widen_to_call(self.sql, span_of(node)),
                   hint=hint, params=params)
