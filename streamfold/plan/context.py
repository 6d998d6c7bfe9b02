"""The context every planner rule receives: compile a sub-relation, keep a bag, declare states.

A rule (``rules_*.py``) turns one kind of logical node into how it changes (:class:`Compiled`).
It sees the planner only through :class:`PlanContext`:

* :meth:`PlanContext.compile` — the delta program of any sub-relation (memoized; relations equal
  up to their names share one set of states, and one read more than once is computed once per
  batch, as a temp result);
* :meth:`PlanContext.bag_state` — a relation's rows kept as a state counting copies;
* :meth:`PlanContext.body` — a tree of inner joins, filters and projections as the seed's coGroup
  body (:mod:`.body`), its inputs compiled on their own;
* ``ctx.plan`` — the :class:`PlanBuilder` the states, steps and notes go into.

The context dispatches ``compile`` to the rules through the function the driver
(:mod:`.incrementalize`) gives it, so it knows none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ir.expr import Agg, Column, Expr, Literal
from ..ir.rel import (
    WEIGHT, Aggregate, DeltaScan, Expand, Field, Filter, IterationMode, Iterate, Limit, Once, Project, Rel, Scan, Sort, StateScan,
    StateVersion,
)
from ..ir.rename import canonical, unroll
from ..ir.types import BIGINT
from ..sql.bind import BoundQuery
from .body import Body, Input, flatten
from .builder import PlanBuilder
from .matrix import DEFAULT_POLICY, MatrixPolicy
from .model import Compiled, Monoid, State, StateColumn, StateRole
from .terms import sum_weights

Rule = Callable[["PlanContext", Rel], Compiled]


class PlanContext:
    """The planner as the rules see it (see the module docstring)."""

    def __init__(self, bound: BoundQuery, logical: Rel, dispatch: Rule,
                 mappings: dict[str, tuple[int, int]] | None = None, policy: MatrixPolicy = DEFAULT_POLICY,
                 heavy: dict[str, tuple[Any, ...]] | None = None,
                 orders: dict[str, tuple[str, ...]] | None = None) -> None:
        self.bound = bound
        self.logical = logical
        self.plan = PlanBuilder(mappings=dict(mappings or {}), policy=policy, heavy=dict(heavy or {}),
                                orders=dict(orders or {}))
        self._dispatch = dispatch
        self._memo: dict[Rel, Compiled] = {}
        self._shared: dict[Rel, tuple[Rel, Compiled]] = {}  # canonical form → first relation, its delta
        self._canonical: dict[Rel, Rel] = {}
        self._repeated = _repeated(logical, self.canonical)
        self._aliases: dict[Rel, str] = {}
        self._statics: dict[Rel, tuple[str, Rel]] = {}  # canonical form → static state, first relation
        self._taken: set[str] | None = None  # the query's table aliases, which derived inputs' must differ from

    def compile(self, rel: Rel) -> Compiled:
        """The delta program of ``rel`` (or, if it reads no stream, ``rel`` itself: static)."""
        if rel not in self._memo:
            self._memo[rel] = self._share(rel)
        return self._memo[rel]

    def canonical(self, rel: Rel) -> Rel:
        """``rel``'s canonical form (names numbered), computed once per relation."""
        if rel not in self._canonical:
            self._canonical[rel] = canonical(rel)
        return self._canonical[rel]

    def _share(self, rel: Rel) -> Compiled:
        """Relations equal up to their names (copies of a CTE, the unchanging parts of an
        iteration's steps) share one set of states: the later ones rename the first's delta."""
        key = self.canonical(rel)
        if key not in self._shared:
            compiled = self._compile(rel)
            if key in self._repeated and not compiled.static and _costly(compiled.program):
                # read more than once: computed once per batch, as a temp result
                temp = self.plan.add_temp("shared", compiled.program)
                compiled = Compiled(StateScan(temp, StateVersion.DELTA, compiled.program.schema), False, compiled.weighted)
            self._shared[key] = (rel, compiled)
            return compiled
        first, compiled = self._shared[key]
        if compiled.static:
            return Compiled(rel, static=True, weighted=False)
        renames = tuple((g.name, Column(f.name, f.type)) for f, g in zip(first.schema, rel.schema))
        return Compiled(Project(compiled.program, renames + ((WEIGHT, Column(WEIGHT, BIGINT)),)),
                        static=False, weighted=compiled.weighted)

    def _compile(self, rel: Rel) -> Compiled:
        if not reads_stream(rel):
            return Compiled(rel, static=True, weighted=False)
        return self._dispatch(self, rel)

    def bag_state(self, rel: Rel, base: str, compiled: Compiled | None = None,
                  partition: tuple[str, ...] | None = None) -> tuple[str, tuple[Field, ...]]:
        """``rel``'s rows kept as a bag: a state keyed by all its columns, counting copies; its
        name and fields (the key, then the count). ``partition``: the columns it is
        hash-partitioned on, when not all of them (the key it is joined on)."""
        compiled = compiled if compiled is not None else self.compile(rel)
        key = tuple(Field(f.name, f.type) for f in rel.schema)
        name = self.plan.name(base)
        self.plan.add_state(
            State(name, StateRole.OUTPUT, key, (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "multiplicity of the row"),),
                  note="the rows with their multiplicity", partition=partition),
            Aggregate(compiled.delta, tuple((f.name, f.ref()) for f in key), ((WEIGHT, sum_weights()),)),
        )
        return name, key + (Field(WEIGHT, BIGINT),)

    def static_rows(self, rel: Rel, note: str) -> Rel:
        """The distinct rows of a static relation, computed once before batch 0 and kept as a
        static state, as a relation with ``rel``'s columns: what a semi or anti join with a
        static side meets every batch without reading its tables again. Relations equal up to
        their names share one state."""
        name, first = self._static_state(rel, note)
        scan = StateScan(name, StateVersion.OLD, self.plan.fields(name))
        return Project(scan, tuple((g.name, Column(f.name, f.type)) for f, g in zip(first.schema, rel.schema)))

    def static_bag(self, rel: Rel, note: str) -> Rel:
        """A static relation's rows with their multiplicity, from the state :meth:`static_rows`
        keeps (each distinct row and how many times it occurs)."""
        name, first = self._static_state(rel, note)
        scan = Expand(StateScan(name, StateVersion.OLD, self.plan.fields(name)), WEIGHT)
        return Project(scan, tuple((g.name, Column(f.name, f.type)) for f, g in zip(first.schema, rel.schema)))

    def _static_state(self, rel: Rel, note: str) -> tuple[str, Rel]:
        key = self.canonical(rel)
        if key not in self._statics:
            name = self.plan.name("st_rows")
            fields = tuple(Field(f.name, f.type) for f in rel.schema)
            self.plan.add_static(
                State(name, StateRole.STATIC, fields, (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "number of rows"),),
                      note=note, static=True),
                Aggregate(rel, tuple((f.name, f.ref()) for f in fields), ((WEIGHT, Agg("sum", (Literal(1, BIGINT),), False, BIGINT)),)))
            self._statics[key] = (name, rel)
        return self._statics[key]

    def _derived_alias(self) -> str:
        """``d1``, ``d2``, … for derived inputs, skipping the query's own table aliases (``FROM D d1``)."""
        if self._taken is None:
            self._taken = _table_aliases(self.logical)
        n = len(self._aliases) + 1
        while f"d{n}" in self._taken or f"d{n}" in self._aliases.values():
            n += 1
        return f"d{n}"

    def body(self, rel: Rel) -> tuple[Body, dict[str, Expr]]:
        """The join body under ``rel`` and each output column's expression over its inputs."""
        return flatten(rel, self._input)

    def _input(self, rel: Rel, index: int) -> Input:
        """An input of a join body: a source, or any relation compiled on its own."""
        compiled = self.compile(rel)
        if isinstance(rel, Scan):
            label = rel.table if rel.alias == rel.table else f"{rel.table} {rel.alias}"
            return Input(index, rel.alias, rel.fields, compiled.program, compiled.static, compiled.weighted, label)
        if rel not in self._aliases:
            self._aliases[rel] = self._derived_alias()
        alias = self._aliases[rel]
        return Input(index, alias, rel.schema, compiled.program, compiled.static, compiled.weighted,
                     f"derived input {alias} ({type(rel).__name__.lower()})", single=at_most_one_row(rel))


