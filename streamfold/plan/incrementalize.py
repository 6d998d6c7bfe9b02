"""Incrementalization (seed 000 §7–§9): a normalized query in, an :class:`IncrementalPlan` out.

The steps, in the seed's terms:

1. *Lineage injection* (Alg. 2). Each join input is kept as a state keyed by its lineage
   (:mod:`.joins`): the join keys, plus what the query needs of it above the join.
2. *Monoid inference* (Fig. 2). Every state column carries the monoid that merges it: counts
   and sums ``+``, insert-only min/max ``min``/``max``. Aggregates that are not homomorphisms
   are split (:mod:`.aggregates`): ``avg`` into ``(sum, count)``, DISTINCT into a multiset.
3. *Split q = a ∘ h* (§9). Everything above the last GROUP BY — the division of avg, HAVING,
   the select list, ORDER BY, LIMIT — moves to the answer function a.
4. *Merge ⊗*. Each state merges with its delta as a full outer join on its key, combining
   columns by their monoids.

Composition, beyond the seed: every relation compiles to a *delta program* — the rows a batch
adds to it, with their ``_weight`` (negative for rows it removes). A source's delta is the
batch's new rows; a filter or projection applies to the delta; a join follows the delta rule
over its inputs' states; an aggregate or DISTINCT nested in a bigger query keeps its own states
and hands on the change of its output (:mod:`.changes`). So any of them can be the input of a
join, of another aggregate, or of the query's answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import UnsupportedError
from ..ir.expr import Agg, Call, Case, Column, Expr, Literal
from ..ir.printer import sql
from ..ir.rename import canonical, unroll
from ..ir.rel import (
    WEIGHT, Aggregate, DeltaScan, Distinct, Expand, Explode, Field, Iterate, Filter, Join, Limit, LoopRef, Once, Project,
    Recursive, Rel, Scan, SetOp,
    Sort, SortKey, StateScan, Union,
)
from ..ir.types import BIGINT, BOOLEAN, INT
from ..passes import normalize
from ..sql.bind import BoundQuery
from .aggregates import AggSpec, Partial, decompose, multiset_final
from .body import Body, Input, flatten, is_body
from .builder import PlanBuilder
from .changes import distinct_delta, global_delta, keyed_delta, merged_fields, per_key_delta
from .joins import JoinTerms
from .rules_matchjoins import compile_match_join
from .model import (
    WEIGHT_COLUMN, Answer, ChangeMode, Diffusion, ExactIteration, Fixpoint, IncrementalPlan, Monoid, State, StateColumn,
    StateRole, OLD, TOUCHED,
)
from .simplify import simplify

W = WEIGHT_COLUMN
SUM_W = Agg("sum", (Column(W, BIGINT),), False, BIGINT)


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


def _repeated(logical: Rel) -> set[Rel]:
    """The canonical forms of the relations a query reads more than once (a CTE read twice,
    the parts of an iteration's steps that do not depend on the loop)."""
    expanded = logical.transform(lambda n: unroll(n) if isinstance(n, Iterate) and n.mode == "exact" else None)
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


def _rows(scan: Rel, rel: Rel, positive: bool = False) -> Rel:
    """The rows of a bag state under ``rel``'s column names (with ``positive``: only rows whose
    count grew — an insert-only batch's delta)."""
    source: Rel = scan
    if positive:
        source = Filter(scan, Call(">", (Column(W, BIGINT), Literal(0, BIGINT)), BOOLEAN))
    return Project(source, tuple((f.name, Column(f.name, f.type)) for f in rel.schema))


def _costly(program: Rel) -> bool:
    """Whether a delta program does more than filter and project the batch's rows."""
    return any(not isinstance(n, (DeltaScan, Filter, Project, Once, Scan)) for n in program.walk())


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


@dataclass(frozen=True)
class Compiled:
    """How a relation changes: ``program`` gives a batch's rows of it with ``_weight`` — or, for a
    static relation, all its rows (it never changes)."""

    program: Rel
    static: bool
    weighted: bool  # its changes may remove rows


@dataclass
class _AggInfo:
    """An aggregate's states and answer function."""

    name: str  # the group state
    keys: list[tuple[str, Expr]]
    key_fields: tuple[Field, ...]
    states: tuple[str, ...]  # the group state, then the multiset states
    rows: Rel  # a over the new states
    per_key: Rel | None  # a row by row, when it is (one group state, no multisets)


class _Planner:
    def __init__(self, bound: BoundQuery, logical: Rel) -> None:
        self.bound = bound
        self.logical = logical
        self.plan_ = PlanBuilder()
        self._derived = 0
        self._memo: dict[Rel, Compiled] = {}
        self._shared: dict[Rel, tuple[Rel, Compiled]] = {}  # canonical form → first relation, its delta
        self._repeated = _repeated(logical)
        self._aliases: dict[Rel, str] = {}

    # -- entry -----------------------------------------------------------------------------------
    def plan(self) -> IncrementalPlan:
        if not any(isinstance(n, Scan) and not n.static for n in self.logical.walk()):
            raise UnsupportedError(
                "the query reads no stream source, so its answer never changes", code="NO_STREAM",
                params={}, hint="give at least one input with --source (static inputs use --table)",
            )
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
        else:
            answer = self._plain_query(top)
        used = {s.table.lower() for s in self.logical.walk() if isinstance(s, Scan)}
        sources = tuple(s for s in self.bound.catalog.values() if s.name.lower() in used)
        p = self.plan_
        return IncrementalPlan(
            sql=self.bound.sql, sources=sources, logical=self.logical, states=tuple(p.states),
            init=tuple(p.init), delta=tuple(p.delta), answer=answer, notes=tuple(p.notes),
        )

    # -- compiling any relation to its delta -----------------------------------------------------
    def compile(self, rel: Rel) -> Compiled:
        """The delta program of ``rel`` (or, if it reads no stream, ``rel`` itself: static)."""
        if rel not in self._memo:
            self._memo[rel] = self._share(rel)
        return self._memo[rel]

    def _share(self, rel: Rel) -> Compiled:
        """Relations equal up to their names (copies of a CTE, the unchanging parts of an
        iteration's steps) share one set of states: the later ones rename the first's delta."""
        key = canonical(rel)
        if key not in self._shared:
            compiled = self._compile(rel)
            if key in self._repeated and not compiled.static and _costly(compiled.program):
                # read more than once: computed once per batch, as a temp result
                temp = self.plan_.add_temp("shared", compiled.program)
                compiled = Compiled(StateScan(temp, "delta", compiled.program.schema), False, compiled.weighted)
            self._shared[key] = (rel, compiled)
            return compiled
        first, compiled = self._shared[key]
        if compiled.static:
            return Compiled(rel, static=True, weighted=False)
        renames = tuple((g.name, Column(f.name, f.type)) for f, g in zip(first.schema, rel.schema))
        return Compiled(Project(compiled.program, renames + ((WEIGHT, Column(WEIGHT, BIGINT)),)),
                        static=False, weighted=compiled.weighted)

    def _compile(self, rel: Rel) -> Compiled:
        if not any(isinstance(n, Scan) and not n.static for n in rel.walk()):
            return Compiled(rel, static=True, weighted=False)
        if isinstance(rel, Scan):
            return Compiled(DeltaScan(rel.table, rel.alias, rel.fields, rel.columns, rel.weighted),
                            static=False, weighted=rel.weighted)
        if is_body(rel):
            return self._body_delta(rel)
        if isinstance(rel, Aggregate):
            info = self._aggregate(rel, [])
            return Compiled(self._aggregate_delta(info, rel.names), static=False, weighted=True)
        if isinstance(rel, Distinct):
            state, fields = self._bag_state(rel.input, "distinct")
            self.plan_.note("DISTINCT: a state counts each row; the row is in the result while its count is positive")
            return Compiled(distinct_delta(state, fields), static=False, weighted=True)
        if isinstance(rel, Union):
            parts = []
            weighted = False
            for item in rel.items:
                c = self.compile(item)
                weighted = weighted or c.weighted
                parts.append(Once(c.program) if c.static else c.program)
            return Compiled(Union(tuple(parts)), static=False, weighted=weighted)
        if isinstance(rel, Sort):
            return self.compile(rel.input)  # order inside a subquery does not change its rows
        if isinstance(rel, Iterate) and rel.mode == "exact":
            return self._repeat(rel)
        if isinstance(rel, Iterate) and rel.mode == "differential":
            # every step's value is a relation of its own, kept up to date by its delta
            self.plan_.note(f"ITERATIVE {rel.name.split('#')[0]}: differential — each of the {rel.times} steps keeps "
                            "its result and passes its change to the next (as differential dataflow does)")
            return self.compile(unroll(rel))
        if isinstance(rel, Iterate):
            return self._diffusion(rel)
        if isinstance(rel, Recursive):
            return self._recursive(rel)
        if isinstance(rel, Explode):
            # linear: the rows a batch adds (or deletes) explode into the rows they add (or delete)
            child = self.compile(rel.input)
            exploded = Explode(child.program, rel.expr, rel.element, rel.position, rel.outer)
            program = Project(exploded, tuple((f.name, f.ref()) for f in rel.schema) + ((WEIGHT, Column(WEIGHT, BIGINT)),))
            return Compiled(program, static=False, weighted=child.weighted)
        if isinstance(rel, Join) and rel.kind in ("semi", "anti", "null_aware_anti", "left", "right", "full"):
            return compile_match_join(self, rel)
        if isinstance(rel, SetOp):
            return Compiled(self._set_op(rel), static=False, weighted=True)
        raise _unsupported(rel)

    def _set_op(self, rel: SetOp) -> Rel:
        """INTERSECT / EXCEPT [ALL]: a state counts each row's copies on the left (``left``) and
        in all (``_w``); a batch changes a touched row's copies in the result by f(new) − f(old)."""
        left, right = self.compile(rel.left), self.compile(rel.right)
        cols = [f.name for f in rel.schema]

        def side(c: Compiled, source: Rel, is_left: bool) -> Rel:
            program = Once(c.program) if c.static else c.program
            exprs = [(n, f.ref()) for n, f in zip(cols, source.schema)]
            w = Column(WEIGHT, BIGINT)
            return Project(program, tuple(exprs) + ((WEIGHT, w), ("left", w if is_left else Literal(0, BIGINT))))

        rows = Union((side(left, rel.left, True), side(right, rel.right, False)))
        name = self.plan_.name(rel.kind.split("_")[0])
        key = tuple(Field(f.name, f.type) for f in rel.schema)
        self.plan_.add_state(
            State(name, StateRole.COUNTS, key, (StateColumn(W, BIGINT, Monoid.SUM, "copies of the row on both sides"),
                                        StateColumn("left", BIGINT, Monoid.SUM, "copies of the row on the left")),
                  note=f"{rel.kind.replace('_', ' ').upper()}: copies of each row per side"),
            Aggregate(rows, tuple((n, Column(n, f.type)) for n, f in zip(cols, key)),
                      ((W, Agg("sum", (Column(WEIGHT, BIGINT),), False, BIGINT)),
                       ("left", Agg("sum", (Column("left", BIGINT),), False, BIGINT)))))
        fields = key + (Field(W, BIGINT), Field("left", BIGINT))
        merged = StateScan(name, "merged", merged_fields(fields, tuple(cols)))

        def copies(total: Expr, lcount: Expr) -> Expr:
            rcount = Call("-", (total, lcount), BIGINT)
            zero = Literal(0, BIGINT)
            if rel.kind == "intersect":
                cond = Call("AND", (Call(">", (lcount, zero), BOOLEAN), Call(">", (rcount, zero), BOOLEAN)), BOOLEAN)
                return Case(((cond, Literal(1, BIGINT)),), zero, BIGINT)
            if rel.kind == "except":
                cond = Call("AND", (Call(">", (lcount, zero), BOOLEAN), Call("=", (rcount, zero), BOOLEAN)), BOOLEAN)
                return Case(((cond, Literal(1, BIGINT)),), zero, BIGINT)
            if rel.kind == "intersect_all":
                return Call("least", (lcount, rcount), BIGINT, "least({0}, {1})")
            return Call("greatest", (Call("-", (lcount, rcount), BIGINT), zero), BIGINT, "greatest({0}, {1})")

        def c0(e: Expr) -> Expr:
            return Call("coalesce", (e, Literal(0, BIGINT)), BIGINT, "coalesce({0}, {1})")

        change = Call("-", (copies(Column(W, BIGINT), Column("left", BIGINT)),
                            copies(c0(Column(OLD + W, BIGINT)), c0(Column(OLD + "left", BIGINT)))), BIGINT)
        touched = Call("=", (Column(TOUCHED, INT), Literal(1, INT)), BOOLEAN)
        out = Project(Filter(merged, touched), tuple((n, Column(n, f.type)) for n, f in zip(cols, key))
                      + ((WEIGHT, change),))
        return Filter(out, Call("<>", (Column(WEIGHT, BIGINT), Literal(0, BIGINT)), BOOLEAN))

    def _loop_inputs(self, node: Rel, base: str, rows: Callable[[StateScan, Rel], Rel]
                     ) -> tuple[Rel, list[tuple[str, tuple[Field, ...], Rel]]]:
        """``node`` (a loop's part) with each largest subtree that reads a stream but not the loop
        kept as a bag state and read as ``rows`` of its version after the merge; and those
        states (name, fields, the subtree). Static subtrees are read as they are."""
        found: list[tuple[str, tuple[Field, ...], Rel]] = []

        def over(n: Rel) -> Rel:
            if any(isinstance(x, LoopRef) for x in n.walk()):
                return n.with_inputs(tuple(over(c) for c in n.inputs()))
            if not any(isinstance(x, Scan) and not x.static for x in n.walk()):
                return n
            state, fields = self._bag_state(n, base)
            found.append((state, fields, n))
            return rows(StateScan(state, "new", fields), n)

        return over(node), found

    def _recursive(self, rel: Recursive) -> Compiled:
        """WITH RECURSIVE: the base and every stream the step reads kept as bags (their rows
        after each batch), the fixpoint kept as a set; a loop in the runtime finds its change."""
        base_state, base_fields = self._bag_state(rel.base, "rec_base")
        step, inputs = self._loop_inputs(rel.step, "rec_input", _rows)
        weighted = any(self.compile(r).weighted for r in (rel.base, *(node for _, _, node in inputs)))
        base = _rows(StateScan(base_state, "new", base_fields), rel.base)
        seeds: list[Rel] = [_rows(StateScan(base_state, "delta", base_fields), rel.base, positive=True)]
        for state, fields, node in inputs:
            new = _rows(StateScan(state, "new", fields), node)
            seeds.append(step.transform(
                lambda n, new=new, state=state, fields=fields, node=node:
                _rows(StateScan(state, "delta", fields), node, positive=True) if n == new else None))
        name = self.plan_.name("fixpoint")
        key = tuple(Field(f.name, f.type) for f in rel.schema)
        self.plan_.add_loop(
            State(name, StateRole.OUTPUT, key, (StateColumn(W, BIGINT, Monoid.SUM, "1 while the row is in the fixpoint"),),
                  note=f"the rows of the recursive CTE {rel.name.split('#')[0]} (a set)"),
            Fixpoint(name, rel.name, key, base, step, tuple(seeds), incremental=not weighted))
        if weighted:
            self.plan_.note(f"WITH RECURSIVE {rel.name.split('#')[0]}: inputs may delete rows, so each batch "
                            "computes the fixpoint again (semi-naive, from the base) and passes on new − old")
        else:
            self.plan_.note(f"WITH RECURSIVE {rel.name.split('#')[0]}: semi-naive from the old fixpoint — the "
                            "batch's new rows derive new rows, round after round, until none is new")
        return Compiled(distinct_delta(name, key + (Field(W, BIGINT),)), static=False, weighted=True)

    def _repeat(self, rel: Iterate) -> Compiled:
        """MODE EXACT (see :class:`ExactIteration`): what the loop reads kept as bags by the usual rules,
        the value kept as a bag, and a loop in the runtime stepping from the start each batch."""
        loop = rel.name.split("#")[0]
        fields = tuple(Field(f.name, f.type) for f in rel.schema)

        def bag(scan: StateScan, node: Rel) -> Rel:  # the rows, each as often as it is counted
            return _rows(Expand(scan, W), node)

        def as_loop(node: Rel) -> Rel | None:  # the previous value, under the names the step uses
            if isinstance(node, LoopRef) and node.name == rel.name:
                return Project(LoopRef(rel.name, fields), tuple((f.name, g.ref()) for f, g in zip(node.fields, fields)))
            return None

        def named(node: Rel) -> Rel:  # a value's rows under the iteration's own names
            return Project(node, tuple((f.name, g.ref()) for f, g in zip(fields, node.schema)))

        start = simplify(named(self._loop_inputs(rel.init, "loop_input", bag)[0]))
        step = simplify(named(self._loop_inputs(rel.step, "loop_input", bag)[0].transform(as_loop)))
        name = self.plan_.name("iteration")
        self.plan_.add_loop(
            State(name, StateRole.OUTPUT, fields, (StateColumn(W, BIGINT, Monoid.SUM, "copies of the row in the value"),),
                  note=f"the value of the iteration {loop} after its {rel.times} steps (a bag)"),
            ExactIteration(name, rel.name, fields, rel.times, start, step,
                   tuple(sorted({n.table for n in rel.walk() if isinstance(n, Scan) and not n.static}))))
        self.plan_.note(f"ITERATIVE {loop}: exact — what it reads is kept as states; each batch that changes them "
                        f"runs the {rel.times} steps from the start over them and passes on the value's change "
                        "(new − old)")
        return Compiled(Project(StateScan(name, "delta", fields + (Field(W, BIGINT),)),
                                tuple((f.name, f.ref()) for f in fields) + ((WEIGHT, Column(W, BIGINT)),)),
                        static=False, weighted=True)

    def _diffusion(self, rel: Iterate) -> Compiled:
        """MODE DIFFUSION (seed 000 Algorithm 1; see :class:`Diffusion`): the step compiled once,
        reading the iteration's value as a stream of its own; a loop in the runtime runs it."""
        name = self.plan_.name("diffusion")
        fields = tuple(Field(f.name, f.type) for f in rel.schema)
        start = self.compile(rel.init)
        columns = tuple(f"c{i}" for i in range(len(fields)))
        scan = Scan(rel.name, rel.name, fields, columns, static=False, weighted=True)
        step_rel = rel.step.transform(
            lambda n: Project(scan, tuple((f.name, g.ref()) for f, g in zip(n.fields, fields)))
            if isinstance(n, LoopRef) and n.name == rel.name else None)
        mark = len(self.plan_.delta)
        step = self.compile(step_rel)
        body = self.plan_.take_steps(mark, rel.name)
        loop = rel.name.split("#")[0]
        diffusion = Diffusion(name, rel.name, fields, rel.key, rel.times,
                              Once(start.program) if start.static else start.program, step.program, body)
        self.plan_.add_loop(
            State(name, StateRole.OUTPUT, fields, (StateColumn(W, BIGINT, Monoid.SUM, "1 while the row is the value"),),
                  note=f"the value of the iteration {loop} (one row per key {', '.join(diffusion.key_names)})"),
            diffusion)
        self.plan_.note(f"ITERATIVE {loop}: diffusion (seed 000 Algorithm 1) — APPROXIMATE: each batch runs "
                        f"{rel.times} steps over what changed, from the previous answer, and merges once; rows the "
                        "changes do not reach keep their value")
        return Compiled(distinct_delta(name, fields + (Field(W, BIGINT),)), static=False, weighted=True)

    def _input(self, rel: Rel, index: int) -> Input:
        """An input of a join body: a source, or any relation compiled on its own."""
        compiled = self.compile(rel)
        if isinstance(rel, Scan):
            label = rel.table if rel.alias == rel.table else f"{rel.table} {rel.alias}"
            return Input(index, rel.alias, rel.fields, compiled.program, compiled.static, compiled.weighted, label)
        if rel not in self._aliases:
            self._derived += 1
            self._aliases[rel] = f"d{self._derived}"
        alias = self._aliases[rel]
        return Input(index, alias, rel.schema, compiled.program, compiled.static, compiled.weighted,
                     f"derived input {alias} ({type(rel).__name__.lower()})")

    def _body(self, rel: Rel) -> tuple[Body, dict[str, Expr]]:
        return flatten(rel, self._input)

    def _body_delta(self, rel: Rel) -> Compiled:
        """A join body's delta: its output columns and the weight of each changed row."""
        body, mapping = self._body(rel)
        outputs = [(n, mapping[n]) for n in rel.names]
        terms = JoinTerms(self.plan_, body)
        terms.inject([e for _, e in outputs], [])
        rows = terms.terms([], [(n, terms.over(e)) for n, e in outputs], [])
        self._note_joins(body)
        program = Project(rows, tuple((n, Column(n, e.type)) for n, e in outputs) + ((WEIGHT, Column(W, BIGINT)),))
        return Compiled(program, static=False, weighted=body.deletions)

    # -- aggregates ------------------------------------------------------------------------------
    def _aggregate(self, agg: Aggregate, above: list[Rel]) -> _AggInfo:
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
        self._note_aggregates(specs)
        self._note_joins(body)

        terms = JoinTerms(self.plan_, body)
        terms.inject([e for _, e in keys] + multisets, partials)
        # Columns of a joined row: group keys, the weight, partial contributions, multiset values.
        out_cols: list[tuple[str, Expr]] = [(n, terms.over(e)) for n, e in keys]
        key_fields = tuple(Field(n, e.type) for n, e in keys)
        value_cols = [(f"v{k}", terms.over(m)) for k, m in enumerate(multisets)]
        joined = terms.terms(partials, out_cols, value_cols)

        name = self.plan_.name("agg")
        agg_aggs: list[tuple[str, Agg]] = [(W, SUM_W)]
        agg_aggs += [(p.name, Agg(p.monoid.merge_sql, (Column(p.name, p.type),), False, p.type)) for p in partials]
        group = tuple((n, Column(n, e.type)) for n, e in out_cols)
        if multisets:
            temp = self.plan_.add_temp("rows", joined)
            source: Rel = StateScan(temp, "delta", joined.schema)
        else:
            source = joined
        self.plan_.add_state(State(
            name, StateRole.AGGREGATE, key_fields,
            (StateColumn(W, BIGINT, Monoid.SUM, "number of rows"),)
            + tuple(StateColumn(p.name, p.type, p.monoid, p.meaning) for p in partials),
            note="group by " + (", ".join(n for n, _ in keys) if keys else "() — one global row"),
            keep_empty=not keys,
        ), Aggregate(source, group, tuple(agg_aggs)))
        ms_names = []
        for k, m in enumerate(multisets):
            ms = self.plan_.name(f"ms{k}" if name == "agg" else f"{name}_ms{k}")
            ms_names.append(ms)
            self.plan_.add_state(State(
                ms, StateRole.MULTISET, key_fields + (Field("v", m.type),),
                (StateColumn(W, BIGINT, Monoid.SUM, "number of rows with this value"),),
                note=f"values of {sql(m)} per group", partition=tuple(n for n, _ in keys) or None,
            ), Aggregate(Filter(source, Call("IS NOT NULL", (Column(f"v{k}", m.type),), BOOLEAN)),
                         group + (("v", Column(f"v{k}", m.type)),), ((W, SUM_W),)))

        rows = self._aggregate_answer(name, ms_names, above, keys, specs, partials, multisets, key_fields)
        per_key = None
        if keys and not multisets:
            per_key = self._per_key(name, above, keys, specs, partials, key_fields)
        return _AggInfo(name, keys, key_fields, (name, *ms_names), rows, per_key)

    def _aggregate_answer(self, name: str, ms_names: list[str], above: list[Rel], keys: list[tuple[str, Expr]],
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

        branches = [branch(StateScan(name, "new", state_fields), {f.name: f.ref() for f in state_fields[len(keys):]})]
        for k, m in enumerate(multisets):
            ms_fields = key_fields + (Field("v", m.type), Field(W, BIGINT))
            branches.append(branch(StateScan(ms_names[k], "new", ms_fields), {f"v{k}": Column("v", m.type)}))
        merged = [(W, SUM_W)]
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
        for i, (out, spec) in enumerate(specs):
            if spec.multiset is not None:
                final: Expr = Column(f"_ms{i}", spec.agg.type)
                if spec.agg.fn == "count":
                    final = Call("coalesce", (final, Literal(0, BIGINT)), BIGINT, "coalesce({0}, {1})")
            else:
                final = spec.final(weight)
            exprs.append((out, final))
        rows: Rel = Project(grouped, tuple(exprs))
        for node in reversed(above):
            rows = node.with_inputs((rows,))
        return rows

    def _per_key(self, name: str, above: list[Rel], keys: list[tuple[str, Expr]], specs: list[tuple[str, AggSpec]],
                 partials: list[Partial], key_fields: tuple[Field, ...]) -> Rel:
        """a over the group state alone, row by row (one state row per group)."""
        state_fields = key_fields + (Field(W, BIGINT),) + tuple(Field(p.name, p.type) for p in partials)
        weight = Column(W, BIGINT)
        exprs: list[tuple[str, Expr]] = [(n, Column(n, f.type)) for (n, _), f in zip(keys, key_fields)]
        exprs += [(out, spec.final(weight)) for out, spec in specs]
        rows: Rel = Project(StateScan(name, "new", state_fields), tuple(exprs))
        for node in reversed(above):
            rows = node.with_inputs((rows,))
        return rows

    def _aggregate_delta(self, info: _AggInfo, output: tuple[str, ...]) -> Rel:
        """What a batch changes in a nested aggregate's output."""
        if not info.keys:
            return global_delta(info.rows, info.name, self.plan_.fields(info.name))
        if info.per_key is not None:
            return per_key_delta(info.per_key, tuple(n for n, _ in info.keys), output)
        return keyed_delta(info.rows, info.name, tuple(zip((n for n, _ in info.keys), info.key_fields)))

    # -- the query's answer ----------------------------------------------------------------------
    def _aggregate_query(self, agg: Aggregate, above: list[Rel], top: _Top) -> Answer:
        info = self._aggregate(agg, above)
        global_answer = not info.keys or top.limit is not None or top.offset > 0
        return Answer(
            rows=info.rows, output=top.output, output_names=self.bound.output_names, order=top.order,
            limit=top.limit, offset=top.offset, changes=ChangeMode.GLOBAL if global_answer else ChangeMode.KEYED,
            change_states=info.states, touched_key=tuple(n for n, _ in info.keys), per_key=info.per_key,
        )

    def _plain_query(self, top: _Top) -> Answer:
        state, fields = self._bag_state(top.rows, "out")
        rows = Expand(StateScan(state, "new", fields), W)
        global_answer = top.limit is not None or top.offset > 0
        return Answer(
            rows=rows, output=top.output, output_names=self.bound.output_names, order=top.order,
            limit=top.limit, offset=top.offset, changes=ChangeMode.GLOBAL if global_answer else ChangeMode.DELTA,
            change_states=(state,),
        )

    def _distinct_query(self, rows: Distinct, top: _Top) -> Answer:
        state, fields = self._bag_state(rows.input, "out")
        names = [f.name for f in fields if f.name != W]
        result = Project(StateScan(state, "new", fields), tuple((n, Column(n, f.type)) for n, f in zip(names, fields)))
        global_answer = top.limit is not None or top.offset > 0
        self.plan_.note("DISTINCT: the output state counts each row; a row is in the answer while its count is positive")
        return Answer(
            rows=result, output=top.output, output_names=self.bound.output_names, order=top.order,
            limit=top.limit, offset=top.offset, changes=ChangeMode.GLOBAL if global_answer else ChangeMode.KEYED,
            change_states=(state,), touched_key=tuple(names), per_key=result,
        )

    def _bag_state(self, rel: Rel, base: str, compiled: Compiled | None = None) -> tuple[str, tuple[Field, ...]]:
        """``rel``'s rows kept as a bag: a state keyed by all its columns, counting copies."""
        compiled = compiled if compiled is not None else self.compile(rel)
        program = Once(compiled.program) if compiled.static else compiled.program
        key = tuple(Field(f.name, f.type) for f in rel.schema)
        name = self.plan_.name(base)
        self.plan_.add_state(
            State(name, StateRole.OUTPUT, key, (StateColumn(W, BIGINT, Monoid.SUM, "multiplicity of the row"),),
                  note="the rows with their multiplicity"),
            Aggregate(program, tuple((f.name, f.ref()) for f in key),
                      ((W, Agg("sum", (Column(WEIGHT, BIGINT),), False, BIGINT)),)),
        )
        return name, key + (Field(W, BIGINT),)

    # -- notes -----------------------------------------------------------------------------------
    def _note_aggregates(self, specs: list[tuple[str, AggSpec]]) -> None:
        for _, spec in specs:
            a = spec.agg
            shown = sql(a)
            if a.fn == "avg" and spec.multiset is None:
                self.plan_.note(f"{shown} = sum / count: (sum, count) kept in state by h, divided in a")
            elif spec.multiset is not None and a.fn in ("min", "max") and not a.distinct:
                self.plan_.note(f"{shown}: inputs may delete rows, so the multiset of values is kept "
                                f"(a min/max cannot be un-merged)")
            elif spec.multiset is not None:
                self.plan_.note(f"{shown}: the multiset of values per group is kept; a counts the distinct ones")
            elif a.fn.startswith(("stddev", "var")):
                self.plan_.note(f"{shown}: (count, sum, sum of squares) kept; a applies the moment formula")

    def _note_joins(self, body: Body) -> None:
        if len(body.streams) > 1:
            self.plan_.note("join of streams: each side is kept pre-aggregated on its lineage; a batch joins "
                            "its delta with the other sides (Δ(R⋈S) = ΔR⋈S + R'⋈ΔS), exact also for "
                            "many-to-many joins")
        if body.deletions:
            self.plan_.note("inputs carry _weight, so rows may be deleted: every state counts rows and drops "
                            "a key when its count reaches zero")


def _unsupported(rel: Rel) -> UnsupportedError:
    from ..ir.rel import Join

    if isinstance(rel, Join):
        what = {"left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL JOIN",
                "semi": "semi join (IN / EXISTS)", "anti": "anti join (NOT IN / NOT EXISTS)"}.get(rel.kind, rel.kind)
        return UnsupportedError(f"{what} is not supported yet", code="UNSUPPORTED_JOIN",
                                params={"construct": rel.kind}, hint="see docs/sql.md")
    if isinstance(rel, Limit):
        return UnsupportedError("LIMIT inside a subquery is not supported yet", code="UNSUPPORTED_NESTED_LIMIT",
                                params={"construct": "LIMIT"}, hint="put ORDER BY … LIMIT on the outermost query")
    return UnsupportedError(f"no incremental rule for {type(rel).__name__}", code="UNSUPPORTED",
                            params={"construct": type(rel).__name__})
