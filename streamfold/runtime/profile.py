"""A batch's waterfall: where its time went, from the driver's phases and Spark's own records.

``streamfold run --profile`` and ``streamfold bench --profile`` record, for every batch:

* the engine's phases as spans on the batch's clock (read, each level of h ⊗, planning the
  outputs, the output job, writing the files, commit, compaction), each with the py4j round trips
  made while it ran;
* every Spark job the batch started and each of its stages — submitted, completed, tasks, task
  time — read from Spark's status store after the batch (``AppStatusStore``, the data behind
  Spark's UI, kept with the UI off), so nothing is guessed;
* the py4j round trips by JVM method (calls and seconds): the driver's planning, call by call;
* the wait before the batch: from its first file's arrival (the file's status change — its
  rename or link into the directory, or its writing) to the batch's start, a span at negative
  times. Work after the previous commit that gives way to a waiting file (a compaction, a fold:
  ``features/maintenance.py``) keeps it short; the poll's interval, without a watch, does not.

* CPU seconds the batch cost, by who spent them: the Python driver, and the JVM's threads in
  groups (the driver's planning threads, executor tasks, the JIT compilers, the garbage
  collector, the rest) read from ``/proc`` before and after — on a busy machine wall times
  stretch, CPU seconds much less, so A/B comparisons hold (Linux, and the JVM on this machine
  only: a local master; elsewhere this part is left out).

Round trips are counted by wrapping the gateway client's ``send_command`` (every call from Python
to the JVM goes through it), installed once per process; counting costs microseconds per call.
Jobs are read after the batch's clock stops, so reading them is not part of the batch's time.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


Part = Callable[[str], AbstractContextManager[None]]  # a named span of a profiled batch
WAITED = "waited: file → batch start"  # the span from the batch's first file's arrival to its start


def no_part(name: str) -> AbstractContextManager[None]:
    """The span of a batch that is not profiled: nothing."""
    return nullcontext()


class Py4jCounter:
    """Every py4j round trip of this process: how many, how long, by JVM method (monotonic totals)."""

    def __init__(self) -> None:
        self.calls = 0
        self.seconds = 0.0
        self.by_method: dict[str, list[float]] = {}  # method -> [calls, seconds]
        self._lock = threading.Lock()

    def snapshot(self) -> tuple[int, float, dict[str, tuple[int, float]]]:
        with self._lock:
            return self.calls, self.seconds, {m: (int(c), s) for m, (c, s) in self.by_method.items()}

    def record(self, command: str, seconds: float) -> None:
        method = _method(command)
        with self._lock:
            self.calls += 1
            self.seconds += seconds
            entry = self.by_method.setdefault(method, [0, 0.0])
            entry[0] += 1
            entry[1] += seconds


def _method(command: str) -> str:
    """What a py4j command asks the JVM (its protocol: a kind letter, then its arguments by line)."""
    lines = command.split("\n", 3)
    kind = lines[0]
    if kind == "c" and len(lines) > 2:
        return lines[2]
    return {"r": "(reflection)", "i": "(constructor)", "m": "(release object)", "f": "(field)",
            "l": "(list)", "a": "(array)", "d": "(dir)", "h": "(help)"}.get(kind, f"({kind})")


_COUNTERS: dict[int, Py4jCounter] = {}
_INSTALL = threading.Lock()


def py4j_counter(spark: SparkSession) -> Py4jCounter:
    """The counter of the gateway ``spark`` talks through, wrapping its client on first use."""
    client: Any = spark.sparkContext._gateway._gateway_client  # type: ignore[union-attr]
    with _INSTALL:
        counter = _COUNTERS.get(id(client))
        if counter is None:
            counter = _COUNTERS[id(client)] = Py4jCounter()
            send = client.send_command

            def counted(command: str, *args: Any, **kwargs: Any) -> Any:
                t = time.perf_counter()
                try:
                    return send(command, *args, **kwargs)
                finally:
                    counter.record(command, time.perf_counter() - t)

            client.send_command = counted
        return counter


@dataclass(frozen=True)
class Span:
    """One phase of a batch on the batch's clock (seconds from its start), with its py4j calls."""

    name: str
    start_s: float
    end_s: float
    py4j_calls: int
    py4j_s: float
    depth: int = 0  # 1 for a part of an enclosing phase


@dataclass(frozen=True)
class Stage:
    stage: int
    name: str
    tasks: int
    start_s: float | None  # submitted
    end_s: float | None  # completed
    task_s: float  # summed run time of its tasks
    status: str


