"""Rules for loops: ``WITH RECURSIVE`` (a fixpoint) and ``WITH ITERATIVE`` in its three modes.

* ``WITH RECURSIVE`` — the base and every stream the step reads are kept as bags (their rows
  after each batch), the fixpoint as a set; a loop in the runtime finds its change
  (:class:`.model.Fixpoint`).
* ``MODE EXACT`` — what the loop reads is kept as bags by the usual rules, the value as a bag,
  and a loop in the runtime steps from the start each batch (:class:`.model.ExactIteration`).
* ``MODE DIFFERENTIAL`` — no loop: every step's value is a relation of its own, kept up to date
  by its change, the iteration unrolled into n copies of the step.
* ``MODE DIFFUSION`` — the step compiled once, reading the iteration's value as a stream of its
  own; a loop in the runtime runs it (seed 000 Algorithm 1; :class:`.model.Diffusion`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.expr import Column
from ..ir.rel import (
    WEIGHT, Expand, Field, Filter, IterationMode, Iterate, LoopRef, Project, Recursive, Rel, Scan, StateScan, StateVersion,
    written_name,
)
from ..ir.rename import unroll
from ..ir.types import BIGINT
from .changes import distinct_delta
from .context import PlanContext, reads_stream
from .model import Compiled, Diffusion, ExactIteration, Fixpoint, Monoid, State, StateColumn, StateRole
from .simplify import simplify
from .terms import positive, weight



def recursive(ctx: PlanContext, rel: Rel) -> Compiled:
    """WITH RECURSIVE: see :class:`Fixpoint`."""
    assert isinstance(rel, Recursive)
    loop = written_name(rel.name)
    base_state, base_fields = ctx.bag_state(rel.base, "rec_base")
    step, inputs = _loop_inputs(ctx, rel.step, "rec_input", _rows)
    weighted = any(ctx.compile(r).weighted for r in (rel.base, *(node for _, _, node in inputs)))
    base = _rows(StateScan(base_state, StateVersion.NEW, base_fields), rel.base)
    seeds: list[Rel] = [_rows(StateScan(base_state, StateVersion.DELTA, base_fields), rel.base, positive_only=True)]
    for state, fields, node in inputs:
        new = _rows(StateScan(state, StateVersion.NEW, fields), node)
        delta = _rows(StateScan(state, StateVersion.DELTA, fields), node, positive_only=True)
        seeds.append(_replace(step, new, delta))
    name = ctx.plan.name("fixpoint")
    key = tuple(Field(f.name, f.type) for f in rel.schema)
    ctx.plan.add_loop(
        State(name, StateRole.OUTPUT, key, (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "1 while the row is in the fixpoint"),),
              note=f"the rows of the recursive CTE {loop} (a set)"),
        Fixpoint(name, rel.name, key, base, step, tuple(seeds), incremental=not weighted))
    if weighted:
        ctx.plan.note(f"WITH RECURSIVE {loop}: inputs may delete rows, so each batch computes the fixpoint again "
                      "(semi-naive, from the base) and passes on new − old")
    else:
        ctx.plan.note(f"WITH RECURSIVE {loop}: semi-naive from the old fixpoint — the batch's new rows derive new "
                      "rows, round after round, until none is new")
    return Compiled(distinct_delta(name, key + (Field(WEIGHT, BIGINT),)), static=False, weighted=True)


def iterate(ctx: PlanContext, rel: Rel) -> Compiled:
    """WITH ITERATIVE, by its mode."""
    assert isinstance(rel, Iterate)
    if rel.mode == IterationMode.EXACT:
        return _exact(ctx, rel)
    if rel.mode == IterationMode.DIFFERENTIAL:
        # every step's value is a relation of its own, kept up to date by its delta
        ctx.plan.note(f"ITERATIVE {written_name(rel.name)}: differential — each of the {rel.times} steps keeps "
                      "its result and passes its change to the next (as differential dataflow does)")
        return ctx.compile(unroll(rel))
    return _diffusion(ctx, rel)


def _exact(ctx: PlanContext, rel: Iterate) -> Compiled:
    """MODE EXACT: see :class:`ExactIteration`."""
    loop = written_name(rel.name)
    fields = tuple(Field(f.name, f.type) for f in rel.schema)

    def bag(scan: StateScan, node: Rel) -> Rel:  # the rows, each as often as it is counted
        return _rows(Expand(scan, WEIGHT), node)

    def as_loop(node: Rel) -> Rel | None:  # the previous value, under the names the step uses
        if isinstance(node, LoopRef) and node.name == rel.name:
            return Project(LoopRef(rel.name, fields), tuple((f.name, g.ref()) for f, g in zip(node.fields, fields)))
        return None

    def named(node: Rel) -> Rel:  # a value's rows under the iteration's own names
        return Project(node, tuple((f.name, g.ref()) for f, g in zip(fields, node.schema)))

    start = simplify(named(_loop_inputs(ctx, rel.init, "loop_input", bag)[0]))
    step = simplify(named(_loop_inputs(ctx, rel.step, "loop_input", bag)[0].transform(as_loop)))
    name = ctx.plan.name("iteration")
    ctx.plan.add_loop(
        State(name, StateRole.OUTPUT, fields, (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "copies of the row in the value"),),
              note=f"the value of the iteration {loop} after its {rel.times} steps (a bag)"),
        ExactIteration(name, rel.name, fields, rel.times, start, step,
                       tuple(sorted({n.table for n in rel.walk() if isinstance(n, Scan) and not n.static}))))
    ctx.plan.note(f"ITERATIVE {loop}: exact — what it reads is kept as states; each batch that changes them "
                  f"runs the {rel.times} steps from the start over them and passes on the value's change "
                  "(new − old)")
    return Compiled(Project(StateScan(name, StateVersion.DELTA, fields + (Field(WEIGHT, BIGINT),)),
                            tuple((f.name, f.ref()) for f in fields) + ((WEIGHT, weight()),)),
                    static=False, weighted=True)


def _diffusion(ctx: PlanContext, rel: Iterate) -> Compiled:
    """MODE DIFFUSION: see :class:`Diffusion`."""
    name = ctx.plan.name("diffusion")
    fields = tuple(Field(f.name, f.type) for f in rel.schema)
    start = ctx.compile(rel.init)
    columns = tuple(f"c{i}" for i in range(len(fields)))
    scan = Scan(rel.name, rel.name, fields, columns, static=False, weighted=True)
    step_rel = rel.step.transform(
        lambda n: Project(scan, tuple((f.name, g.ref()) for f, g in zip(n.fields, fields)))
        if isinstance(n, LoopRef) and n.name == rel.name else None)
    mark = len(ctx.plan.delta)
    step = ctx.compile(step_rel)
    body = ctx.plan.take_steps(mark, rel.name)
    loop = written_name(rel.name)
    diffusion = Diffusion(name, rel.name, fields, rel.key, rel.times, start.delta, step.program, body)
    ctx.plan.add_loop(
        State(name, StateRole.OUTPUT, fields, (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "1 while the row is the value"),),
              note=f"the value of the iteration {loop} (one row per key {', '.join(diffusion.key_names)})"),
        diffusion)
    ctx.plan.note(f"ITERATIVE {loop}: diffusion (seed 000 Algorithm 1) — APPROXIMATE: each batch runs "
                  f"{rel.times} steps over what changed, from the previous answer, and merges once; rows the "
                  "changes do not reach keep their value")
    return Compiled(distinct_delta(name, fields + (Field(WEIGHT, BIGINT),)), static=False, weighted=True)


def _loop_inputs(ctx: PlanContext, node: Rel, base: str, rows: Callable[[StateScan, Rel], Rel]
                 ) -> tuple[Rel, list[tuple[str, tuple[Field, ...], Rel]]]:
    """``node`` (a loop's part) with each largest subtree that reads a stream but not the loop
    kept as a bag state and read as ``rows`` of its version after the merge; and those
    states (name, fields, the subtree). Static subtrees are read as they are."""
    found: list[tuple[str, tuple[Field, ...], Rel]] = []

    def over(n: Rel) -> Rel:
        if any(isinstance(x, LoopRef) for x in n.walk()):
            return n.with_inputs(tuple(over(c) for c in n.inputs()))
        if not reads_stream(n):
            return n
        state, fields = ctx.bag_state(n, base)
        found.append((state, fields, n))
        return rows(StateScan(state, StateVersion.NEW, fields), n)

    return over(node), found


def _replace(rel: Rel, old: Rel, new: Rel) -> Rel:
    """``rel`` with every subtree equal to ``old`` replaced by ``new``."""
    return rel.transform(lambda n: new if n == old else None)


def _rows(scan: Rel, rel: Rel, positive_only: bool = False) -> Rel:
    """The rows of a bag state under ``rel``'s column names (with ``positive_only``: only rows
    whose count grew — an insert-only batch's delta)."""
    source = Filter(scan, positive(weight())) if positive_only else scan
    return Project(source, tuple((f.name, Column(f.name, f.type)) for f in rel.schema))
