"""Lineage injection and the delta rule for joins (seed 000 §8, and beyond it).

Each input of a join body is kept as a state keyed by its *lineage*: its join keys, plus what
the consumer above the join reads of it (group keys, values, residual predicates). Rows with
equal lineage merge, so a state is the input pre-aggregated on lineage — as the seed's h does
for join-groupBy — and may carry partial aggregates of the columns only it has.

A batch's change to the join is ``Σᵢ R₁'⋈…⋈Rᵢ₋₁'⋈ΔRᵢ⋈Rᵢ₊₁⋈…⋈Rₙ`` over the stream inputs
(primes: after this batch's merge), which is exact for many-to-many joins; a static input has
one version; a body with one stream needs no state for it.

A theta join of two streams (no equality between them) is laid out as a join matrix
(:mod:`.matrix`): both states are also keyed by the cells a row is kept in, and the delta terms
meet them cell by cell instead of as a filtered cross product.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..ir.expr import Agg, Call, Column, Expr, Literal, and_all
from ..ir.rel import (
    WEIGHT, Aggregate, Explode, Field, Filter, Join, JoinKind, Project, Rel, StateScan, StateVersion, Union,
)
from ..ir.types import BIGINT, BOOLEAN
from .aggregates import Partial, scale
from .body import Body, Input
from .builder import PlanBuilder
from .matrix import Mapping, Matrix, auto_note, hybrid_keys, plan_matrix
from .model import DeltaJoin, JoinMatrix, Merge, Monoid, SkewWatch, State, StateColumn, StateRole, Step


@dataclass
class Lineage:
    """One input's lineage: named expressions over its columns, and the partials it pre-aggregates."""

    exprs: list[tuple[str, Expr]] = field(default_factory=list)
    partials: list[Partial] = field(default_factory=list)

    def add(self, alias: str, e: Expr, taken: set[str]) -> None:
        if any(x == e for _, x in self.exprs):
            return
        if isinstance(e, Column):
            name = e.name
        else:
            k = 0
            while f"{alias}._l{k}" in taken:
                k += 1
            name = f"{alias}._l{k}"
        taken.add(name)
        self.exprs.append((name, e))


