"""The soak's verdict (``streamfold bench soak``, issue 17): what counts as flat, without Spark."""

from __future__ import annotations

import pytest

from streamfold.bench.soak import judge, markdown, parse_workloads
from streamfold.errors import UsageError


def _record(heap: list[float], plans: list[int], every: int = 20, exact: bool = True) -> dict:
    rows = [{"batch": b, "seconds": 1.0, "heap_mb": h, "plan_chars": p, "executions": 10, "exact": exact,
             "compacted": (b + 1) % every == 0} for b, (h, p) in enumerate(zip(heap, plans))]
    return {"workload": "w", "status": "ok", "batches": rows}


def test_a_workload_whose_heap_and_plans_stay_in_their_band_passes():
    record = _record([300.0] * 5 + [100.0 + b % 3 for b in range(25)], [50_000] * 30)
    verdict = judge(record, 5)
    assert verdict["passed"] and verdict["heap"]["flat"] and verdict["plans"]["flat"]


def test_a_heap_that_grows_every_batch_fails():
    record = _record([100.0 + 10 * b for b in range(30)], [50_000] * 30)
    verdict = judge(record, 5)
    assert not verdict["passed"] and not verdict["heap"]["flat"] and verdict["heap"]["slope"] == 10


def test_plans_that_grow_fail_but_a_compaction_batch_is_left_out_of_the_plan_band():
    growing = judge(_record([100.0] * 30, [50_000 + 1_000 * b for b in range(30)]), 5)
    assert not growing["plans"]["flat"]
    plans = [50_000] * 30
    plans[19] = 80_000  # the 20th batch also writes a full copy of the state
    assert judge(_record([100.0] * 30, plans), 5)["plans"]["flat"]


def test_plans_are_judged_per_execution_so_a_loop_may_run_more_rounds():
    record = _record([100.0] * 30, [50_000] * 30)
    for b, row in enumerate(record["batches"]):
        row["executions"] = 10 + b % 7  # rounds to the fixpoint vary with the data
        row["plan_chars"] = 5_000 * row["executions"]
    assert judge(record, 5)["plans"]["flat"]


def test_a_bounded_workload_whose_states_grow_fails_and_the_table_says_so():
    record = {**_record([100.0] * 30, [50_000] * 30), "bounded": True}
    for b, row in enumerate(record["batches"]):
        row["state_rows"] = 1_000 + 100 * b  # a time bound that expires nothing
    verdict = judge(record, 5)
    assert not verdict["passed"] and not verdict["states"]["flat"] and verdict["heap"]["flat"]
    assert "the states' rows" in markdown({"workloads": {"windowed": {**record, **verdict}}}, 5)
    for row in record["batches"]:
        row["state_rows"] = 1_000 + row["batch"] % 3
    assert judge(record, 5)["passed"]
    unbounded = _record([100.0] * 30, [50_000] * 30)  # a growing history's states may grow
    assert judge(unbounded, 5)["states"] is None


def test_a_wrong_snapshot_fails_a_flat_workload():
    assert not judge(_record([100.0] * 30, [50_000] * 30, exact=False), 5)["passed"]


def test_the_table_shows_a_workload_cut_short():
    done = _record([100.0] * 30, [50_000] * 30)
    cut = {**_record([100.0] * 3, [50_000] * 3), "status": "running"}
    table = markdown({"workloads": {"q21": {**done, **judge(done, 5)}, "q18": {**cut, **judge(cut, 5)}}}, 5)
    assert "| q21 | 30 | yes |" in table and "| q18 | 3 (running) |" in table


def test_the_table_shows_a_workload_one_batch_past_the_start_before_its_band_can_be_judged():
    early = {**_record([100.0] * 6, [50_000] * 6), "status": "running"}
    table = markdown({"workloads": {"q01": {**early, **judge(early, 5)}}}, 5)
    assert "| q01 | 6 (not finished) |" in table and "trend –" in table


def test_workloads_are_named_as_queries_or_seed_workloads():
    assert parse_workloads("q21, 2,groupby") == ("q21", "q02", "groupby")
    assert len(parse_workloads(None)) == 28
    with pytest.raises(UsageError):
        parse_workloads("q23")
