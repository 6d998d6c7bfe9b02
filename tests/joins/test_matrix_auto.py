"""``matrix_equi="auto"`` (issue 20): an equi-join of two streams is hashed on its key while no key
holds more than a joiner's fair share (|R| + |S|) / J, and becomes the hybrid of §4.4.4 (heavy
keys over the join matrix, the others hashed) at the batch boundary where the key frequencies —
checked when an input has grown by ε since the last check — show a heavy key.

The streams start uniform (every key on at most one row of each side) and turn skewed (one hot
key takes most new rows), with deletions; every snapshot equals DuckDB's answer, the commits
record the hash join, its checks and the switch, and a restart after the switch — or a crash
before the switching batch's commit — plans and answers the same.
"""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyarrow.parquet as pq

import streamfold
from streamfold.errors import CheckpointError
from streamfold.plan import explain_text, incrementalize
from streamfold.plan.matrix import MatrixPolicy
from streamfold.plan.model import IncrementalPlan, SkewWatch
from streamfold.cli import main
from streamfold.runtime.analyze import analyze
from streamfold.runtime.checkpoint import Checkpoint
from streamfold.runtime.matrices import MatrixDriver
from streamfold.sql import Catalog, bind
from streamfold.verify import compare, duckdb_answer

from ..streams import Source, check_stream

R = Source("R", (("a", "INT"), ("k", "INT"), ("v", "INT")), weighted=True)
S = Source("S", (("k", "INT"), ("u", "INT")), weighted=True)
SCHEMAS = {"R": "a INT, k INT, v INT", "S": "k INT, u INT"}
AUTO = {"matrix_equi": "auto", "matrix_cells": 4}
HOT = 0  # the key the stream turns to


def _plan(sql: str, policy: MatrixPolicy, heavy: dict | None = None) -> IncrementalPlan:
    return incrementalize(bind(sql, Catalog.from_mapping(SCHEMAS)), None, policy, heavy)


def test_auto_hashes_an_equi_join_says_why_and_plans_the_hybrid_once_given_heavy_keys():
    sql = "SELECT R.a, S.u FROM R JOIN S ON R.k = S.k"
    hashed = _plan(sql, MatrixPolicy(4, "auto"))
    assert not hashed.matrices
    assert hashed.watched == (SkewWatch("in_R", "in_S", ("R.k", "S.k"), 4),)
    text = explain_text(hashed)
    assert "join matrix:" not in text and "_cell" not in text
    assert "equi-join R.k = S.k hashed on its key (matrix_equi=auto)" in text
    assert "(|R| + |S|) / 4" in text
    hybrid = _plan(sql, MatrixPolicy(4, "auto"), {"in_R": (HOT,)})
    assert not hybrid.watched and len(hybrid.matrices) == 1
    assert hybrid.matrices[0].hybrid == ("R.k", "S.k") and hybrid.matrices[0].heavy == (HOT,)
    assert "skewed equi-join, hybrid (§4.4.4): the heavy keys (0)" in explain_text(hybrid)
    # a join a hybrid cannot lay out (two equalities) is hashed and not watched; hash is the default
    two = _plan("SELECT R.a, S.u FROM R JOIN S ON R.k = S.k AND R.v = S.u", MatrixPolicy(4, "auto"))
    assert not two.watched and not two.matrices
    assert not _plan(sql, MatrixPolicy(4)).watched


def test_explain_takes_the_partitioning_of_equi_joins(capsys):
    args = ["explain", "SELECT R.a, S.u FROM R JOIN S ON R.k = S.k", "--schema", f"R={SCHEMAS['R']}",
            "--schema", f"S={SCHEMAS['S']}"]
    assert main([*args, "--equi-joins", "auto"]) == 0
    assert "hashed on its key (matrix_equi=auto)" in capsys.readouterr().out
    assert main([*args, "--equi-joins", "hybrid"]) == 0
    assert "skewed equi-join, hybrid" in capsys.readouterr().out


def test_a_watched_join_is_checked_when_an_input_grew_by_epsilon_since_the_last_check():
    plan = _plan("SELECT R.a, S.u FROM R JOIN S ON R.k = S.k", MatrixPolicy(4, "auto"))
    w = plan.watched[0]
    driver = MatrixDriver(epsilon=1.0)
    driver.begin()
    assert driver.due(plan, {"in_R": 0, "in_S": 0}) == []  # nothing yet
    assert driver.due(plan, {"in_R": 10, "in_S": None}) == [w]  # a size unknown: counted
    assert driver.due(plan, {"in_R": 10, "in_S": 4}) == [w]  # first rows
    driver.checked(w, (10, 4), (3, 2), ())
    assert driver.due(plan, {"in_R": 19, "in_S": 7}) == []  # neither has doubled
    assert driver.due(plan, {"in_R": 12, "in_S": 8}) == [w]  # S has
    assert driver.record_watched(plan)["in_R"] == {
        "right": "in_S", "partitioning": "hash", "checked_at": [10, 4],
        "checked": {"sizes": [10, 4], "share": 3.5, "largest": [3, 2]}}
    driver.unswitch()  # a failed batch forgets its check
    assert driver.checked_at == {} and driver.checks == {}


