"""Batch progress (runtime/progress.py): what a look at Spark's status tracker becomes, with a fake
tracker and clock (no Spark), then the poller on a real Spark job and through ``streamfold run``'s
terminal line."""

from __future__ import annotations

import threading
import time

import pytest

from streamfold.runtime.progress import Progress, ProgressPoller, StageLook


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class FakeSc:
    """statusTracker().getActiveJobsIds() only; the stages come from the test's look."""

    def __init__(self) -> None:
        self.active: list[int] = []

    def statusTracker(self):  # noqa: N802 - Spark's name
        return self

    def getActiveJobsIds(self):  # noqa: N802
        return self.active


def test_a_batch_shows_its_files_step_stage_tasks_rows_and_a_time_left_only_once_tasks_finished():
    clock, sc, shown = Clock(), FakeSc(), []
    stages: dict[int, list[StageLook]] = {}
    poller = ProgressPoller(shown.append, look=lambda _sc, jobs: {j: stages[j] for j in jobs if j in stages},
                            clock=clock)
    poller.attach(sc)
    assert poller.current.phase == "planning"
    poller.inputs(0, {"orders": ["a.parquet", "b.parquet"], "users": ["c.parquet"]})
    poller.step("batch 000000: Δsales")
    sc.active = [7]
    stages[7] = [StageLook(10, 8, 8, 0, 1000), StageLook(11, 400, 20, 2, 50), StageLook(12, 4, 0, 0, None)]
    poller._tick()
    p = poller.current
    assert (p.batch, p.files, p.step, p.stage, p.stages, p.tasks_done, p.tasks, p.rows_read) == \
        (0, 3, "Δsales", 2, 3, 28, 412, 1050)
    assert p.eta_s is None  # no task of the running stage has finished while watched yet
    clock.t += 10
    stages[7][1] = StageLook(11, 400, 120, 2, 900)
    poller._tick()
    p = poller.current
    assert p.eta_s == pytest.approx(280 * 10 / 100)  # 100 tasks in 10 s, 280 to go
    assert p.text() == ("batch 0: Δsales · 3 files · stage 2 of 3, 128 of 412 tasks · 1,900 rows read · "
                        "about 28 s left in this stage")
    # the job ends between two looks: its stages' last figures still count as read
    stages[7] = [StageLook(10, 8, 8, 0, 1000), StageLook(11, 400, 400, 0, 5000), StageLook(12, 4, 4, 0, None)]
    sc.active = []
    poller._tick()
    p = poller.current
    assert (p.stages, p.tasks, p.eta_s, p.rows_read) == (None, None, None, 6000)
    poller.batch_done(0)
    assert poller.current.text() == "waiting for files after batch 0"
    assert [s.phase for s in shown][:2] == ["planning", "batch"]


def test_an_unannounced_batch_and_messages_outside_a_batch_are_shown_as_they_come():
    poller = ProgressPoller(lambda p: None)
    assert poller.current.text() == "starting Spark (the JVM)"
    poller.step("resuming after batch 000004: loading state")
    assert poller.current.text() == "starting Spark (the JVM): resuming after batch 000004: loading state"
    poller.step("batch 000005: rebuilding the states from the history")
    assert poller.current.text() == "batch 5: rebuilding the states from the history"
    assert Progress("stopped").text() == "stopped"


@pytest.mark.spark
def test_the_poller_reads_a_real_jobs_stages_tasks_and_rows(spark):
    shown: list[Progress] = []
    poller = ProgressPoller(shown.append, interval=0.1)
    poller.attach(spark.sparkContext)
    poller.inputs(0, {"t": ["x"]})
    poller.start()
    sc = spark.sparkContext

    def job() -> None:
        # every task sleeps 1 s: 200 tasks on 2 cores would run for 100 s, so the job is still
        # running however far Spark's status store lags behind (its listener working through an
        # earlier test's events); the test cancels it once the poller has shown what it looks for
        sc.setJobGroup("progress-test", "the poller's test job", interruptOnCancel=True)
        try:
            spark.range(0, 200, numPartitions=200).selectExpr(
                "id % 10 AS k", "reflect('java.lang.Thread', 'sleep', 1000L) AS s").groupBy("k").count().collect()
        except Exception:  # noqa: BLE001 - cancelled
            pass

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    deadline = time.monotonic() + 90
    while not any(p.tasks_done and p.rows_read for p in shown) and time.monotonic() < deadline:
        time.sleep(0.1)
    sc.cancelJobGroup("progress-test")
    thread.join(30)
    poller.close()
    running = [p for p in shown if p.tasks]
    assert running, shown
    assert all(p.tasks_done <= p.tasks and 1 <= p.stage <= p.stages for p in running)
    assert max(p.rows_read or 0 for p in shown) > 0


def test_streamfold_runs_progress_line_off_a_terminal_is_a_plain_line_every_few_seconds_and_quiet_is_silent(capsys):
    from streamfold.cli import _Status

    status = _Status(quiet=False)
    status.poller.close()  # its own looks are not part of this test
    try:
        status._show(Progress("batch", 0, step="Δagg", files=2, elapsed_s=0.4))  # under a second: not shown
        status._show(Progress("batch", 0, step="Δagg", files=2, elapsed_s=3))
        status._show(Progress("batch", 0, step="answer", files=2, elapsed_s=4))  # within 5 s of the last line
        assert capsys.readouterr().err == "… batch 0: Δagg · 2 files (3 s)\n"
        status.plain_at -= status.PLAIN_EVERY
        status._show(Progress("batch", 0, step="answer", files=2, elapsed_s=9))
        assert capsys.readouterr().err == "… batch 0: answer · 2 files (9 s)\n"
    finally:
        status.close()
    quiet = _Status(quiet=True)
    quiet._show(Progress("starting", elapsed_s=30))
    quiet.close()
    assert capsys.readouterr().err == ""
