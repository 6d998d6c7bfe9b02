"""``ORDER BY … LIMIT`` inside a subquery, CTE or derived table, as a top-k over a row number.

The outermost ``ORDER BY … LIMIT`` is part of the answer (``plan.rules_answer``). One further
down keeps the first rows of a relation that other operators read: the same rows as a filter on
each row's number in that order, which the window rules maintain — as a top-k that keeps k rows
(``plan.rules_topk``), or the first rows of a relation that deletes (``plan.rules_topk_reserve``)::

    Limit[k, offset o](Sort[keys](R))
        →  Project[R's columns](Filter[o < rank ≤ o + k](Window[rank = row_number() OVER (ORDER BY keys)](R)))

Which rows a LIMIT keeps among rows that tie on its ORDER BY is the order Spark happens to read
them in, so the ORDER BY must leave no ties between rows that differ; the window rules refuse
one that does, worded for a LIMIT (``LIMIT_ORDER_NOT_TOTAL``, by the rank's name,
:data:`~streamfold.ir.window.LIMIT_RANK`). A LIMIT without ORDER BY keeps any k rows and is
refused here (``LIMIT_WITHOUT_ORDER``). ``LIMIT 0`` keeps no row, a filter that is always false.
"""

from __future__ import annotations

from ..errors import UnsupportedError
from ..ir.expr import Call, Column, Literal, and_all
from ..ir.rel import Filter, Limit, Project, Rel, Sort
from ..ir.types import BIGINT, BOOLEAN
from ..ir.window import LIMIT_RANK, Window, WindowCall


def run(rel: Rel) -> Rel:
    """Every LIMIT but the query's own (under the projection that drops hidden sort columns),
    which the answer applies."""
    if isinstance(rel, Project) and isinstance(rel.input, Limit):
        return Project(run(rel.input), rel.exprs)
    if isinstance(rel, Limit):
        return Limit(_below(rel.input), rel.limit, rel.offset)
    return _below(rel)


def _below(rel: Rel) -> Rel:
    count = [0]

    def rewrite(node: Rel) -> Rel | None:
        if not isinstance(node, Limit):
            return None
        count[0] += 1
        return _ranked(node, f"{LIMIT_RANK}{count[0] - 1}")

    return rel.transform(rewrite)


def _ranked(limit: Limit, name: str) -> Rel:
    if limit.limit == 0:  # no row, whatever the order
        return Filter(limit.input.input if isinstance(limit.input, Sort) else limit.input, Literal(False, BOOLEAN))
    if not isinstance(limit.input, Sort):
        raise UnsupportedError(
            "LIMIT without ORDER BY inside a subquery keeps whichever rows Spark happens to read first",
            code="LIMIT_WITHOUT_ORDER", params={"construct": "LIMIT"},
            hint="add an ORDER BY that orders the subquery's rows totally (its columns as tie-breakers)")
    rows = limit.input.input
    call = WindowCall("row_number", (), (), limit.input.keys, None, BIGINT)
    window = Window(rows, ((name, call),))
    rank = Column(name, BIGINT)
    bounds = [Call(">", (rank, Literal(limit.offset, BIGINT)), BOOLEAN)] if limit.offset else []
    if limit.limit is not None:
        bounds.append(Call("<=", (rank, Literal(limit.offset + limit.limit, BIGINT)), BOOLEAN))
    condition = and_all(bounds)
    kept: Rel = Filter(window, condition) if condition is not None else window
    return Project(kept, tuple((f.name, Column(f.name, f.type)) for f in rows.schema))


__all__ = ["run"]