@st.composite
def uniform_then_skewed(draw: st.DrawFn) -> list[dict[str, list[tuple]]]:
    """Six batches of R (a, k, v, _weight) and S (k, u, _weight): batches 0–1 uniform (each key on
    at most one row of each side, so no key is above a joiner's share), batch 2 doubles R with
    rows of the hot key, batches 3–5 mix both kinds; each batch after the first deletes some
    live rows (of either kind)."""
    keys_r = draw(st.lists(st.integers(1, 60), min_size=16, max_size=20, unique=True))
    keys_s = draw(st.lists(st.integers(1, 60), min_size=12, max_size=16, unique=True))
    live: dict[str, list[tuple]] = {"R": [], "S": []}
    a = iter(range(1, 10_000))  # R's rows differ in a: each is a row of R's state
    batches = []
    for b in range(6):
        if b < 2:
            half_r, half_s = len(keys_r) // 2, len(keys_s) // 2
            new_r = [(next(a), k, draw(st.integers(0, 5))) for k in keys_r[b * half_r:(b + 1) * half_r]]
            new_s = [(k, draw(st.integers(0, 9))) for k in keys_s[b * half_s:(b + 1) * half_s]]
        elif b == 2:
            hot = len(live["R"]) + draw(st.integers(4, 10))
            new_r = [(next(a), HOT, draw(st.integers(0, 5))) for _ in range(hot)]
            new_s = [(HOT, u) for u in range(draw(st.integers(1, 4)))]
        else:
            new_r = [(next(a), draw(st.sampled_from([HOT, HOT, *keys_r])), draw(st.integers(0, 5)))
                     for _ in range(draw(st.integers(2, 8)))]
            new_s = [(draw(st.sampled_from([HOT, *keys_s])), draw(st.integers(10, 30)))
                     for _ in range(draw(st.integers(1, 4)))]
        batch = {}
        for name, new in (("R", new_r), ("S", new_s)):
            doomed = draw(st.lists(st.sampled_from(live[name]), unique=True, max_size=2)) if b and live[name] else []
            for row in doomed:
                live[name].remove(row)
            live[name] += [r for r in new if r not in live[name]]
            batch[name] = [r + (1,) for r in new] + [r + (-1,) for r in doomed]
        batches.append(batch)
    return batches


def _commit(out: str, batch: int) -> dict:
    with open(os.path.join(out, "commits", f"{batch:06d}.json"), encoding="utf-8") as fh:
        return json.load(fh)


def _continue(spark, tmp: str, sql: str, batches: list[dict], first: int) -> None:
    """Start the query again over ``tmp``'s output (a restart) and feed it ``batches[first:]``,
    each snapshot against DuckDB over every batch so far."""
    dirs = {n: os.path.join(tmp, "in", n) for n in ("R", "S")}
    query = streamfold.start(sql, dirs, os.path.join(tmp, "out"), schemas={s.name: s.schema_sql() for s in (R, S)},
                             spark=spark, background=False, partitions=2, **AUTO)
    try:
        for b in range(first, len(batches)):
            for name, src in (("R", R), ("S", S)):
                path = os.path.join(dirs[name], f"{b:04d}.parquet")
                if batches[b][name] and not os.path.exists(path):
                    pq.write_table(src.table(batches[b][name]), path)
            result = query.process_available()
            assert result is not None and result.batch == b
            snapshot = [tuple(None if v != v else v for v in r) for r in query.snapshot_pandas().itertuples(index=False)]
            prefix = {n: [src.table(x[n]) for x in batches[:b + 1]] for n, src in (("R", R), ("S", S))}
            assert compare(snapshot, duckdb_answer(sql, prefix)).matches, f"batch {b} after the restart"
    finally:
        query.stop()


SKEWED_SQL = "SELECT R.a, count(*) AS n, sum(S.u) AS su FROM R JOIN S ON R.k = S.k GROUP BY R.a"