@dataclass(frozen=True)
class Job:
    job: int
    start_s: float | None
    end_s: float | None
    stages: tuple[Stage, ...]


# JVM threads by what they do (their names as Linux shows them, cut to 15 characters).
_THREAD_GROUPS = (
    ("JIT compiler", ("C1 CompilerThre", "C2 CompilerThre", "Sweeper thread")),
    ("garbage collector", ("GC Thread", "G1 ", "VM Thread", "VM Periodic")),
    ("executor tasks", ("Executor task", "Executor-Heart")),
    ("driver: py4j calls (planning)", ("Thread-",)),
    ("driver: result transfer (Arrow)", ("serve-Arrow", "task-result-get")),
    ("driver: scheduler", ("dag-scheduler", "dispatcher-")),
)


def _thread_group(name: str) -> str:
    for group, prefixes in _THREAD_GROUPS:
        if name.startswith(prefixes):
            return group
    return "JVM: other threads"


class CpuClock:
    """CPU seconds so far of this Python process and of the JVM's threads by group (``/proc``)."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self._tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

    @classmethod
    def of(cls, spark: SparkSession) -> CpuClock:
        """The clock of ``spark``'s JVM when it runs on this machine (a local master), else of Python only."""
        pid = None
        try:
            if (spark.sparkContext.master or "").startswith("local"):
                jvm: Any = spark._jvm
                pid = int(jvm.java.lang.ProcessHandle.current().pid())
        except Exception:  # noqa: BLE001 - Spark Connect, or no such API: Python only
            pid = None
        return cls(pid)

    def read(self) -> dict[str, float]:
        out = {"Python driver": time.process_time()}
        if self.pid is None:
            return out
        try:
            tasks = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return out
        for tid in tasks:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/stat", encoding="ascii", errors="replace") as fh:
                    stat = fh.read()
            except OSError:  # the thread ended
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            group = _thread_group(name)
            out[group] = out.get(group, 0.0) + (int(fields[11]) + int(fields[12])) / self._tick
        return out


def cpu_spent(before: dict[str, float], after: dict[str, float]) -> tuple[tuple[str, float], ...]:
    """CPU seconds per group between two readings, most first (threads that ended are not counted)."""
    spent = {k: round(v - before.get(k, 0.0), 4) for k, v in after.items()}
    return tuple(sorted(((k, max(v, 0.0)) for k, v in spent.items() if v > 0), key=lambda kv: -kv[1]))


