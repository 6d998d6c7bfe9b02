"""``explain``: the incremental plan as text a database engineer can follow, or as JSON.

The text has five parts: the sources, the states (each with its lineage key and, per column,
the monoid that merges it), h (the per-batch program, one SQL statement per state delta),
⊗ (the merge of each state with its delta) and a (the answer over the merged states).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..ir.printer import display_name, sql
from ..ir.sqltext import rel_sql
from ..ir.rel import DeltaScan, Iterate, Recursive, Rel, Scan, SortKey, StateScan
from .model import FIXPOINT_MAX_ROUNDS, WEIGHT_COLUMN, Diffusion, Fixpoint, IncrementalPlan, Repeat, State, Step


def explain_text(plan: IncrementalPlan) -> str:
    out: list[str] = []
    out.append("Query")
    out += _indent(plan.sql.strip())
    out.append("")
    out.append("Sources")
    width = max(len(s.name) for s in plan.sources)
    for s in plan.sources:
        kind = "static table" if s.static else ("stream with deletions (_weight)" if s.weighted else "stream, insert-only")
        cols = ", ".join(f"{c} {t.sql()}" for c, t in s.columns)
        out.append(f"  {s.name:<{width}}  {kind}: {cols}")
    out.append("")
    loops = [n for n in plan.logical.walk() if isinstance(n, (Iterate, Recursive))]
    if loops:
        out.append("Iterations")
        for it in loops:
            out += _loop_text(it)
        out.append("")
    out.append("States (lineage key → columns, each merged by its monoid)")
    for st in plan.states:
        out += _state_text(st)
    out.append("")
    if plan.init:
        out.append("init — computed once from the static tables")
        for step in plan.init:
            out.append(f"  {step.state} =")
            out += _indent(rel_sql(step.program), 4)
        out.append("")
    out.append("h — per batch, over the new rows ΔS of each stream (with their _weight: +1 insert, −1 delete)")
    for step in plan.delta:
        label = f"Δ{step.state}"
        if step.fixpoint is not None:
            out += _fixpoint_text(step.state, step.fixpoint)
            continue
        if step.diffusion is not None:
            out += _diffusion_text(step.state, step.diffusion)
            continue
        if step.repeat is not None:
            out += _repeat_text(step.state, step.repeat)
            continue
        out.append(f"  {label} =" + ("   (intermediate, computed once per batch)" if step.temp else ""))
        out += _indent(rel_sql(step.program), 4)
    out.append("")
    out.append("⊗ — merge: state ← state ⊗ Δstate, a full outer join on the key combining columns by monoid")
    for st in plan.states:
        if st.static:
            continue
        out.append(f"  {st.name}: " + "; ".join(_merge_column(st, c.name, c.monoid.value) for c in st.columns)
                   + ("" if st.keep_empty else f"; a key leaves when {WEIGHT_COLUMN} = 0"))
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
             "static": st.static}
            for st in plan.states
        ],
        "init": [{"state": s.state, "sql": rel_sql(s.program), "reads": step_reads(s)} for s in plan.init],
        "delta": [{"state": s.state, "temp": s.temp, "sql": rel_sql(s.program), "reads": step_reads(s),
                   "fixpoint": None if s.fixpoint is None else {
                       "loop": s.fixpoint.loop.split("#")[0], "incremental": s.fixpoint.incremental,
                       "base": rel_sql(s.fixpoint.base), "step": rel_sql(s.fixpoint.step),
                       "seeds": [rel_sql(x) for x in s.fixpoint.seeds]},
                   "diffusion": None if s.diffusion is None else {
                       "loop": s.diffusion.loop.split("#")[0], "times": s.diffusion.times,
                       "key": [display_name(k) for k in s.diffusion.key_names],
                       "start": rel_sql(s.diffusion.start), "output": rel_sql(s.diffusion.output),
                       "steps": [{"state": b.state, "temp": b.temp, "sql": rel_sql(b.program)}
                                 for b in s.diffusion.steps]},
                   "repeat": None if s.repeat is None else {
                       "loop": s.repeat.loop.split("#")[0], "times": s.repeat.times,
                       "start": rel_sql(s.repeat.start), "step": rel_sql(s.repeat.step),
                       "streams": list(s.repeat.streams)}}
                  for s in plan.delta],
        "merge": [
            {"state": st.name, "key": list(st.key_names),
             "columns": [{"name": c.name, "monoid": c.monoid.value, "sql": _merge_column(st, c.name, c.monoid.value)}
                         for c in st.columns],
             "drop_when": None if st.keep_empty else f"{WEIGHT_COLUMN} = 0"}
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
        "logical": rel_sql(plan.logical),
    }


def step_reads(step: Step) -> dict[str, list[Any]]:
    """What a step reads: the sources (their new rows, or a static table whole) and the states
    with the version of each (``old``, ``new``, ``delta``, ``merged``), in order of first use —
    the edges of the plan drawn as a graph."""
    programs = list(step.reads())
    if step.fixpoint is not None:
        programs += [step.fixpoint.base, step.fixpoint.step, *step.fixpoint.seeds]
    if step.repeat is not None:
        programs += [step.repeat.start, step.repeat.step]
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
    name = it.name.split("#")[0]
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


def _fixpoint_text(state: str, fx: Fixpoint) -> list[str]:
    name = fx.loop.split("#")[0]
    lines = [f"  Δ{state} = a loop to the fixpoint of {name} (at most {FIXPOINT_MAX_ROUNDS} rounds per batch):"]
    if fx.incremental:
        lines.append(f"    new₀ = the rows the batch's new input rows derive, not already in {state}:")
        lines += _indent("\nUNION\n".join(rel_sql(s) for s in fx.seeds), 6)
        lines.append(f"    (where {name} is {state} before the batch)")
    else:
        lines.append(f"    inputs may delete rows: the fixpoint is found again; new₀ = the base:")
        lines += _indent(rel_sql(fx.base), 6)
    lines.append(f"    newᵢ₊₁ = the step over newᵢ (as {name}), minus every row found so far; stop when empty:")
    lines += _indent(rel_sql(fx.step), 6)
    lines.append("    Δ = +1 for every row found" + ("" if fx.incremental else f", −1 for every row of {state} not found"))
    return lines


def _repeat_text(state: str, rp: Repeat) -> list[str]:
    name = rp.loop.split("#")[0]
    streams = ", ".join(rp.streams)
    lines = [f"  Δ{state} = a loop of {rp.times} steps over {name} (exact; skipped when no row of {streams} "
             "came in the batch):", f"    X₀ = the start, over the states after the merge:"]
    lines += _indent(rel_sql(rp.start), 6)
    how = (f"up to {rp.nested} steps nested in one statement" if rp.nested > 1
           else "one statement per step (it reads the loop more than once)")
    lines.append(f"    Xᵢ = the step over Xᵢ₋₁ (as {name}), i = 1 … {rp.times}, {how}, over the last one's checkpoint:")
    lines += _indent(rel_sql(rp.step), 6)
    lines.append(f"    Δ = each row of X{_subscript(rp.times)} +1, each row of {state} before the batch −{WEIGHT_COLUMN}, "
                 "summed per row (rows whose sum is 0 left out)")
    return lines


def _diffusion_text(state: str, dx: Diffusion) -> list[str]:
    name = dx.loop.split("#")[0]
    key = ", ".join(display_name(k) for k in dx.key_names)
    lines = [f"  Δ{state} = a diffusion loop over {name} (approximate; seed 000 Algorithm 1), {dx.times} rounds:",
             f"    ΔX₀ = the start's new rows, for keys ({key}) {state} does not have:"]
    lines += _indent(rel_sql(dx.start), 6)
    lines.append(f"    round i = 1 … {dx.times}, against the states as the batch found them (nothing merged), with "
                 f"ΔX = ΔXᵢ₋₁ as the change of {name}:")
    for b in dx.steps:
        lines.append(f"      Δ{b.state} =" + ("   (intermediate)" if b.temp else "   (merged only in the last pass)"))
        lines += _indent(rel_sql(b.program), 8)
    lines.append(f"      ΔY = the step's change:")
    lines += _indent(rel_sql(dx.output), 8)
    lines.append(f"      ΔXᵢ = ΔY's new rows, replacing the rows of {state} with the same key (a key with only "
                 "old rows leaves)")
    lines.append(f"    then the steps above run once more with ΔX = ΔX{_subscript(dx.times)} and are merged; "
                 f"Δ{state} = ΔX{_subscript(dx.times)}")
    return lines


def _subscript(n: int) -> str:
    return str(n).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def _state_text(st: State) -> list[str]:
    key = ", ".join(display_name(f.name) for f in st.key)
    lines = [f"  {st.name}  [{st.role}]  key ({key})"]
    width = max(len(f"{display_name(c.name)} {c.type.sql()} ({c.monoid.value})") for c in st.columns)
    for c in st.columns:
        text = f"{display_name(c.name)} {c.type.sql()} ({c.monoid.value})"
        lines.append(f"      {text:<{width}}  {c.meaning}".rstrip())
    if st.note:
        lines.append(f"      — {st.note}")
    return lines


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
