"""``streamfold linalg explain``: what the compiler made of a program, phase by phase.

It prints the simplified statements and what the search did with each (and a cheaper program
it refused as numerically unstable), the views (the ANF statements with their
meta-information and cost), and for each input a trigger program — each view's update, its
rank, the rules that shaped it, and its cost against re-evaluating — with the rank of a change
beyond which re-evaluating is cheaper. Costs are the thesis's operation counts; the machine
model's seconds are shown beside the totals.
"""

from __future__ import annotations

import json
from typing import Any

from .compiler import Compiled
from .machine import Machine
from .meta import Inferrer
from .printer import show
from .trigger import Change, Trigger

STRUCTURES = {"rows": "selector", "cols": "selector_t", "dense": "dense"}
_WHAT = {"selector": "U_{x} selects the rows touched", "selector_t": "V_{x} selects the columns touched",
         "dense": "dense thin factors"}


def ops(v: float) -> str:
    """An operation count, short: 950, 4.02e6, 1.60e10."""
    if v < 10_000:
        return str(int(v))
    mantissa, exp = f"{v:.2e}".split("e")
    return f"{mantissa}e{int(exp)}"


def triggers(compiled: Compiled, rank: int, structure: str) -> list[Trigger]:
    return [compiled.trigger((Change(name, min(rank, _full(compiled, name)), structure),))
            for name in compiled.program.input_names]


def _full(compiled: Compiled, name: str) -> int:
    m = compiled.anf.metas[name]
    return min(m.rows, m.cols)


def explain_text(compiled: Compiled, rank: int = 1, structure: str = "selector", title: str | None = None) -> str:
    prog, anf = compiled.program, compiled.anf
    machine = Machine()
    lines = [f"program{' ' + title if title else ''} ({prog.semiring.name} semiring)", "inputs"]
    for d in prog.inputs:
        lines.append(f"  {d.name}  {anf.metas[d.name].describe()}")
    lines.append("statements (simplified)")
    for s in compiled.statements.statements:
        lines.append(f"  {s.name} := {show(s.expr)}")
    lines.append("search (per statement, cheapest first over the equivalence rules)")
    for name, r in compiled.searches.items():
        kept = "kept as written" if r.best.expr == r.start.expr else f"rewritten by {', '.join(r.best.rules)}"
        lines.append(f"  {name}: {r.explored} programs expanded, {r.applications} rule applications, "
                     f"{r.cache_hits} revisits; {kept} (cost {ops(r.start.cost)} → {ops(r.best.cost)})")
        if r.best.expr != r.start.expr:
            lines.append(f"    {name} := {show(r.best.expr)}")
        if r.unstable is not None:
            lines.append(f"    not chosen: {show(r.unstable.expr)} (cost {ops(r.unstable.cost)}), reached by "
                         f"{', '.join(r.unstable.rules)} — numerically unstable")
    lines.append("views (ANF)")
    width = max((len(s.name) for s in anf.statements), default=1)
    infer = Inferrer(anf.metas)
    for s in anf.statements:
        lines.append(f"  {s.name:<{width}} := {show(s.expr):<24} {anf.metas[s.name].describe():<28} "
                     f"cost {ops(infer.op_cost(s.expr))}")
    lines.append("outputs")
    for out, view in anf.outputs:
        lines.append(f"  {out} = {view}")
    lines.append(f"re-evaluation: {ops(compiled.reeval_cost)} operations "
                 f"(machine model {machine.reeval_seconds(compiled):.3g} s)")
    for trigger in triggers(compiled, rank, structure):
        change = trigger.changes[0]
        lines.append("")
        lines.append(f"trigger program for Δ{change.input} of rank {change.rank} "
                     f"(Δ{change.input} = U_{change.input}·V_{change.input}, "
                     f"{_WHAT[change.structure].format(x=change.input)})")
        lines.extend(_trigger_lines(trigger, compiled, machine))
    return "\n".join(lines) + "\n"


def _trigger_lines(trigger: Trigger, compiled: Compiled, machine: Machine) -> list[str]:
    lines = []
    for s in trigger.lets:
        lines.append(f"  let {s.name} := {show(s.expr)}    [{trigger.metas[s.name].describe()}]")
    ring = compiled.program.semiring
    plus = "+=" if ring.name == "arithmetic" else "⊕="
    lines.append("  then, with the old views read, update:")
    for f in trigger.factored:
        update = f"{f.view} {plus} {f.u}" + ("" if f.v is None else f"·{f.v}")
        rank = "dense" if f.dense else f"rank {f.rank}"
        rules = f"  [{', '.join(f.rules)}]" if f.rules else ""
        vs = "" if f.view in compiled.program.input_names else f" vs re-evaluating {ops(f.reeval_cost)}"
        lines.append(f"    {update:<28} {rank:<8} ops {ops(f.cost + f.update_cost)}{vs}{rules}")
    lines.append(f"  total: {ops(trigger.cost)} operations against {ops(trigger.reeval_cost)} re-evaluating "
                 f"({trigger.gain:.0f}×; machine model {machine.trigger_seconds(trigger, compiled):.3g} s against "
                 f"{machine.reeval_seconds(compiled):.3g} s)")
    change = trigger.changes[0]
    cross = compiled.crossover(change.input, change.structure)
    lines.append(f"  re-evaluating is cheaper from rank {cross} of Δ{change.input}" if cross is not None
                 else f"  the trigger program is cheaper at every rank of Δ{change.input}")
    return lines


def explain_json(compiled: Compiled, rank: int = 1, structure: str = "selector") -> str:
    prog, anf = compiled.program, compiled.anf
    infer = Inferrer(anf.metas)
    out: dict[str, Any] = {
        "semiring": prog.semiring.name,
        "inputs": {d.name: _meta(anf.metas[d.name]) for d in prog.inputs},
        "statements": {s.name: show(s.expr) for s in compiled.statements.statements},
        "search": {name: {"expanded": r.explored, "applications": r.applications, "revisits": r.cache_hits,
                          "chosen": show(r.best.expr), "rules": list(r.best.rules), "cost": r.best.cost,
                          "unstable": None if r.unstable is None else
                          {"expression": show(r.unstable.expr), "cost": r.unstable.cost,
                           "rules": list(r.unstable.rules)}}
                   for name, r in compiled.searches.items()},
        "views": {s.name: {"expression": show(s.expr), **_meta(anf.metas[s.name]), "cost": infer.op_cost(s.expr)}
                  for s in anf.statements},
        "outputs": dict(anf.outputs),
        "reeval_cost": compiled.reeval_cost,
        "triggers": [],
    }
    for t in triggers(compiled, rank, structure):
        c = t.changes[0]
        out["triggers"].append({
            "input": c.input, "rank": c.rank, "structure": c.structure,
            "lets": [{"name": s.name, "expression": show(s.expr), **_meta(t.metas[s.name])} for s in t.lets],
            "updates": [{"view": f.view, "u": f.u, "v": f.v, "rank": f.rank, "dense": f.dense,
                         "rules": list(f.rules), "cost": f.cost, "update_cost": f.update_cost,
                         "reeval_cost": f.reeval_cost} for f in t.factored],
            "cost": t.cost, "reeval_cost": t.reeval_cost,
            "crossover_rank": compiled.crossover(c.input, c.structure),
        })
    return json.dumps(out, indent=2) + "\n"


def _meta(m: Any) -> dict[str, Any]:
    return {"rows": m.rows, "cols": m.cols, "symmetric": m.symmetric, "rank": m.rank, "structure": m.structure}
