"""A batch's profile (``--profile``): its waterfall of phases, Spark jobs and py4j calls, read
from Spark's own records, whether the batch was planned or replayed as a prepared plan."""

from __future__ import annotations

import json
import os

import pytest

from streamfold.runtime import shape

from .test_runtime import put, rows_of, start

pytestmark = pytest.mark.spark


def _profiled_sums(spark, tmp_path):
    """A profiled sum per key with batch 0 committed and batch 1's file in place: (tmp, source, query)."""
    tmp = str(tmp_path)
    src = os.path.join(tmp, "S")
    put(src, "a.parquet", [(1, 5), (2, 7)])
    q = start(spark, tmp, "SELECT k, sum(v) AS total FROM S GROUP BY k", profile=True)
    q.process_available()
    put(src, "b.parquet", [(1, 1)])
    return tmp, src, q


def test_profile_gives_each_batch_its_waterfall_from_sparks_own_records(spark, tmp_path, monkeypatch):
    from streamfold.runtime.profile import WAITED, Waterfall
    from streamfold.settings import env_name

    monkeypatch.setenv(env_name("prepared"), "0")  # batches planned one by one (next test: replayed)
    tmp, src, q = _profiled_sums(spark, tmp_path)
    try:
        q.process_available()  # the state moves from batch 0's hash partitions into one partition
        put(src, "c.parquet", [(1, 2)])
        result = q.process_available()
        waterfall = result.waterfall()
        assert waterfall.batch == 2 and waterfall is result.waterfall()  # built once
        # The batch's jobs are the ids Spark's scheduler handed out while it ran (the status
        # store's list of jobs without a job group is only the fallback: it missed them once).
        assert isinstance(q.engine.profiler._next_job_id(), int)
        names = [s.name for s in waterfall.spans]
        assert {"read", "write", "commit", "plan + job + Arrow"} <= set(names)
        # The wait from the file's arrival to the batch's start sits before it, ending at 0.
        assert [(s.start_s < 0, s.end_s) for s in waterfall.spans if s.name == WAITED] == [(True, 0.0)]
        assert all(0 <= s.start_s <= s.end_s <= waterfall.total_s + 1e-3 for s in waterfall.spans if s.name != WAITED)
        assert len(waterfall.jobs) >= 1  # this batch's jobs only, read from Spark's status store
        assert all(0 <= j.start_s <= j.end_s <= waterfall.total_s + 0.1 for j in waterfall.jobs)
        assert all(st.tasks >= 1 for j in waterfall.jobs for st in j.stages)
        # A small batch over a small state: one job of one stage — the batch's rows read, merged into
        # the state (one partition) and answered without a shuffle.
        assert [len([s for s in j.stages if s.status != "SKIPPED"]) for j in waterfall.jobs] == [1]
        assert waterfall.py4j_calls == sum(c for _, c, _ in waterfall.py4j_methods) > 0
        saved = json.loads(json.dumps(waterfall.to_json()))
        assert Waterfall.from_json(saved).to_json() == saved  # what bench's waterfall.txt is printed from
        assert waterfall.lines()[0].startswith("batch 000002 waterfall:")
    finally:
        q.stop()
    q = start(spark, tmp + "/unprofiled", "SELECT k, sum(v) AS total FROM S GROUP BY k", sources={"S": src})
    try:
        assert q.process_available().waterfall() is None
    finally:
        q.stop()


def test_a_replayed_batchs_waterfall_is_its_one_prepared_job(spark, tmp_path):
    """Batch 1 captures the prepared plans (gathering batch 0's state into one partition); batch
    2 replays them: its waterfall shows the slots pointed and one job of one stage."""
    tmp, src, q = _profiled_sums(spark, tmp_path)
    try:
        q.process_available()
        put(src, "c.parquet", [(1, 2)])
        waterfall = q.process_available().waterfall()
        names = {s.name for s in waterfall.spans}
        assert {"read", "prepared: point the slots", "prepared: the job + Arrow", "write files", "commit"} <= names
        assert "plan + job + Arrow" not in names  # nothing planned
        assert [len([s for s in j.stages if s.status != "SKIPPED"]) for j in waterfall.jobs] == [1]
        assert json.loads(open(os.path.join(tmp, "out", "commits", "000002.json")).read())["prepared"] == "replay"
    finally:
        q.stop()


def test_a_batch_over_large_states_shuffles_only_its_own_rows(spark, tmp_path, monkeypatch):
    """Past one task's rows (here: any), states are hash-partitioned on their keys: a warm batch is
    one job of two stages, the batch's rows read and shuffled on the key, then merged into the
    state and answered. A third stage would be the state shuffled: it stays where it is."""
    monkeypatch.setattr(shape, "ONE_TASK_ROWS", 0)
    _, _, q = _profiled_sums(spark, tmp_path)
    try:
        waterfall = q.process_available().waterfall()
        assert [len([s for s in j.stages if s.status != "SKIPPED"]) for j in waterfall.jobs] == [2]
        assert sorted(rows_of(q)) == [(1, 6), (2, 7)]
    finally:
        q.stop()
