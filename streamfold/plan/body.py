"""The body of a query block seen as the seed's coGroup tree: inputs joined on equi-keys.

``flatten`` turns a normalized tree of inner joins, filters and projections into a :class:`Body`:
the inputs, the equality edges between them, the predicates that read one input (pushed into
it), and the rest (residual predicates over joined rows). Expressions are rewritten over the
inputs' own columns, so later stages never see the projections the binder introduced for
derived tables and CTEs.

An input is a source (a scan) or any other relation — an aggregate, a DISTINCT, a union, an
outer join — that the planner compiles separately: a stream input is given by the rows each
batch adds to it (with their ``_weight``), a static one by all its rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..ir.expr import Call, Expr, conjuncts, reads_clock
from ..ir.rel import Field, Filter, Join, Project, Rel
from .topk_shape import is_top_k


@dataclass
class Input:
    index: int
    alias: str  # unique in the query: names the input's state and weight column
    fields: tuple[Field, ...]  # the columns the body reads from it
    rows: Rel  # stream: the batch's rows of it with ``_weight``; static: all its rows
    static: bool
    weighted: bool  # its rows may have negative weights (deletions, or updates of a derived input)
    label: str  # for people: "S1 x", "derived d1"
    filters: list[Expr] = field(default_factory=list)
    # At most one row at any time (a global aggregate: no GROUP BY, as a scalar subquery is).
    # A join with it needs no partitioning: its one row goes to every partition of the other.
    single: bool = False

    def field(self, name: str) -> Field:
        return next(f for f in self.fields if f.name == name)


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
        return any(i.weighted for i in self.inputs)


# Makes the Input for a relation that is not part of the join tree (a scan or a sub-relation).
InputMaker = Callable[[Rel, int], Input]


def flatten(rel: Rel, make_input: InputMaker) -> tuple[Body, dict[str, Expr]]:
    """The body under ``rel`` and, for each output column of ``rel``, its expression over inputs."""
    inputs: list[Input] = []
    preds: list[Expr] = []
    mapping = _walk(rel, inputs, preds, make_input)
    owner = {f.name: i.index for i in inputs for f in i.fields}
    body = Body(inputs, [], [], owner)
    for p in preds:
        _classify(body, p)
    return body, mapping


def _walk(rel: Rel, inputs: list[Input], preds: list[Expr], make_input: InputMaker) -> dict[str, Expr]:
    if isinstance(rel, Project):
        inner = _walk(rel.input, inputs, preds, make_input)
        return {n: e.substitute(inner) for n, e in rel.exprs}
    # a time bound is an input (rules_expiry), and so is a top-k per group (rules_topk, rules_topk_reserve)
    if isinstance(rel, Filter) and not reads_clock(rel.condition) and not is_top_k(rel):
        inner = _walk(rel.input, inputs, preds, make_input)
        preds.extend(c.substitute(inner) for c in conjuncts(rel.condition))
        return inner
    if isinstance(rel, Join) and rel.kind in ("inner", "cross"):
        left = _walk(rel.left, inputs, preds, make_input)
        right = _walk(rel.right, inputs, preds, make_input)
        both = {**left, **right}
        if rel.condition is not None:
            preds.extend(c.substitute(both) for c in conjuncts(rel.condition))
        return both
    names = [f.name for f in rel.schema]
    taken = {f.name for i in inputs for f in i.fields}
    if any(n in taken for n in names):
        # Columns are told apart by name in a body; scans' names carry their alias, but two derived
        # inputs can name theirs alike (a DISTINCT CTE joined with itself: `cid` both sides)
        rel = Project(rel, tuple((f"_in{len(inputs)}.{f.name}", f.ref()) for f in rel.schema))
    inp = make_input(rel, len(inputs))
    inputs.append(inp)
    return {n: f.ref() for n, f in zip(names, inp.fields)}


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
