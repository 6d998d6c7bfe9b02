"""Seed 004 §3.4 (e), the incremental windowed join: both inputs time-bounded, so each side's
window gains X⁺ (its batch's rows inside the bound) and loses X⁻ (the rows the clock passed).
The paper maintains W = X ⋈ Y by

    W⁺(t+1) = X⁺ ⋈ Y(t+1) + Y⁺ ⋈ (X(t) − X⁻),   W⁻(t+1) = X⁻ ⋈ Y(t) + Y⁻ ⋈ (X(t) − X⁻)

which is the delta rule streamfold applies to the live rows' change ΔX = X⁺ − X⁻ (``plan/
rules_expiry.py``): ΔX ⋈ Y(t) + X(t+1) ⋈ ΔY expands to exactly W⁺ − W⁻. Here both sides expire at
different widths, with deletions and a clock that steps back, and every snapshot equals DuckDB's
answer at the batch's recorded time — the join's rows themselves, and grouped."""

from __future__ import annotations

import random

import pytest

from streamfold.runtime.checkpoint import OutputDir

from ..streams import Source, check_stream
from ..strategies import random_stream
from .test_expiry import CLOCK, R, bound, moving_clock

pytestmark = pytest.mark.spark

Y = Source("Y", (("k", "INT"), ("ts", "TIMESTAMP"), ("w", "INT")), weighted=True)
_BOTH = ("R.ts > current_timestamp() - INTERVAL 10 MINUTES AND Y.ts > current_timestamp() - INTERVAL 5 MINUTES")

QUERIES = {
    "rows": (f"SELECT R.k, R.v, Y.w FROM R JOIN Y ON R.k = Y.k WHERE {_BOTH}",
             lambda r: f"SELECT R.k, R.v, Y.w FROM R JOIN Y ON R.k = Y.k WHERE {bound(10, ts='R.ts')(r)} "
                       f"AND {bound(5, ts='Y.ts')(r)}"),
    "grouped": (f"SELECT R.k, count(*) AS n, sum(Y.w) AS t, max(R.v) AS hi FROM R JOIN Y ON R.k = Y.k WHERE {_BOTH} "
                "GROUP BY R.k",
                lambda r: f"SELECT R.k, count(*), sum(Y.w), max(R.v) FROM R JOIN Y ON R.k = Y.k "
                          f"WHERE {bound(10, ts='R.ts')(r)} AND {bound(5, ts='Y.ts')(r)} GROUP BY R.k"),
}


@pytest.mark.parametrize("name", list(QUERIES))
@pytest.mark.parametrize("seed", [1, 2])
def test_a_join_of_two_windows_equals_duckdb_as_both_expire(spark, tmp_path, monkeypatch, name, seed):
    moving_clock(monkeypatch, CLOCK)
    batches = random_stream(random.Random(f"windowed-join-{name}-{seed}"), [R, Y], batches=len(CLOCK),
                            max_rows=12, min_rows=4)
    output = OutputDir(str(tmp_path / "out"))
    sql, oracle = QUERIES[name]
    lives: list[dict] = []
    run = check_stream(spark, str(tmp_path), sql, [R, Y], batches, oracle_sql=oracle,
                       check=lambda b, snapshot, prefix: lives.append(output.read_commit(b)["late_rows"]))
    assert run.batches == len(CLOCK) and any(run.snapshots)
    assert all(len(late) == 2 for late in lives), lives  # each side's window counts its late rows
    # rows left the answer as the clock moved: some snapshot is smaller than the one before it
    assert any(len(after) < len(before) for before, after in zip(run.snapshots, run.snapshots[1:]))
