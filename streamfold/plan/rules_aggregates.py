"""Rules for GROUP BY: monoid partials in states (h), the final expressions in the answer (a).

An aggregate over a join body (:mod:`.rules_joins`) keeps one group state keyed by the group
key, holding the row count ``_weight`` and each aggregate's homomorphic partials (:mod:`.aggregates`:
avg → (sum, count), …), and one multiset state per value a DISTINCT aggregate or a min/max
under deletions needs. Its answer a reads those states (all partitioned on the group key, so
as one union grouped by it: no join, no shuffle) and computes the final values.

Nested in a bigger query, an aggregate hands on the change of its output (:mod:`.changes`):
per touched key from its state's merge when a is row-wise, else a over the touched keys
after the merge minus before it, and for a global aggregate its one row after minus before.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.expr import BY_PAIR_OP, Agg, Call, Column, Expr, Literal
from ..ir.printer import sql
from ..ir.rel import WEIGHT, Aggregate, Field, Filter, Project, Rel, StateScan, StateVersion, Union
from ..ir.types import BIGINT, BOOLEAN
from .aggregates import COUNTED, AggSpec, Partial, decompose, multiset_answer, multiset_final
from .changes import global_delta, keyed_delta, per_key_delta
from .context import PlanContext
from .joins import JoinTerms
from .model import Compiled, Monoid, State, StateColumn, StateRole
from .rules_joins import note_joins
from .terms import nonzero, sum_weights, weight



@dataclass
class AggregateStates:
    """An aggregate's states and its answer function."""

    name: str  # the group state
    keys: list[tuple[str, Expr]]
    key_fields: tuple[Field, ...]
    states: tuple[str, ...]  # the group state, then the multiset states
    rows: Rel  # a over the new states
    per_key: Rel | None  # a row by row, when it is (one group state, no multisets)

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(n for n, _ in self.keys)


def aggregate(ctx: PlanContext, rel: Rel) -> Compiled:
    """An aggregate nested in a bigger query: what a batch changes in its output."""
    assert isinstance(rel, Aggregate)
    info = aggregate_states(ctx, rel, [])
    if not info.keys:
        program = global_delta(info.rows, info.name, ctx.plan.fields(info.name))
    elif info.per_key is not None:
        program = per_key_delta(info.per_key, info.key_names, rel.names)
    else:
        program = keyed_delta(info.rows, info.name, tuple(zip(info.key_names, info.key_fields)))
    return Compiled(program, static=False, weighted=True)


def aggregate_states(ctx: PlanContext, agg: Aggregate, above: list[Rel]) -> AggregateStates:
    """The states of ``agg`` and its answer a, with ``above`` (filters and projections over
    the aggregate, innermost last) applied to a."""
    body, mapping = ctx.body(agg.input)
    keys = [(n, e.substitute(mapping)) for n, e in agg.keys]
    specs: list[tuple[str, AggSpec]] = []
    for name, a in agg.aggs:
        bound = a.substitute(mapping)
        assert isinstance(bound, Agg)
        specs.append((name, decompose(bound, body.deletions)))
    partials: list[Partial] = []
    multisets: list[Expr] = []
    for _, spec in specs:
        for p in spec.partials:
            if p not in partials:
                partials.append(p)
        if spec.multiset is not None and spec.multiset not in multisets:
            multisets.append(spec.multiset)
    _note_aggregates(ctx, specs)
    note_joins(ctx, body)

    terms = JoinTerms(ctx.plan, body)
    terms.inject([e for _, e in keys] + multisets, partials)
    # Columns of a joined row: group keys, the weight, partial contributions, multiset values.
    out_cols: list[tuple[str, Expr]] = [(n, terms.over(e)) for n, e in keys]
    key_fields = tuple(Field(n, e.type) for n, e in keys)
    value_cols = [(f"v{k}", terms.over(m)) for k, m in enumerate(multisets)]
    joined = terms.terms(partials, out_cols, value_cols)

    name = ctx.plan.name("agg")
    group = tuple((n, Column(n, e.type)) for n, e in out_cols)
    source: Rel = joined
    if multisets:  # the joined rows feed several states: computed once
        temp = ctx.plan.add_temp("rows", joined)
        source = StateScan(temp, StateVersion.DELTA, joined.schema)
    ctx.plan.add_state(State(
        name, StateRole.AGGREGATE, key_fields,
        (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "number of rows"),)
        + tuple(StateColumn(p.name, p.type, p.monoid, p.meaning) for p in partials),
        note="group by " + (", ".join(n for n, _ in keys) if keys else "() — one global row"),
        keep_empty=not keys,
    ), Aggregate(source, group, ((WEIGHT, sum_weights()),) + _merged_partials(partials)))
    ms_names = []
    for k, m in enumerate(multisets):
        ms = ctx.plan.name(f"ms{k}" if name == "agg" else f"{name}_ms{k}")
        ms_names.append(ms)
        ctx.plan.add_state(State(
            ms, StateRole.MULTISET, key_fields + (Field("v", m.type),),
            (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "number of rows with this value"),),
            note=f"values of {sql(m)} per group", partition=tuple(n for n, _ in keys) or None,
        ), Aggregate(Filter(source, Call("IS NOT NULL", (Column(f"v{k}", m.type),), BOOLEAN)),
                     group + (("v", Column(f"v{k}", m.type)),), ((WEIGHT, sum_weights()),)))

    rows = _answer(name, ms_names, above, keys, specs, partials, multisets, key_fields)
    per_key = _per_key(name, above, keys, specs, partials, key_fields) if keys and not multisets else None
    return AggregateStates(name, keys, key_fields, (name, *ms_names), rows, per_key)


