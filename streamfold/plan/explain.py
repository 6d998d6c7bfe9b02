"""``explain``: the incremental plan as text a database engineer can follow, or as JSON.

The text has five parts: the sources, the states (each with its lineage key and, per column,
the monoid that merges it), h (the per-batch program, one SQL statement per state delta),
⊗ (the merge of each state with its delta) and a (the answer over the merged states).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..ir.printer import display_name, quote, sql
from ..ir.sqltext import rel_sql
from ..ir.rel import WEIGHT, DeltaScan, Iterate, Recursive, Rel, Scan, SortKey, StateScan, written_name
from .runs import candidates
from .model import FIXPOINT_MAX_ROUNDS, Diffusion, ExactIteration, Fixpoint, IncrementalPlan, Merge, State, StateRole, Step, Temp


def explain_text(plan: IncrementalPlan) -> str:
    out: list[str] = []
    out.append("Query")
    out += _indent(plan.sql.strip())
    out.append("")
    out.append("Sources")
    width = max(len(s.name) for s in plan.sources)
    for s in plan.sources:
        kind = "static table" if s.static else ("stream with deletions (_weight)" if s.weighted else "stream, insert-only")
        cols = ", ".join(f"{quote(c)} {t.sql()}" for c, t in s.columns)
        out.append(f"  {s.name:<{width}}  {kind}: {cols}")
    out.append("")
    loops = [n for n in plan.logical.walk() if isinstance(n, (Iterate, Recursive))]
    if loops:
        out.append("Iterations")
        for it in loops:
            out += _loop_text(it)
        out.append("")
    out.append("States (lineage key → columns, each merged by its monoid)")
    runs = candidates(plan)
    for st in plan.states:
        out += _state_text(st, st.name in runs)
    out.append("")
    if plan.init:
        out.append("init — computed once from the static tables")
        for step in plan.init:
            out.append(f"  {step.state} =")
            out += _indent(rel_sql(step.program), 4)
        out.append("")
    out.append("h — per batch, over the new rows ΔS of each stream (with their _weight: +1 insert, −1 delete)")
    for step in plan.delta:
        if isinstance(step, Fixpoint):
            out += _fixpoint_text(step)
        elif isinstance(step, Diffusion):
            out += _diffusion_text(step)
        elif isinstance(step, ExactIteration):
            out += _exact_text(step)
        else:
            out.append(f"  Δ{step.state} =" + ("   (intermediate, computed once per batch)" if isinstance(step, Temp) else ""))
            out += _indent(rel_sql(step.program), 4)
    out.append("")
    out.append("⊗ — merge: state ← state ⊗ Δstate, a full outer join on the key combining columns by monoid")
    for st in plan.states:
        if st.static:
            continue
        out.append(f"  {st.name}: " + "; ".join(_merge_column(st, c.name, c.monoid.value) for c in st.columns)
                   + (f"; a key leaves when {_leaves(st)}" if st.leaves_when_zero else ""))
    out.append("")
    a = plan.answer
    out.append("a — the answer, over the states after the merge (X' is state X after this batch)")
    out += _indent(rel_sql(a.per_key if a.per_key is not None else a.rows), 2)
    if a.order:
        out.append("  ORDER BY " + ", ".join(_sort(k) for k in a.order))
    if a.limit is not None or a.offset:
        out.append("  " + (f"LIMIT {a.limit}" if a.limit is not None else "") + (f" OFFSET {a.offset}" if a.offset else ""))
    columns = ", ".join(f"{display_name(i)} AS {display_name(o)}" if i != o else display_name(o)
                        for i, o in zip(a.output, a.output_names))
    out.append(f"  output columns: {columns}")
    out.append("  changes: " + _changes_text(plan))
    if plan.notes:
        out.append("")
        out.append("Notes")
        out += [f"  - {n}" for n in plan.notes]
    return "\n".join(out) + "\n"


def explain_json(plan: IncrementalPlan) -> str:
    return json.dumps(explain_dict(plan), indent=2) + "\n"


def explain_dict(plan: IncrementalPlan) -> dict[str, Any]:
    a = plan.answer
    runs = candidates(plan)
    return {
        "query": plan.sql.strip(),
        "sources": [
            {"name": s.name, "kind": "table" if s.static else "stream", "deletions": s.weighted,
             "columns": [{"name": c, "type": t.sql()} for c, t in s.columns]}
            for s in plan.sources
        ],
        "states": [
            {"name": st.name, "role": st.role, "note": st.note,
             "key": [{"name": f.name, "type": f.type.sql()} for f in st.key],
             "columns": [{"name": c.name, "type": c.type.sql(), "monoid": c.monoid.value, "meaning": c.meaning}
                         for c in st.columns],
             "static": st.static, "runs": st.name in runs}
            for st in plan.states
        ],
        "init": [{"state": s.state, "sql": rel_sql(s.program), "reads": step_reads(s)} for s in plan.init],
        "delta": [_step_dict(s) for s in plan.delta],
        "merge": [
            {"state": st.name, "key": list(st.key_names),
             "columns": [{"name": c.name, "monoid": c.monoid.value, "sql": _merge_column(st, c.name, c.monoid.value)}
                         for c in st.columns],
             "drop_when": _leaves(st) if st.leaves_when_zero else None}
            for st in plan.states if not st.static
        ],
        "answer": {
            "sql": rel_sql(a.per_key if a.per_key is not None else a.rows),
            "order": [_sort(k) for k in a.order],
            "limit": a.limit, "offset": a.offset,
            "output": [{"column": i, "name": o} for i, o in zip(a.output, a.output_names)],
            "changes": a.changes, "change_states": list(a.change_states), "touched_key": list(a.touched_key),
            "reads": _reads((a.rows,)),
        },
        "notes": list(plan.notes),
        "matrices": [{"left": m.left, "right": m.right, "mapping": [m.n, m.m], "cells": m.cells,
                      **({"hybrid_keys": list(m.hybrid), "heavy": list(m.heavy)} if m.hybrid is not None else {})}
                     for m in plan.matrices],
        "delta_joins": [{"inputs": list(d.inputs), "step": d.step,
                         "orders": {start: list(order) for start, order in d.terms}} for d in plan.delta_joins],
        "watched": [{"left": w.left, "right": w.right, "keys": list(w.keys), "cells": w.cells,
                     "partitioning": "hash"} for w in plan.watched],
        "logical": rel_sql(plan.logical),
    }


def _step_dict(s: Step) -> dict[str, Any]:
    """A step of h as JSON: its kind (``merge``, ``temp``, ``fixpoint``, ``exact``, ``diffusion``),
    the program it reads and, for a loop, the loop's parts."""
    out: dict[str, Any] = {"state": s.state, "kind": _KINDS[type(s)], "temp": isinstance(s, Temp),
                           "sql": rel_sql(s.program), "reads": step_reads(s)}
    if isinstance(s, Fixpoint):
        out["fixpoint"] = {"loop": written_name(s.loop), "incremental": s.incremental, "base": rel_sql(s.base),
                           "step": rel_sql(s.step), "seeds": [rel_sql(x) for x in s.seeds]}
    elif isinstance(s, Diffusion):
        out["diffusion"] = {"loop": written_name(s.loop), "times": s.times,
                            "key": [display_name(k) for k in s.key_names],
                            "start": rel_sql(s.start), "output": rel_sql(s.output),
                            "steps": [_step_dict(b) for b in s.steps]}
    elif isinstance(s, ExactIteration):
        out["exact"] = {"loop": written_name(s.loop), "times": s.times, "start": rel_sql(s.start),
                        "step": rel_sql(s.step), "streams": list(s.streams)}
    return out


