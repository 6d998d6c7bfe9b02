"""Golden fixtures for the runtime's SQL (``runtime/lowering/``): an explain fixture's query in,
every statement the runtime writes for its plan out (``tests/fixtures/lowering/NAME.txt``), each
statement parsed by sqlglot's Spark dialect. No Spark: leaves and views are named after what they
hold (``delta_S``, ``old_agg``, ``merged_agg``), states' columns take the plan's types in Spark's
spelling. Run ``pytest --update-golden`` after a deliberate change and review the diff."""

from __future__ import annotations

import re

import pytest
import sqlglot

import streamfold
from streamfold.ir.printer import sql
from streamfold.ir.rel import Once, Rel
from streamfold.ir.types import DataType
from streamfold.plan.model import Diffusion, ExactIteration, Fixpoint, IncrementalPlan, Step
from streamfold.runtime import lowering
from streamfold.runtime.lowering import AnswerLowering, StateTable, netting
from streamfold.runtime.runs import candidates
from streamfold.runtime.views import leaf_hint

from ..golden import FIXTURES, check, load

# The queries whose statements are golden: explain fixtures that together use every statement.
QUERIES = ("seed_groupby", "seed_join_groupby", "count_distinct", "global_aggregate", "top_k", "distinct",
           "recursive", "iterative", "diffusion", "not_in", "stream_static_join", "aggregate_of_aggregate", "theta_band_join",
           "window_top_k_per_group", "time_bound")


def _type(t: DataType) -> str:
    """A type as Spark's ``simpleString`` spells it; a state keeps decimals at 38 digits."""
    if t.is_decimal:
        return f"decimal(38,{t.scale})"
    return t.sql().lower().replace(" ", "")


def _leaf(rel: Rel) -> str:
    """A leaf as the runtime names its view (a static relation as a delta: its statement)."""
    if isinstance(rel, Once):
        inner = lowering.program(rel.input, _leaf)
        return lowering.subquery(lowering.once(inner, [f.name for f in rel.input.schema], keep=not rel.later))
    return leaf_hint(rel)


def _step(step: Step) -> list[str]:
    out: list[str] = []
    if isinstance(step, Fixpoint):
        cols = [f.name for f in step.fields]
        out += [f"-- Δ{step.state}: the fixpoint's base", lowering.fixpoint_rows(cols, lowering.program(step.base, _leaf)),
                f"-- Δ{step.state}: a round", lowering.fixpoint_rows(cols, lowering.program(step.step, _leaf)),
                f"-- Δ{step.state}: the seeds", lowering.fixpoint_rows(
                    cols, "\nUNION ALL\n".join(lowering.program(s, _leaf) for s in step.seeds)),
                f"-- Δ{step.state}: the old fixpoint", lowering.fixpoint_old(cols, f"old_{step.state}"),
                f"-- Δ{step.state}: the rows found", lowering.fixpoint_found(cols, "fix_new")]
    elif isinstance(step, ExactIteration):
        cols = [f.name for f in step.fields]
        out += [f"-- Δ{step.state}: X₀", lowering.program(step.start, _leaf),
                f"-- Δ{step.state}: a step", lowering.program(step.step, _leaf),
                f"-- Δ{step.state}: the change", lowering.exact_change(cols, "value", f"old_{step.state}")]
    elif isinstance(step, Diffusion):
        text = lowering.DiffusionLowering(step.loop.split("#")[0], tuple(f.name for f in step.fields), step.columns,
                                          step.key, f"old_{step.state}")
        out += [f"-- Δ{step.state}: ΔX₀", text.start(lowering.program(step.start, _leaf))]
        for sub in step.steps:
            out += _step(sub)
        out += [f"-- Δ{step.state}: ΔX", text.change(lowering.program(step.output, _leaf)),
                f"-- Δ{step.state}: merged", text.merged("dx")]
    else:
        out += [f"-- Δ{step.state} ({type(step).__name__.lower()})", lowering.program(step.program, _leaf)]
    return out