def _merged_partials(partials: list[Partial]) -> tuple[tuple[str, Agg], ...]:
    """Each partial column summed up by its monoid."""
    return tuple((p.name, Agg(p.monoid.merge_sql, (Column(p.name, p.type),), False, p.type)) for p in partials)


def _answer(name: str, ms_names: list[str], above: list[Rel], keys: list[tuple[str, Expr]],
            specs: list[tuple[str, AggSpec]], partials: list[Partial], multisets: list[Expr],
            key_fields: tuple[Field, ...]) -> Rel:
    """a over the group state and the multiset states.

    All of them are partitioned on the group key, so a reads them as one union aggregated by
    that key — no join, no shuffle — where each group's row takes the group state's partials
    (one row per key: ``sum`` just picks it) and the aggregates of each multiset's values. A
    global aggregate (no key) yields its one row even over empty states.
    """
    state_fields = key_fields + (Field(WEIGHT, BIGINT),) + tuple(Field(p.name, p.type) for p in partials)
    columns: list[Field] = [Field(WEIGHT, BIGINT)] + [Field(p.name, p.type) for p in partials]
    columns += [Field(f"v{k}", m.type) for k, m in enumerate(multisets)]
    # a percentile reads its multiset's counts as the values' frequencies
    counted = {multisets.index(spec.multiset) for _, spec in specs
               if spec.multiset is not None and spec.agg.fn in COUNTED}
    columns += [Field(f"c{k}", BIGINT) for k in sorted(counted)]
    key_refs = [(n, Column(n, f.type)) for (n, _), f in zip(keys, key_fields)]
    # Each branch renames the key (to _g0, _g1, …): Spark 4.3 keeps a union's hash
    # partitioning through projections that alias the key, but drops it when the key passes
    # through beside computed columns, which would shuffle every state once per batch.
    grouped_keys = [(f"_g{i}", Column(n, f.type)) for i, ((n, _), f) in enumerate(zip(keys, key_fields))]

    def branch(state: Rel, present: dict[str, Expr]) -> Rel:
        exprs = grouped_keys + [(c.name, present.get(c.name, Literal(None, c.type))) for c in columns]
        return Project(state, tuple(exprs))

    branches = [branch(StateScan(name, StateVersion.NEW, state_fields), {f.name: f.ref() for f in state_fields[len(keys):]})]
    for k, m in enumerate(multisets):
        ms_fields = key_fields + (Field("v", m.type), Field(WEIGHT, BIGINT))
        present: dict[str, Expr] = {f"v{k}": Column("v", m.type), **({f"c{k}": weight()} if k in counted else {})}
        branches.append(branch(StateScan(ms_names[k], StateVersion.NEW, ms_fields), present))
    merged: list[tuple[str, Agg]] = [(WEIGHT, sum_weights()), *_merged_partials(partials)]
    finals: dict[int, Agg] = {}  # each multiset aggregate's, by its position in specs
    for i, (_, spec) in enumerate(specs):
        if spec.multiset is not None:
            k = multisets.index(spec.multiset)
            finals[i] = multiset_final(spec.agg, Column(f"v{k}", spec.multiset.type), Column(f"c{k}", BIGINT))
            merged.append((f"_ms{i}", finals[i]))
    source: Rel = branches[0] if len(branches) == 1 else Union(tuple(branches))
    grouped: Rel = Aggregate(source, tuple((n, Column(g, e.type)) for (n, e), (g, _) in zip(key_refs, grouped_keys)),
                             tuple(merged))
    if keys:  # a group whose count passed through zero is kept while its sums are not (StateTable.kept)
        grouped = Filter(grouped, nonzero(weight()))
    exprs: list[tuple[str, Expr]] = list(key_refs)
    for i, (out, spec) in enumerate(specs):
        if spec.multiset is not None:
            final = multiset_answer(spec.agg, Column(f"_ms{i}", finals[i].type))
        else:
            final = spec.final(weight())
        exprs.append((out, final))
    return _above(Project(grouped, tuple(exprs)), above)