def _table_aliases(rel: Rel) -> set[str]:
    seen: set[int] = set()
    out: set[str] = set()
    todo = [rel]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Scan):
            out.add(node.alias)
        todo.extend(node.inputs())
    return out


def at_most_one_row(rel: Rel) -> bool:
    """Whether ``rel`` never has more than one row: a global aggregate (no GROUP BY), or a
    filter, projection, sort or LIMIT 1 of one."""
    while True:
        if isinstance(rel, Aggregate):
            return not rel.keys
        if isinstance(rel, Limit) and rel.limit is not None and rel.limit <= 1:
            return True
        if not isinstance(rel, (Filter, Project, Sort, Limit)):
            return False
        rel = rel.input


def reads_stream(rel: Rel) -> bool:
    """Whether ``rel`` reads a stream source (else it never changes: it is static)."""
    return any(isinstance(n, Scan) and not n.static for n in rel.walk())


def _repeated(logical: Rel, canonical: Callable[[Rel], Rel]) -> set[Rel]:
    """The canonical forms of the relations a query reads more than once (a CTE read twice,
    the parts of an iteration's steps that do not depend on the loop)."""
    expanded = logical.transform(
        lambda n: unroll(n) if isinstance(n, Iterate) and n.mode == IterationMode.EXACT else None)
    seen: set[Rel] = set()
    repeated: set[Rel] = set()

    def visit(rel: Rel) -> None:
        key = canonical(rel)
        if key in seen:
            repeated.add(key)
            return  # its parts are read through it
        seen.add(key)
        for child in rel.inputs():
            visit(child)

    visit(expanded)
    return repeated


def _costly(program: Rel) -> bool:
    """Whether a delta program does more than filter and project the batch's rows."""
    return any(not isinstance(n, (DeltaScan, Filter, Project, Once, Scan)) for n in program.walk())