_KINDS: dict[type, str] = {Merge: "merge", Temp: "temp", Fixpoint: "fixpoint", ExactIteration: "exact",
                           Diffusion: "diffusion"}


def step_reads(step: Step) -> dict[str, list[Any]]:
    """What a step reads: the sources (their new rows, or a static table whole) and the states
    with the version of each (``old``, ``new``, ``delta``, ``merged``), in order of first use —
    the edges of the plan drawn as a graph."""
    programs = list(step.reads())
    if isinstance(step, Fixpoint):
        programs += [step.base, step.step, *step.seeds]
    if isinstance(step, ExactIteration):
        programs += [step.start, step.step]
    return _reads(programs)


def _reads(programs: Iterable[Rel]) -> dict[str, list[Any]]:
    sources: list[str] = []
    states: list[dict[str, str]] = []
    for program in programs:
        for node in program.walk():
            if isinstance(node, (Scan, DeltaScan)) and node.table not in sources:
                sources.append(node.table)
            elif isinstance(node, StateScan):
                read = {"state": node.state, "version": node.version}
                if read not in states:
                    states.append(read)
    return {"sources": sources, "states": states}


def _loop_text(it: Iterate | Recursive) -> list[str]:
    name = written_name(it.name)
    if isinstance(it, Recursive):
        cols = ", ".join(display_name(f.name.split(".", 1)[-1]) for f in it.schema)
        lines = [f"  {name} ({cols}): WITH RECURSIVE — the least set with {name} = base ∪ step({name}), "
                 "reached by semi-naive rounds", "    base:"]
        lines += _indent(rel_sql(it.base), 6)
        lines.append(f"    step ({name} is the rows found so far):")
        lines += _indent(rel_sql(it.step), 6)
        return lines
    cols = ", ".join(display_name(f.name.split(".", 1)[-1]) for f in it.schema)
    how = {"exact": "exact: what the loop reads is kept as states; a batch runs the steps from the start over "
                    "them, one statement per step, and passes on the value's change",
           "differential": "differential (exact): every step's result is kept as states and updated by its "
                           "change, step by step, as differential dataflow does",
           "diffusion": "diffusion (seed 000 Algorithm 1) — APPROXIMATE: a batch runs the steps over what "
                        "changed, warm-started from the previous answer; rows are told apart by KEY ("
                        + ", ".join(display_name(k.split(".", 1)[-1]) for k in it.key) + ")"}[it.mode]
    lines = [f"  {name} ({cols}): {name}₀ = start, then {name}ᵢ = step({name}ᵢ₋₁) for i = 1 … {it.times}; "
             f"the query reads {name}{_subscript(it.times)}",
             f"    mode {how}", "    start:"]
    lines += _indent(rel_sql(it.init), 6)
    lines.append(f"    step ({name} is the previous step's value):")
    lines += _indent(rel_sql(it.step), 6)
    return lines


