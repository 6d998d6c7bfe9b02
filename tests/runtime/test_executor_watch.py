"""The bound on waiting for executors (``runtime/features/executors.py``) on a real local Spark,
whose application has no executor beside the driver: the watch gives up after its bound, and
every job submitted after that is cancelled too — a batch's next step or a read-back of its
states must not wait for executors that never come. (On a cluster: ``test_cluster_faults.py``.)"""

from __future__ import annotations

import time

import pytest

from streamfold.runtime.features.executors import ExecutorWatch

pytestmark = pytest.mark.spark


def test_jobs_submitted_after_the_watch_gave_up_are_cancelled_too_and_the_error_is_no_executors(spark):
    watch = ExecutorWatch(spark, bound=1)
    try:
        deadline = time.monotonic() + 30
        while not watch.tripped:
            assert time.monotonic() < deadline, "the watch never gave up on a local application"
            time.sleep(0.2)
        time.sleep(0.5)  # past the first cancel
        began = time.monotonic()
        with pytest.raises(Exception, match="(?i)cancel"):  # 400 tasks of 0.3 s: a minute on two cores
            spark.range(0, 400, 1, 400).selectExpr("reflect('java.lang.Thread', 'sleep', 300L)").collect()
        assert time.monotonic() - began < 20, "the job ran on: nothing cancelled it"
        error = watch.failure(4, RuntimeError("job cancelled"))
        assert error is not None and error.code == "NO_EXECUTORS" and error.params["batch"] == 4
        assert watch.failure(4, error) is None, "an error that is already NO_EXECUTORS is not wrapped again"
    finally:
        watch.close()
    assert spark.range(10).count() == 10, "a closed watch cancels nothing"


def test_a_run_whose_executors_are_gone_while_it_is_idle_ends_with_no_executors(spark, tmp_path):
    """The executors lost after a commit (a master started again without recovery has them
    killed): the idle run ends with ``NO_EXECUTORS`` once the bound has passed — it does not sit
    waiting for files no executor would read — and what it committed stays as it was."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    import streamfold
    from streamfold.errors import BatchError

    src, out = tmp_path / "S", str(tmp_path / "out")
    src.mkdir()
    pq.write_table(pa.table({"k": pa.array([1, 2, 2], pa.int32())}), str(src / "0.parquet"))
    query = streamfold.start("SELECT k, count(*) AS n FROM S GROUP BY k", {"S": str(src)}, out, spark=spark,
                             background=False, partitions=2)
    try:
        assert query.process_available() is not None
        query.engine.watch = ExecutorWatch(spark, bound=1)  # a local application has no executor
        began = time.monotonic()
        with pytest.raises(BatchError) as raised:
            query.run(trigger=0.2, until_idle=60)
        assert raised.value.code == "NO_EXECUTORS" and raised.value.params["batch"] == 1, raised.value
        assert time.monotonic() - began < 30, "the idle run waited on"
    finally:
        query.stop()  # closes the watch: no cancel after it
    assert sorted(os.listdir(os.path.join(out, "commits"))) == ["000000.json"]
    assert spark.range(10).count() == 10
