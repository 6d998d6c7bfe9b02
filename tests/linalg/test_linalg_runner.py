"""``streamfold linalg run``: update files in, snapshots, changes and commits out, durable.

Every committed snapshot equals the oracle's re-evaluation over the files the commits list up
to it; a change applied to the previous snapshot gives the next; a restart resumes after the
last commit; what cannot be applied exactly is refused with a code and nothing committed.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streamfold.cli import main
from streamfold.errors import BadInputError, BatchError, UsageError
from streamfold.linalg.program_file import load_program
from streamfold.linalg.runner import LinalgConfig, LinalgRun, choose_backend

from ..linalg_files import oracle_by_commit, snapshot, write_entries, write_matrix, write_rows
from ..linalg_oracle import assert_matches

EXAMPLES = Path(__file__).parent.parent.parent / "examples"
OLS = {"n": "10", "m": "3", "responses": "2"}


def _ols_files(tmp: Path, seed: int = 0) -> tuple[Path, Path]:
    rng = np.random.default_rng(seed)
    x, y = tmp / "X", tmp / "Y"
    write_matrix(x, "0000.npy", rng.standard_normal((10, 3)))
    write_matrix(y, "0000.npy", rng.standard_normal((10, 2)))
    return x, y


def _config(tmp: Path, x: Path, y: Path, **options) -> LinalgConfig:  # noqa: ANN003
    return LinalgConfig(program=str(EXAMPLES / "ols.py"), sources={"X": str(x), "Y": str(y)},
                        output=str(tmp / "out"), params=OLS, **options)


def _check(tmp: Path, x: Path, y: Path) -> None:
    prog = load_program(str(EXAMPLES / "ols.py"), OLS)
    for batch, expected in oracle_by_commit(prog, tmp / "out", {"X": x, "Y": y}):
        assert_matches(snapshot(tmp / "out", batch), expected, "arithmetic", f"batch {batch}: ")


def _more(x: Path, y: Path, b: int, rng: np.random.Generator) -> None:
    write_entries(x, f"{b:04d}.parquet", [int(rng.integers(10)), int(rng.integers(10))], [0, 2],
                  [float(rng.normal()), float(rng.normal())], weight=[1, -1])
    if b % 2:
        write_rows(y, f"{b:04d}.parquet", [int(rng.integers(10))], [list(rng.normal(size=2))])


def test_each_snapshot_equals_reevaluation_and_each_change_leads_from_the_last(tmp_path: Path) -> None:
    x, y = _ols_files(tmp_path)
    run = LinalgRun(_config(tmp_path, x, y, strategy="incremental", drift_every=2))
    rng = np.random.default_rng(1)
    for b in range(1, 6):
        run.run_batch(run.poll())
        _more(x, y, b, rng)
    run.run_batch(run.poll())
    out = tmp_path / "out"
    assert sorted(p.name for p in (out / "commits").iterdir()) == [f"{b:06d}.json" for b in range(6)]
    _check(tmp_path, x, y)
    for b in range(1, 6):
        before, after = snapshot(out, b - 1)["beta"], snapshot(out, b)["beta"]
        changes = out / "changes" / f"{b:06d}"
        u = np.load(changes / "beta.u.npy")
        delta = u @ np.load(changes / "beta.v.npy") if (changes / "beta.v.npy").exists() else u
        np.testing.assert_allclose(before + delta, after, rtol=1e-9, atol=1e-12)
    record = json.loads((out / "commits" / "000002.json").read_text())
    assert record["strategy"] == "incremental" and record["ranks"]["X"] == 2 and record["backend"] == "numpy"
    assert set(record["drift"]) == {"x0", "x1", "x2", "beta"}, "probed on the second batch of two"


def test_a_restart_resumes_after_the_last_commit_with_the_views_restored(tmp_path: Path) -> None:
    x, y = _ols_files(tmp_path)
    rng = np.random.default_rng(2)
    first = LinalgRun(_config(tmp_path, x, y, strategy="incremental", compact_every=0))
    for b in range(1, 4):
        first.run_batch(first.poll())
        _more(x, y, b, rng)
    first.checkpoint.write_offsets(first.next_batch, first.poll())  # killed after planning a batch
    again = LinalgRun(_config(tmp_path, x, y, strategy="incremental", compact_every=0))
    assert again.next_batch == 3 and again.recovery.pending is not None
    assert [p.name for p in (tmp_path / "out" / "_checkpoint" / "state").iterdir()] != []
    again.run_batch(again.poll())
    _more(x, y, 9, rng)
    again.run_batch(again.poll())
    _check(tmp_path, x, y)
    assert again.poll() is None


def test_a_changed_program_is_refused_on_an_old_checkpoint(tmp_path: Path) -> None:
    x, y = _ols_files(tmp_path)
    LinalgRun(_config(tmp_path, x, y)).run_batch({"X": ["0000.npy"], "Y": ["0000.npy"]})
    config = _config(tmp_path, x, y)
    config.params = {**OLS, "m": "3", "responses": "1"}
    with pytest.raises(Exception) as e:
        LinalgRun(config)
    assert getattr(e.value, "code", None) == "CHECKPOINT_MISMATCH"


def test_a_reanchored_view_is_recorded_in_the_commit_and_checkpointed_whole(tmp_path: Path) -> None:
    x, y = _ols_files(tmp_path)
    run = LinalgRun(_config(tmp_path, x, y, strategy="incremental", drift_every=1, drift_tolerance=0.0))
    run.run_batch(run.poll())
    _more(x, y, 1, np.random.default_rng(3))
    run.run_batch(run.poll())
    record = json.loads((tmp_path / "out" / "commits" / "000001.json").read_text())
    assert record["reanchored"], "a zero tolerance re-anchors"
    assert (tmp_path / "out" / "_checkpoint" / "state" / "base-000001").is_dir()
    _check(tmp_path, x, y)


def test_an_update_that_makes_the_inverted_matrix_singular_is_refused_and_not_committed(tmp_path: Path) -> None:
    x, y = tmp_path / "X", tmp_path / "Y"
    m = np.eye(10)[:, :3] + 0.0
    m[3:, :] = 0.0  # X's three columns are e₀, e₁, e₂: XᵀX = I
    write_matrix(x, "0000.npy", m)
    write_matrix(y, "0000.npy", np.ones((10, 2)))
    run = LinalgRun(_config(tmp_path, x, y, strategy="incremental"))
    run.run_batch(run.poll())
    write_entries(x, "0001.parquet", [0], [0], [-1.0])  # column 0 becomes zero: XᵀX singular
    with pytest.raises(BatchError) as e:
        run.run_batch(run.poll())
    assert e.value.code == "NON_INVERTIBLE_UPDATE" and e.value.params["batch"] == 1
    assert not (tmp_path / "out" / "commits" / "000001.json").exists()
    (x / "0001.parquet").unlink()
    write_entries(x, "0002.parquet", [5], [1], [2.0])
    again = LinalgRun(_config(tmp_path, x, y, strategy="incremental"))
    assert again.poll() == {"X": ["0002.parquet"], "Y": []}
    again.run_batch(again.poll())
    _check(tmp_path, x, y)


@pytest.mark.parametrize("write, code", [
    (lambda d: write_entries(d, "1.parquet", [99], [0], [1.0]), "INDEX_OUT_OF_RANGE"),
    (lambda d: write_rows(d, "1.parquet", [0], [[1.0]]), "BAD_ROW_LENGTH"),
    (lambda d: (d / "1.txt").write_text("i,j,v\n"), "UNKNOWN_FORMAT"),
    (lambda d: write_matrix(d, "1.npy", np.ones((3, 3))), "BAD_SHAPE"),
    (lambda d: (d / "1.csv").write_text("a,b\n1,2\n"), "BAD_COLUMNS"),
])
def test_a_malformed_update_file_is_refused_naming_it(tmp_path: Path, write, code: str) -> None:  # noqa: ANN001
    x, y = _ols_files(tmp_path)
    run = LinalgRun(_config(tmp_path, x, y))
    run.run_batch(run.poll())
    write(x)
    with pytest.raises(BadInputError) as e:
        run.run_batch(run.poll())
    assert e.value.code == code and e.value.params["source"] == "X"


def test_deletions_are_refused_under_boolean_and_tropical(tmp_path: Path) -> None:
    for example, program, value in [("reachability.py", "reach", 0.0), ("shortest_paths.py", "distance", 3.0)]:
        g = tmp_path / program
        write_entries(g, "0000.parquet", [0, 1], [1, 2], [1.0, 1.0])
        run = LinalgRun(LinalgConfig(program=str(EXAMPLES / example), sources={"G": str(g)},
                                     output=str(tmp_path / f"out-{program}"), params={"n": "4", "hops": "2"}))
        run.run_batch(run.poll())
        write_entries(g, "0001.parquet", [2], [3], [value], weight=[1 if value == 0.0 else -1])
        with pytest.raises(BadInputError) as e:
            run.run_batch(run.poll())
        assert e.value.code == "DELETION_UNSUPPORTED"


def test_the_runtime_reevaluates_when_a_batch_has_a_high_rank_and_says_so(tmp_path: Path) -> None:
    a = tmp_path / "A"
    rng = np.random.default_rng(4)
    write_matrix(a, "0000.npy", rng.standard_normal((300, 300)) * 0.05)
    run = LinalgRun(LinalgConfig(program=str(EXAMPLES / "matrix_power.py"), sources={"A": str(a)},
                                 output=str(tmp_path / "out"), params={"n": "300", "squarings": "2"}))
    run.run_batch(run.poll())
    write_entries(a, "0001.parquet", [3], [4], [0.5])
    assert run.run_batch(run.poll()).strategy == "incremental"
    write_matrix(a, "0002.npy", rng.standard_normal((300, 300)) * 0.001)
    assert run.run_batch(run.poll()).strategy == "reevaluate"
    record = json.loads((tmp_path / "out" / "commits" / "000002.json").read_text())
    assert record["ranks"] == {"A": 300} and record["estimate_s"]["reevaluate"] < record["estimate_s"]["incremental"]
    prog = load_program(str(EXAMPLES / "matrix_power.py"), {"n": "300", "squarings": "2"})
    for batch, expected in oracle_by_commit(prog, tmp_path / "out", {"A": a}):
        assert_matches(snapshot(tmp_path / "out", batch), expected, "arithmetic", f"batch {batch}: ")
    changes = tmp_path / "out" / "changes" / "000002"
    np.testing.assert_allclose(snapshot(tmp_path / "out", 1)["power"] + np.load(changes / "power.u.npy"),
                               snapshot(tmp_path / "out", 2)["power"], rtol=1e-9, atol=1e-12)


def test_auto_backend_is_spark_only_for_a_matrix_past_the_local_limit() -> None:
    prog = load_program(str(EXAMPLES / "matrix_power.py"), {"n": "100"})
    from streamfold.linalg import compile_program

    compiled = compile_program(prog)
    config = LinalgConfig(program="", sources={}, output="")
    assert choose_backend(prog, compiled, config) == "numpy"
    config.local_limit = 9_999
    assert choose_backend(prog, compiled, config) == "spark"
    config.backend = "gpu"
    with pytest.raises(UsageError):
        choose_backend(prog, compiled, config)


def test_the_command_line_runs_until_idle_and_exits_2_on_a_missing_source(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    x, y = _ols_files(tmp_path)
    args = ["linalg", "run", str(EXAMPLES / "ols.py"), *sum((["--param", f"{k}={v}"] for k, v in OLS.items()), []),
            "--source", f"X={x}", "--source", f"Y={y}", "--output", str(tmp_path / "out"), "--until-idle", "0",
            "--trigger", "0.05"]
    assert main(args) == 0
    assert "batch 000000" in capsys.readouterr().out
    assert main(args[:-10] + ["--source", f"Y={y}", "--output", str(tmp_path / "o2"), "--until-idle", "0"]) == 2
    assert "SOURCE_MISMATCH" in capsys.readouterr().err