def _fixpoint_text(fx: Fixpoint) -> list[str]:
    state, name = fx.state, written_name(fx.loop)
    lines = [f"  Δ{state} = a loop to the fixpoint of {name} (at most {FIXPOINT_MAX_ROUNDS} rounds per batch):"]
    if fx.incremental:
        lines.append(f"    new₀ = the rows the batch's new input rows derive, not already in {state}:")
        lines += _indent("\nUNION\n".join(rel_sql(s) for s in fx.seeds), 6)
        lines.append(f"    (where {name} is {state} before the batch)")
    else:
        lines.append("    inputs may delete rows: the fixpoint is found again; new₀ = the base:")
        lines += _indent(rel_sql(fx.base), 6)
    lines.append(f"    newᵢ₊₁ = the step over newᵢ (as {name}), minus every row found so far; stop when empty:")
    lines += _indent(rel_sql(fx.step), 6)
    lines.append("    Δ = +1 for every row found" + ("" if fx.incremental else f", −1 for every row of {state} not found"))
    return lines


def _exact_text(rp: ExactIteration) -> list[str]:
    state, name = rp.state, written_name(rp.loop)
    streams = ", ".join(rp.streams)
    lines = [f"  Δ{state} = a loop of {rp.times} steps over {name} (exact; skipped when no row of {streams} "
             "came in the batch):", "    X₀ = the start, over the states after the merge:"]
    lines += _indent(rel_sql(rp.start), 6)
    how = (f"up to {rp.nested} steps nested in one statement" if rp.nested > 1
           else "one statement per step (it reads the loop more than once)")
    lines.append(f"    Xᵢ = the step over Xᵢ₋₁ (as {name}), i = 1 … {rp.times}, {how}, over the last one's checkpoint:")
    lines += _indent(rel_sql(rp.step), 6)
    lines.append(f"    Δ = each row of X{_subscript(rp.times)} +1, each row of {state} before the batch −{WEIGHT}, "
                 "summed per row (rows whose sum is 0 left out)")
    return lines


