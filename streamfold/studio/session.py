"""One query's shared session: its text (a :class:`DocRoom`), its compile result, its run, the
batch timeline and the log — one copy on the server that every viewer sees (Texera's shared
execution manager, §2.4.2).

A viewer's event channel receives, on joining, the whole **state** (query, compile result, run
status, control status, timeline, log, viewers), then **deltas** only: a new compile result, a
run status, the running query's control status (paused, where, the breakpoint hit, its query
version, a reconfiguration waiting), a committed batch (its commit and the rows that changed,
not the answer), a log entry, the viewers. A page applies each to its copy, so every page shows
the same thing and a late joiner catches up from the state.

The execution state is the controller's, not the page's: a control action (pause, resume, skip,
breakpoints, reconfigure — from any page, or from ``streamfold control`` on the run's endpoint)
changes the run's controller, whose events come back through :class:`.driver.RunHandle` with
its status, which is sent to every viewer. So a page shows paused only once the query is.

Invariant: all of the session's fields are read and written on the event loop; blocking work
(compiling, reading outputs, starting and stopping runs) runs in worker threads and comes back
to the loop with its result.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from starlette.websockets import WebSocket, WebSocketDisconnect

from ..errors import StreamfoldError, UsageError
from .collab import DocRoom
from .compiler import CompileCache, Input, resolve_inputs
from .driver import ACTIONS, RunHandle, RunSpec, StartCancelled
from .peers import Peer
from .results import Results, commits_after
from .workspace import Workspace


class Shared(Protocol):
    """What a query's session uses of the studio (:class:`.app.Studio`): its workspace, its
    compiler cache, the Spark session (or master) runs use, and the sinks they deliver to."""

    workspace: Workspace
    compiler: CompileCache
    spark: Any
    master: str | None
    sinks: tuple[str, ...]

COMPILE_DELAY = 0.08  # s after the last edit; edits arriving faster are compiled once
SAVE_DELAY = 0.3
WATCH_SECONDS = 0.3  # how often a running query's output is looked at
WAITING_EVERY = 4  # looks at the output between two counts of the files waiting in the sources
TIMELINE_KEPT = 2000
LOG_KEPT = 500


@dataclass
class RunState:
    """What every viewer sees of the run. ``status``: idle (never run), starting, running,
    stopping, stopped, failed."""

    status: str = "idle"
    run: int | None = None
    started_at: float | None = None
    last_batch: int = -1
    error: dict[str, Any] | None = None
    sql: str | None = None
    inputs: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"status": self.status, "run": self.run, "started_at": self.started_at,
                "last_batch": self.last_batch, "error": self.error, "sql": self.sql, "inputs": self.inputs}


class QuerySession:
    def __init__(self, studio: Shared, qid: str) -> None:
        self.studio = studio
        self.workspace = studio.workspace
        self.meta = self.workspace.load_meta(qid)
        self.id = qid
        self.room = DocRoom(self.workspace.load_doc(qid), self.workspace.load_text(qid), self._text_changed)
        self.viewers: dict[Peer, str] = {}
        self.seats: dict[str, int] = {}  # a connected viewer's colour: the lowest seat free when they joined
        self.compiled: dict[str, Any] | None = None
        self.run = RunState()
        self.timeline: list[dict[str, Any]] = []
        self.log: list[dict[str, Any]] = self.workspace.read_log(qid, LOG_KEPT)
        self.handle: RunHandle | None = None
        self.control: dict[str, Any] | None = None  # the running query's controller status
        self.progress: dict[str, Any] | None = None  # what the run is doing (runtime/progress.py)
        self.waiting: dict[str, int] = {}  # per stream, files no committed batch has read yet
        self._cancel_start: threading.Event | None = None  # set by a Stop while the run starts
        self._pause_asked = False  # a page asked for the pause the controller is taking (logged by its actor)
        self.results: Results | None = None
        self._compile_task: asyncio.Task[None] | None = None
        self._save_task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._actions = asyncio.Lock()  # one run action at a time (start, stop, a failure's clean-up)
        self._load_last_run()

    def _load_last_run(self) -> None:
        runs = self.workspace.runs(self.id)
        if not runs:
            return
        record = self.workspace.read_run(self.id, runs[-1])
        self.results = Results(self._output(runs[-1]))
        self.timeline = commits_after(self.results.output, -1) if os.path.isdir(self.results.output) else []
        self.run = RunState("stopped", runs[-1], None, self.timeline[-1]["batch"] if self.timeline else -1, None,
                            record["spec"]["sql"], record["spec"]["inputs"])

    def _output(self, run: int) -> str:
        return os.path.join(self.workspace.run_dir(self.id, run), "output")

    # -- the state every viewer shares --------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"type": "state", "query": self.meta.to_json(), "compile": self.compiled, "run": self.run.to_json(),
                "control": self.control, "timeline": self.timeline, "log": self.log,
                "viewers": sorted(self.viewers.values()), "colors": self.seats, "progress": self.progress, "waiting": self.waiting}

    def publish(self, message: dict[str, Any]) -> None:
        for peer in self.viewers:
            peer.send_json(message)

    async def serve_events(self, ws: WebSocket, name: str) -> None:
        peer = Peer(ws)
        if self.compiled is None:
            await self.compile()
        peer.send_json(self.state())
        self.viewers[peer] = name
        if name not in self.seats:
            taken = set(self.seats.values())
            self.seats[name] = next(i for i in range(len(taken) + 1) if i not in taken)
        self._publish_viewers()
        try:
            while True:
                await ws.receive_text()  # the page speaks over HTTP; this only notices it leaving
        except WebSocketDisconnect:
            pass
        finally:
            self.viewers.pop(peer, None)
            if name not in self.viewers.values():
                self.seats.pop(name, None)
            self._publish_viewers()  # the others learn of it first: this peer's socket may be slow to end
            await peer.finish()

    def _publish_viewers(self) -> None:
        """The viewers' names, and each one's seat: two viewers never share a colour (up to the
        page's palette), and a viewer keeps theirs while others come and go."""
        self.publish({"type": "viewers", "viewers": sorted(self.viewers.values()), "colors": dict(self.seats)})

    def note(self, actor: str, action: str, message: str, error: dict[str, Any] | None = None) -> None:
        """Add to the log (kept in the workspace) and tell every viewer."""
        entry = {"at": time.time(), "actor": actor, "action": action, "message": message,
                 "level": "error" if error else "info", "error": error}
        self.log = (self.log + [entry])[-LOG_KEPT:]
        self.workspace.append_log(self.id, entry)
        self.publish({"type": "log", "entry": entry})

    def _set_run(self, **changes: Any) -> None:
        for k, v in changes.items():
            setattr(self.run, k, v)
        self.publish({"type": "run", "run": self.run.to_json()})

    # -- the text: saved and compiled after edits ---------------------------------------------
    def _text_changed(self, text: str) -> None:
        for attr, job in (("_compile_task", self._compile_later), ("_save_task", self._save_later)):
            task = getattr(self, attr)
            if task is not None and not task.done():
                task.cancel()
            setattr(self, attr, asyncio.get_running_loop().create_task(job()))

    async def _compile_later(self) -> None:
        await asyncio.sleep(COMPILE_DELAY)
        await self.compile()

    async def _save_later(self) -> None:
        await asyncio.sleep(SAVE_DELAY)
        await self.save()

    async def save(self) -> None:
        update, text = self.room.state(), self.room.value
        await asyncio.to_thread(self.workspace.save_doc, self.id, update, text)

    async def inputs(self) -> tuple[Input, ...]:
        return await asyncio.to_thread(resolve_inputs, self.workspace, self.meta.bindings)

    async def compile(self, inputs: tuple[Input, ...] | None = None) -> dict[str, Any]:
        """Compile the current text (through the studio's cache) and send the result to all."""
        text = self.room.value
        if inputs is None:
            inputs = await self.inputs()
        result = await asyncio.to_thread(self.studio.compiler.compile, text, inputs)
        if text == self.room.value:  # else a newer edit's compile is on its way
            self.compiled = result
            self.publish({"type": "compile", "compile": result})
        return result

    async def set_bindings(self, bindings: list[Any], actor: str) -> None:
        for b in bindings:
            await asyncio.to_thread(self.workspace.resolve, b.path)
        self.meta.bindings = list(bindings)
        await asyncio.to_thread(self.workspace.save_meta, self.meta)
        self.publish({"type": "query", "query": self.meta.to_json()})
        listed = ", ".join(f"{b.name} = {b.path}" for b in bindings) or "none"
        self.note(actor, "bind", f"bound tables: {listed}")
        await self.compile()

    # -- the run ------------------------------------------------------------------------------
    async def start_run(self, actor: str) -> None:
        async with self._actions:
            await self._start(actor)

    async def _start(self, actor: str) -> None:
        if self.run.status in ("starting", "running", "stopping"):
            raise UsageError(f"the query is already {self.run.status}", code="RUN_ACTIVE",
                             params={"status": self.run.status}, hint="stop it first")
        inputs = await self.inputs()
        result = await self.compile(inputs)
        if not result["ok"]:
            err = result["error"]
            self.note(actor, "run", "the query does not compile; nothing was started", err)
            raise UsageError(f"the query does not compile: [{err['code']}] {err['message']}",
                             code="QUERY_DOES_NOT_COMPILE", params={"error": err["code"]}, hint=err["hint"])
        used = {i["name"].lower() for i in result["inputs"]}
        spec = RunSpec(result["text"], tuple(i for i in inputs if i.name.lower() in used))
        run = await asyncio.to_thread(self.workspace.new_run, self.id, spec.to_json())
        resumed = run == self.run.run
        self.results = Results(self._output(run))
        if not resumed:
            self.timeline = []
        self._set_run(status="starting", run=run, started_at=time.time(), error=None, sql=spec.sql,
                      inputs=[i.to_json() for i in spec.inputs],
                      last_batch=self.timeline[-1]["batch"] if self.timeline else -1)
        self.note(actor, "run", f"{'resumed' if resumed else 'started'} run {run}")
        loop = asyncio.get_running_loop()

        def failed(error: BaseException) -> None:
            loop.call_soon_threadsafe(lambda: loop.create_task(self._failed(error)))

        def controlled(status: dict[str, Any], events: list[dict[str, Any]]) -> None:
            loop.call_soon_threadsafe(self._control_changed, status, events)

        def progressed(p: Any) -> None:
            loop.call_soon_threadsafe(self._set_progress, p.to_json())

        cancel = self._cancel_start = threading.Event()
        try:
            handle = await asyncio.to_thread(RunHandle.start, spec, self.results.output, self.workspace.root,
                                             self.studio.spark, self.studio.master, failed, controlled, progressed,
                                             cancel, self.studio.sinks)
        except StartCancelled:
            self._set_progress(None)
            self._set_run(status="stopped")
            self.note("studio", "stop", f"run {run} stopped while it started, before its first batch")
            return
        except Exception as e:  # noqa: BLE001 - shown to every viewer, the studio carries on
            err = error_json(e)
            self._set_progress(None)
            self._set_run(status="failed", error=err)
            self.note(actor, "run", f"run {run} could not start", err)
            return
        finally:
            self._cancel_start = None
        self.handle = handle
        self._set_control(await asyncio.to_thread(handle.status))
        if cancel.is_set():  # Stop was pressed as the start ended
            await self._release("studio")
            return
        self._set_run(status="running")
        self._watch_task = loop.create_task(self._watch())

    async def stop_run(self, actor: str) -> None:
        """Stop the run now: while it starts, before its first batch; while a batch runs, its
        running step is cancelled (the batch is not committed and the next run does it again)."""
        cancel = self._cancel_start
        if self.run.status == "starting" and cancel is not None:
            cancel.set()
            self._set_run(status="stopping")
            self.note(actor, "stop", f"stopping run {self.run.run} while it starts "
                      f"({(self.progress or {}).get('text') or 'starting'})")
            return
        async with self._actions:
            if self.handle is None or self.run.status != "running":
                raise UsageError("the query is not running", code="NOT_RUNNING", params={"status": self.run.status})
            self._set_run(status="stopping")
            self.note(actor, "stop", f"stopping run {self.run.run}" + (
                f" (cancelling batch {self.progress['batch']}: it runs again on the next run)"
                if self.progress and self.progress.get("phase") == "batch" else ""))
            await self._release(actor)

    async def _release(self, actor: str, error: dict[str, Any] | None = None) -> None:
        handle, self.handle = self.handle, None
        late = await asyncio.to_thread(handle.stop) if handle is not None else None
        if self._watch_task is not None:
            self._watch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch_task
        await self._collect()
        self._set_control(None)
        self._set_progress(None)
        self.waiting = {}
        self.publish({"type": "waiting", "waiting": {}})
        if error is None and late is not None:
            error = error_json(late)
        self._set_run(status="failed" if error else "stopped", error=error)
        if error is None:
            self.note(actor, "stop", f"run {self.run.run} stopped after batch {self.run.last_batch}")

    # -- control: the running query's controller, shared by every viewer -------------------------
    async def control_action(self, actor: str, action: str, **args: Any) -> Any:
        """Take a control action on the running query (in a worker thread; coded errors raise
        and are logged), then send the controller's status to every viewer."""
        assert action in ACTIONS, action
        handle = self.handle
        if handle is None or self.run.status != "running":
            raise UsageError("the query is not running", code="NOT_RUNNING", params={"status": self.run.status},
                             hint="run it first; control acts on a running query")
        if action == "pause":
            self._pause_asked = True
        try:
            result = await asyncio.to_thread(handle.act, action, **args)
        except StreamfoldError as e:
            self._pause_asked = False
            what = f": {' '.join(args['sql'].split())[:200]}" if action == "inspect" else ""
            self.note(actor, action.replace("_", " "), f"{action.replace('_', ' ')} was refused{what}", error_json(e))
            raise
        if action == "inspect":
            self.note(actor, "inspect", f"inspected batch {result['batch']}: {' '.join(args['sql'].split())[:200]}")
            return result
        if self.handle is handle:
            self._set_control(await asyncio.to_thread(handle.status))
        self.note(actor, action.replace("_", " "), _described(action, args, result))
        return result

    def _set_progress(self, progress: dict[str, Any] | None) -> None:
        if progress is not None and self.handle is None and self.run.status not in ("starting", "stopping"):
            return  # a late report of a run that ended
        self.progress = progress
        self.publish({"type": "progress", "progress": progress})

    def _set_control(self, status: dict[str, Any] | None) -> None:
        self.control = status
        self.publish({"type": "control", "control": status})

    def _control_changed(self, status: dict[str, Any], events: list[dict[str, Any]]) -> None:
        """The controller's events since the last report (the loop's thread): what the query did
        on its own goes to the log; a reconfiguration that applied changes the run's text."""
        if self.handle is None:
            return
        for e in events:
            kind = e["type"]
            if kind == "breakpoint":
                self.note("streamfold", "breakpoint", f"breakpoint {e['breakpoint']['id']} hit at batch {e['batch']}: "
                          f"{e['row_count']} row(s) met {e['breakpoint']['description']}; "
                          "paused before its commit")
            elif kind == "state" and e["state"] == "paused":
                where = status.get("pause") or {}
                if self._pause_asked or where.get("reason") == "breakpoint":  # logged by its actor, or as the hit
                    self._pause_asked = False
                    continue
                self.note("streamfold", "paused", f"{_paused_where(status)} (reason: {where.get('reason')})")
            elif kind == "reconfigured":
                self.note("streamfold", "reconfigured", f"query version {e['version']} ({e['semantics']}) applied at "
                          f"batch {e['batch']}: kept {', '.join(e['kept_states']) or 'no state'}, "
                          f"built {', '.join(e['rebuilt_states']) or 'no state'}")
                self._set_run(sql=e["sql"])
            elif kind == "reconfigure failed":
                self.note("streamfold", "reconfigure", f"query version {e['version']} did not apply at batch {e['batch']}",
                          {"code": e["code"], "message": e["error"], "hint": None, "params": {}, "cause": None})
            elif kind == "error":
                self.note("streamfold", "error", e["message"], {"code": "CONTROL_ERROR", "message": e["message"],
                                                                "hint": None, "params": {}, "cause": None})
        self._set_control(status)

    async def _failed(self, e: BaseException) -> None:
        async with self._actions:
            if self.handle is None:
                return
            err = error_json(e)
            self.note("streamfold", "error", f"run {self.run.run} failed", err)
            await self._release("streamfold", err)

    async def _watch(self) -> None:
        looks = 0
        while True:
            await self._collect()
            if looks % WAITING_EVERY == 0 and self.handle is not None:
                waiting = await asyncio.to_thread(self.handle.waiting)
                if waiting != self.waiting:
                    self.waiting = waiting
                    self.publish({"type": "waiting", "waiting": waiting})
            looks += 1
            await asyncio.sleep(WATCH_SECONDS)

    async def _collect(self) -> None:
        """Send every batch committed since the last look: its commit and its changed rows."""
        results = self.results
        if results is None or not os.path.isdir(results.output):
            return
        last = self.timeline[-1]["batch"] if self.timeline else -1
        for commit in await asyncio.to_thread(commits_after, results.output, last):
            changes = await asyncio.to_thread(results.changes, commit["batch"])
            self.timeline = (self.timeline + [commit])[-TIMELINE_KEPT:]
            self.run.last_batch = commit["batch"]
            self.publish({"type": "batch", "commit": commit, "changes": changes})

    async def close(self) -> None:
        async with self._actions:
            if self.handle is not None:
                await self._release("studio")
        await self.save()


def _described(action: str, args: dict[str, Any], result: Any) -> str:
    """A control action as the log shows it."""
    if action == "pause":
        return _paused_where(result)
    if action == "resume":
        return "resumed"
    if action == "skip":
        return "skipped the breakpoint's files (quarantined) and ran the batch again without them"
    if action == "add_breakpoint":
        return f"added breakpoint {result['id']}: {result['description']}"
    if action == "remove_breakpoint":
        return f"removed breakpoint {result['id']}"
    return (f"reconfigured to query version {result['version']} ({args.get('semantics') or 'restate'}), "
            f"{result['applies']}")


def _paused_where(status: dict[str, Any]) -> str:
    """Where a paused query is: after its last committed batch, or inside the batch it runs."""
    where = status.get("pause") or {}
    step = where.get("step") or "between batches"
    if step == "between batches":
        return f"paused after batch {status.get('last_committed')}, between batches"
    return f"paused in batch {where.get('batch')} (not committed), {step}"


def error_json(e: BaseException) -> dict[str, Any]:
    if isinstance(e, StreamfoldError):
        cause = e.__cause__
        return {"code": e.code, "message": e.message, "hint": e.hint, "params": e.params,
                "cause": f"{type(cause).__name__}: {cause}" if cause is not None else None}
    return {"code": "RUN_FAILED", "message": f"{type(e).__name__}: {e}", "hint": None, "params": {}, "cause": None}
