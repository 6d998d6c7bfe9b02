"""The strategy of each batch (runtime/strategy.py): incremental, recompute, rebuild.

The cost model's choices are checked on given measurements; the three strategies' answers are
checked against DuckDB with the sequence of strategies drawn at random (every transition: a
recompute leaving the states stale, more recomputes, a rebuild, a restart while stale)."""

from __future__ import annotations

import json
import os
import random

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import streamfold
from streamfold.runtime import shape
from streamfold.runtime.strategy import Choice, CostModel

from ..streams import Source, check_stream
from ..strategies import stream
from .test_differential import SETTINGS

ONE = SETTINGS.__class__(SETTINGS, max_examples=1)  # every example runs Spark for seconds


# -- the cost model, on given measurements ----------------------------------------------------------
def test_forced_modes():
    assert CostModel("incremental").choose(False, 10, 100).strategy == "incremental"
    assert CostModel("incremental").choose(True, 10, 100).strategy == "rebuild"  # stale after a restart
    assert CostModel("recompute").choose(False, 10, 100).strategy == "recompute"
    with pytest.raises(ValueError):
        CostModel("sometimes")


def _built(model: CostModel, rows: int = 1000, seconds: float = 2.0) -> CostModel:
    model.observe("incremental", True, rows, rows, seconds)  # batch 0
    return model


def test_auto_measures_incremental_then_probes_a_recompute_before_choosing():
    model = _built(CostModel("auto"))
    first = model.choose(False, 10, 1000)
    # nothing measured since the build: incremental, and a recompute is measured after its commit
    assert (first.strategy, first.probe) == ("incremental", True)
    model.observe("incremental", False, 10, 1010, 1.0)
    model.observe("probe", False, 0, 1010, 0.3)  # recompute is cheaper than the incremental batch
    second = model.choose(False, 10, 1010)
    assert second.strategy == "recompute" and second.estimates["recompute"] < second.estimates["incremental"]
    assert "incremental" in second.reason and not second.probe


def test_an_empty_increment_measured_after_the_build_decides_the_first_batch():
    """After the history's commit the engine runs the prepared plans once over no rows (the floor
    under an incremental batch) and probes a recompute: batch 1 is a recompute when even the
    floor costs more, else incremental and measured; a rebuild forgets the floor."""
    model = _built(CostModel("auto"), 1000, 2.0)
    model.observe_floor(3.0)
    model.observe("probe", False, 0, 1000, 0.5)
    first = model.choose(False, 10, 1000, preparable=True)
    assert first.strategy == "recompute" and "at least" in first.reason
    assert first.estimates["incremental"] == pytest.approx(3.0 + 10 * 2.0 / 1000)
    cheap = _built(CostModel("auto"), 1000, 2.0)
    cheap.observe_floor(0.1)
    cheap.observe("probe", False, 0, 1000, 0.5)
    first = cheap.choose(False, 10, 1000, preparable=True)
    assert (first.strategy, first.probe) == ("incremental", False)  # a recompute is measured already
    cheap.observe("incremental", False, 10, 1010, 0.9, warm=True)  # a measured batch replaces the floor
    assert cheap.choose(False, 10, 1010, preparable=True).strategy == "recompute"
    cheap.observe("rebuild", False, 0, 1010, 2.0)
    assert cheap.floor is None
    # a choice within 2x of the probe right after the build — the query's first run in the JVM,
    # which paid its code generation — measures a recompute again, and that measure replaces it
    close = _built(CostModel("auto"), 1000, 2.0)
    close.observe_floor(0.4)
    close.observe("probe", False, 0, 1000, 0.8)
    first = close.choose(False, 10, 1000, preparable=True)
    assert (first.strategy, first.probe) == ("incremental", True) and "again" in first.reason
    close.observe("incremental", False, 10, 1010, 0.5, warm=True)
    close.observe("probe", False, 0, 1010, 0.3)
    assert close.predicted("recompute", 0, 1010) == pytest.approx(0.3)
    assert close.choose(False, 10, 1010, preparable=True).strategy == "recompute"