@pytest.mark.spark
@settings(max_examples=1, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                 HealthCheck.data_too_large])
@given(batches=uniform_then_skewed())
def test_auto_switches_a_join_that_turns_skewed_to_the_hybrid_and_a_restart_keeps_it(
        spark, tmp_path_factory, batches):
    """Hashed while uniform (the commits record each check: no key above the share); the batch
    after the hot key's rows doubled R checks again, finds the key heavy and runs as the hybrid;
    a restart after it plans the hybrid from the commit; every snapshot equals DuckDB's."""
    tmp = str(tmp_path_factory.mktemp("auto"))
    check_stream(spark, tmp, SKEWED_SQL, [R, S], batches[:4], **AUTO)
    _continue(spark, tmp, SKEWED_SQL, batches, 4)
    out = os.path.join(tmp, "out")
    for b in range(3):
        entry = _commit(out, b)["partitioning"]["in_R"]
        assert entry["partitioning"] == "hash" and "matrix" not in _commit(out, b), (b, entry)
        if "checked" in entry:
            assert not entry["checked"].get("heavy") and entry["checked"]["largest"][1] <= entry["checked"]["share"]
    assert "checked" in _commit(out, 1)["partitioning"]["in_R"]  # batch 0's rows were the first growth
    switch = _commit(out, 3)
    assert "partitioning" not in switch
    entry = switch["matrix"]["in_R"]
    assert entry["switched_at"] == 3 and HOT in entry["heavy"] and entry["heavy_from"] == []
    assert entry["checked"]["largest"] == [HOT, entry["checked"]["largest"][1]]
    assert entry["checked"]["largest"][1] > entry["checked"]["share"]
    assert os.path.isdir(Checkpoint(os.path.join(out, "_checkpoint")).base_dir(3))  # its states written whole
    for b in (4, 5):  # after the restart: the hybrid, planned from the commit
        later = _commit(out, b)
        assert "partitioning" not in later and later["matrix"]["in_R"]["switched_at"] == 3, later["matrix"]
    assert "partitioning of in_R ⋈ in_S after batch 5: hybrid since batch 3 (matrix_equi=auto" in analyze(out).text("")
    with pytest.raises(CheckpointError) as refused:  # its states are a hybrid's: a hash plan cannot resume them
        streamfold.start(SKEWED_SQL, {n: os.path.join(tmp, "in", n) for n in ("R", "S")}, out, spark=spark,
                         schemas={s.name: s.schema_sql() for s in (R, S)}, background=False, partitions=2)
    assert refused.value.code == "CHECKPOINT_MISMATCH" and refused.value.params["differences"] == ["join matrix in_R"]


CRASH_SQL = "SELECT S.u, R.a, count(*) AS n, sum(R.v) AS sv FROM R FULL JOIN S ON R.k = S.k GROUP BY S.u, R.a"
# uniform for two batches, then key 0 takes R (doubling it): batch 3 finds it heavy
CRASH_BATCHES = [
    {"R": [(a, a, a % 4, 1) for a in range(1, 9)], "S": [(k, k % 3, 1) for k in range(2, 10)]},
    {"R": [(a, a, a % 4, 1) for a in range(9, 13)] + [(1, 1, 1, -1)], "S": [(k, k % 3, 1) for k in range(10, 13)]},
    {"R": [(a, HOT, a % 5, 1) for a in range(13, 40)], "S": [(HOT, 7, 1), (2, 2, -1)]},
    {"R": [(a, HOT if a % 2 else a - 30, a % 3, 1) for a in range(40, 50)] + [(13, HOT, 3, -1)],
     "S": [(HOT, 8, 1), (11, 4, 1)]},
    {"R": [(50, 11, 1, 1), (51, HOT, 2, 1), (14, HOT, 4, -1)], "S": [(HOT, 7, -1), (12, 5, 1)]},
]


@pytest.mark.spark
def test_a_crash_before_the_switching_batch_commits_loses_nothing_and_the_rerun_switches_again(
        spark, tmp_path, monkeypatch):
    """A full outer equi-join under an aggregate: restarted before batch 2 (it resumes the sizes
    of its last check, so it does not check again before R doubles), then killed just before
    batch 3's commit — its states already laid out as the hybrid and written whole — the rerun
    restores the hashed states of batch 2, decides the same switch and commits it; answers
    exact throughout."""
    from streamfold.runtime import checkpoint

    real_commit = checkpoint.OutputDir.commit

    def crash_on_batch_3(self, batch, record):
        if batch == 3:
            assert record["matrix"]["in_R"]["switched_at"] == 3  # it was switching
            raise KeyboardInterrupt("killed before the commit")
        return real_commit(self, batch, record)

    check_stream(spark, str(tmp_path), CRASH_SQL, [R, S], CRASH_BATCHES[:2], **AUTO)
    monkeypatch.setattr(checkpoint.OutputDir, "commit", crash_on_batch_3)
    with pytest.raises(KeyboardInterrupt):
        _continue(spark, str(tmp_path), CRASH_SQL, CRASH_BATCHES[:4], 2)
    out = str(tmp_path / "out")
    first, second = (_commit(out, b)["partitioning"]["in_R"] for b in (1, 2))
    assert "checked" in first and "checked" not in second and second["checked_at"] == first["checked"]["sizes"]
    assert not os.path.exists(os.path.join(out, "commits", "000003.json"))
    monkeypatch.setattr(checkpoint.OutputDir, "commit", real_commit)
    _continue(spark, str(tmp_path), CRASH_SQL, CRASH_BATCHES, 3)
    assert "matrix" not in _commit(out, 2) and _commit(out, 2)["partitioning"]["in_R"]["partitioning"] == "hash"
    for b in (3, 4):
        entry = _commit(out, b)["matrix"]["in_R"]
        assert entry["switched_at"] == 3 and HOT in entry["heavy"], (b, entry)
