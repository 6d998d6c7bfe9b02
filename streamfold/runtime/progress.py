"""What a long batch is doing, read from Spark's status tracker: for ``streamfold run``'s progress
line and the studio's status panel (issue 58: batch 0 over a large history ran a minute with
nothing to show for it).

A :class:`ProgressPoller` is a daemon thread that looks at the tracker once per ``interval``
(never per row, never per task): the active jobs, their stages, tasks done of the stages' total,
and the rows the stages have read so far (``inputRecords`` of Spark's status store, which
counts a task's rows once it finished). What the engine says it is doing (its progress
messages: the step of h, the answer, a sink) and the files of the batch come from the query
(:meth:`step`, :meth:`inputs`). Each look gives a frozen :class:`Progress`, passed to
``on_update`` when it changed; :func:`Progress.text` is the line a person reads.

The time left is given only where tasks done say it honestly: for the running stage, from the
rate its tasks finished since it was first seen, once a few of its tasks finished. A batch's
later jobs are unknown until they start, so there is no estimate for the whole batch.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

INTERVAL_S = 1.0  # how often the tracker is read
ETA_MIN_TASKS = 3  # tasks of a stage finished before its time left is estimated
LINGER_S = 2.0  # a finished job is still looked at this long, for its last figures
_BATCH_MESSAGE = re.compile(r"^batch (\d+): (.*)$")


@dataclass(frozen=True, slots=True)
class Progress:
    """One look at a run. ``phase``: starting (the JVM), planning, batch (one in progress),
    waiting (for files), stopped. Spark's figures are those of the active jobs (None outside)."""

    phase: str
    batch: int | None = None
    step: str | None = None
    files: int | None = None  # files of the batch
    stage: int | None = None  # the running stage's place among its job's stages (1-based)
    stages: int | None = None
    tasks_done: int | None = None  # of the active jobs' stages
    tasks: int | None = None
    rows_read: int | None = None  # by the batch's stages seen so far
    eta_s: float | None = None  # the running stage's time left
    elapsed_s: float = 0.0  # in this phase (this batch)

    def text(self) -> str:
        """``batch 0: Δsales_by_region · 12 files · stage 2 of 3, 120 of 400 tasks · 1,200,000 rows
        read · about 40 s left in this stage``."""
        if self.phase != "batch":
            head = {"starting": "starting Spark (the JVM)", "planning": "reading the inputs' schemas and planning",
                    "waiting": "waiting for files" + (f" after batch {self.batch - 1}" if self.batch else "")}
            return head.get(self.phase, self.phase) + (f": {self.step}" if self.step else "")
        parts = [f"batch {self.batch}" + (f": {self.step}" if self.step else "")]
        if self.files is not None:
            parts.append(f"{self.files} file{'' if self.files == 1 else 's'}")
        if self.stages:
            parts.append(f"stage {self.stage} of {self.stages}, {self.tasks_done} of {self.tasks} tasks")
        if self.rows_read:
            parts.append(f"{self.rows_read:,} rows read")
        if self.eta_s is not None:
            parts.append(f"about {_seconds(self.eta_s)} left in this stage")
        return " · ".join(parts)

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self.__slots__}  # type: ignore[attr-defined]
        out["text"] = self.text()
        return out


def _seconds(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.0f} min"


@dataclass(frozen=True, slots=True)
class StageLook:
    """One stage as the tracker shows it."""

    stage_id: int
    tasks: int
    done: int
    active: int
    rows: int | None


def spark_look(sc: Any, jobs: Sequence[int]) -> dict[int, list[StageLook]]:
    """The stages of ``jobs`` (active ones, and those active at the last look, to get their last
    figures), from the status tracker and status store: a few py4j calls per stage."""
    tracker = sc.statusTracker()
    store = sc._jsc.sc().statusStore()
    out: dict[int, list[StageLook]] = {}
    for job in jobs:
        info = tracker.getJobInfo(job)
        if info is None:
            continue
        stages = []
        for sid in info.stageIds:
            s = tracker.getStageInfo(sid)
            if s is None:
                continue
            try:
                rows: int | None = int(store.lastStageAttempt(sid).inputRecords())
            except Exception:  # noqa: BLE001 - a stage the store no longer keeps
                rows = None
            stages.append(StageLook(sid, s.numTasks, s.numCompletedTasks, s.numActiveTasks, rows))
        out[job] = sorted(stages, key=lambda st: st.stage_id)
    return out