def test_with_prepared_plans_a_warm_batch_is_measured_before_a_recompute_and_is_what_incremental_costs():
    """The batches after a build that lay the states out and capture the plans cost several warm
    batches; they are not what an incremental batch costs from then on. (Without this, 19 of 22
    TPC-H queries at SF 0.01 went to recompute after batch 2 and cost 1.0–1.7× a recompute,
    where incremental batches cost 0.3–1×.)"""
    model = _built(CostModel("auto"))
    assert model.choose(False, 10, 1000, preparable=True).probe is True  # the first batch is probed
    model.observe("incremental", False, 10, 1010, 1.2)  # the states laid out (plain)
    model.observe("probe", False, 0, 1010, 0.4)  # cheaper than the cold batch ...
    waiting = model.choose(False, 10, 1010, preparable=True)
    assert (waiting.strategy, waiting.probe) == ("incremental", False) and "prepared" in waiting.reason
    model.observe("incremental", False, 10, 1020, 0.9)  # the capture
    assert model.choose(False, 10, 1020, preparable=True).strategy == "incremental"  # still waiting
    model.observe("incremental", False, 10, 1030, 0.1, warm=True)  # a replay
    choice = model.choose(False, 10, 1030, preparable=True)  # ... not than a warm one
    assert choice.strategy == "incremental" and choice.estimates["incremental"] < 0.2 and not choice.probe
    # without warm batches the cold ones are all there is to go by: after WARM_UP of them the
    # choice is made on them (a plan whose batches are never prepared)
    cold = _built(CostModel("auto"))
    for i in range(3):
        cold.observe("incremental", False, 10, 1010 + 10 * i, 1.0)
    assert cold.choose(False, 10, 1030, preparable=True).probe is True  # (its probe was not taken)
    cold.observe("probe", False, 0, 1030, 0.4)
    assert cold.choose(False, 10, 1030, preparable=True).strategy == "recompute"
    # a restart calibrates from the commits, which say which batches replayed
    resumed = CostModel("auto")
    resumed.resume([{"batch": 0, "rows": {"S": 1000}, "history_rows": 1000, "duration_s": 2.0},
                    {"batch": 1, "rows": {"S": 10}, "history_rows": 1010, "duration_s": 1.2},
                    {"batch": 2, "rows": {"S": 10}, "history_rows": 1020, "duration_s": 0.9, "prepared": "capture"},
                    {"batch": 3, "rows": {"S": 10}, "history_rows": 1030, "duration_s": 0.1, "prepared": "replay"}])
    assert resumed.predicted("incremental", 10, 1030) < 0.2


def test_a_small_history_of_many_states_is_recomputed_and_lower_bounds_never_rebuild():
    """Batch 0 under auto: a small history of a plan of many states is recomputed (a build is a
    job per state at least); then the per-state floor is a lower bound on an increment and a
    build, which may keep recomputing but never rebuilds at once; a cold first recompute is
    replaced by the next one measured (issue 58)."""
    model = CostModel("auto")
    assert model.first(15, 34, 100_000, 8).strategy == "recompute"
    assert model.first(15, 5, 100_000, 8).strategy == "incremental"  # few states: built
    assert model.first(200_000, 34, 100_000, 8).strategy == "incremental"  # a large history: built
    assert CostModel("incremental").first(15, 34, 100_000, 8).strategy == "incremental"
    model.observe_states(34, 0.05)  # 1.7 s at least per increment
    model.observe("recompute", True, 15, 15, 30.0)  # batch 0: cold
    assert not model.builds  # a recompute is no build
    choice = model.choose(True, 1, 15)
    assert choice.strategy == "recompute", choice  # the rebuild is at least recompute + 1.7 s
    assert choice.estimates["rebuild"] == pytest.approx(30.0 + 1.7)  # the history before the batch
    model.observe("recompute", False, 1, 16, 1.0)  # warm: replaces the cold one
    assert model.predicted("recompute", 0, 16) == pytest.approx(1.0)
    assert model.choose(True, 1, 16).strategy == "recompute"  # 1.7 s > 1.0 s: no regret either
    assert model.regret == 0.0
    cheap = CostModel("auto")
    assert cheap.first(15, 34, 100, 8).strategy == "recompute"
    cheap.observe_states(34, 0.001)  # increments could be cheap, but while the history is small
    cheap.observe("recompute", True, 15, 15, 1.0)  # (100 rows here) it is recomputed, no regret
    taken = []
    for i in range(12):
        rows = 15 + 20 * i
        taken.append(cheap.choose(True, 20, rows).strategy)
        if taken[-1] == "rebuild":
            break
        cheap.observe("recompute", False, 20, rows + 20, 1.0 * (rows + 20) / 15)
    # recomputed while the history is at most 100 rows (batches of 20: four), then rebuilt: the
    # recompute grew with the rows, the increment and the build did not
    assert taken == ["recompute"] * 4 + ["rebuild"], taken
    small = CostModel("auto")
    small.first(15, 34, 100, 8)
    small.observe("recompute", True, 15, 15, 1.0)
    assert "still small" in small.choose(True, 1, 15).reason


def test_a_measured_recompute_batch_replaces_the_probes():
    model = _built(CostModel("auto"))
    model.observe("incremental", False, 10, 1010, 0.5)
    model.observe("probe", False, 0, 1010, 0.3)  # the probe said recompute is cheaper
    assert model.choose(False, 10, 1010).strategy == "recompute"
    model.observe("recompute", False, 10, 1020, 0.9)  # the real batch was not
    assert model.predicted("recompute", 10, 1020) == pytest.approx(0.9 / 1020 * 1030)
    assert model.regret == pytest.approx(0.4)