def _per_key(name: str, above: list[Rel], keys: list[tuple[str, Expr]], specs: list[tuple[str, AggSpec]],
             partials: list[Partial], key_fields: tuple[Field, ...]) -> Rel:
    """a over the group state alone, row by row (one state row per group)."""
    state_fields = key_fields + (Field(WEIGHT, BIGINT),) + tuple(Field(p.name, p.type) for p in partials)
    exprs: list[tuple[str, Expr]] = [(n, Column(n, f.type)) for (n, _), f in zip(keys, key_fields)]
    exprs += [(out, spec.final(weight())) for out, spec in specs]
    groups = Filter(StateScan(name, StateVersion.NEW, state_fields), nonzero(weight()))  # as in _answer
    return _above(Project(groups, tuple(exprs)), above)


def _above(rows: Rel, above: list[Rel]) -> Rel:
    for node in reversed(above):
        rows = node.with_inputs((rows,))
    return rows


def _note_aggregates(ctx: PlanContext, specs: list[tuple[str, AggSpec]]) -> None:
    for _, spec in specs:
        a = spec.agg
        shown = sql(a)
        pair = a.args[0] if a.args and isinstance(a.args[0], Call) and a.args[0].op == BY_PAIR_OP else None
        if pair is not None:  # max_by(x, y) as max(struct(y, x)) (sql/bind_expr/extremes.py)
            ctx.plan.note(f"{shown} is {a.fn}_by({sql(pair.args[1])}, {sql(pair.args[0])}): ties go to the "
                          f"{'largest' if a.fn == 'max' else 'smallest'} value, the same after every batch")
        if a.fn == "avg" and spec.multiset is None:
            ctx.plan.note(f"{shown} = sum / count: (sum, count) kept in state by h, divided in a")
        elif spec.multiset is not None and a.fn in ("min", "max") and not a.distinct:
            ctx.plan.note(f"{shown}: inputs may delete rows, so the multiset of values is kept "
                          f"(a min/max cannot be un-merged)")
        elif spec.multiset is not None and a.fn == "percentile":
            ctx.plan.note(f"{shown}: the multiset of values per group is kept; a is Spark's percentile over it, "
                          f"each value's count its frequency")
        elif spec.multiset is not None and a.fn in ("percentile_disc", "percentile_disc_desc"):
            ctx.plan.note(f"{shown}: the multiset of values per group is kept; a walks its values in order to the "
                          f"first whose running count reaches ceil(p · n)")
        elif spec.multiset is not None and a.fn in ("mode", "mode_desc"):
            ctx.plan.note(f"{shown}: the multiset of values per group is kept; a picks the value with the "
                          f"largest count, ties to the {'lowest' if a.fn == 'mode' else 'highest'} value")
        elif spec.multiset is not None and a.fn in ("collect_set", "collect_list"):
            ctx.plan.note(f"{shown}: the multiset of values per group is kept; a collects "
                          + ("each value once" if a.fn == "collect_set" else "each value as often as its count"))
        elif spec.multiset is not None:
            ctx.plan.note(f"{shown}: the multiset of values per group is kept; a counts the distinct ones")
        elif a.fn.startswith(("stddev", "var")):
            ctx.plan.note(f"{shown}: (count, sum, sum of squares) kept; a applies the moment formula")
