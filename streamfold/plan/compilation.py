"""One query's compilation, each phase kept: nothing parses the query's text twice.

::

    text ──parse──▶ parsed ──bind(catalog)──▶ bound ──normalize──▶ normalized ──incrementalize(policy)──▶ plan
                      │                                                 │
                      └──▶ spark_sql (the text Spark analyses)          └──▶ replanned(mappings, heavy)

A :class:`Compilation` is the text, the catalog it binds against and the join matrix policy it
plans with; each phase is computed on first use and kept (Spark Catalyst's ``QueryExecution``
keeps its phases the same way). The plan it makes carries it (``plan.compilation``), so the
runtime re-plans a join matrix's new mapping or a hybrid's heavy keys from the kept normalized
query (:meth:`Compilation.replanned`), and asks it for the query Spark analyses for the output
columns (:attr:`Compilation.spark_sql`), without parsing or binding again. A phase that fails
raises its coded error each time it is asked for, and is not kept.

The parse needs no catalog: ``Compilation(text)`` parses (and reports a syntax error) before the
inputs' schemas are known, and :meth:`Compilation.against` binds the same parse against them.
Nothing here changes once computed; a compilation is shared freely.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cached_property
from typing import Any

from ..errors import StreamfoldError
from ..ir.rel import Rel
from ..sql import BoundQuery, Catalog, ParsedQuery, bind, parse_query
from ..sql.batch_text import null_observable_in
from .incrementalize import normalized, plan_normalized
from .matrix import DEFAULT_POLICY, MatrixPolicy
from .model import IncrementalPlan


class Compilation:
    """``text`` compiled against ``catalog`` with join matrix ``policy``, phase by phase (see the
    module docstring). Without a catalog only :attr:`parsed` and :attr:`spark_sql` can be had."""

    def __init__(self, text: str, catalog: Catalog | None = None, policy: MatrixPolicy = DEFAULT_POLICY,
                 parsed: ParsedQuery | None = None, push_down_groups: bool = True) -> None:
        if parsed is not None and parsed.sql != text:
            raise StreamfoldError("internal: a compilation given another text's parse", code="INTERNAL")
        self.text = text
        self.catalog = catalog
        self.policy = policy
        self.push_down_groups = push_down_groups  # False: filters on group keys stay above (A/B)
        if parsed is not None:
            self.__dict__["parsed"] = parsed  # (cached_property's slot: the parse is shared)

    def against(self, catalog: Catalog, policy: MatrixPolicy | None = None,
                push_down_groups: bool | None = None) -> Compilation:
        """The same text, its parse shared (parsed now if it was not), bound against ``catalog``
        and planned with ``policy`` and ``push_down_groups`` (this compilation's by default)."""
        return Compilation(self.text, catalog, self.policy if policy is None else policy, self.parsed,
                           self.push_down_groups if push_down_groups is None else push_down_groups)

    @cached_property
    def parsed(self) -> ParsedQuery:
        """The text parsed (``PARSE_ERROR`` and the like if it does not parse)."""
        return parse_query(self.text)

    @cached_property
    def bound(self) -> BoundQuery:
        """The parse bound against the catalog (``UNKNOWN_COLUMN`` and the like)."""
        if self.catalog is None:
            raise StreamfoldError("internal: a query compiled without a catalog cannot be bound", code="INTERNAL")
        return bind(self.parsed, self.catalog)

    @cached_property
    def normalized(self) -> Rel:
        """The bound query normalized: unnested, fused, filters pushed (``passes/``)."""
        return normalized(self.bound, self.push_down_groups)

    @cached_property
    def plan(self) -> IncrementalPlan:
        """The incremental plan, with the mappings the policy starts join matrices with."""
        return self._planned(None, None)

    @cached_property
    def spark_sql(self) -> str:
        """The query as Spark analyses it for the output columns: iterations unrolled, a recursive
        CTE's parts joined by ``UNION ALL`` (:func:`..sql.iterate.spark_schema_text`)."""
        return self.parsed.spark_sql()

    @cached_property
    def batch_sql(self) -> str:
        """The batch query as the recompute strategy runs it (:meth:`..sql.parse.ParsedQuery.batch_sql`):
        :attr:`spark_sql` with division that gives NULL for a zero divisor."""
        return self.parsed.batch_sql()

    @cached_property
    def recomputable(self) -> bool:
        """Whether Spark's batch plan of the query gives the answer the incremental plan keeps:
        not with an IN subquery whose NULL a row shows (:func:`..sql.batch_text.null_observable_in`)."""
        return not null_observable_in(self.parsed.tree)

    def replanned(self, mappings: dict[str, tuple[int, int]],
                  heavy: dict[str, tuple[Any, ...]] | None = None,
                  orders: dict[str, tuple[str, ...]] | None = None) -> IncrementalPlan:
        """The plan again with these join matrix mappings and hybrids' heavy keys (by left state;
        others ignored) and delta terms' join orders (by start state), from the kept normalized
        query: the same states, other programs."""
        return self._planned(mappings, heavy, orders)

    def _planned(self, mappings: dict[str, tuple[int, int]] | None,
                 heavy: dict[str, tuple[Any, ...]] | None,
                 orders: dict[str, tuple[str, ...]] | None = None) -> IncrementalPlan:
        return replace(plan_normalized(self.bound, self.normalized, mappings, self.policy, heavy, orders),
                       compilation=self)

    def __repr__(self) -> str:
        kept = [p for p in ("parsed", "bound", "normalized", "plan", "spark_sql") if p in self.__dict__]
        text = self.text if len(self.text) <= 40 else self.text[:40] + "…"
        return f"Compilation({text!r}, kept: {', '.join(kept) or 'nothing yet'})"


def compilation_of(plan: IncrementalPlan) -> Compilation:
    """The compilation ``plan`` came from; for a plan made without one (by ``incrementalize``
    directly) a compilation of its text against its own sources."""
    if isinstance(plan.compilation, Compilation):
        return plan.compilation
    return Compilation(plan.sql, Catalog(plan.sources), plan.policy)


def replanned(plan: IncrementalPlan, mappings: dict[str, tuple[int, int]],
              heavy: dict[str, tuple[Any, ...]] | None = None,
              orders: dict[str, tuple[str, ...]] | None = None) -> IncrementalPlan:
    """``plan`` compiled again with these join matrix mappings and hybrids' heavy keys (by left
    state; others ignored), from its compilation: the runtime's re-plan when a matrix migrates
    or a hashed join becomes a hybrid. The delta terms' join orders are ``plan``'s unless
    ``orders`` gives others (the re-plan of :mod:`streamfold.runtime.features.join_order`)."""
    return compilation_of(plan).replanned(mappings, heavy, dict(plan.orders) if orders is None else orders)
