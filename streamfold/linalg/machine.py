"""A machine model: the seconds an expression takes, to choose between a trigger program and
re-evaluation per batch.

The thesis's cost model counts arithmetic operations (Fig. 5.9), which is what the compiler's
search minimises. Choosing at run time needs seconds, and there a product of an n×n view with
an n×k factor is not k·n² operations at BLAS speed: for small k it streams the whole view from
memory for little arithmetic. So each operation is charged the larger of its arithmetic time
and its memory time (a roofline): ``max(ops / rate, bytes / bandwidth)``, with a rate per
semiring (the min-plus product has no BLAS and runs at NumPy's element-wise speed).

The constants are this machine's order of magnitude (2 cores, OpenBLAS); ``streamfold bench
linalg`` measures where the real crossover falls and reports the runtime's choice beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .compiler import Compiled
from .ir import Expr, Mul, Transpose, Var
from .meta import SELECTOR, SELECTOR_T, Inferrer
from .trigger import Trigger

RATES = {"arithmetic": 1.0e10, "boolean": 1.0e10, "tropical": 4.0e8}  # multiply-adds (⊗⊕) per second


@dataclass
class Machine:
    bandwidth: float = 4.0e9  # bytes per second
    rates: dict[str, float] = field(default_factory=lambda: dict(RATES))
    _reeval: dict[int, float] = field(default_factory=dict)
    _triggers: dict[int, tuple[Trigger, float]] = field(default_factory=dict)  # the trigger kept: ids stay unique

    def _seconds(self, ops: int, nbytes: int, ring: str) -> float:
        return max(ops / self.rates[ring], nbytes / self.bandwidth)

    def expr_seconds(self, exprs: list[Expr], infer: Inferrer, ring: str, done: set[Expr] | None = None) -> float:
        seen: set[Expr] = set() if done is None else done
        total = 0.0
        stack = list(exprs)
        while stack:
            e = stack.pop()
            if e in seen or isinstance(e, (Var, Transpose)):
                continue
            seen.add(e)
            kids = e.children()
            stack.extend(kids)
            out = infer(e)
            metas = [infer(k) for k in kids]
            if isinstance(e, Mul) and any(m.structure in (SELECTOR, SELECTOR_T) for m in metas):
                nbytes = 16 * out.entries  # a gather
            else:
                nbytes = 8 * (out.entries + sum(m.entries for m in metas))
            total += self._seconds(infer.op_cost(e), nbytes, ring)
        return total

    def trigger_seconds(self, trigger: Trigger, compiled: Compiled) -> float:
        key = id(trigger)
        if key not in self._triggers:
            self._triggers[key] = (trigger, self._trigger_seconds(trigger, compiled))
        return self._triggers[key][1]

    def _trigger_seconds(self, trigger: Trigger, compiled: Compiled) -> float:
        ring = compiled.program.semiring.name
        infer = Inferrer(compiled.anf.metas)
        for c in trigger.changes:
            mu, mv = c.factor_metas(compiled.anf.metas[c.input])
            infer.bind(f"U_{c.input}", mu)
            infer.bind(f"V_{c.input}", mv)
        for name, m in trigger.metas.items():
            infer.bind(name, m)
        total = self.expr_seconds([s.expr for s in trigger.lets], infer, ring)
        for f in trigger.factored:
            m = compiled.anf.metas[f.view]
            selected = f.v is not None and infer.env.get(f.u) is not None and infer.env[f.u].structure == SELECTOR
            nbytes = 16 * f.update_cost if selected else 16 * m.entries
            total += self._seconds(f.update_cost, nbytes, ring)
        return total

    def reeval_seconds(self, compiled: Compiled) -> float:
        key = id(compiled)
        if key not in self._reeval:
            infer = Inferrer(compiled.anf.metas)
            self._reeval[key] = self.expr_seconds([s.expr for s in compiled.anf.statements], infer,
                                                  compiled.program.semiring.name)
        return self._reeval[key]
