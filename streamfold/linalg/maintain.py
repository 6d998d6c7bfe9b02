"""Maintained views: a compiled program's inputs and views, kept up to date batch by batch.

A batch gives, per changed input, its factored change ``ΔX = U·V``. :meth:`Views.apply`
runs the batch's trigger program — every let with the *old* views, then ``x ⊕= U_x·V_x`` for
every changed view (seed 001 Fig. 5.12e) — or, when the cost model says re-evaluating is cheaper
(a change of high rank: Table 5.3's crossover), updates the inputs and re-evaluates.

**Drift.** A long chain of low-rank updates in floating point drifts from what re-evaluation
gives (the thesis does not discuss it). Every ``drift_every`` batches each view is checked
against its own statement with a random probe vector r (Freivalds' check, O(n²) per view):
``x·r`` against ``op(a, b)·r`` evaluated right to left from the other views — for an inverse,
``a·(x·r)`` against r. A view whose relative residual passes ``drift_tolerance`` is *re-anchored*:
it and every view after it are re-evaluated exactly, and the report records the residuals, the
views re-anchored and how far each had drifted from its exact value.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import fusion
from .compiler import Compiled
from .evaluate import evaluate
from .ir import Add, Expr, Inv, Mul, Scale, Var
from .lazy import MAX_RANK, MIN_ENTRIES, LazyBackend
from .machine import Machine
from .trigger import Change, Trigger

DRIFT_TOLERANCE = 1e-9
DRIFT_EVERY = 10


@dataclass(frozen=True)
class InputChange:
    """One input's change in a batch: ``ΔX = u·v`` (``structure`` says what u and v are)."""

    input: str
    u: Any
    v: Any
    rank: int
    structure: str

    @property
    def change(self) -> Change:
        return Change(self.input, self.rank, self.structure)


@dataclass
class Report:
    """What one batch did (the runtime writes it into the commit)."""

    strategy: str  # "incremental" or "reevaluate"
    ranks: dict[str, int]
    cost: int  # operations of the strategy taken (the cost model's count)
    incremental_cost: int
    reeval_cost: int
    estimate_s: dict[str, float]  # the machine model's estimate of both strategies
    deltas: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # view → (u, v|None) applied
    drift: dict[str, float] = field(default_factory=dict)  # residual per view, when checked
    reanchored: dict[str, float] = field(default_factory=dict)  # view → its drift from the exact value
    replaced: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # output view → (old, new) re-evaluated
    seconds: float = 0.0