def test_auto_stays_incremental_when_it_is_cheaper():
    model = _built(CostModel("auto"), 100_000, 20.0)
    for i in range(2):
        model.observe("incremental", False, 1000, 100_000 + 1000 * (i + 1), 0.3)
    model.observe("probe", False, 0, 102_000, 4.0)
    choice = model.choose(False, 1000, 102_000)
    assert (choice.strategy, choice.probe) == ("incremental", False)
    bulk = model.choose(False, 300_000, 102_000)  # a bulk batch: h over 300K rows costs more than a recompute
    assert bulk.strategy == "recompute"


def test_stale_states_are_rebuilt_once_recomputing_has_cost_the_rebuild():
    model = _built(CostModel("auto"), 1000, 2.0)
    model.observe("incremental", False, 10, 1010, 0.5)
    model.observe("probe", False, 0, 1010, 0.4)
    assert model.choose(False, 10, 1010).strategy == "recompute"
    model.observe("recompute", False, 10, 1020, 0.4)
    # recomputes get dearer than an incremental batch would be: the regret accumulates
    regret_rebuilds = []
    history = 1020
    for _ in range(40):
        choice = model.choose(True, 10, history)
        if choice.strategy == "rebuild":
            regret_rebuilds.append(history)
            break
        history += 10
        model.observe("recompute", False, 10, history, 1.0)
    assert regret_rebuilds, "recomputing at twice an incremental batch's cost must end in a rebuild"
    assert model.regret >= model.choose(True, 10, history).estimates["rebuild"] or True


def test_resume_calibrates_from_commit_records():
    records = [{"batch": 0, "rows": {"S": 1000}, "history_rows": 1000, "duration_s": 2.0, "strategy": "incremental"},
               {"batch": 1, "rows": {"S": 10}, "history_rows": 1010, "duration_s": 1.0, "strategy": "incremental"},
               {"batch": 2, "rows": {"S": 10}, "history_rows": 1020, "duration_s": 0.3, "strategy": "recompute"}]
    model = CostModel("auto")
    model.resume(records)
    assert model.choose(True, 10, 1020).estimates.keys() == {"incremental", "recompute", "rebuild"}



def test_the_first_recompute_that_nets_a_deletion_is_measured_before_it_is_chosen():
    """A recompute over a history holding a deletion nets the streams that may delete, 2–3× the
    cost of one over inserts alone (TPC-DS at SF 0.1: issue 58), so the recomputes measured before
    the first deletion do not predict it: with the states current, the first batch that brings a
    deletion runs incrementally and a netted recompute is measured after its commit; from then on
    that measure predicts the recompute."""
    model = CostModel("auto")
    model.observe("incremental", True, 1000, 1000, 10.0)  # batch 0 builds: 0.01 s a row
    for history in (1010, 1020, 1030):
        model.observe("incremental", False, 10, history, 1.0, warm=True)
    model.observe("probe", False, 0, 1030, 0.5)  # a recompute of inserts only
    assert model.choose(False, 10, 1030).strategy == "recompute"  # 1.0 s > 0.5 s
    first = model.choose(False, 10, 1030, netted=True)
    assert first.strategy == "incremental" and first.probe, first
    assert first.estimates["recompute"] == pytest.approx(0.01 * 1040)  # the build's cost: an upper bound
    model.observe("incremental", False, 10, 1040, 1.0, warm=True)
    model.observe("probe", False, 0, 1040, 2.0, netted=True)
    later = model.choose(False, 10, 1040, netted=True)
    assert later.strategy == "incremental" and not later.probe, later
    assert later.estimates["recompute"] == pytest.approx(2.0 / 1040 * 1050)
    # stale states: the netted measure, not the inserts', is what recomputing costs
    assert model.choose(True, 10, 1040, netted=True).estimates["recompute"] == pytest.approx(2.0 / 1040 * 1050)


def test_a_restart_remembers_that_the_history_holds_a_deletion(tmp_path):
    """The commits say from which batch on the history holds a deletion (``history_deletes``,
    under auto); a restart reads it, and the recomputes it recorded predict netted ones."""
    from types import SimpleNamespace

    from streamfold.runtime.checkpoint import OutputDir
    from streamfold.runtime.features.strategies import Strategies

    out = OutputDir(str(tmp_path))
    records = [{"batch": 0, "rows": {"S": 1000}, "history_rows": 1000, "duration_s": 10.0, "strategy": "incremental"},
               {"batch": 1, "rows": {"S": 10}, "history_rows": 1010, "duration_s": 1.0, "strategy": "incremental"},
               {"batch": 2, "rows": {"S": 10}, "history_rows": 1020, "duration_s": 3.0, "strategy": "recompute",
                "history_deletes": True}]
    for r in records:
        out.commit(r["batch"], r)
    ctx = SimpleNamespace(output=out, config=SimpleNamespace(strategy="auto"))
    strategies = Strategies(ctx, can_recompute=True, stale=True)  # type: ignore[arg-type]
    strategies.resume(2)
    assert strategies.deletes
    assert strategies.cost.predicted("recompute", 10, 1020, netted=True) == pytest.approx(3.0 / 1020 * 1030)