class JoinTerms:
    """Builds the states of a body's inputs and the program of a batch's change to the join."""

    def __init__(self, plan: PlanBuilder, body: Body) -> None:
        self.plan = plan
        self.body = body
        self.lineage: dict[int, Lineage] = {}
        first = self._state_name(body.inputs[0])
        given = plan.mappings.get(first) if len(body.inputs) == 2 else None
        self.matrix: Matrix | None = plan_matrix(body, Mapping(*given) if given is not None else None, plan.policy,
                                                 plan.heavy.get(first))

    # -- lineage ---------------------------------------------------------------------------------
    def inject(self, consumer: list[Expr], partials: list[Partial]) -> None:
        """Per input: the expressions to keep (join keys, what the consumer reads) and partials."""
        body = self.body
        self.lineage = {i.index: Lineage() for i in body.inputs}
        taken = {f.name for i in body.inputs for f in i.fields}
        for e in body.edges:
            self.lineage[e.left].add(body.inputs[e.left].alias, e.left_expr, taken)
            self.lineage[e.right].add(body.inputs[e.right].alias, e.right_expr, taken)
        for r in body.residual:
            self._add_columns(r, taken)
        for c in consumer:
            sides = body.inputs_of(c)
            if len(sides) == 1:
                i = next(iter(sides))
                self.lineage[i].add(body.inputs[i].alias, c, taken)
            else:
                self._add_columns(c, taken)
        for p in partials:
            sides = body.inputs_of(p.arg)
            if len(sides) == 1 and len(body.inputs) > 1:
                self.lineage[next(iter(sides))].partials.append(p)
            else:
                self._add_columns(p.arg, taken)

    def _add_columns(self, e: Expr, taken: set[str]) -> None:
        for name in sorted(e.columns()):
            i = self.body.owner[name]
            inp = self.body.inputs[i]
            self.lineage[i].add(inp.alias, inp.field(name).ref(), taken)

    def over(self, e: Expr) -> Expr:
        """``e`` rewritten over lineage columns (whole lineage expressions matched top-down)."""
        table = {x: Column(n, x.type) for lin in self.lineage.values() for n, x in lin.exprs}

        def go(x: Expr) -> Expr:
            if x in table:
                return table[x]
            kids = x.children()
            return x.with_children(tuple(go(k) for k in kids)) if kids else x

        return go(e)

    # -- inputs as join operands -------------------------------------------------------------
    def operand(self, inp: Input, version: StateVersion | None) -> Rel:
        """An input as a join operand: its lineage columns, its weight ``alias._weight``, its partials.

        ``version`` is the version of the input's state to read, or None for the batch's rows of
        the only stream (which then needs no state).
        """
        lin = self.lineage[inp.index]
        weight_name = f"{inp.alias}.{WEIGHT}"
        if version is None:
            cond = and_all(inp.filters)
            rows: Rel = Filter(inp.rows, cond) if cond is not None else inp.rows
            weight = Column(WEIGHT, BIGINT)
            exprs = list(lin.exprs) + [(weight_name, weight)]
            exprs += [(p.name, p.contribution(weight)) for p in lin.partials]
            return Project(rows, tuple(exprs))
        name = self.input_state(inp)
        state = self.plan.fields(name)
        rename = [(f.name, f.ref()) for f in state if f.name != WEIGHT] + [(weight_name, Column(WEIGHT, BIGINT))]
        return Project(StateScan(name, StateVersion.OLD if inp.static else version, state), tuple(rename))

    def input_state(self, inp: Input) -> str:
        """Declare (once) the state of an input, pre-aggregated on its lineage."""
        name = self._state_name(inp)
        if any(s.name == name for s in self.plan.states):
            return name
        lin = self.lineage[inp.index]
        key = tuple(Field(n, e.type) for n, e in lin.exprs) + tuple(Field(n, BIGINT) for n in self._cell_names(inp))
        columns = (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "number of rows"),) + tuple(
            StateColumn(p.name, p.type, p.monoid, p.meaning) for p in lin.partials
        )
        edges = [e for e in self.body.edges if inp.index in (e.left, e.right)]
        not_null: list[Expr] = [Call("IS NOT NULL", (e.left_expr if e.left == inp.index else e.right_expr,), BOOLEAN)
                    for e in edges if not e.null_safe]
        cond = and_all(_unique(list(inp.filters) + not_null))
        rows = Filter(inp.rows, cond) if cond is not None else inp.rows
        weight: Expr = Literal(1, BIGINT) if inp.static else Column(WEIGHT, BIGINT)
        aggs: list[tuple[str, Agg]] = [(WEIGHT, Agg("sum", (weight,), False, BIGINT))]
        aggs += [(p.name, Agg(p.monoid.merge_sql, (p.contribution(weight),), False, p.type)) for p in lin.partials]
        lineage_text = ", ".join(n for n, _ in lin.exprs) or "()"
        note = f"{inp.label} pre-aggregated on its lineage ({lineage_text})"
        program: Rel
        partition = self._partition(inp, edges)
        if self.matrix is None:
            program = Aggregate(rows, tuple(lin.exprs), tuple(aggs))
        else:
            program, cells = self._matrix_rows(inp, rows, aggs)
            partition = (partition or ()) + cells  # an equi-join's key, then the cell (the join's order)
            side = "row" if inp.index == 0 else "column"
            if self.matrix.kind == "hybrid":
                note += f", a heavy key's row kept in each cell of its {side} group of the join matrix, another in the cell its key hashes to"
            else:
                note += f", kept in each cell of its {side} group of the join matrix"
        state = State(name, StateRole.STATIC if inp.static else StateRole.JOIN_INPUT, key, columns,
                      note=note, static=inp.static, partition=partition)
        if inp.static:
            self.plan.add_static(state, program)
        else:
            self.plan.add_state(state, program)
        return name

    @staticmethod
    def _state_name(inp: Input) -> str:
        return ("st_" if inp.static else "in_") + _safe(inp.alias)

    def _cell_names(self, inp: Input) -> tuple[str, ...]:
        """The columns a matrix state adds to its key: the cell, and the value bucket of a band."""
        if self.matrix is None:
            return ()
        alias = _safe(inp.alias)
        return (f"{alias}._cell",) + ((f"{alias}._bucket",) if self.matrix.band is not None else ())

    def _matrix_rows(self, inp: Input, rows: Rel, aggs: list[tuple[str, Agg]]) -> tuple[Rel, tuple[str, ...]]:
        """An input's rows replicated into the cells of its group, with their value bucket; the
        state is partitioned on (cell, bucket), which the delta terms join it on."""
        matrix = self.matrix
        assert matrix is not None
        lin = self.lineage[inp.index]
        names = self._cell_names(inp)
        replica = f"{_safe(inp.alias)}._replica"
        exploded = Explode(rows, matrix.replicas(inp.index), replica)
        group = matrix.group(inp.index, tuple(e for _, e in lin.exprs))
        keys = list(lin.exprs) + [(names[0], matrix.cell(inp.index, group, Column(replica, BIGINT)))]
        if matrix.band is not None:
            keys.append((names[1], matrix.band.bucket(inp.index)))
        return Aggregate(exploded, tuple(keys), tuple(aggs)), names

    def _partition(self, inp: Input, edges: list) -> tuple[str, ...] | None:
        """The join key of the input's first join partner that is a stream: what a delta joins
        this state on (a static table's rows come once, with the history, so a partner that is
        one never probes the state batch after batch; TPC-H Q18's orders, partitioned on their
        customer, were moved whole by every batch's line items, which join them on the order)."""
        if not edges:
            return None
        lin = self.lineage[inp.index]
        partners = {e.right if e.left == inp.index else e.left for e in edges}
        streams = {i for i in partners if not self.body.inputs[i].static}
        partner = min(streams or partners)
        names = []
        for e in edges:
            if partner in (e.left, e.right):
                mine = e.left_expr if e.left == inp.index else e.right_expr
                names.append(next(n for n, x in lin.exprs if x == mine))
        return tuple(dict.fromkeys(names))

    # -- the change of a batch -------------------------------------------------------------------
    def terms(self, partials: list[Partial], out_cols: list[tuple[str, Expr]],
              value_cols: list[tuple[str, Expr]]) -> Rel:
        """The union over stream inputs i of ``Δi ⋈ (inputs before i, new) ⋈ (inputs after i, old)``,
        each joined row projected to the consumer's columns and its weight ``_weight``."""
        streams = self.body.streams
        need_state = len(streams) > 1
        if self.matrix is not None:
            self.plan.note(self.matrix.describe())
            left, right = (self._state_name(i) for i in self.body.inputs)
            mp = self.matrix.mapping
            hybrid = None
            if self.matrix.keys is not None:  # the key's lineage column in each state
                hybrid = tuple(next(n for n, x in self.lineage[i].exprs if x == k)
                               for i, k in enumerate(self.matrix.keys))
            if not any(x.left == left for x in self.plan.matrices):
                self.plan.matrices.append(JoinMatrix(left, right, mp.n, mp.m, hybrid, self.matrix.heavy))  # type: ignore[arg-type]
        elif not self.body.edges and any(i.single for i in self.body.inputs):  # plan_matrix and hybrid_keys skip it
            self.plan.note("a join with a relation of at most one row (a global aggregate) is a filtered cross "
                           "product: that row is broadcast to the other input, which is neither moved nor split")
        elif self.plan.policy.equi == "auto" and (keys := hybrid_keys(self.body)) is not None:
            left, right = (self._state_name(i) for i in self.body.inputs)
            names = tuple(next(n for n, x in self.lineage[i].exprs if x == k) for i, k in enumerate(keys))
            self.plan.note(auto_note(keys, self.plan.policy.cells))
            if not any(x.left == left for x in self.plan.watched):
                self.plan.watched.append(SkewWatch(left, right, names, self.plan.policy.cells))  # type: ignore[arg-type]
        # the states are declared in the compile-time order of the first term (a re-planned order
        # changes the programs, never the states: the runtime swaps plans over the same states)
        for i in [streams[0].index] + self._order(streams[0], False):
            if i != streams[0].index or need_state:
                self.input_state(self.body.inputs[i])
        terms: list[Rel] = []
        orders: list[tuple[str, tuple[str, ...]]] = []
        for inp in streams:
            first = self.operand(inp, StateVersion.DELTA if need_state else None)
            order = self._order(inp)
            joined = self._join_others(inp, first, order)
            terms.append(self._project(joined, partials, out_cols, value_cols))
            orders.append((self._state_name(inp), tuple(self._state_name(self.body.inputs[i]) for i in order)))
        if need_state and self.matrix is None and len(self.body.inputs) >= 3:
            name = self._state_name
            edges = tuple(dict.fromkeys((name(self.body.inputs[e.left]), name(self.body.inputs[e.right]))
                                        for e in self.body.edges))
            self.plan.delta_joins.append(DeltaJoin(tuple(name(i) for i in self.body.inputs), edges, tuple(orders)))
            self.plan.note("join order of each delta term (" + "; ".join(
                f"Δ{s} ⋈ {' ⋈ '.join(o)}" for s, o in orders) + "): re-planned between batches from the "
                "selectivities each batch measures (`explain --analyze` shows the current one)")
        return terms[0] if len(terms) == 1 else Union(tuple(terms))

    def _order(self, start: Input, given_order: bool = True) -> list[int]:
        """The order ``start``'s delta term joins the other inputs in: the one the runtime
        re-planned (``plan.orders``) if it is a connected order of them, else the compile-time
        one — at each step the lowest-numbered input an equality joins to those before it."""
        body = self.body
        given = self.plan.orders.get(self._state_name(start)) if given_order else None
        if given is not None and self.matrix is None:
            index = {self._state_name(i): i.index for i in body.inputs}
            order = [index.get(n, -1) for n in given]
            if sorted(order) == sorted(i.index for i in body.inputs if i.index != start.index) and _connected(
                    body, start.index, order):
                return order
        done = {start.index}
        order = []
        while len(done) < len(body.inputs):
            connected = [e for e in body.edges if (e.left in done) != (e.right in done)]
            if connected:
                nxt = min(e.right if e.left in done else e.left for e in connected)
            else:
                nxt = min(i.index for i in body.inputs if i.index not in done)
            order.append(nxt)
            done.add(nxt)
        return order

    def _join_others(self, start: Input, rel: Rel, order: list[int]) -> Rel:
        body = self.body
        done = {start.index}
        for nxt in order:
            other = self.operand(body.inputs[nxt], StateVersion.NEW if nxt < start.index else StateVersion.OLD)
            conds: list[Expr] = []
            for e in body.edges:
                if {e.left, e.right} <= done | {nxt} and nxt in (e.left, e.right):
                    a, b = self.over(e.left_expr), self.over(e.right_expr)
                    conds.append(Call("<=>" if e.null_safe else "=", (a, b), BOOLEAN))
            if self.matrix is not None:
                rel, cells = self._cells(start, rel, body.inputs[nxt])
                conds += cells
            cond = and_all(conds)
            rel = Join(rel, other, JoinKind.INNER if cond is not None else JoinKind.CROSS, cond)
            done.add(nxt)
        if body.residual:
            cond = and_all([self.over(r) for r in body.residual])
            assert cond is not None
            rel = Filter(rel, cond)
        return rel

    def _cells(self, start: Input, delta: Rel, other: Input) -> tuple[Rel, list[Expr]]:
        """A matrix's delta term: the batch's rows meet the other state in their cells — and, in a
        band, in the buckets the band may reach, one exploded row per bucket offset."""
        matrix = self.matrix
        assert matrix is not None
        mine, theirs = self._cell_names(start), self._cell_names(other)
        conds: list[Expr] = [Call("=", (Column(mine[0], BIGINT), Column(theirs[0], BIGINT)), BOOLEAN)]
        if matrix.band is not None:
            offset = f"{_safe(start.alias)}._offset"
            delta = Explode(delta, matrix.offsets(), offset)
            # b(left) − b(right) = k: the left side's rows look for b(right) = b(left) − k
            sign = "-" if start.index == 0 else "+"
            target = Call(sign, (Column(mine[1], BIGINT), Column(offset, BIGINT)), BIGINT)
            conds.append(Call("=", (target, Column(theirs[1], BIGINT)), BOOLEAN))
        return delta, conds

    def _project(self, joined: Rel, partials: list[Partial], out_cols: list[tuple[str, Expr]],
                 value_cols: list[tuple[str, Expr]]) -> Rel:
        weights = [Column(f"{i.alias}.{WEIGHT}", BIGINT) for i in self.body.inputs]
        total: Expr = weights[0]
        for w in weights[1:]:
            total = Call("*", (total, w), BIGINT)
        exprs: list[tuple[str, Expr]] = list(out_cols) + [(WEIGHT, total)]
        for p in partials:
            owner = next((i for i, lin in self.lineage.items() if p in lin.partials), None)
            if owner is None:
                local = Partial(p.kind, self.over(p.arg))
                exprs.append((p.name, local.contribution(total) if p.monoid == Monoid.SUM else local.arg))
                continue
            pre = Column(p.name, p.type)
            if p.monoid != Monoid.SUM:
                exprs.append((p.name, pre))
                continue
            others: Expr | None = None
            for i, w in zip(self.body.inputs, weights):
                if i.index != owner:
                    others = w if others is None else Call("*", (others, w), BIGINT)
            exprs.append((p.name, scale(pre, others, p.type) if others is not None else pre))
        exprs += value_cols
        return Project(joined, tuple(exprs))


