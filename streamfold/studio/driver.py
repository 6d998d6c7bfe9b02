"""How the studio drives a run: through the public Python API and nothing else.

``streamfold.start`` returns a :class:`~streamfold.runtime.query.Query` polling its sources in a
background thread; :class:`RunHandle` starts one for a studio run, learns of a failure as a
program would (``Query.wait_for_batch`` raises the run's error), and stops it. The studio
watches the output directory, not the Query, for committed batches, so what the page shows is
what any reader of the output sees.

This is the one module that touches a running Query. Its control actions (pause, resume, skip,
breakpoints, inspect, reconfigure) are the :class:`~streamfold.control.api.ControlledQuery`'s
own methods, so the page drives the same controller as ``streamfold control`` and the control
endpoint; a second thread follows the controller's events (long polling) and reports each with
the controller's status, which the session shares with every viewer. The run keeps its own
control endpoint too (``OUTPUT/_control.json``), so ``streamfold control`` acts on a studio run
and every page sees what it did. Blocking calls (start
builds the engine; stop waits for a batch in progress; pause, inspect and reconfigure wait for
the engine) are meant to run in a worker thread, never on the server's event loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import StreamfoldError
from ..runtime.progress import Progress, ProgressPoller

if TYPE_CHECKING:
    from ..control.api import ControlledQuery
    from .compiler import Input

POLL_SECONDS = 0.5  # how often a studio run looks for new files
EVENT_WAIT = 1.0  # s a long poll for the controller's events waits

# The control actions a page may take, by the name of the route and of the query's method.
ACTIONS = ("pause", "resume", "skip", "add_breakpoint", "remove_breakpoint", "inspect", "reconfigure")


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What a run maintains: the query text over its inputs (workspace directories)."""

    sql: str
    inputs: tuple[Input, ...]

    def to_json(self) -> dict[str, Any]:
        return {"sql": self.sql, "inputs": [i.to_json() for i in self.inputs]}


class StartCancelled(Exception):
    """Stop was pressed while the run was starting: nothing of it runs."""


class RunHandle:
    """A started run: its query, a thread that reports the run's failure once, one that
    reports the controller's events (``on_control(status, events)``) as they happen, and its
    progress poller (:mod:`streamfold.runtime.progress`), started before the JVM."""

    def __init__(self, query: ControlledQuery, on_failure: Callable[[BaseException], None],
                 on_control: Callable[[dict[str, Any], list[dict[str, Any]]], None],
                 poller: ProgressPoller) -> None:
        self.query = query
        self.poller = poller
        self._stopping = threading.Event()
        self._on_failure = on_failure
        self._on_control = on_control
        self._watcher = threading.Thread(target=self._watch, name="studio-run-watch", daemon=True)
        self._watcher.start()
        self._follower = threading.Thread(target=self._follow, name="studio-run-control", daemon=True)
        self._follower.start()

    @classmethod
    def start(cls, spec: RunSpec, output: str, root: str, spark: Any, master: str | None,
              on_failure: Callable[[BaseException], None],
              on_control: Callable[[dict[str, Any], list[dict[str, Any]]], None],
              on_progress: Callable[[Progress], None], cancelled: threading.Event,
              sinks: tuple[str, ...] = ()) -> RunHandle:
        """Start maintaining ``spec`` into ``output`` (resuming its checkpoint if it has one).
        Paths of ``spec.inputs`` are relative to ``root``. CSV and JSON columns are passed as the
        schema the editor compiled against, so the run's plan is the plan the page showed.

        The start reports its phases to ``on_progress`` (starting the JVM, planning, then the
        batches), and looks at ``cancelled`` after each: a Stop pressed meanwhile ends it there
        (:class:`StartCancelled`), before any batch runs; the JVM's own start cannot be cut short.
        ``sinks``: the studio's (``--sink``), each committed batch delivered to them."""
        import os

        import streamfold

        from ..runtime.session import get_spark

        sources = {i.name: os.path.join(root, i.path) for i in spec.inputs if not i.static}
        tables = {i.name: os.path.join(root, i.path) for i in spec.inputs if i.static}
        formats = {i.name: i.format or "parquet" for i in spec.inputs}
        schemas = {i.name: i.schema for i in spec.inputs if i.format in ("csv", "json") and i.columns}
        poller = ProgressPoller(on_progress).start()
        query = None
        try:
            session = spark if spark is not None else get_spark(master)
            if cancelled.is_set():
                raise StartCancelled()
            poller.attach(session.sparkContext)
            query = streamfold.start(spec.sql, sources, output, tables=tables, formats=formats, schemas=schemas,
                                     trigger=POLL_SECONDS, spark=session, background=False, progress=poller.step,
                                     sinks=list(sinks))
            if cancelled.is_set():
                raise StartCancelled()
            query.on_inputs = poller.inputs
            query.on_batch = lambda result: poller.batch_done(result.batch)
            poller.phase("waiting", query.last_batch + 1)
            query.start_background(POLL_SECONDS)
        except BaseException:
            poller.close()
            if query is not None:
                query.stop()
            raise
        return cls(query, on_failure, on_control, poller)

    @property
    def last_batch(self) -> int:
        return self.query.last_batch

    def _watch(self) -> None:
        while not self._stopping.is_set():
            try:
                self.query.wait_for_batch(timeout=1.0)
            except TimeoutError:
                continue
            except BaseException as e:  # noqa: BLE001 - the run's own error, reported to the page
                if not self._stopping.is_set():
                    self._on_failure(e)
                return

    def _follow(self) -> None:
        """Report the controller's status after each burst of its events, until stopped."""
        seen = 0
        while not self._stopping.is_set():
            events = self.query.events(seen, EVENT_WAIT)
            if events and not self._stopping.is_set():
                seen = events[-1]["seq"]
                self._on_control(self.query.status(), events)

    def status(self) -> dict[str, Any]:
        return self.query.status()

    def waiting(self) -> dict[str, int]:
        """Per stream, the files in its directory that no committed batch has read yet (while
        paused, the files the resume will read)."""
        from ..runtime.sources import list_inputs

        engine = self.query.engine
        out = {}
        for s in engine.plan.streams:
            try:
                consumed = set(engine.consumed.get(s.name, ()))
                out[s.name] = sum(1 for n in list_inputs(engine.specs[s.name.lower()].path) if n not in consumed)
            except (OSError, RuntimeError, StreamfoldError):  # a directory gone; a set changed while copied
                continue
        return out

    def act(self, action: str, **args: Any) -> Any:
        """One of :data:`ACTIONS` on the running query, with its arguments (coded errors raise)."""
        if action not in ACTIONS:
            raise ValueError(f"not a control action: {action}")
        return getattr(self.query, action)(**args)

    def stop(self) -> BaseException | None:
        """Stop now: a step in progress is cancelled (the batch is not committed, and the next
        run does it again, exactly), a paused query stops where it is; returns the run's error,
        if it had one."""
        self._stopping.set()
        self.poller.close()
        try:
            self.query.controller.halt()
            self.query.stop()
        except BaseException as e:  # noqa: BLE001 - already reported by the watcher or returned here
            return e
        finally:
            self._watcher.join(timeout=5)
            self._follower.join(timeout=EVENT_WAIT + 5)
        return None