@pytest.mark.spark
def test_the_commits_say_from_which_batch_the_history_holds_a_deletion(spark, tmp_path):
    """Under auto each commit from the batch whose file first deletes a row on records
    ``history_deletes`` (a Parquet file's footers proving every weight 1 is no deletion); every
    answer as DuckDB's."""
    s = Source("S", (("k", "INT"), ("v", "INT")), weighted=True)
    batches = [{"S": [(1, 5, 1), (2, 6, 1), (1, 7, 1)]}, {"S": [(2, 8, 1)]}, {"S": [(1, 5, -1), (3, 1, 1)]},
               {"S": [(3, 2, 1)]}]
    check_stream(spark, str(tmp_path), "SELECT k, count(*) AS n, sum(v) AS t FROM S GROUP BY k", [s], batches,
                 strategy="auto")
    commits = tmp_path / "out" / "commits"
    deletes = [json.loads((commits / f"{b:06d}.json").read_text()).get("history_deletes", False) for b in range(4)]
    assert deletes == [False, False, True, True], deletes


def test_a_restart_long_after_batch_0_still_predicts_a_recompute(tmp_path):
    """The model's recompute and rebuild rates come from builds (batch 0, rebuilds): a restart
    after batch 40 reads batch 0's record besides the last ones, or --strategy auto could
    predict no recompute and stayed incremental for the rest of the run."""
    from types import SimpleNamespace

    from streamfold.runtime.checkpoint import OutputDir
    from streamfold.runtime.features.strategies import Strategies

    out = OutputDir(str(tmp_path))
    history = 0
    for b in range(41):
        rows = 1000 if b == 0 else 10
        history += rows
        out.commit(b, {"batch": b, "rows": {"S": rows}, "history_rows": history, "strategy": "incremental",
                       "duration_s": 2.0 if b == 0 else 0.5})
    ctx = SimpleNamespace(output=out, config=SimpleNamespace(strategy="auto"))
    strategies = Strategies(ctx, can_recompute=True, stale=False)  # type: ignore[arg-type]
    strategies.resume(40)
    choice = strategies.cost.choose(False, 10, history)
    assert strategies.history_rows == history and {"recompute", "rebuild"} <= choice.estimates.keys()
    assert choice.probe  # no recompute measured in this process: one is measured after the commit


def test_a_restart_after_a_small_history_recomputed_keeps_recomputing_while_small(tmp_path):
    """Batch 0 recomputed a small history (cost.first): after a restart the states are stale and
    the model recomputes while the history stays small, as before the restart (issue 58)."""
    from types import SimpleNamespace

    from streamfold.runtime.checkpoint import OutputDir
    from streamfold.runtime.features.strategies import Strategies

    out = OutputDir(str(tmp_path))
    for b in range(3):
        out.commit(b, {"batch": b, "rows": {"S": 15 if b == 0 else 1}, "history_rows": 15 + b, "strategy": "recompute",
                       "duration_s": 1.0})
    ctx = SimpleNamespace(output=out, config=SimpleNamespace(strategy="auto"))
    strategies = Strategies(ctx, can_recompute=True, stale=True)  # type: ignore[arg-type]
    strategies.resume(2)
    strategies.cost.observe_states(34, 0.0001)  # (else measured on Spark at the first stale choice)
    choice = strategies.cost.choose(True, 1, 17)
    assert choice.strategy == "recompute" and "still small" in choice.reason, choice

def test_a_probe_does_not_count_the_probed_batchs_job():
    """A probe times what a recompute batch computes (the query, its outputs written to scratch)
    and adds the probed batch's file listing and commit — not its "write" phase, which in an
    incremental batch is the job that runs h, the merges and the outputs: counted, every
    recompute was predicted as dear as an incremental batch (TPC-H SF 1, Q08: 15.5 s predicted,
    2.4 s by Spark) and ``auto`` never recomputed."""
    from types import SimpleNamespace

    from streamfold.runtime.engine import Engine
    from streamfold.runtime.features.strategies import Strategies

    calls, histories = [], []

    def measure(history, outputs=None):
        calls.append(outputs)
        histories.append(history)
        return 0.5

    ctx = SimpleNamespace(config=SimpleNamespace(strategy="auto"), progress=lambda _: None,
                          clock=SimpleNamespace(timings={"read": 0.1, "write": 10.0, "commit": 0.2}))
    strategies = Strategies(ctx, can_recompute=True, stale=False)  # type: ignore[arg-type]
    strategies.history_rows = 1010
    strategies.cost.observe("incremental", True, 1000, 1000, 2.0)
    strategies.cost.observe("incremental", False, 10, 1010, 10.3)
    bundle = SimpleNamespace(recomputer=SimpleNamespace(measure=measure), plan=SimpleNamespace(
        streams=[SimpleNamespace(name="S")]))
    engine = SimpleNamespace(consumed={"S": {"a.parquet"}}, b=bundle)
    history = Engine._history(engine, {"S": ["b.parquet"]})  # type: ignore[arg-type]
    strategies.measure_recompute(bundle, 1, 10, history)  # type: ignore[arg-type]
    assert len(calls) == 1 and calls[0] is not None  # the outputs are computed too
    # over every file so far, the probed batch's own included (they join ``consumed`` after it:
    # without them the probe after the history recomputed nothing and took 0.27 s for Q03 at SF 1)
    assert histories == [{"S": ["a.parquet", "b.parquet"]}]
    assert strategies.cost.predicted("recompute", 0, 1010) == pytest.approx(0.8)


