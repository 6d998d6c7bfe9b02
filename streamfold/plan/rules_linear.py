"""Rules for the operators a change passes straight through: a source, ORDER BY, explode.

* A stream source changes by the batch's rows (``DeltaScan``, with their ``_weight``).
* ORDER BY inside a subquery does not change its rows: its change is its input's.
* ``LATERAL VIEW explode`` maps each row to rows of its own, so the rows a batch adds (or
  deletes) explode into the rows they add (or delete).
"""

from __future__ import annotations

from ..ir.rel import WEIGHT, DeltaScan, Explode, Project, Rel, Scan, Sort
from .context import PlanContext
from .model import Compiled
from .terms import weight


def scan(ctx: PlanContext, rel: Rel) -> Compiled:
    assert isinstance(rel, Scan)
    return Compiled(DeltaScan(rel.table, rel.alias, rel.fields, rel.columns, rel.weighted),
                    static=False, weighted=rel.weighted)


def sort(ctx: PlanContext, rel: Rel) -> Compiled:
    assert isinstance(rel, Sort)
    return ctx.compile(rel.input)


def explode(ctx: PlanContext, rel: Rel) -> Compiled:
    assert isinstance(rel, Explode)
    child = ctx.compile(rel.input)
    exploded = Explode(child.program, rel.expr, rel.element, rel.position, rel.outer)
    program = Project(exploded, tuple((f.name, f.ref()) for f in rel.schema) + ((WEIGHT, weight()),))
    return Compiled(program, static=False, weighted=child.weighted)
