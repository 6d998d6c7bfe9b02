"""Incrementalization (seed 000 §7–§9): a normalized query in, an :class:`IncrementalPlan` out.

The steps, in the seed's terms:

1. *Lineage injection* (Alg. 2). Each join input is kept as a state keyed by its lineage: the
   join keys, plus whatever the query needs of it above the join (group keys, values). Rows with
   equal lineage merge, so an input's state is its pre-aggregation on lineage — what the seed's
   h computes for the join-groupBy query.
2. *Monoid inference* (Fig. 2). Every state column carries the monoid that merges it: counts and
   sums ``+``, insert-only min/max ``min``/``max``. Aggregates that are not homomorphisms are
   split (:mod:`.aggregates`): ``avg`` into ``(sum, count)``, DISTINCT into a multiset.
3. *Split q = a ∘ h* (§9). Everything above the last GROUP BY — the division of avg, HAVING,
   the select list, ORDER BY, LIMIT — moves to the answer function a.
4. *Merge ⊗*. Each state merges with its delta as a full outer join on its key, combining
   columns by their monoids; the runtime runs it as a partitioned union-and-aggregate.

Beyond the seed: a join is maintained with the delta rule
``Δ(R ⋈ S) = ΔR ⋈ S + R' ⋈ ΔS`` over both inputs' states (``R'`` = R after this batch's merge),
which keeps many-to-many joins exact; deletions (negative weights) flow through every rule.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UnsupportedError
from ..ir.expr import Agg, Call, Column, Expr, Literal, and_all
from ..ir.rel import (
    WEIGHT, Aggregate, DeltaScan, Distinct, Expand, Field, Filter, Join, Limit, Project, Rel, Scan, Sort,
    SortKey, StateScan, Union,
)
from ..ir.types import BIGINT, BOOLEAN
from ..passes import normalize
from ..sql.bind import BoundQuery
from .aggregates import AggSpec, Partial, decompose, multiset_final, scale
from .body import Body, Input, flatten
from .model import WEIGHT_COLUMN, Answer, IncrementalPlan, Monoid, State, StateColumn, Step
from .simplify import simplify

W = WEIGHT_COLUMN


def incrementalize(bound: BoundQuery) -> IncrementalPlan:
    """Compile a bound query into its incremental plan, or refuse with a coded error."""
    logical = normalize(bound.rel)
    try:
        return _Planner(bound, logical).plan()
    except UnsupportedError as e:
        raise e.with_sql(bound.sql) from None


@dataclass
class _Top:
    """What sits above the query's rows: ORDER BY, LIMIT/OFFSET and hidden sort columns."""

    rows: Rel
    output: tuple[str, ...]
    order: tuple[SortKey, ...] = ()
    limit: int | None = None
    offset: int = 0


def _peel(rel: Rel) -> _Top:
    output: tuple[str, ...] | None = None
    if isinstance(rel, Project) and isinstance(rel.input, (Limit, Sort)):
        output = rel.names
        rel = rel.input
    limit, offset = None, 0
    if isinstance(rel, Limit):
        limit, offset = rel.limit, rel.offset
        rel = rel.input
    order: tuple[SortKey, ...] = ()
    if isinstance(rel, Sort):
        order = rel.keys
        rel = rel.input
    return _Top(rel, output if output is not None else rel.names, order, limit, offset)


@dataclass
class _Lineage:
    """One input's lineage: named expressions over its scan, and the partials it pre-aggregates."""

    exprs: list[tuple[str, Expr]] = field(default_factory=list)
    partials: list[Partial] = field(default_factory=list)

    def add(self, name_hint: str, e: Expr, taken: set[str]) -> None:
        if any(x == e for _, x in self.exprs):
            return
        if isinstance(e, Column):
            name = e.name
        else:
            k = 0
            while f"{name_hint}._l{k}" in taken:
                k += 1
            name = f"{name_hint}._l{k}"
        taken.add(name)
        self.exprs.append((name, e))