# -- the strategies' answers, against DuckDB ---------------------------------------------------------
R = Source("R", (("a", "INT"), ("b", "INT"), ("c", "DOUBLE"), ("s", "STRING")), weighted=True)
S = Source("S", (("k", "INT"), ("v", "INT")), weighted=True)
T = Source("T", (("k", "INT"), ("name", "STRING")), static=True)

QUERIES = [
    ("groupby", "SELECT a, count(*) AS n, sum(b), avg(c), min(s), max(b) FROM R GROUP BY a", "R", False),
    ("top-k", "SELECT a, count(*) AS n FROM R GROUP BY a ORDER BY n DESC, a LIMIT 3", "R", True),
    ("join-static", "SELECT R.a, T.name, count(*), sum(S.v) FROM R JOIN S ON R.b = S.k JOIN T ON R.a = T.k "
                    "GROUP BY R.a, T.name", "RST", False),
    ("not-exists", "SELECT a, b FROM R WHERE NOT EXISTS (SELECT 1 FROM S WHERE S.k = R.a AND S.v < R.b)", "RS", False),
    # IN under OR: a join matrix and 22 states, so under auto batch 0 recomputes (issue 58)
    ("in-or", "SELECT a, b FROM R WHERE (b > 0 AND a IN (SELECT k FROM S WHERE v IN (SELECT b FROM R WHERE a < 3))) "
              "OR (a = 1 AND b IN (SELECT v FROM S WHERE k > 0))", "RS", False),
    # running functions: each partition's summary a state, rebuilt with the others when stale
    ("running-window", "SELECT a, b, sum(b) OVER (PARTITION BY a ORDER BY b) AS rb, "
                       "dense_rank() OVER (PARTITION BY a ORDER BY b) AS r FROM R", "R", False),
]


class Scripted:
    """Strategies drawn at random among those possible (a stand-in for the cost model's choice)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.taken: list[str] = []

    def choose(self, stale: bool, batch_rows: int, history_rows: int, preparable: bool = False,
               netted: bool = False) -> Choice:
        strategy = self.rng.choice(["recompute", "rebuild"] if stale else ["incremental", "recompute"])
        self.taken.append(strategy)
        return Choice(strategy, "scripted", probe=self.rng.random() < 0.3)


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,uses,ordered", QUERIES, ids=[q[0] for q in QUERIES])
@ONE
@given(data=st.data(), seed=st.integers(0, 1000))
def test_random_strategies_equal_duckdb(spark, tmp_path_factory, monkeypatch, qid, sql, uses, ordered, data, seed):
    sources = [{"R": R, "S": S, "T": T}[c] for c in uses]
    batches = data.draw(stream(sources, min_batches=4, max_batches=5, min_rows=1), label="batches")
    tables = {"T": [(k, f"n{k % 3}") for k in range(-2, 6)]} if "T" in uses else {}
    scripted = Scripted(seed)
    monkeypatch.setattr(CostModel, "choose", lambda self, *a: scripted.choose(*a))
    tmp = str(tmp_path_factory.mktemp(f"strategy-{qid}"))
    check_stream(spark, tmp, sql, sources, batches, tables, ordered=ordered, strategy="auto")
    commits = os.path.join(tmp, "out", "commits")
    recorded = [streamfold_commit(commits, n)["strategy"] for n in sorted(os.listdir(commits))]
    assert recorded[1:] == scripted.taken[:len(recorded) - 1], (recorded, scripted.taken)
    assert recorded[0] == ("recompute" if qid == "in-or" else "incremental"), recorded


def streamfold_commit(directory: str, name: str) -> dict:
    import json

    with open(os.path.join(directory, name)) as f:
        return json.load(f)


@pytest.mark.spark
@pytest.mark.parametrize("floor", [0.0, 1e6])
def test_under_auto_the_first_increment_is_chosen_on_an_empty_increment_run_after_the_history(
        spark, tmp_path, monkeypatch, floor):
    """The prepared plans' run over no rows after batch 0 (here given its seconds) and the probe
    beside it decide batch 1: a recompute when even an empty increment costs more than a
    recompute, else a replay of the plans captured ahead; every answer as DuckDB's."""
    from streamfold.runtime.prepared import Prepared

    if not Prepared.available(spark):
        pytest.skip("the JVM helpers are not loaded")
    run_empty = Prepared.run_empty
    runs: list[float] = []

    def given_seconds(self: Prepared) -> float:
        run_empty(self)  # (the job runs: what it kept is freed)
        runs.append(floor)
        return floor

    monkeypatch.setattr(Prepared, "run_empty", given_seconds)
    monkeypatch.setattr(shape, "AHEAD_MIN_ROWS", 0)  # (the calibration follows the capture ahead)
    sql = "SELECT a, count(*) AS n, sum(b) AS t FROM R GROUP BY a"
    r = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
    rng = random.Random(f"floor {floor}")
    # A history of 200 rows and increments of 8: with a floor of 0 the increment is then estimated
    # at 8/200 of the build's seconds against a recompute of 208 rows, a choice no machine's load
    # turns (with increments as large as the history the two estimates were within 20 %, and a
    # loaded CI machine once chose the recompute).
    batches = [{"R": [(rng.randrange(4), rng.randrange(50), 1) for _ in range(200 if i == 0 else 8)]} for i in range(4)]
    batches[2]["R"].append(batches[0]["R"][0][:2] + (-1,))  # a deletion
    check_stream(spark, str(tmp_path), sql, [r], batches, strategy="auto")
    commits = os.path.join(str(tmp_path), "out", "commits")
    records = [streamfold_commit(commits, n) for n in sorted(os.listdir(commits))]
    if floor:
        assert records[1]["strategy"] == "recompute" and "at least" in records[1]["cost"]["reason"], records[1]
        assert runs == [floor, floor]  # run again: it decided the choice
    else:
        assert (records[1]["strategy"], records[1].get("prepared")) == ("incremental", "replay"), records[1]
        assert runs == [floor]