def _connected(body: Body, start: int, order: list[int]) -> bool:
    """Whether each input of ``order`` has an equality with ``start`` or one joined before it (a
    re-planned order never makes a cross product)."""
    done = {start}
    for i in order:
        if not any({e.left, e.right} == {i, j} for e in body.edges for j in done):
            return False
        done.add(i)
    return True


def delta_joins(joins: list[DeltaJoin], steps: list[Step]) -> tuple[DeltaJoin, ...]:
    """``joins`` with the merge step that holds each one's delta terms: the one step reading
    the delta of every term's start state whose program joins exactly as many times as the
    terms do (the runtime then reads each join's output rows from its plan's metrics, in order)."""
    out = []
    for d in joins:
        starts = {s for s, _ in d.terms}
        joined = len(d.terms) * (len(d.inputs) - 1)
        found = [s.state for s in steps if isinstance(s, Merge) and _reads_deltas(s.program) >= starts
                 and sum(isinstance(n, Join) for n in s.program.walk()) == joined]
        out.append(replace(d, step=found[0] if len(found) == 1 else None))
    return tuple(out)


def _reads_deltas(program: Rel) -> set[str]:
    return {n.state for n in program.walk() if isinstance(n, StateScan) and n.version == StateVersion.DELTA}


def _unique(items: list[Expr]) -> list[Expr]:
    out: list[Expr] = []
    for i in items:
        if i not in out:
            out.append(i)
    return out


def _safe(alias: str) -> str:
    return alias.replace("#", "_")