def lowered(plan: IncrementalPlan) -> str:
    tables = {s.name: StateTable(s, tuple((f.name, _type(f.type)) for f in s.fields)) for s in plan.states}
    out: list[str] = []
    for step in plan.init:
        out += [f"-- init {step.state}", lowering.program(step.program, _leaf)]
    for step in plan.delta:
        out += _step(step)
    durable = [t for t in tables.values() if not t.state.static]
    for mx in plan.matrices:  # a join matrix's migration, to the mapping its left side grows into
        for side, name in ((0, mx.left), (1, mx.right)):
            out += [f"-- {name}: migrated ({mx.n}, {mx.m}) → ({mx.cells}, 1)",
                    lowering.migrate(tables[name], f"new_{name} _new", side, (mx.n, mx.m), (mx.cells, 1))]
    runs = candidates(plan)
    for t in durable:
        merged = f"merged_{t.name}"
        if t.name in runs:  # a join input that may be kept as a base and a tail (runtime/runs.py)
            out += [f"-- ⊗ {t.name} (old values summed over its runs)",
                    lowering.merge(t, f"old_{t.name} _old", f"SELECT * FROM delta_program_{t.name}", summed=True),
                    f"-- {t.name}: new, as a base and a tail", lowering.runs(t, f"base_{t.name}", merged),
                    f"-- {t.name}: the touched keys' new rows, added up", lowering.runs_touched(t, f"base_{t.name}", merged),
                    f"-- {t.name}: delta (and changelog)", lowering.delta_rows(t, merged),
                    f"-- {t.name}: restored, the logged deltas added up", lowering.summed_logs(t, "logs")]
            continue
        if t.state.kept_while is not None:  # a time bound's live rows, appended (plan/rules_expiry.py)
            out += [f"-- ⊗ {t.name} (appended)",
                    lowering.appended(t, f"old_{t.name} _old", f"SELECT * FROM delta_program_{t.name}",
                                      sql(t.state.kept_while, spark=True), 4),
                    f"-- {t.name}: new", lowering.new_rows(t, merged),
                    f"-- {t.name}: delta", lowering.delta_rows(t, merged),
                    f"-- {t.name}: changelog, the rows that entered it", lowering.touched_new(t, merged),
                    f"-- {t.name}: restored, the logged rows added up, those still kept",
                    lowering.summed_logs(t, "logs", sql(t.state.kept_while, spark=True))]
            continue
        out += [f"-- ⊗ {t.name}", lowering.merge(t, f"old_{t.name} _old", f"SELECT * FROM delta_program_{t.name}"),
                f"-- {t.name}: new", lowering.new_rows(t, merged),
                f"-- {t.name}: delta", lowering.delta_rows(t, merged),
                f"-- {t.name}: changelog", lowering.changelog(t, merged),
                f"-- {t.name}: restored", lowering.latest(t, "logs")]
    a = plan.answer
    rows = a.per_key if a.per_key is not None else a.rows
    columns = [(n, _type(rows.field(o).type)) for o, n in zip(a.output, a.output_names)]
    answer = AnswerLowering(a, columns, tables.__getitem__)
    snapshot = answer.snapshot(_leaf)
    changes = answer.changes(False, lambda s: f"merged_{s}", lambda s: f"new_{s}", lambda s: f"old_{s}")
    pack = lowering.pack(durable, {t.name: f"log_{t.name}" for t in durable})
    out += ["-- the snapshot", snapshot,
            "-- the changes of batch 0", answer.changes(True, lambda s: f"merged_{s}", lambda s: f"new_{s}",
                                                        lambda s: f"old_{s}"),
            "-- the changes of a later batch", changes,
            "-- the changelog, packed", pack,
            "-- the outputs as one job", lowering.stack([("SELECT * FROM snapshot", answer.output_columns()),
                                                         ("SELECT * FROM changes", answer.output_columns(weight=True)),
                                                         ("SELECT * FROM changelog", lowering.pack_columns(durable))]),
            "-- the changelogs to restore from", lowering.changelogs([(19, "base/19"), (20, "deltas/20")])]
    return "\n".join(out) + "\n"


def statements(text: str) -> list[str]:
    """A golden file's statements (each follows a ``-- `` header line)."""
    found: list[list[str]] = []
    for line in text.split("\n"):
        if line.startswith("-- "):
            found.append([])
        elif found:
            found[-1].append(line)
    return ["\n".join(lines).strip() for lines in found if "".join(lines).strip()]


def assert_spark_sql(text: str) -> None:
    """Every statement of ``text`` parses as Spark SQL (sqlglot's Spark dialect). The fixtures name
    a loop's leaves after its state (``delta_score#2``), which the runtime's views never are."""
    for statement in statements(text):
        sqlglot.parse_one(re.sub(r"(\w)#(\d)", r"\1_\2", statement), read="spark")


@pytest.mark.parametrize("name", QUERIES)
def test_lowering(request: pytest.FixtureRequest, name: str) -> None:
    fx = load(FIXTURES / "explain" / f"{name}.sql")
    text = lowered(streamfold.compile(fx.sql, fx.schemas, fx.tables))
    assert_spark_sql(text)
    check(request, FIXTURES / "lowering" / f"{name}.sql", text)


def test_join_hints_hash_the_delta_side_and_broadcast_touched_keys() -> None:
    plan = streamfold.compile("SELECT x.A, avg(y.D) FROM S1 x JOIN S2 y ON x.B = y.C GROUP BY x.A",
                              {"S1": "A INT, B INT", "S2": "C INT, D INT"})
    text = "\n".join(lowering.program(s.program, _leaf) for s in plan.delta)
    assert "SHUFFLE_HASH(" in text
    nested = streamfold.compile(
        "SELECT d, count(*) FROM (SELECT a, count(DISTINCT b) AS d FROM R GROUP BY a) g GROUP BY d",
        {"R": "a INT, b INT"})
    assert any("BROADCAST(" in lowering.program(s.program, _leaf) for s in nested.delta)