@pytest.mark.spark
def test_restart_with_stale_states_rebuilds_them(spark, tmp_path, monkeypatch):
    """Killed after recompute batches (no state written since), a run restarts with the states
    stale, rebuilds them from the files, and goes on incrementally: every answer DuckDB's."""
    from streamfold.verify import compare, duckdb_answer

    sql = "SELECT R.a, count(*) AS n, sum(S.v) AS t FROM R JOIN S ON R.b = S.k GROUP BY R.a"
    dirs = {n: str(tmp_path / "in" / n) for n in "RS"}
    for d in dirs.values():
        os.makedirs(d)
    out = str(tmp_path / "out")
    rng = random.Random(3)
    prefix: dict[str, list] = {"R": [R.table([])], "S": [S.table([])]}
    plan = iter(["incremental", "recompute", "recompute", "STOP", "recompute", "incremental", "incremental",
                 "incremental"])

    def scripted(self, stale, *_):
        return Choice(next(plan), "scripted")

    monkeypatch.setattr(CostModel, "choose", scripted)
    schemas = {"R": R.schema_sql(), "S": S.schema_sql()}
    query = streamfold.start(sql, dirs, out, schemas=schemas, spark=spark, background=False, strategy="auto",
                             partitions=2)
    strategies = []
    try:
        for i in range(8):
            for name, src in (("R", R), ("S", S)):
                rows = [(rng.randint(0, 3), rng.randint(0, 3)) + ((1.0, "x", 1) if name == "R" else (1,))
                        for _ in range(4)]
                table = src.table(rows)
                pq.write_table(table, os.path.join(dirs[name], f"{i:04d}.parquet"))
                prefix[name].append(table)
            if i == 4:  # the engine is gone ("killed" after batch 3's commit); a new one takes over
                assert next(plan) == "STOP"
                query.stop()
                query = streamfold.start(sql, dirs, out, schemas=schemas, spark=spark, background=False,
                                         strategy="auto", partitions=2)
                assert query.engine.stale, "the states are not restorable after a recompute batch"
            result = query.process_available()
            assert result is not None
            strategies.append(query.commit(result.batch)["strategy"])
            got = compare([tuple(r) for r in query.snapshot_pandas().itertuples(index=False)],
                          duckdb_answer(sql, prefix))
            assert got.matches, f"batch {i}: {got.detail}"
    finally:
        query.stop()
    # batch 0 builds; 1 incremental; 2, 3 recompute; restart stale: 4 recompute, 5 rebuilds (the
    # scripted "incremental" on stale states is taken as a rebuild), 6 and 7 incremental
    assert strategies == ["incremental", "incremental", "recompute", "recompute", "recompute", "rebuild",
                          "incremental", "incremental"]


def test_unknown_strategy_is_refused_with_a_hint():
    from streamfold.errors import UsageError

    with pytest.raises(UsageError) as e:  # before Spark starts
        streamfold.start("SELECT 1 FROM R", {"R": "/nowhere"}, "/out", strategy="sometimes")
    assert e.value.code == "BAD_OPTION" and "incremental" in (e.value.hint or "")
    assert e.value.params == {"option": "strategy", "value": "sometimes"}


