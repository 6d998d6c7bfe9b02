"""The window calls of one SELECT block, gathered while its select list is bound.

Each distinct call (:class:`~streamfold.ir.window.WindowCall`) becomes one ``_win<n>`` column of
a :class:`~streamfold.ir.window.Window` node put between the block's rows and its select list:
over FROM … WHERE in a plain block, over the GROUP BY (and HAVING) in an aggregate one, whose
calls are lifted over the aggregate's output as the select list is (Spark evaluates windows
after HAVING and before DISTINCT, ORDER BY and LIMIT).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from ...ir.expr import Column, Expr
from ...ir.rel import Rel
from ...ir.window import Window, WindowCall
from .context import BindContext


class WindowCalls:
    """The ``on_window`` hook of a block's select list: each call's stand-in column."""

    def __init__(self, ctx: BindContext) -> None:
        self.ctx = ctx
        self.calls: dict[WindowCall, tuple[str, exp.Expr]] = {}

    def __call__(self, call: WindowCall, node: exp.Expr) -> Expr:
        if call not in self.calls:
            self.calls[call] = (self.ctx.fresh("_win"), node)
        return Column(self.calls[call][0], call.type)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(n for n, _ in self.calls.values())

    def over(self, rel: Rel, lift: Callable[[Expr, exp.Expr], Expr] | None = None) -> Rel:
        """``rel`` with a column per call (the calls lifted by ``lift`` first), or ``rel`` itself."""
        if not self.calls:
            return rel
        calls = []
        for call, (name, node) in self.calls.items():
            lifted = lift(call, node) if lift is not None else call
            assert isinstance(lifted, WindowCall)
            calls.append((name, lifted))
        return Window(rel, tuple(calls))