# The statements a running query's controller has the runtime write (streamfold.control): a
# reconfiguration's first batch and states, and a breakpoint's rows.
CONTROL_QUERIES = ("seed_groupby", "count_distinct", "global_aggregate")


def control_lowered(plan: IncrementalPlan) -> str:
    tables = {s.name: StateTable(s, tuple((f.name, _type(f.type)) for f in s.fields)) for s in plan.states}
    out: list[str] = []
    for t in (t for t in tables.values() if not t.state.static):
        have = [n for n, _ in t.columns][:-1]  # the last column new: at its monoid's identity
        out += [f"-- {t.name}: carried over from now on, {t.columns[-1][0]} added",
                lowering.carried_over(t, have, f"old_{t.name}"),
                f"-- {t.name}: kept whole by a rebuild", lowering.whole_merge(t, f"kept_{t.name}")]
    a = plan.answer
    rows = a.per_key if a.per_key is not None else a.rows
    columns = [(n, _type(rows.field(o).type)) for o, n in zip(a.output, a.output_names)]
    answer = AnswerLowering(a, columns, tables.__getitem__)
    snapshot = answer.snapshot(_leaf)
    source = plan.streams[0]
    out += ["-- a new plan's first changes, from the last snapshot", answer.changes_between(snapshot, "before"),
            "-- a new plan's first changes, its columns changed", answer.changes_between(snapshot, None),
            f"-- a breakpoint on {source.name}'s new rows",
            lowering.breakpoint_rows(f"delta_{source.name}", [c for c, _ in source.columns] + ["_weight"],
                                     f"{source.columns[0][0]} < 0", 1001, files=True),
            "-- a breakpoint on the changes",
            lowering.breakpoint_rows("changes", [n for n, _ in columns] + ["_weight"], "_weight < 0", 1001)]
    return "\n".join(out) + "\n"


@pytest.mark.parametrize("name", CONTROL_QUERIES)
def test_control_lowering(request: pytest.FixtureRequest, name: str) -> None:
    fx = load(FIXTURES / "explain" / f"{name}.sql")
    text = control_lowered(streamfold.compile(fx.sql, fx.schemas, fx.tables))
    assert_spark_sql(text)
    check(request, FIXTURES / "lowering" / "control" / f"{name}.sql", text)


def runtime_lowered() -> str:
    """The statements the runtime writes beside a plan's: a stream netted for a recompute, the
    counts a join matrix decides from, a base's probes, a recompute's snapshot."""
    plan = streamfold.compile("SELECT count(*) AS n FROM A a JOIN B b ON a.x BETWEEN b.x - 3 AND b.x + 3",
                              {"A": "x INT, y INT", "B": "x INT, y INT"})
    tables = {s.name: StateTable(s, tuple((f.name, _type(f.type)) for f in s.fields)) for s in plan.states}
    mx = plan.matrices[0]
    keep = lowering.canonical(tables[mx.left], 0, mx.m)
    cols = ["k", "v"]
    out = ["-- a stream netted whole", netting.netted(cols, "all_S"),
           "-- the rows a deletion can meet, netted",
           netting.met_rows(cols, "weighted_S", "plain_S", ["k"]),
           "-- the stream's bag: the other rows as they are, and those netted",
           netting.with_met(cols, "weighted_S", "plain_S", ["k"], "S__met"),
           "-- an insert-only stream's rows", netting.projected("all_S", cols),
           "-- two states' rows", lowering.state_sizes("new_in_a", "new_in_b"),
           "-- a join matrix's sizes, one copy of each row",
           lowering.matrix_sizes([("new_in_a", mx.m, None), ("new_in_b", None, keep)]),
           "-- a watched join's largest keys",
           lowering.key_frequencies([("k", "in_a", None), ("k", "in_b", None)], 4),
           "-- a hybrid's keys above a joiner's share, one copy of each row",
           lowering.key_frequencies([("k", "in_a", keep), ("k", "in_b", None)], 64, 12.5),
           "-- the key columns in which a base has a NULL", lowering.null_columns("base_agg", ["k", "v"]),
           "-- an empty tail, laid out as its base", lowering.select_all(lowering.no_rows("base_agg")),
           "-- a recompute's snapshot", lowering.snapshot_of("recomputed")]
    return "\n".join(out) + "\n"


def test_runtime_lowering(request: pytest.FixtureRequest) -> None:
    text = runtime_lowered()
    assert_spark_sql(text)
    check(request, FIXTURES / "lowering" / "runtime.sql", text)