@pytest.mark.spark
def test_reconfiguring_while_states_are_stale_rebuilds_them_first(spark, tmp_path):
    """Under --strategy recompute the states go stale after batch 0; a state is not inspectable
    then (coded), and an answer-only reconfiguration rebuilds the running plan's states before it
    applies (and recomputes with the new query afterwards). Every committed snapshot is DuckDB's
    answer under its query version."""
    from ..controlled import Feed, check_every_commit

    sql = "SELECT k, sum(v) AS s, count(*) AS n FROM S GROUP BY k"
    feed = Feed(str(tmp_path / "S"))
    out = str(tmp_path / "out")
    q = streamfold.start(f"{sql} HAVING count(*) > 1", {"S": feed.directory}, out, schemas={"S": "k INT, v BIGINT"},
                         spark=spark, trigger=0.1, partitions=2, endpoint=False, strategy="recompute")
    try:
        feed.put([(1, 5), (1, 1), (2, 7), (2, 3), (2, 9), (3, 4)])
        q.wait_for_batch(0, timeout=180)
        feed.put([(1, 2), (3, 1), (4, 4)])
        q.wait_for_batch(1, timeout=180)
        assert q.commit(1)["strategy"] == "recompute" and q.engine.stale
        with pytest.raises(streamfold.StreamfoldError) as e:
            q.inspect("SELECT * FROM agg")
        assert e.value.code == "STATE_NOT_MAINTAINED"
        assert q.inspect("SELECT count(*) AS c FROM snapshot")["rows"]
        done = q.reconfigure(f"{sql} HAVING count(*) > 2", wait=True)  # the answer only
        assert q.commit(done["result"]["batch"])["strategy"] == "incremental" and not q.engine.stale
        feed.put([(2, 1), (5, 5)])
        q.wait_for_batch(done["result"]["batch"] + 1, timeout=180)
        assert q.commit(q.last_batch)["strategy"] == "recompute"
    finally:
        q.stop()
    check_every_commit(out, feed, f"{sql} HAVING count(*) > 1")


def _strategies(out: str) -> list[str]:
    commits = os.path.join(out, "commits")
    return [streamfold_commit(commits, n)["strategy"] for n in sorted(os.listdir(commits))]


@pytest.mark.spark
@pytest.mark.parametrize("strategy", ["incremental", "recompute"])
def test_division_by_zero_is_null_under_every_strategy(spark, tmp_path, strategy):
    """`/`, `%` and `DIV` by zero give NULL (docs/sql.md) whether a batch is maintained or
    recomputed: the recompute runs the query's divisions in their NULL-on-zero form
    (sql/batch_text.py) and names its columns as Spark names the query's own."""
    r = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
    sql = "SELECT a, a / b, a % b AS m, a DIV b AS q FROM R"
    oracle = ("SELECT a, CASE WHEN b = 0 THEN NULL ELSE a / b END, CASE WHEN b = 0 THEN NULL ELSE a % b END AS m, "
              "CASE WHEN b = 0 THEN NULL ELSE a // b END AS q FROM R")
    batches = [{"R": [(7, 2, 1), (1, 1, 1)]}, {"R": [(1, 0, 1), (3, 0, 1)]}, {"R": [(1, 0, -1), (5, 2, 1)]}]
    check_stream(spark, str(tmp_path), sql, [r], batches, oracle_sql=oracle, strategy=strategy)
    assert _strategies(os.path.join(str(tmp_path), "out"))[1:] == [strategy] * 2
    snapshot = pq.read_table(os.path.join(str(tmp_path), "out", "snapshots", "000002"))
    assert snapshot.column_names[:4] == ["a", "(a / b)", "m", "q"]


@pytest.mark.spark
def test_an_in_subquery_whose_null_shows_is_never_recomputed(spark, tmp_path):
    """Spark's batch plan answers FALSE for `NULL IN (SELECT …)` in a select list (an existence
    join; SQL and the incremental plan: NULL), so such a query is not recomputed: under
    `--strategy recompute` its batches are incremental, with the reason in the commit."""
    r = Source("R", (("a", "INT"),), weighted=True)
    s = Source("S", (("k", "INT"),), weighted=True)
    sql = "SELECT a, a IN (SELECT k FROM S) AS f, a NOT IN (SELECT k FROM S) AS g FROM R"
    batches = [{"R": [(1, 1)], "S": [(2, 1)]}, {"R": [(None, 1)]}, {"S": [(None, 1)], "R": [(2, 1)]}]
    check_stream(spark, str(tmp_path), sql, [r, s], batches, strategy="recompute")
    commits = os.path.join(str(tmp_path), "out", "commits")
    records = [streamfold_commit(commits, n) for n in sorted(os.listdir(commits))]
    assert [c["strategy"] for c in records] == ["incremental"] * 3
    assert "IN subquery" in records[1]["cost"]["reason"]


# A plan of many states over a small history (batch 0 recomputes it under auto): R and S, six rows
# a batch each.
MANY_STATES = ("SELECT a, b FROM R WHERE (b > 0 AND a IN (SELECT k FROM S WHERE v IN (SELECT b FROM R WHERE a < 3))) "
               "OR (a = 1 AND b IN (SELECT v FROM S WHERE k > 0))")