@dataclass(frozen=True)
class Waterfall:
    """One batch's profile (see the module docstring); ``to_json`` is what ``--profile`` writes."""

    batch: int
    total_s: float
    spans: tuple[Span, ...]
    jobs: tuple[Job, ...]
    py4j_calls: int
    py4j_s: float
    py4j_methods: tuple[tuple[str, int, float], ...]  # (method, calls, seconds), most time first
    cpu: tuple[tuple[str, float], ...] = ()  # CPU seconds by who spent them (see CpuClock), most first

    def to_json(self) -> dict[str, Any]:
        r = _r
        return {
            "cpu_s": {k: r(v) for k, v in self.cpu},
            "batch": self.batch, "total_s": r(self.total_s), "py4j_calls": self.py4j_calls, "py4j_s": r(self.py4j_s),
            "phases": [{"name": s.name, "start_s": r(s.start_s), "end_s": r(s.end_s), "depth": s.depth,
                        "py4j_calls": s.py4j_calls, "py4j_s": r(s.py4j_s)} for s in self.spans],
            "jobs": [{"job": j.job, "start_s": r(j.start_s), "end_s": r(j.end_s),
                      "stages": [{"stage": s.stage, "name": s.name, "tasks": s.tasks, "start_s": r(s.start_s),
                                  "end_s": r(s.end_s), "task_s": r(s.task_s), "status": s.status}
                                 for s in j.stages]} for j in self.jobs],
            "py4j_methods": [{"method": m, "calls": c, "seconds": r(s)} for m, c, s in self.py4j_methods],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Waterfall:
        """The waterfall :meth:`to_json` wrote."""
        return cls(d["batch"], d["total_s"],
                   tuple(Span(p["name"], p["start_s"], p["end_s"], p["py4j_calls"], p["py4j_s"], p["depth"])
                         for p in d["phases"]),
                   tuple(Job(j["job"], j["start_s"], j["end_s"],
                             tuple(Stage(s["stage"], s["name"], s["tasks"], s["start_s"], s["end_s"], s["task_s"],
                                         s["status"]) for s in j["stages"])) for j in d["jobs"]),
                   d["py4j_calls"], d["py4j_s"], tuple((m["method"], m["calls"], m["seconds"]) for m in d["py4j_methods"]),
                   tuple((k, v) for k, v in d.get("cpu_s", {}).items()))

    def lines(self, top: int = 6) -> list[str]:
        """The waterfall as text: phases, jobs and stages with their start–end, then the top py4j calls."""
        out = [f"batch {self.batch:06d} waterfall: {self.total_s:.3f} s, {len(self.jobs)} Spark job(s), "
               f"{self.py4j_calls} py4j calls ({self.py4j_s:.3f} s)"]
        events: list[tuple[float, int, str]] = []
        for s in self.spans:
            events.append((s.start_s, 0, f"{'  ' * (s.depth + 1)}{s.name:<24} {_when(s.start_s, s.end_s)}  "
                                         f"py4j {s.py4j_calls} calls {s.py4j_s:.3f} s"))
        for j in self.jobs:
            events.append((j.start_s or 0.0, 1, f"    job {j.job:<20} {_when(j.start_s, j.end_s)}  "
                                                f"{len(j.stages)} stage(s)"))
            for st in j.stages:
                if st.status == "SKIPPED":
                    continue
                events.append((st.start_s or 0.0, 2, f"      stage {st.stage:<16} {_when(st.start_s, st.end_s)}  "
                                                      f"{st.tasks} task(s), task time {st.task_s:.3f} s"))
        out += [text for _, _, text in sorted(events, key=lambda e: (e[0], e[1]))]
        calls = ", ".join(f"{m} {c}× {s * 1000:.0f} ms" for m, c, s in self.py4j_methods[:top])
        out.append(f"  py4j by method: {calls}")
        if self.cpu:
            total = sum(v for _, v in self.cpu)
            out.append(f"  CPU {total:.3f} s: " + ", ".join(f"{k} {v:.3f}" for k, v in self.cpu))
        return out


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def _when(start: float | None, end: float | None) -> str:
    if start is None:
        return " " * 13
    return f"{start:6.3f}–{end:6.3f}" if end is not None else f"{start:6.3f}–     ?"


class Profiler:
    """Records one batch at a time: :meth:`begin`, :meth:`phase` around each part, :meth:`end`."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self.counter = py4j_counter(spark)
        self._spans: list[Span] = []
        self._local = threading.local()  # each thread's nesting depth (steps of h run side by side)
        self._open = 0  # how deep the thread that began the batch is: where other threads' spans sit
        self._t0 = 0.0
        self._epoch0 = 0.0
        self._owner = threading.get_ident()
        self._start: tuple[int, float, dict[str, tuple[int, float]]] = (0, 0.0, {})
        self._last_job = -1
        self._first_job: int | None = None
        self._job_ids: tuple[int, int] | None = None  # [first, after) the jobs of the batch being built
        self.clock = CpuClock.of(spark)
        self._cpu0: dict[str, float] = {}

    def begin(self) -> None:
        self._spans = []
        self._owner = threading.get_ident()
        self._local = threading.local()
        self._open = 0
        self._t0 = time.monotonic()
        self._epoch0 = time.time()
        self._first_job = self._next_job_id()
        self._start = self.counter.snapshot()
        self._cpu0 = self.clock.read()

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        calls, secs, _ = self.counter.snapshot()
        start = time.monotonic() - self._t0
        depth = getattr(self._local, "depth", None)
        owner = threading.get_ident() == self._owner
        if depth is None:  # the batch's thread starts at 0; another runs a part of its open phase
            depth = 0 if owner else self._open
        self._local.depth = depth + 1
        if owner:
            self._open = depth + 1
        try:
            yield
        finally:
            self._local.depth = depth
            if owner:
                self._open = depth
            c, s, _ = self.counter.snapshot()
            self._spans.append(Span(name, start, time.monotonic() - self._t0, c - calls, s - secs, depth))

    def waited(self, arrived: float | None) -> None:
        """The batch's first file arrived at ``arrived`` (epoch seconds): the wait until the batch
        began is a span before its start (at a negative time), :data:`WAITED`."""
        if arrived is not None and arrived < self._epoch0:
            self._spans.append(Span(WAITED, arrived - self._epoch0, 0.0, 0, 0.0))

    def end(self, batch: int) -> Callable[[], Waterfall]:
        """Stop the batch's clock; the waterfall, built when first asked for (its Spark jobs are
        read then, so reading them is never part of the batch's time)."""
        total = time.monotonic() - self._t0
        after = self._next_job_id()
        job_ids = (self._first_job, after) if self._first_job is not None and after is not None else None
        cpu = cpu_spent(self._cpu0, self.clock.read())
        calls, secs, methods = self.counter.snapshot()
        calls0, secs0, methods0 = self._start
        per = {m: (c - methods0.get(m, (0, 0.0))[0], s - methods0.get(m, (0, 0.0))[1]) for m, (c, s) in methods.items()}
        ranked = tuple(sorted(((m, c, s) for m, (c, s) in per.items() if c), key=lambda x: -x[2]))
        spans = tuple(sorted(self._spans, key=lambda s: (s.start_s, s.depth)))
        epoch0 = self._epoch0
        built: list[Waterfall] = []

        def waterfall() -> Waterfall:
            if not built:
                self._job_ids = job_ids
                built.append(Waterfall(batch, total, spans, self._jobs(epoch0, total), calls - calls0, secs - secs0,
                                       ranked, cpu))
            return built[0]

        return waterfall

    def _next_job_id(self) -> int | None:
        """The id the JVM's next job will get (Spark's scheduler counts them), or None."""
        try:
            counter = self.spark.sparkContext._jsc.sc().dagScheduler().nextJobId()  # type: ignore[union-attr]
            # py4j hands the AtomicInteger over as its value; a proxy (``get``) should that change.
            return int(counter) if isinstance(counter, int) else int(counter.get())
        except Exception:  # noqa: BLE001 - not a local JVM's scheduler: the status store's list is used
            return None

    def _jobs(self, epoch0: float, total: float) -> tuple[Job, ...]:
        """The jobs submitted while the batch ran, with their stages, from Spark's status store."""
        try:
            sc = self.spark.sparkContext
            store = sc._jsc.sc().statusStore()  # type: ignore[union-attr]
            if self._job_ids is not None:
                # The jobs the JVM started while the batch ran (other queries' too: the times below
                # keep this batch's). Spark's status store learns of them from its listener bus,
                # asynchronously — in a busy JVM seconds later —, so wait for each to be there.
                first, after = self._job_ids
                ids = list(range(max(first, self._last_job + 1), after))
                deadline = time.monotonic() + 10
                for i in ids:
                    while time.monotonic() < deadline:
                        try:
                            store.job(i)
                            break
                        except Exception:  # noqa: BLE001 - not delivered yet
                            time.sleep(0.02)
            else:
                ids = sorted(i for i in sc.statusTracker().getJobIdsForGroup(None) if i > self._last_job)
            seq = sc._jvm.scala.jdk.javaapi.CollectionConverters  # type: ignore[union-attr]
            # Spark's times are whole milliseconds: a job of this batch may read as up to 1 ms early.
            since, until = math.floor(epoch0 * 1000), math.ceil((epoch0 + total) * 1000)
            jobs = []
            for i in ids:
                try:
                    data = store.job(i)
                except Exception:  # noqa: BLE001 - beyond spark.ui.retainedJobs: forgotten
                    continue
                submitted = _ms(data.submissionTime())
                if submitted is None or not since <= submitted <= until:
                    continue
                stages = []
                for sid in sorted(seq.asJava(data.stageIds())):
                    try:
                        st = store.lastStageAttempt(sid)
                    except Exception:  # noqa: BLE001 - a stage that never ran (skipped) has no attempt
                        continue
                    stages.append(Stage(sid, st.name(), st.numTasks(), _rel(epoch0, _ms(st.submissionTime())),
                                        _rel(epoch0, _ms(st.completionTime())), st.executorRunTime() / 1000,
                                        str(st.status())))
                jobs.append(Job(i, _rel(epoch0, submitted), _rel(epoch0, _ms(data.completionTime())), tuple(stages)))
            if jobs:
                self._last_job = max(j.job for j in jobs)
            return tuple(jobs)
        except Exception:  # noqa: BLE001 - no status store (Spark Connect): phases and py4j only
            return ()



def _rel(epoch0: float, ms: float | None) -> float | None:
    """Seconds from the batch's start of a time Spark recorded (at least 0: see the rounding above)."""
    return None if ms is None else max(0.0, ms / 1000 - epoch0)


def _ms(option: Any) -> float | None:
    """Epoch milliseconds of a Scala ``Option[Date]``, or None."""
    return float(option.get().getTime()) if option.isDefined() else None