class Views:
    """The inputs and every view of a compiled program, on a back-end."""

    def __init__(self, compiled: Compiled, backend: Any, *, strategy: str = "auto",
                 drift_tolerance: float = DRIFT_TOLERANCE, drift_every: int = DRIFT_EVERY,
                 machine: Machine | None = None, lazy_entries: int = MIN_ENTRIES, lazy_rank: int = MAX_RANK,
                 fuse: tuple[int, int] = (fusion.LARGE, fusion.THIN)) -> None:
        self.compiled = compiled
        self.backend = LazyBackend(backend, lazy_entries, lazy_rank)
        self.ring = compiled.program.semiring
        self.strategy = strategy
        self.drift_tolerance = drift_tolerance
        self.drift_every = drift_every
        self.machine = machine or Machine()
        self.values: dict[str, Any] = {}
        self._groups: dict[int, list[fusion.Group]] = {}  # per trigger (kept alive by the compiled program)
        self.fuse = fuse  # (views at least this large, operands at most this thin)
        self.batches = 0  # batches applied since the start (for the drift schedule)

    # -- loading -----------------------------------------------------------------------------------
    def load(self, inputs: Mapping[str, Any]) -> None:
        """Set the inputs and evaluate every view (the initialization phase)."""
        for name in self.compiled.program.input_names:
            self.values[name] = inputs[name]
        self.reevaluate()

    def restore(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)

    def reevaluate(self, start: int = 0, report: Report | None = None) -> None:
        """Evaluate the views from statement ``start`` on, from the inputs and earlier views
        (the old values of outputs are kept in ``report.replaced``)."""
        self._settle(self._recompute(start), report, measure=False)

    def _recompute(self, start: int) -> dict[str, Any]:
        old: dict[str, Any] = {}
        for s in self.compiled.anf.statements[start:]:
            if s.name in self.values:
                old[s.name] = self.values[s.name]
            self.values[s.name] = self.backend.materialize(evaluate(s.expr, self.values, self.backend))
        return old

    def _settle(self, old: dict[str, Any], report: Report | None, measure: bool) -> None:
        """Record what re-evaluated views replaced; free the old values."""
        outputs = {name for _, name in self.compiled.anf.outputs}
        for name, value in old.items():
            if report is not None and measure:
                report.reanchored[name] = self.backend.distance(value, self.values[name])
            if report is not None and name in outputs:
                report.replaced[name] = (value, self.values[name])
            else:
                self.backend.release(value)

    def outputs(self) -> dict[str, Any]:
        """Each output's value on the back-end (pending updates applied)."""
        return {out: self.value(name) for out, name in self.compiled.anf.outputs}

    def value(self, name: str) -> Any:
        """An input's or a view's value, with its pending updates applied."""
        return self.backend.flush(self.values[name])

    # -- a batch -----------------------------------------------------------------------------------
    def choose(self, changes: list[InputChange]) -> tuple[str, Trigger]:
        trigger = self.compiled.trigger(tuple(c.change for c in changes))
        if self.strategy in ("incremental", "reevaluate"):
            return self.strategy, trigger
        inc = self.machine.trigger_seconds(trigger, self.compiled)
        full = self.machine.reeval_seconds(self.compiled)
        return ("incremental" if inc < full else "reevaluate"), trigger

    def apply(self, changes: list[InputChange], check_drift: bool | None = None) -> Report:
        start = time.perf_counter()
        strategy, trigger = self.choose(changes)
        report = Report(strategy, {c.input: c.rank for c in changes},
                        trigger.cost if strategy == "incremental" else trigger.reeval_cost, trigger.cost,
                        trigger.reeval_cost,
                        {"incremental": self.machine.trigger_seconds(trigger, self.compiled),
                         "reevaluate": self.machine.reeval_seconds(self.compiled)})
        if strategy == "incremental":
            with self.backend.thin_products():
                self._incremental(trigger, changes, report)
        else:
            for c in changes:
                self.values[c.input] = self.backend.update(self.values[c.input], c.u, c.v)
                report.deltas[c.input] = (c.u, c.v)
            self.reevaluate(0, report)
        self.batches += 1
        due = self.drift_every > 0 and self.batches % self.drift_every == 0
        if strategy == "incremental" and (check_drift if check_drift is not None else due):
            with self.backend.thin_products():  # probes are matrix–vector products
                self.check_drift(report)
        report.seconds = time.perf_counter() - start
        return report

    def _incremental(self, trigger: Trigger, changes: list[InputChange], report: Report) -> None:
        env = dict(self.values)
        for c in changes:
            env[f"U_{c.input}"] = c.u
            env[f"V_{c.input}"] = c.v
        memo: dict[Expr, Any] = {}
        groups = self._groups.get(id(trigger))
        if groups is None:
            groups = self._groups[id(trigger)] = fusion.plan(trigger, self.compiled.anf.metas, *self.fuse)
        for i, let in enumerate(trigger.lets):  # with the old views; kept, as the updates replace them
            for g in groups:
                if g.first_let == i:
                    fusion.run_group(g, env, memo, self.backend, evaluate, trigger.lets)
            if let.name not in env:
                env[let.name] = self.backend.keep(evaluate(let.expr, env, self.backend, memo))
        updates = [(f.view, env[f.u], None if f.v is None else env[f.v]) for f in trigger.factored]
        for view, u, v in updates:
            self.values[view] = self.backend.update(self.values[view], u, v)
            report.deltas[view] = (u, v)
        used = {id(x) for _, u, v in updates for x in (u, v)}
        for let in trigger.lets:
            if id(env[let.name]) not in used:
                self.backend.release(env[let.name])

    def done(self, report: Report) -> None:
        """Free what a batch's report holds (its factors), once they are written."""
        for u, v in report.deltas.values():
            self.backend.release(u)
            if v is not None:
                self.backend.release(v)

    # -- drift -------------------------------------------------------------------------------------
    def residuals(self, seed: int = 0) -> dict[str, float]:
        """Each view against its statement, probed with a random vector (see the module doc)."""
        ring, backend = self.ring, self.backend
        rng = np.random.default_rng(seed)
        out: dict[str, float] = {}
        for s in self.compiled.anf.statements:
            m = self.compiled.anf.metas[s.name]
            r = _probe(rng, m.cols, ring.name)
            env = {**self.values, "__r": r}
            memo: dict[Expr, Any] = {}
            if isinstance(s.expr, Inv):  # a·(x·r) must give r back
                got = backend.to_numpy(evaluate(Mul(s.expr.arg, Mul(Var(s.name), Var("__r"))), env, backend, memo))
                out[s.name] = ring.distance(got, r)
                continue
            lhs = backend.to_numpy(evaluate(Mul(Var(s.name), Var("__r")), env, backend, memo))
            rhs = backend.to_numpy(evaluate(_push(s.expr, Var("__r")), env, backend, memo))
            out[s.name] = ring.distance(lhs, rhs)
        return out

    def check_drift(self, report: Report | None = None) -> dict[str, float]:
        """Probe every view; re-anchor from the first one past the tolerance. Returns the residuals."""
        if self.ring.exact:
            return {}
        res = self.residuals(self.batches)
        if report is not None:
            report.drift = res
        bad = [i for i, s in enumerate(self.compiled.anf.statements) if res[s.name] > self.drift_tolerance]
        if bad:
            self.reanchor(bad[0], report)
        return res

    def reanchor(self, start: int = 0, report: Report | None = None) -> None:
        """Re-evaluate the views from statement ``start`` on, recording how far each had drifted."""
        self._settle(self._recompute(start), report, measure=True)


def _probe(rng: np.random.Generator, n: int, ring: str) -> np.ndarray:
    if ring == "boolean":
        return rng.random((n, 1)) < 0.5
    return rng.standard_normal((n, 1))


def _push(e: Expr, r: Expr) -> Expr:
    """``e·r`` with the product pushed inside, so only matrix–vector products are computed."""
    if isinstance(e, Mul):
        return _push(e.left, _push(e.right, r))
    if isinstance(e, Add):
        return Add(_push(e.left, r), _push(e.right, r))
    if isinstance(e, Scale):
        return Scale(e.coef, _push(e.arg, r))
    return Mul(e, r)
