"""The body of a query block seen as the seed's coGroup tree: inputs joined on equi-keys.

``flatten`` turns a normalized tree of inner joins, filters and projections over scans into
a :class:`Body`: the inputs (one per scan), the equality edges between them, the predicates
that read one input (pushed into it), and the rest (residual predicates over joined rows).
Expressions are rewritten over the scans' own columns, so later stages never see the
projections the binder introduced for derived tables and CTEs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UnsupportedError
from ..ir.expr import Call, Expr, conjuncts
from ..ir.rel import Aggregate, Distinct, Filter, Join, Project, Rel, Scan, Union


@dataclass
class Input:
    index: int
    scan: Scan
    filters: list[Expr] = field(default_factory=list)

    @property
    def alias(self) -> str:
        return self.scan.alias

    @property
    def static(self) -> bool:
        return self.scan.static


@dataclass(frozen=True)
class Edge:
    """``left_expr = right_expr`` between inputs ``left`` and ``right`` (``<=>`` if null_safe)."""

    left: int
    left_expr: Expr
    right: int
    right_expr: Expr
    null_safe: bool = False


@dataclass
class Body:
    inputs: list[Input]
    edges: list[Edge]
    residual: list[Expr]
    owner: dict[str, int]  # column name -> input index

    def inputs_of(self, e: Expr) -> frozenset[int]:
        return frozenset(self.owner[c] for c in e.columns())

    @property
    def streams(self) -> list[Input]:
        return [i for i in self.inputs if not i.static]

    @property
    def deletions(self) -> bool:
        return any(i.scan.weighted for i in self.inputs)


def flatten(rel: Rel) -> tuple[Body, dict[str, Expr]]:
    """The body under ``rel`` and, for each output column of ``rel``, its expression over scans."""
    inputs: list[Input] = []
    preds: list[Expr] = []
    mapping = _walk(rel, inputs, preds)
    owner = {f.name: i.index for i in inputs for f in i.scan.schema}
    body = Body(inputs, [], [], owner)
    for p in preds:
        _classify(body, p)
    return body, mapping


def _walk(rel: Rel, inputs: list[Input], preds: list[Expr]) -> dict[str, Expr]:
    if isinstance(rel, Scan):
        inputs.append(Input(len(inputs), rel))
        return {f.name: f.ref() for f in rel.schema}
    if isinstance(rel, Project):
        inner = _walk(rel.input, inputs, preds)
        return {n: e.substitute(inner) for n, e in rel.exprs}
    if isinstance(rel, Filter):
        inner = _walk(rel.input, inputs, preds)
        preds.extend(c.substitute(inner) for c in conjuncts(rel.condition))
        return inner
    if isinstance(rel, Join) and rel.kind in ("inner", "cross"):
        left = _walk(rel.left, inputs, preds)
        right = _walk(rel.right, inputs, preds)
        both = {**left, **right}
        if rel.condition is not None:
            preds.extend(c.substitute(both) for c in conjuncts(rel.condition))
        return both
    raise _unsupported(rel)


def _unsupported(rel: Rel) -> UnsupportedError:
    if isinstance(rel, Join):
        what = {"left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL JOIN",
                "semi": "semi join (IN / EXISTS)", "anti": "anti join (NOT IN / NOT EXISTS)"}[rel.kind]
        return UnsupportedError(f"{what} is not supported yet", code="UNSUPPORTED_JOIN",
                                params={"construct": rel.kind},
                                hint="inner joins are supported; see docs/sql.md")
    if isinstance(rel, (Aggregate, Distinct)):
        return UnsupportedError(
            "an aggregate or DISTINCT inside a subquery, CTE or derived table is not supported yet",
            code="UNSUPPORTED_NESTED_AGGREGATE", params={"construct": type(rel).__name__},
            hint="aggregate in the outermost query; see docs/sql.md",
        )
    if isinstance(rel, Union):
        return UnsupportedError("UNION inside a join or aggregate is not supported yet",
                                code="UNSUPPORTED_SET_OPERATION", params={"construct": "UNION"})
    return UnsupportedError(f"no incremental rule for {type(rel).__name__}", code="UNSUPPORTED",
                            params={"construct": type(rel).__name__})


def _classify(body: Body, p: Expr) -> None:
    sides = body.inputs_of(p)
    if len(sides) == 1:
        body.inputs[next(iter(sides))].filters.append(p)
        return
    if isinstance(p, Call) and p.op in ("=", "<=>") and len(sides) == 2:
        a, b = p.args
        sa, sb = body.inputs_of(a), body.inputs_of(b)
        if len(sa) == 1 and len(sb) == 1 and sa != sb:
            body.edges.append(Edge(next(iter(sa)), a, next(iter(sb)), b, p.op == "<=>"))
            return
    body.residual.append(p)