def _diffusion_text(dx: Diffusion) -> list[str]:
    state, name = dx.state, written_name(dx.loop)
    key = ", ".join(display_name(k) for k in dx.key_names)
    lines = [f"  Δ{state} = a diffusion loop over {name} (approximate; seed 000 Algorithm 1), {dx.times} rounds:",
             f"    ΔX₀ = the start's new rows, for keys ({key}) {state} does not have:"]
    lines += _indent(rel_sql(dx.start), 6)
    lines.append(f"    round i = 1 … {dx.times}, against the states as the batch found them (nothing merged), with "
                 f"ΔX = ΔXᵢ₋₁ as the change of {name}:")
    for b in dx.steps:
        lines.append(f"      Δ{b.state} =" + ("   (intermediate)" if isinstance(b, Temp) else "   (merged only in the last pass)"))
        lines += _indent(rel_sql(b.program), 8)
    lines.append("      ΔY = the step's change:")
    lines += _indent(rel_sql(dx.output), 8)
    lines.append(f"      ΔXᵢ = ΔY's new rows, replacing the rows of {state} with the same key (a key with only "
                 "old rows leaves)")
    lines.append(f"    then the steps above run once more with ΔX = ΔX{_subscript(dx.times)} and are merged; "
                 f"Δ{state} = ΔX{_subscript(dx.times)}")
    return lines


def _subscript(n: int) -> str:
    return str(n).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def _state_text(st: State, runs: bool = False) -> list[str]:
    key = ", ".join(display_name(f.name) for f in st.key)
    lines = [f"  {st.name}  [{st.role}]  key ({key})"]
    width = max(len(f"{display_name(c.name)} {c.type.sql()} ({c.monoid.value})") for c in st.columns)
    for c in st.columns:
        text = f"{display_name(c.name)} {c.type.sql()} ({c.monoid.value})"
        lines.append(f"      {text:<{width}}  {c.meaning}".rstrip())
    if st.note:
        lines.append(f"      — {st.note}")
    if runs:
        reads = ("read by inner joins only" if st.role == StateRole.JOIN_INPUT else
                 "read by inner joins, as its delta, on the keys a batch touched, or looked up and added up per key")
        lines.append(f"      — {reads}: kept as a base and a tail once large (runtime/runs.py)")
    return lines


def _leaves(st: State) -> str:
    """When a key leaves ``st``: its row count is zero (a group's sums too: ``State.leaves_when_zero``)."""
    return " and ".join(f"abs({display_name(n)}) <= {st.zero_within(n)}" if st.zero_within(n) else f"{display_name(n)} = 0"
                        for n in st.leaves_when_zero)


def _merge_column(st: State, name: str, monoid: str) -> str:
    n = display_name(name)
    if monoid == "+":
        return f"{n} = {n} + Δ.{n}"
    return f"{n} = {'least' if monoid == 'min' else 'greatest'}({n}, Δ.{n})"


def _sort(k: SortKey) -> str:
    text = sql(k.expr) + (" DESC" if k.descending else "")
    if k.nulls_first is not None and k.nulls_first != (not k.descending):
        text += " NULLS FIRST" if k.nulls_first else " NULLS LAST"
    return text


def _changes_text(plan: IncrementalPlan) -> str:
    a = plan.answer
    if a.changes == "delta" and a.change_rows is not None:
        return (f"the delta of state {a.change_states[0]} (rows whose multiplicity changed), projected and filtered "
                "as a reads the state")
    if a.changes == "delta":
        return f"the delta of state {a.change_states[0]} itself (rows whose multiplicity changed)"
    if a.changes == "keyed" and a.per_key is not None:
        return (f"per key the batch touched, a over its new row against a over its old row "
                f"(one row per key of {a.change_states[0]}, so no join or shuffle is needed)")
    if a.changes == "keyed":
        key = ", ".join(display_name(k) for k in a.touched_key)
        return (f"a over the keys ({key}) this batch touched, after the merge minus before it; "
                f"touched keys come from Δ{', Δ'.join(a.change_states)}")
    return "the whole answer after the batch minus the answer before it (it is small: one row or LIMIT rows)"


def _indent(text: str, n: int = 2) -> list[str]:
    return [(" " * n + line).rstrip() for line in text.splitlines()]
