"""A bound on waiting for executors: a cluster that has none left fails the run, it never hangs.

On a cluster, Spark's scheduler waits for resources without end: when every worker is gone, or
the master died without recovery and the application's executors were dropped, a batch's job
waits for executors that never come, and the driver sits there with no error and no commit.
:class:`ExecutorWatch` looks at the application's executors every few seconds while the run is
on a cluster master; after ``bound`` seconds with none (or with the master's connection gone
and Spark's context stopped), it cancels the running jobs. The engine then fails the batch with
``NO_EXECUTORS`` and a hint: nothing of the batch was committed, and the same command resumes
it once the cluster is back. A run that is idle when the watch gives up ends the same way
before its next batch (:meth:`Query.run <..query.Query.run>`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING

from ...errors import BatchError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("streamfold")
EVERY_S = 2.0  # how often the executors are counted


class ExecutorWatch:
    """Counts a cluster application's executors in a thread of its own; see the module docstring."""

    def __init__(self, spark: SparkSession, bound: float) -> None:
        self._sc = spark.sparkContext
        self.bound = bound
        self.starved_since: float | None = None
        self.tripped = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="streamfold-executor-watch", daemon=True)
        self._thread.start()

    def executors(self) -> int:
        """Executors the application has now, the driver not counted; 0 if the context is gone."""
        try:
            infos = self._sc._jsc.sc().statusTracker().getExecutorInfos()
            return max(0, len(infos) - 1)
        except Exception:  # noqa: BLE001 - a stopped context or a JVM that is gone has none
            return 0

    def _watch(self) -> None:
        while not self._stop.wait(EVERY_S):
            now = time.monotonic()
            if self.executors() > 0:
                self.starved_since = None
                continue
            if self.starved_since is None:
                self.starved_since = now
                log.warning("the Spark application has no executors; waiting up to %.0f s for them", self.bound)
            elif now - self.starved_since >= self.bound:
                if not self.tripped:
                    self.tripped = True
                    log.error("no executors for %.0f s: cancelling the batch's jobs", now - self.starved_since)
                # Every tick, not once: a job the driver submits after the first cancel (the
                # batch's next step, a read-back of the states) would wait for executors as well.
                try:
                    self._sc.cancelAllJobs()
                except Exception:  # noqa: BLE001 - a stopped context runs no job to cancel
                    pass

    def failure(self, batch: int, error: BaseException) -> BatchError | None:
        """The run's error when a batch failed because the watch gave up on the executors (whatever
        call of the batch found its job cancelled: a step, the states' read-back)."""
        if not self.tripped or getattr(error, "code", None) == "NO_EXECUTORS":
            return None
        return self._error(f"batch {batch} failed", batch)

    def idle_failure(self, batch: int) -> BatchError | None:
        """The run's error when the watch gave up while no batch ran (the executors lost after the
        last commit, say to a master started again without recovery): the run ends then, rather
        than wait for files that no executor would ever read."""
        return self._error(f"before batch {batch}", batch) if self.tripped else None

    def _error(self, what: str, batch: int) -> BatchError:
        master = self._sc.master
        return BatchError(
            f"{what}: the Spark application had no executors for {self.bound:.0f} s",
            code="NO_EXECUTORS", params={"batch": batch, "master": master, "waited_s": self.bound},
            hint=f"the cluster at {master} lost its workers (or its master, without recovery): bring them back and "
                 "run the same command again — nothing of this batch was committed, the run resumes after the last "
                 "commit. The wait is the executor_wait setting (docs/tuning.md)")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * EVERY_S)  # no cancel after it returns