class _ManyStates:
    """The sources of :data:`MANY_STATES` under ``tmp_path``, a batch of files landed at a time,
    and DuckDB's answer over what landed."""

    def __init__(self, tmp_path, seed: str) -> None:
        self.rng = random.Random(seed)
        self.src = {n: tmp_path / n for n in "RS"}
        for d in self.src.values():
            d.mkdir()
        self.sources = {n: str(d) for n, d in self.src.items()}

    def land(self, i: int) -> None:
        import pyarrow as pa

        for n, (x, y) in {"R": ("a", "b"), "S": ("k", "v")}.items():
            pq.write_table(pa.table({x: pa.array([self.rng.randrange(5) for _ in range(6)], pa.int32()),
                                     y: pa.array([self.rng.randrange(-2, 5) for _ in range(6)], pa.int32())}),
                           self.src[n] / f"{i:04d}.parquet")

    def expected(self) -> list[tuple]:
        import duckdb

        con = duckdb.connect()
        for n, d in self.src.items():
            con.execute(f"CREATE VIEW {n} AS SELECT * FROM read_parquet('{d}/*.parquet')")
        return sorted(con.execute(MANY_STATES).fetchall())


def _snapshot(out, batch: int) -> list[tuple]:
    return sorted(tuple(r.values()) for r in pq.read_table(out / "snapshots" / f"{batch:06d}").to_pylist())


@pytest.mark.spark
@pytest.mark.parametrize("waiting", [False, True], ids=["idle", "file-waiting"])
def test_the_states_floor_is_measured_after_batch_0s_commit_not_before_it(spark, tmp_path, waiting):
    """Batch 0 recomputes a small history of many states (``CostModel.first``): what each state
    costs at least is measured after the commit, off the batch's path — or, when batch 1's file
    is already waiting, by batch 1's choice (issue 58). Every answer as DuckDB's."""
    data = _ManyStates(tmp_path, f"floor {waiting}")
    data.land(0)
    query = streamfold.start(MANY_STATES, data.sources, str(tmp_path / "out"), spark=spark,
                             background=False, endpoint=False, strategy="auto")
    try:
        later = query.engine.post_commit
        files_waiting = later.waiting
        if waiting:  # as if batch 1's files had landed while batch 0 ran
            later.waiting = lambda: True
        first = query.process_available()
        later.waiting = files_waiting
        assert first is not None and first.batch == 0 and query.commit(0)["strategy"] == "recompute"
        events = [(b, what) for b, what, name in later.events if name.startswith("measure the states")]
        floor = query.engine.strategies.cost.states_floor
        assert events == [(0, "deferred" if waiting else "ran")] and (floor is None) == waiting, (events, floor)
        data.land(1)
        second = query.process_available()
        assert second is not None and second.batch == 1
        assert query.engine.strategies.cost.states_floor is not None
        assert not later.due  # measured once, by batch 1's choice when deferred
        assert _snapshot(tmp_path / "out", 1) == data.expected()
    finally:
        query.stop()


@pytest.mark.spark
def test_a_recomputed_batch_0_leaves_the_states_undeclared_until_a_batch_builds_them(spark, tmp_path):
    """A run that may recompute its first batch defers analysing its states' programs (a second or
    more for a plan of many states: issue 58) to the first batch that builds them: batch 0
    recomputing under ``auto`` analyses none, the rebuild after it declares them, and a run that
    is always incremental declares them at its start. Every answer as DuckDB's."""
    data = _ManyStates(tmp_path, "undeclared")
    data.land(0)
    out = tmp_path / "out"
    query = streamfold.start(MANY_STATES, data.sources, str(out), spark=spark, background=False, endpoint=False,
                             strategy="auto")
    try:
        assert not query.engine.store.declared
        first = query.process_available()
        assert first is not None and query.commit(0)["strategy"] == "recompute"
        assert not query.engine.store.declared  # nothing read the states
        assert _snapshot(out, 0) == data.expected()
        data.land(1)
        # the model asked for an incremental batch: the stale states are rebuilt, by a new bundle
        query.engine.strategies.cost.choose = lambda *a, **k: Choice("incremental", "given")  # type: ignore[method-assign]
        second = query.process_available()
        assert second is not None and query.commit(1)["strategy"] == "rebuild"
        assert query.engine.store.declared and query.engine.store.rows  # built
        assert _snapshot(out, 1) == data.expected()
        data.land(2)
        third = query.process_available()
        assert third is not None and query.commit(2)["strategy"] == "incremental"
        assert _snapshot(out, 2) == data.expected()
    finally:
        query.stop()
    always = streamfold.start(MANY_STATES, data.sources, str(tmp_path / "out2"), spark=spark, background=False,
                              endpoint=False)
    try:
        assert always.engine.store.declared  # an incremental batch 0 builds them: declared at once
    finally:
        always.stop()