class ProgressPoller:
    """Follows one run: the query reports its phase, steps and batches; the thread adds Spark's
    figures while a batch runs and calls ``on_update(progress)`` when what is shown changed."""

    def __init__(self, on_update: Callable[[Progress], None], interval: float = INTERVAL_S,
                 look: Callable[[Any, Sequence[int]], dict[int, list[StageLook]]] = spark_look,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._on_update = on_update
        self._interval = interval
        self._look = look
        self._clock = clock
        self._lock = threading.Lock()
        self._sc: Any = None
        self._current = Progress("starting")
        self._since = clock()
        self._jobs: dict[int, float] = {}  # job -> looked at until then: active ones, and just finished ones
        self._rows: dict[int, int] = {}  # rows read per stage of this batch
        self._first_seen: dict[int, tuple[float, int]] = {}  # stage -> (when, tasks done then)
        self._shown: Progress | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="streamfold-progress", daemon=True)

    @property
    def current(self) -> Progress:
        with self._lock:
            return self._current

    def start(self) -> ProgressPoller:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    # -- what the query reports ------------------------------------------------------------------
    def attach(self, sc: Any) -> None:
        """Spark is up: read its tracker from now on."""
        with self._lock:
            self._sc = sc
        self.phase("planning")

    def phase(self, phase: str, batch: int | None = None) -> None:
        with self._lock:
            self._current = Progress(phase, batch)
            self._since = self._clock()
            self._rows, self._first_seen = {}, {}
        self._publish()

    def inputs(self, batch: int, inputs: Mapping[str, Sequence[str]]) -> None:
        """A batch starts over these files (per source)."""
        with self._lock:
            self._current = Progress("batch", batch, files=sum(len(v) for v in inputs.values()))
            self._since = self._clock()
            self._rows, self._first_seen = {}, {}
        self._publish()

    def step(self, message: str) -> None:
        """The engine's progress message (``batch 000000: Δstate``): the step in progress."""
        m = _BATCH_MESSAGE.match(message)
        with self._lock:
            if m is None:
                self._current = replace(self._current, step=message)
            elif self._current.phase == "batch" and self._current.batch == int(m.group(1)):
                self._current = replace(self._current, step=m.group(2))
            else:  # a batch the query did not announce (a rebuild, a reconfiguration's)
                self._current = Progress("batch", int(m.group(1)), step=m.group(2))
                self._since = self._clock()
        self._publish()

    def batch_done(self, batch: int) -> None:
        self.phase("waiting", batch + 1)

    # -- the thread ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._tick()
            except Exception:  # noqa: BLE001 - progress is a view: a failed look is skipped
                continue

    def _tick(self) -> None:
        with self._lock:
            sc, current = self._sc, self._current
        if sc is not None and current.phase == "batch":
            active = list(sc.statusTracker().getActiveJobsIds())
            looks = self._look(sc, sorted(set(active) | set(self._jobs)))
            # a job that just finished is looked at a while longer: the status store takes in a
            # stage's last task figures a moment after the tracker stops listing the job
            now = self._clock()
            self._jobs = {job: until for job, until in self._jobs.items() if until > now}
            self._jobs.update((job, now + LINGER_S) for job in active)
            with self._lock:
                if self._current.batch == current.batch:
                    self._current = self._merge(self._current, looks, set(active))
        self._publish()

    def _merge(self, p: Progress, looks: dict[int, list[StageLook]], active: set[int]) -> Progress:
        now = self._clock()
        for stages in looks.values():
            for s in stages:
                if s.rows is not None:
                    self._rows[s.stage_id] = max(s.rows, self._rows.get(s.stage_id, 0))
        running = [(job, looks[job]) for job in sorted(active) if job in looks and looks[job]]
        rows = sum(self._rows.values()) if self._rows else None
        if not running:
            return replace(p, stage=None, stages=None, tasks_done=None, tasks=None, eta_s=None, rows_read=rows,
                           elapsed_s=now - self._since)
        _, stages = running[-1]  # the latest job: the one the step waits for
        finished = sum(1 for s in stages if s.done >= s.tasks)
        current = next((s for s in stages if s.active), None) or next((s for s in stages if s.done < s.tasks),
                                                                      stages[-1])
        return replace(p, stage=min(finished + 1, len(stages)), stages=len(stages),
                       tasks_done=sum(s.done for s in stages), tasks=sum(s.tasks for s in stages),
                       rows_read=rows, eta_s=self._eta(current, now), elapsed_s=now - self._since)

    def _eta(self, s: StageLook, now: float) -> float | None:
        """The stage's time left at the rate its tasks finished since it was first seen."""
        seen = self._first_seen.setdefault(s.stage_id, (now, s.done))
        done = s.done - seen[1]
        if done < ETA_MIN_TASKS or s.done >= s.tasks or now <= seen[0]:
            return None
        return (s.tasks - s.done) * (now - seen[0]) / done

    def _publish(self) -> None:
        with self._lock:
            p = replace(self._current, elapsed_s=round(self._clock() - self._since))
            if p == self._shown:
                return
            self._shown = p
        self._on_update(p)


__all__ = ["INTERVAL_S", "Progress", "ProgressPoller", "StageLook", "spark_look"]