class _Planner:
    def __init__(self, bound: BoundQuery, logical: Rel) -> None:
        self.bound = bound
        self.logical = logical
        self.states: list[State] = []
        self.init: list[Step] = []
        self.delta: list[Step] = []
        self.notes: list[str] = []

    # -- entry -----------------------------------------------------------------------------------
    def plan(self) -> IncrementalPlan:
        top = _peel(self.logical)
        above: list[Rel] = []  # Filter/Project nodes between the rows' top and an Aggregate
        node = top.rows
        while isinstance(node, (Project, Filter)):
            above.append(node)
            node = node.input
        if isinstance(node, Aggregate):
            answer = self._aggregate_query(node, above, top)
        elif isinstance(top.rows, Distinct):
            answer = self._distinct_query(top.rows, top)
        elif isinstance(node, Union) or isinstance(top.rows, Union):
            raise UnsupportedError("UNION is not supported yet", code="UNSUPPORTED_SET_OPERATION",
                                   params={"construct": "UNION"}, hint="see docs/sql.md")
        else:
            answer = self._plain_query(top)
        used = {s.table.lower() for s in self.logical.walk() if isinstance(s, Scan)}
        sources = tuple(s for s in self.bound.catalog.values() if s.name.lower() in used)
        return IncrementalPlan(
            sql=self.bound.sql, sources=sources, logical=self.logical, states=tuple(self.states),
            init=tuple(self.init), delta=tuple(self.delta), answer=answer, notes=tuple(self.notes),
        )

    def _body(self, rel: Rel) -> tuple[Body, dict[str, Expr]]:
        body, mapping = flatten(rel)
        if not body.streams:
            raise UnsupportedError(
                "the query reads no stream source, so its answer never changes", code="NO_STREAM",
                params={}, hint="give at least one input with --source (static inputs use --table)",
            )
        return body, mapping

    # -- query forms -----------------------------------------------------------------------------
    def _aggregate_query(self, agg: Aggregate, above: list[Rel], top: _Top) -> Answer:
        body, mapping = self._body(agg.input)
        keys = [(n, e.substitute(mapping)) for n, e in agg.keys]
        specs: list[tuple[str, AggSpec]] = []
        for name, a in agg.aggs:
            bound = a.substitute(mapping)
            assert isinstance(bound, Agg)
            specs.append((name, decompose(bound, body.deletions)))
        partials: list[Partial] = []
        for _, spec in specs:
            for p in spec.partials:
                if p not in partials:
                    partials.append(p)
        multisets: list[Expr] = []
        for _, spec in specs:
            if spec.multiset is not None and spec.multiset not in multisets:
                multisets.append(spec.multiset)
        self._note_aggregates(specs, body)

        consumer = [e for _, e in keys] + multisets
        lineage = self._lineage(body, consumer, partials)
        # Columns of a joined row: group keys, the weight, partial contributions, multiset values.
        out_cols: list[tuple[str, Expr]] = [(n, self._over(e, lineage, body)) for n, e in keys]
        key_fields = tuple(Field(n, e.type) for n, e in keys)
        value_cols = [(f"v{k}", self._over(m, lineage, body)) for k, m in enumerate(multisets)]
        joined = self._terms(body, lineage, partials, out_cols, value_cols)

        agg_aggs: list[tuple[str, Agg]] = [(W, Agg("sum", (Column(W, BIGINT),), False, BIGINT))]
        for p in partials:
            agg_aggs.append((p.name, Agg(p.monoid.merge_sql, (Column(p.name, p.type),), False, p.type)))
        group = tuple((n, Column(n, e.type)) for n, e in out_cols)
        if multisets:
            self.delta.append(Step("rows", simplify(joined), temp=True))
            source: Rel = StateScan("rows", "delta", joined.schema)
        else:
            source = joined
        self._state(State(
            "agg", "aggregate", key_fields,
            (StateColumn(W, BIGINT, Monoid.SUM, "number of rows"),)
            + tuple(StateColumn(p.name, p.type, p.monoid, p.meaning) for p in partials),
            note="group by " + (", ".join(n for n, _ in keys) if keys else "() — one global row"),
            keep_empty=not keys,
        ), Aggregate(source, group, tuple(agg_aggs)))
        for k, m in enumerate(multisets):
            v = Field("v", m.type)
            ms_source = Filter(source, Call("IS NOT NULL", (Column(f"v{k}", m.type),), BOOLEAN))
            self._state(State(
                f"ms{k}", "multiset", key_fields + (v,),
                (StateColumn(W, BIGINT, Monoid.SUM, "number of rows with this value"),),
                note=f"values of {_show(m)} per group", partition=tuple(n for n, _ in keys) or None,
            ), Aggregate(ms_source, group + (("v", Column(f"v{k}", m.type)),),
                         ((W, Agg("sum", (Column(W, BIGINT),), False, BIGINT)),)))

        rows = self._aggregate_answer(agg, above, keys, specs, partials, multisets, key_fields)
        global_answer = not keys or top.limit is not None or top.offset > 0
        per_key = None
        if keys and not multisets:
            per_key = self._per_key(above, keys, specs, partials, key_fields)
        return Answer(
            rows=rows, output=top.output, output_names=self.bound.output_names, order=top.order,
            limit=top.limit, offset=top.offset, changes="global" if global_answer else "keyed",
            change_states=("agg",) + tuple(f"ms{k}" for k in range(len(multisets))),
            touched_key=tuple(n for n, _ in keys), per_key=per_key,
        )

    def _per_key(self, above: list[Rel], keys: list[tuple[str, Expr]], specs: list[tuple[str, AggSpec]],
                 partials: list[Partial], key_fields: tuple[Field, ...]) -> Rel:
        """a over the group state alone, row by row (one state row per group)."""
        state_fields = key_fields + (Field(W, BIGINT),) + tuple(Field(p.name, p.type) for p in partials)
        weight = Column(W, BIGINT)
        exprs: list[tuple[str, Expr]] = [(n, Column(n, f.type)) for (n, _), f in zip(keys, key_fields)]
        exprs += [(name, spec.final(weight)) for name, spec in specs]
        rows: Rel = Project(StateScan("agg", "new", state_fields), tuple(exprs))
        for node in reversed(above):
            rows = node.with_inputs((rows,))
        return rows

    def _aggregate_answer(self, agg: Aggregate, above: list[Rel], keys: list[tuple[str, Expr]],
                          specs: list[tuple[str, AggSpec]], partials: list[Partial], multisets: list[Expr],
                          key_fields: tuple[Field, ...]) -> Rel:
        """a over the group state and the multiset states.

        All of them are partitioned on the group key, so a reads them as one union aggregated by
        that key — no join, no shuffle — where each group's row takes the group state's partials
        (one row per key: ``sum`` just picks it) and the aggregates of each multiset's values. A
        global aggregate (no key) yields its one row even over empty states.
        """
        state_fields = key_fields + (Field(W, BIGINT),) + tuple(Field(p.name, p.type) for p in partials)
        columns: list[Field] = [Field(W, BIGINT)] + [Field(p.name, p.type) for p in partials]
        columns += [Field(f"v{k}", m.type) for k, m in enumerate(multisets)]
        key_refs = [(n, Column(n, f.type)) for (n, _), f in zip(keys, key_fields)]
        # Each branch renames the key (to _g0, _g1, …): Spark 4.3 keeps a union's hash
        # partitioning through projections that alias the key, but drops it when the key passes
        # through beside computed columns, which would shuffle every state once per batch.
        grouped_keys = [(f"_g{i}", Column(n, f.type)) for i, ((n, _), f) in enumerate(zip(keys, key_fields))]

        def branch(state: Rel, present: dict[str, Expr]) -> Rel:
            exprs = grouped_keys + [(c.name, present.get(c.name, Literal(None, c.type))) for c in columns]
            return Project(state, tuple(exprs))

        branches = [branch(StateScan("agg", "new", state_fields), {f.name: f.ref() for f in state_fields[len(keys):]})]
        for k, m in enumerate(multisets):
            ms_fields = key_fields + (Field("v", m.type), Field(W, BIGINT))
            branches.append(branch(StateScan(f"ms{k}", "new", ms_fields), {f"v{k}": Column("v", m.type)}))
        merged = [(W, Agg("sum", (Column(W, BIGINT),), False, BIGINT))]
        merged += [(p.name, Agg(p.monoid.merge_sql, (Column(p.name, p.type),), False, p.type)) for p in partials]
        for i, (_, spec) in enumerate(specs):
            if spec.multiset is not None:
                k = multisets.index(spec.multiset)
                merged.append((f"_ms{i}", multiset_final(spec.agg, Column(f"v{k}", spec.multiset.type))))
        source: Rel = branches[0] if len(branches) == 1 else Union(tuple(branches))
        grouped = Aggregate(source, tuple((n, Column(g, e.type)) for (n, e), (g, _) in zip(key_refs, grouped_keys)),
                            tuple(merged))
        weight = Column(W, BIGINT)
        exprs: list[tuple[str, Expr]] = list(key_refs)
        for i, (name, spec) in enumerate(specs):
            if spec.multiset is not None:
                final: Expr = Column(f"_ms{i}", spec.agg.type)
                if spec.agg.fn == "count":
                    final = Call("coalesce", (final, Literal(0, BIGINT)), BIGINT, "coalesce({0}, {1})")
            else:
                final = spec.final(weight)
            exprs.append((name, final))
        rows: Rel = Project(grouped, tuple(exprs))
        for node in reversed(above):
            rows = node.with_inputs((rows,))
        return rows

    def _plain_query(self, top: _Top) -> Answer:
        out_fields, _ = self._output_state(top.rows)
        rows = Expand(StateScan("out", "new", out_fields + (Field(W, BIGINT),)), W)
        global_answer = top.limit is not None or top.offset > 0
        return Answer(
            rows=rows, output=top.output, output_names=self.bound.output_names, order=top.order,
            limit=top.limit, offset=top.offset, changes="global" if global_answer else "delta",
            change_states=("out",),
        )

    def _distinct_query(self, rows: Distinct, top: _Top) -> Answer:
        out_fields, names = self._output_state(rows.input)
        state = StateScan("out", "new", out_fields + (Field(W, BIGINT),))
        result = Project(state, tuple((n, Column(n, f.type)) for n, f in zip(names, out_fields)))
        global_answer = top.limit is not None or top.offset > 0
        self.notes.append("DISTINCT: the output state counts each row; a row is in the answer while its count is positive")
        return Answer(
            rows=result, output=top.output, output_names=self.bound.output_names, order=top.order,
            limit=top.limit, offset=top.offset, changes="global" if global_answer else "keyed",
            change_states=("out",), touched_key=tuple(names), per_key=result,
        )

    def _output_state(self, rel: Rel) -> tuple[tuple[Field, ...], list[str]]:
        """The rows of ``rel`` kept as a bag: a state keyed by every output column, counting copies."""
        body, mapping = self._body(rel)
        outputs = [(n, mapping[n]) for n in rel.names]
        lineage = self._lineage(body, [e for _, e in outputs], [])
        out_cols = [(n, self._over(e, lineage, body)) for n, e in outputs]
        joined = self._terms(body, lineage, [], out_cols, [])
        fields = tuple(Field(n, e.type) for n, e in outputs)
        self._state(
            State("out", "output", fields, (StateColumn(W, BIGINT, Monoid.SUM, "multiplicity of the row"),),
                  note="the answer's rows with their multiplicity"),
            Aggregate(joined, tuple((n, Column(n, e.type)) for n, e in out_cols),
                      ((W, Agg("sum", (Column(W, BIGINT),), False, BIGINT)),)),
        )
        return fields, [n for n, _ in outputs]

    # -- lineage and join terms ------------------------------------------------------------------
    def _lineage(self, body: Body, consumer: list[Expr], partials: list[Partial]) -> dict[int, _Lineage]:
        """Per input: the expressions to keep (join keys, what the consumer reads) and partials."""
        lineage = {i.index: _Lineage() for i in body.inputs}
        taken = {f.name for i in body.inputs for f in i.scan.schema}
        for e in body.edges:
            lineage[e.left].add(body.inputs[e.left].alias, e.left_expr, taken)
            lineage[e.right].add(body.inputs[e.right].alias, e.right_expr, taken)
        for r in body.residual:
            self._add_columns(body, lineage, r, taken)
        for c in consumer:
            sides = body.inputs_of(c)
            if len(sides) == 1:
                i = next(iter(sides))
                lineage[i].add(body.inputs[i].alias, c, taken)
            else:
                self._add_columns(body, lineage, c, taken)
        for p in partials:
            sides = body.inputs_of(p.arg)
            if len(sides) == 1 and len(body.inputs) > 1:
                lineage[next(iter(sides))].partials.append(p)
            else:
                self._add_columns(body, lineage, p.arg, taken)
        return lineage

    def _add_columns(self, body: Body, lineage: dict[int, _Lineage], e: Expr, taken: set[str]) -> None:
        for name in sorted(e.columns()):
            i = body.owner[name]
            col = body.inputs[i].scan.field(name).ref()
            lineage[i].add(body.inputs[i].alias, col, taken)

    def _over(self, e: Expr, lineage: dict[int, _Lineage], body: Body) -> Expr:
        """``e`` rewritten over lineage columns (whole lineage expressions matched top-down)."""
        table = {x: Column(n, x.type) for lin in lineage.values() for n, x in lin.exprs}

        def go(x: Expr) -> Expr:
            if x in table:
                return table[x]
            kids = x.children()
            return x.with_children(tuple(go(k) for k in kids)) if kids else x

        return go(e)

    def _input_relation(self, body: Body, inp: Input, lin: _Lineage, version: str) -> Rel:
        """An input as a join operand: its lineage columns, its weight ``alias._w``, its partials.

        ``version`` is ``delta``/``old``/``new`` of the input's state, or ``batch`` for the raw
        batch rows of the only stream (which then needs no state).
        """
        weight_name = f"{inp.alias}.{W}"
        if version == "batch":
            scan = _delta_scan(inp.scan)
            filtered: Rel = Filter(scan, and_all(inp.filters)) if inp.filters else scan  # type: ignore[arg-type]
            weight = Column(WEIGHT, BIGINT)
            exprs = list(lin.exprs) + [(weight_name, weight)]
            exprs += [(p.name, p.contribution(weight)) for p in lin.partials]
            return Project(filtered, tuple(exprs))
        name = self._input_state(body, inp, lin)
        state = self.state_fields(name)
        rename = [(f.name, f.ref()) for f in state if f.name != W] + [(weight_name, Column(W, BIGINT))]
        return Project(StateScan(name, "old" if inp.static else version, state), tuple(rename))

    def state_fields(self, name: str) -> tuple[Field, ...]:
        return next(s for s in self.states if s.name == name).fields

    def _input_state(self, body: Body, inp: Input, lin: _Lineage) -> str:
        """Declare (once) the state of a join input, pre-aggregated on its lineage."""
        name = ("st_" if inp.static else "in_") + inp.alias
        if any(s.name == name for s in self.states):
            return name
        key = tuple(Field(n, e.type) for n, e in lin.exprs)
        columns = (StateColumn(W, BIGINT, Monoid.SUM, "number of rows"),) + tuple(
            StateColumn(p.name, p.type, p.monoid, p.meaning) for p in lin.partials
        )
        join_keys = [e for e in body.edges if inp.index in (e.left, e.right)]
        not_null = [
            Call("IS NOT NULL", (e.left_expr if e.left == inp.index else e.right_expr,), BOOLEAN)
            for e in join_keys if not e.null_safe
        ]
        base: Rel = Scan(inp.scan.table, inp.scan.alias, inp.scan.fields, inp.scan.columns, inp.scan.static,
                         inp.scan.weighted) if inp.static else _delta_scan(inp.scan)
        cond = and_all(list(inp.filters) + _unique(not_null))
        filtered = Filter(base, cond) if cond is not None else base
        weight: Expr = Literal(1, BIGINT) if inp.static else Column(WEIGHT, BIGINT)
        aggs: list[tuple[str, Agg]] = [(W, Agg("sum", (weight,), False, BIGINT))]
        for p in lin.partials:
            aggs.append((p.name, Agg(p.monoid.merge_sql, (p.contribution(weight),), False, p.type)))
        program = Aggregate(filtered, tuple(lin.exprs), tuple(aggs))
        lineage_text = ", ".join(n for n, _ in lin.exprs) or "()"
        state = State(name, "static" if inp.static else "join input", key, columns,
                      note=f"{inp.scan.table} {inp.alias} pre-aggregated on its lineage ({lineage_text})",
                      static=inp.static, partition=self._join_partition(inp, lin, join_keys))
        if inp.static:
            self.states.append(state)
            self.init.append(Step(name, simplify(program)))
        else:
            self._state(state, program)
        return name

    def _join_partition(self, inp: Input, lin: _Lineage, edges: list) -> tuple[str, ...] | None:
        """The join key of the input's first join partner: what a delta joins this state on."""
        if not edges:
            return None
        partner = min(e.right if e.left == inp.index else e.left for e in edges)
        names = []
        for e in edges:
            if partner in (e.left, e.right):
                mine = e.left_expr if e.left == inp.index else e.right_expr
                names.append(next(n for n, x in lin.exprs if x == mine))
        return tuple(dict.fromkeys(names))

    def _terms(self, body: Body, lineage: dict[int, _Lineage], partials: list[Partial],
               out_cols: list[tuple[str, Expr]], value_cols: list[tuple[str, Expr]]) -> Rel:
        """The union over stream inputs i of ``Δi ⋈ (inputs before i, new) ⋈ (inputs after i, old)``,
        each joined row projected to the consumer's columns and its weight."""
        streams = body.streams
        need_state = len(streams) > 1
        terms: list[Rel] = []
        for inp in streams:
            first = self._input_relation(body, inp, lineage[inp.index], "delta" if need_state else "batch")
            joined = self._join_others(body, lineage, inp, first)
            terms.append(self._project_term(body, lineage, joined, partials, out_cols, value_cols))
        return terms[0] if len(terms) == 1 else Union(tuple(terms))

    def _join_others(self, body: Body, lineage: dict[int, _Lineage], start: Input, rel: Rel) -> Rel:
        done = {start.index}
        while len(done) < len(body.inputs):
            connected = [e for e in body.edges if (e.left in done) != (e.right in done)]
            if connected:
                nxt = min(e.right if e.left in done else e.left for e in connected)
            else:
                nxt = min(i.index for i in body.inputs if i.index not in done)
            inp = body.inputs[nxt]
            version = "new" if nxt < start.index else "old"
            other = self._input_relation(body, inp, lineage[nxt], version)
            conds = []
            for e in body.edges:
                if {e.left, e.right} <= done | {nxt} and nxt in (e.left, e.right):
                    a = self._over(e.left_expr, lineage, body)
                    b = self._over(e.right_expr, lineage, body)
                    conds.append(Call("<=>" if e.null_safe else "=", (a, b), BOOLEAN))
            cond = and_all(conds)
            rel = Join(rel, other, "inner" if cond is not None else "cross", cond)
            done.add(nxt)
        if body.residual:
            cond = and_all([self._over(r, lineage, body) for r in body.residual])
            assert cond is not None
            rel = Filter(rel, cond)
        return rel

    def _project_term(self, body: Body, lineage: dict[int, _Lineage], joined: Rel, partials: list[Partial],
                      out_cols: list[tuple[str, Expr]], value_cols: list[tuple[str, Expr]]) -> Rel:
        weights = [Column(f"{i.alias}.{W}", BIGINT) for i in body.inputs]
        total: Expr = weights[0]
        for w in weights[1:]:
            total = Call("*", (total, w), BIGINT)
        exprs: list[tuple[str, Expr]] = list(out_cols) + [(W, total)]
        for p in partials:
            owner = next((i for i, lin in lineage.items() if p in lin.partials), None)
            if owner is None:
                local = Partial(p.kind, self._over(p.arg, lineage, body))
                exprs.append((p.name, local.contribution(total) if p.monoid == Monoid.SUM else local.arg))
                continue
            pre = Column(p.name, p.type)
            if p.monoid != Monoid.SUM:
                exprs.append((p.name, pre))
                continue
            others: Expr | None = None
            for i, w in zip(body.inputs, weights):
                if i.index != owner:
                    others = w if others is None else Call("*", (others, w), BIGINT)
            exprs.append((p.name, scale(pre, others, p.type) if others is not None else pre))
        exprs += value_cols
        return Project(joined, tuple(exprs))

    # -- bookkeeping -----------------------------------------------------------------------------
    def _state(self, state: State, program: Rel) -> None:
        self.states.append(state)
        self.delta.append(Step(state.name, simplify(program)))

    def _note_aggregates(self, specs: list[tuple[str, AggSpec]], body: Body) -> None:
        for _, spec in specs:
            a = spec.agg
            shown = _show(a)
            if a.fn == "avg" and spec.multiset is None:
                self.notes.append(f"{shown} = sum / count: (sum, count) kept in state by h, divided in a")
            elif spec.multiset is not None and a.fn in ("min", "max") and not a.distinct:
                self.notes.append(f"{shown}: inputs may delete rows, so the multiset of values is kept "
                                  f"(a min/max cannot be un-merged)")
            elif spec.multiset is not None:
                self.notes.append(f"{shown}: the multiset of values per group is kept; a counts the distinct ones")
            elif a.fn.startswith(("stddev", "var")):
                self.notes.append(f"{shown}: (count, sum, sum of squares) kept; a applies the moment formula")
        if len(body.streams) > 1:
            self.notes.append("join of streams: each side is kept pre-aggregated on its lineage; a batch joins "
                              "its delta with the other sides (Δ(R⋈S) = ΔR⋈S + R'⋈ΔS), exact also for "
                              "many-to-many joins")
        if body.deletions:
            self.notes.append("inputs carry _weight, so rows may be deleted: every state counts rows and drops "
                              "a key when its count reaches zero")


def _delta_scan(scan: Scan) -> DeltaScan:
    return DeltaScan(scan.table, scan.alias, scan.fields, scan.columns, scan.weighted)


def _unique(items: list[Expr]) -> list[Expr]:
    out: list[Expr] = []
    for i in items:
        if i not in out:
            out.append(i)
    return out


def _show(e: Expr) -> str:
    from ..ir.printer import sql

    return sql(e)
