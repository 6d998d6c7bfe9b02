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
