"""The parts of an incremental plan as they are being built: states, steps, names, notes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..ir.rel import DeltaScan, Field, Rel, StateScan
from .matrix import DEFAULT_POLICY, MatrixPolicy
from .model import DeltaJoin, Diffusion, ExactIteration, Fixpoint, JoinMatrix, Merge, SkewWatch, State, Step, Temp
from .simplify import simplify


@dataclass
class PlanBuilder:
    states: list[State] = field(default_factory=list)
    init: list[Step] = field(default_factory=list)
    delta: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    matrices: list[JoinMatrix] = field(default_factory=list)
    watched: list[SkewWatch] = field(default_factory=list)  # hashed equi-joins the runtime may switch
    late: list[tuple[str, Rel]] = field(default_factory=list)  # a time bound's live rows, the rows it drops
    expiring: list[tuple[str, Rel]] = field(default_factory=list)  # … and its live rows the bound no longer passes
    clocks: set[str] = field(default_factory=set)  # the kinds of clock the time bounds read
    event_time: Rel | None = None  # the event-time clock: the largest event time of a batch's rows
    late_margin: int | None = None  # the narrowest event-time bound's interval (µs)
    # (n, m) per join matrix (named by its left state) to plan with instead of the square one:
    # the mapping the runtime moved to (streamfold.plan.matrix.decide)
    mappings: dict[str, tuple[int, int]] = field(default_factory=dict)
    policy: MatrixPolicy = DEFAULT_POLICY
    # a hybrid join's heavy keys, by left state (under policy "auto": the joins switched to hybrids)
    heavy: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    # the order of the other inputs' states each delta term joins them in, by its start state
    # (the runtime's re-plan from measured selectivities, runtime/features/join_order.py)
    orders: dict[str, tuple[str, ...]] = field(default_factory=dict)
    delta_joins: list[DeltaJoin] = field(default_factory=list)
    _names: set[str] = field(default_factory=set)

    def name(self, base: str) -> str:
        """``base``, or ``base2``, ``base3`` … if it is taken (states and temps share one space)."""
        name, k = base, 2
        while name in self._names:
            name = f"{base}{k}"
            k += 1
        self._names.add(name)
        return name

    def add_state(self, state: State, program: Rel) -> None:
        """A state with the program computing its delta each batch (a step of h)."""
        self._names.add(state.name)
        self.states.append(state)
        self.delta.append(Merge(state.name, simplify(program)))

    def add_static(self, state: State, program: Rel) -> None:
        """A state computed once, before batch 0, from static tables."""
        self._names.add(state.name)
        self.states.append(state)
        self.init.append(Merge(state.name, simplify(program)))

    def add_loop(self, state: State, loop: Fixpoint | ExactIteration | Diffusion) -> None:
        """A state whose delta a loop in the runtime computes (a recursive CTE, an iteration)."""
        assert loop.state == state.name
        self._names.add(state.name)
        self.states.append(state)
        self.delta.append(loop)

    def take_steps(self, since: int, loop: str) -> tuple[Step, ...]:
        """Remove from ``delta[since:]`` the steps that read the stream ``loop`` (directly or
        through one another), and return them in order; the others stay."""
        taken: list[Step] = []
        names: set[str] = set()
        kept: list[Step] = []
        for step in self.delta[since:]:
            nodes = [n for r in step.reads() for n in r.walk()]
            if any(isinstance(n, DeltaScan) and n.table == loop for n in nodes) or any(
                    isinstance(n, StateScan) and n.state in names for n in nodes):
                taken.append(step)
                names.add(step.state)
            else:
                kept.append(step)
        self.delta[since:] = kept
        return tuple(taken)

    def add_temp(self, base: str, program: Rel) -> str:
        """An intermediate result of a batch several later steps read; returns its name."""
        name = self.name(base)
        self.delta.append(Temp(name, simplify(program)))
        return name

    def state(self, name: str) -> State:
        return next(s for s in self.states if s.name == name)

    def fields(self, name: str) -> tuple[Field, ...]:
        return self.state(name).fields

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)
