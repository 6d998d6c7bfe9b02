"""The compiler's pipeline (seed 001 Fig. 5.11): program → views → trigger programs.

::

    check semiring → simplify (statements) → search (each statement) → ANF      [once]
    → derive (Fig. 5.8) → factorize (U·V, Woodbury) → trigger program          [per kind of batch]

A trigger program depends on which inputs a batch changes, the rank of each change and its
structure (a batch of row updates is a selector times the rows' changes), so it is compiled
per kind of batch and kept: a stream of rank-1 row updates compiles one trigger program.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .anf import Anf, to_anf
from .api import Program
from .derive import derive
from .factorize import factorize
from .meta import Inferrer
from .search import DEFAULT_BUDGET, SearchResult, search
from .simplify import Statement, Statements, check_semiring, to_statements
from .trigger import Change, Trigger


@dataclass
class Compiled:
    program: Program
    statements: Statements  # after simplification, before the search
    searches: dict[str, SearchResult]  # per statement
    anf: Anf
    reeval_cost: int  # operations to evaluate every view from the inputs
    _triggers: dict[tuple[Change, ...], Trigger] = field(default_factory=dict)

    @property
    def semiring(self):  # noqa: ANN201 - Semiring
        return self.program.semiring

    def trigger(self, changes: tuple[Change, ...]) -> Trigger:
        """The trigger program for a batch with these changes (compiled once, then kept)."""
        key = tuple(sorted(changes, key=lambda c: c.input))
        if key not in self._triggers:
            derived = derive(self.anf, [c.input for c in key])
            self._triggers[key] = factorize(self.anf, derived, self.program.semiring, key, self.reeval_cost)
        return self._triggers[key]

    def crossover(self, input: str, structure: str = "selector") -> int | None:  # noqa: A002
        """The smallest rank of a change to ``input`` at which re-evaluating costs no more than
        the trigger program (by the cost model), or None if the trigger is cheaper at every rank."""
        m = self.anf.metas[input]
        hi = min(m.rows, m.cols)
        if self.trigger((Change(input, hi, structure),)).cost < self.reeval_cost:
            return None
        lo = 1
        if self.trigger((Change(input, lo, structure),)).cost >= self.reeval_cost:
            return lo
        while hi - lo > 1:  # the trigger's cost grows with the rank
            mid = (lo + hi) // 2
            if self.trigger((Change(input, mid, structure),)).cost >= self.reeval_cost:
                hi = mid
            else:
                lo = mid
        return hi


def compile_program(prog: Program, budget: int = DEFAULT_BUDGET) -> Compiled:
    check_semiring(prog)
    stmts = to_statements(prog)
    infer = Inferrer(stmts.inputs)
    searches: dict[str, SearchResult] = {}
    chosen = []
    for s in stmts.statements:
        result = search(s.expr, infer, prog.semiring, budget)
        searches[s.name] = result
        chosen.append(Statement(s.name, result.best.expr))
        infer.bind(s.name, infer(result.best.expr))
    anf = to_anf(Statements(tuple(chosen), stmts.outputs, stmts.inputs))
    view_infer = Inferrer(anf.metas)
    reeval = sum(view_infer.op_cost(s.expr) for s in anf.statements)
    return Compiled(prog, stmts, searches, anf, reeval)
