"""Reconfiguring a running query (Fries, seed 002 Ch. 3, at micro-batch granularity).

A micro-batch is an epoch: every batch is processed under one plan, so a reconfiguration that
applies between two batches to the whole plan is conflict-serializable (Fries' Lemma 3.2) —
no batch is processed partly by the old plan and partly by the new. What remains is to make the
switch cheap: the new plan's states that equal old ones are kept, not rebuilt.

**restate** (the default): the new query's answer over all the data, exactly. A state of the new
plan is *shared* with the old plan when both have it under the same name with the same definition
(key, columns, monoids) and the same program, reading only shared states (the greatest such set,
:func:`shared_states`): its rows are then the same function of the same history, so it is kept.
The others are built from the history — every file the committed batches consumed, which the
checkpoint lists. A change to the answer only (a HAVING threshold, an output expression) keeps
every state and costs one batch.

**from now on** (Fries' own): the new logic applies to the rows that arrive after the boundary;
what the states hold stays. Each state of the new plan must be an old state carried over by a
state transformation T (:func:`transforms`): same name, role and key; columns kept as they are,
a new column starting at its monoid's identity (0, or NULL for min and max — the seed's "pad with
nulls"), a dropped one dropped. What has no such T is refused (``RECONFIGURE_CANNOT_TRANSFORM``):
a new state, a changed key, a changed column type — Fries changes operator logic, not topology —
and a changed iteration. A changed state over a source with deletions is refused too
(``RECONFIGURE_FROM_NOW_ON_DELETES``): a deletion of a row counted under the old logic would be
subtracted under the new one. States that hold rows under older logic are *mixed*; a later
restate rebuilds them rather than keep them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..ir.rel import DeltaScan, StateScan
from ..plan.model import LOOPS, IncrementalPlan, State, Step

if TYPE_CHECKING:
    from ..runtime.engine import Engine

SEMANTICS = ("restate", "from now on")


@dataclass(frozen=True)
class Prepared:
    """A reconfiguration checked against the plan it replaces, ready to install."""

    plan: IncrementalPlan
    semantics: str
    keep: dict[str, str]  # new state -> old state whose rows it takes
    rebuild: tuple[str, ...]  # states built from the history (restate)
    mixed: tuple[str, ...]  # states holding rows under older logic afterwards

    def summary(self) -> dict[str, object]:
        return {"semantics": self.semantics, "kept_states": sorted(self.keep), "rebuilt_states": list(self.rebuild),
                "mixed_states": list(self.mixed)}


def normalize_semantics(value: str | None) -> str:
    text = (value or "restate").strip().lower().replace("_", " ").replace("-", " ")
    if text not in SEMANTICS:
        raise UsageError(f"unknown reconfiguration semantics {value!r}", code="BAD_SEMANTICS",
                         params={"semantics": value}, hint="use restate (the default) or from now on")
    return text


def prepare(engine: Engine, plan: IncrementalPlan, semantics: str, mixed: frozenset[str]) -> Prepared:
    """Decide what each of ``plan``'s states takes from the running plan; coded errors if Spark
    rejects the query, or if ``semantics`` cannot be kept."""
    from ..plan.answer_key import answer_key
    from ..runtime.bundle import spark_output_schema
    from ..sql import Catalog

    scratch = engine.spark.newSession()  # its temp views are its own
    schema = spark_output_schema(scratch, plan, Catalog(plan.sources))
    engine.sinks.check_answer([(f.name, f.dataType.simpleString()) for f in schema.fields], answer_key(plan))
    old = engine.plan
    stored = [s for s in plan.states if not s.static]
    if semantics == "restate":
        keep = {n: n for n in sorted(shared_states(old, plan) - mixed)}
        return Prepared(plan, semantics, keep, tuple(s.name for s in stored if s.name not in keep), ())
    found = transforms(old, plan)
    changed = {n for n in found if not _same(old, plan, n)}
    changed_closure = _readers_of(plan, changed | (set(found) & mixed))
    return Prepared(plan, semantics, found, (), tuple(sorted(changed_closure)))


def shared_states(old: IncrementalPlan, new: IncrementalPlan) -> set[str]:
    """The stored states of ``new`` equal to ``old``'s of the same name over any data: same
    definition and program, reading only states that are themselves shared (greatest fixpoint)."""
    old_steps, new_steps = _steps(old), _steps(new)
    shared = {n for n, step in new_steps.items() if old_steps.get(n) == step and _defs(old).get(n) == _defs(new).get(n)}
    changed = True
    while changed:
        changed = False
        for n in sorted(shared):
            if not _reads(new_steps[n]) <= shared:
                shared.discard(n)
                changed = True
    return {n for n in shared if n in _defs(new) and not _defs(new)[n].static}


def transforms(old: IncrementalPlan, new: IncrementalPlan) -> dict[str, str]:
    """For "from now on": each stored state of ``new`` → the old state it is carried over from."""
    olds, news = _defs(old), _defs(new)
    weighted = {s.name.lower() for s in new.streams if s.weighted}
    sources = _sources(new)
    old_steps, new_steps = _steps(old), _steps(new)
    out: dict[str, str] = {}
    for name, state in news.items():
        if state.static:
            continue
        before = olds.get(name)

        def refuse(reason: str, state: str = name) -> UsageError:
            return UsageError(f"from now on cannot carry state {state} over: {reason}",
                              code="RECONFIGURE_CANNOT_TRANSFORM", params={"state": state, "reason": reason},
                              hint="reconfigure with restate, which builds the new plan's states from the history")

        if before is None or before.static:
            raise refuse("the new query needs it and the running one has no such state")
        if before.role != state.role or before.key != state.key:
            raise refuse(f"its key changes from {_names(before.key)} to {_names(state.key)}")
        had = {c.name: c for c in before.columns}
        for c in state.columns:
            if c.name in had and (had[c.name].type != c.type or had[c.name].monoid != c.monoid):
                raise refuse(f"column {c.name} changes type or merge")
        step, old_step = new_steps[name], old_steps.get(name)
        if step != old_step and (isinstance(step, LOOPS) or isinstance(old_step, LOOPS)):
            raise refuse("it is an iteration's, and iterations are not changed while they run")
        padded = any(c.name not in had for c in state.columns)
        if (step != old_step or padded) and sources[name] & weighted:
            shown = sorted(sources[name] & weighted)[0]
            raise UsageError(f"from now on cannot change state {name}: source {shown} deletes rows, and a deletion "
                             f"of a row counted under the old logic would be taken away under the new",
                             code="RECONFIGURE_FROM_NOW_ON_DELETES", params={"state": name, "source": shown},
                             hint="reconfigure with restate, exact over all the data")
        out[name] = name
    return out


# -- the plans' steps as a graph -----------------------------------------------------------------
def _defs(plan: IncrementalPlan) -> dict[str, State]:
    return {s.name: s for s in plan.states}


def _steps(plan: IncrementalPlan) -> dict[str, Step]:
    return {s.state: s for s in plan.init + plan.delta}


def _same(old: IncrementalPlan, new: IncrementalPlan, name: str) -> bool:
    return _steps(old).get(name) == _steps(new).get(name) and _defs(old).get(name) == _defs(new).get(name)


def _reads(step: Step) -> set[str]:
    """The other states ``step`` reads."""
    return {n.state for r in step.reads() for n in r.walk() if isinstance(n, StateScan) and n.state != step.state}


def _sources(plan: IncrementalPlan) -> dict[str, set[str]]:
    """Per step, the stream sources its rows come from, through the states it reads."""
    steps = _steps(plan)
    direct = {n: {d.table.lower() for r in s.reads() for d in r.walk() if isinstance(d, DeltaScan)}
              for n, s in steps.items()}
    out = {n: set(v) for n, v in direct.items()}
    changed = True
    while changed:
        changed = False
        for n, s in steps.items():
            for m in _reads(s):
                if m in out and not out[m] <= out[n]:
                    out[n] |= out[m]
                    changed = True
    return out


def _readers_of(plan: IncrementalPlan, names: set[str]) -> set[str]:
    """``names`` and every stored state that reads one of them, directly or not."""
    steps = _steps(plan)
    out = set(names)
    changed = True
    while changed:
        changed = False
        for n, s in steps.items():
            if n not in out and _reads(s) & out:
                out.add(n)
                changed = True
    return {n for n in out if n in _defs(plan) and not _defs(plan)[n].static}


def _names(fields: tuple) -> str:
    return "(" + ", ".join(f.name for f in fields) + ")"
