"""The controller of one running query: the engine's :class:`~streamfold.runtime.hooks.BatchControl`,
and the actions a user takes on the query.

The endpoint, ``streamfold control`` and the Python API all call the same methods here (status,
pause, resume, skip, breakpoints, inspect, reconfigure, history, events), from their own threads;
the engine's thread meets the controller only at the seam's points. Every action that changes
the run is appended to the control log (:mod:`.log`) before it takes effect, with the batch it
applies to, and a restart replays the log at the same points:

* a query paused when it died comes back paused (between batches, before the batch it was in);
* a breakpoint hit it was stopped at is hit again by the same batch over the same files; one it
  was resumed from is not stopped at again; files skipped stay skipped;
* a reconfiguration applies at the batch it applied at (or, if it had not applied yet, at the
  first batch), so every batch is answered under the query version it was committed under.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import ControlError, StreamfoldError, UsageError
from ..runtime.checkpoint import batch_name
from ..runtime.hooks import Boundary, ControlFlow, Pending, PollWait, RedoBatch
from ..runtime.inputs import first_line
from . import inspect as inspection
from .breakpoints import KINDS, Breakpoint, Hit, check_condition, evaluate, parse_condition, target_schema
from .events import Events
from .log import ControlLog, Version, replay
from .pause import GRACE_S, Gate
from .reconfigure import Prepared, normalize_semantics, prepare

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ..plan.model import IncrementalPlan
    from ..runtime.config import QueryConfig
    from ..runtime.engine import Engine

T = TypeVar("T")


class Controller:
    """``compile`` turns a query text into its plan over the run's inputs (coded errors if it
    cannot be): the engine receives plans, and a reconfiguration brings a new text."""

    def __init__(self, config: QueryConfig, compile: Callable[[str], IncrementalPlan],  # noqa: A002
                 grace: float = GRACE_S) -> None:
        self.config = config
        self.compile = compile
        self.log = ControlLog(os.path.join(config.checkpoint_dir, "control.log"))
        self.replayed = replay(self.log.records())
        self.events = Events()
        self.gate = Gate(self._cancel, self._tag, grace, on_change=self._gate_changed)
        self.engine: Engine | None = None
        self.breakpoints = {i: Breakpoint.from_record(r) for i, r in self.replayed.breakpoints.items()}
        self.version = Version(1, config.sql, "restate", 0)
        self.mixed: frozenset[str] = frozenset()
        self.hit: Hit | None = None
        self.error: str | None = None
        self._lock = threading.RLock()
        self._tag_name = f"streamfold-{uuid.uuid4().hex[:12]}"
        self._resumed_hits = set(self.replayed.resumed_hits)
        self._next_breakpoint = self.replayed.next_breakpoint
        self._next_version = self.replayed.next_version
        self._request: tuple[int, str, str, Prepared | None] | None = None  # received, not yet applied
        self._replaying: list[Version] = []  # applied before a restart at the batch it redoes
        self._installed: dict[str, Any] | None = None  # applied at the batch in progress
        self._installing = False
        self._previous: tuple[Version, frozenset[str]] | None = None
        self._skip: dict[str, list[str]] | None = None
        self._pending: Pending | None = None
        self._committed_through = -1  # the last batch committed: a pause after its commit redoes nothing
        self._state = ""
        self._scratch: Any = None
        self._poll = PollWait()  # woken when an action should not wait for the next poll

    # -- set-up ----------------------------------------------------------------------------------
    def attach(self, engine: Engine) -> None:
        """Bind to the engine (made with this controller) and resume what the log says."""
        self.engine = engine
        last = engine.recovery.last_committed
        self._committed_through = last
        current = self.replayed.query_at(last)
        if current is not None:
            self.version, self.mixed = current, frozenset(current.mixed)
        self._replaying = self.replayed.applied_at(last + 1)
        if self.replayed.received:
            r = self.replayed.received[-1]
            self._request = (r["version"], r["sql"], r["semantics"], None)
        self._finish_skips(last + 1)
        self.gate.batch(False, engine.next_batch)
        self.log.append("start", batch=engine.next_batch, pid=os.getpid(), query_version=self.version.number)
        if self.replayed.paused and self.replayed.hit is None:
            self.gate.request("restored")  # the batch it stopped in runs again after the resume
        self.events.emit("start", batch=engine.next_batch, query_version=self.version.number)

    def _finish_skips(self, batch: int) -> None:
        """Files skipped at an uncommitted batch before a restart: moved aside, out of its inputs."""
        skipped = self.replayed.skipped.get(batch)
        engine = self.engine
        if not skipped or engine is None:
            return
        for source, names in skipped.items():
            self._quarantine(source, names, "skipped at a breakpoint before a restart")
        pending = engine.recovery.pending
        if pending is not None:
            engine.recovery.pending = {s: [n for n in ns if n not in skipped.get(s, [])] for s, ns in pending.items()}

    def _quarantine(self, source: str, names: list[str], why: str) -> None:
        engine = self._engine()
        spec = engine.specs[source.lower()]
        target = os.path.join(engine.output.root, "quarantine", source)
        os.makedirs(target, exist_ok=True)
        for n in names:
            path = os.path.join(spec.path, n)
            if os.path.exists(path):
                shutil.move(path, os.path.join(target, n))
                with open(os.path.join(target, n + ".error.txt"), "w", encoding="utf-8") as fh:
                    fh.write(why + "\n")

    def _engine(self) -> Engine:
        if self.engine is None:
            raise ControlError("the query has not started yet", code="NOT_RUNNING", status=409)
        return self.engine

    # -- the seam (the query's threads) ----------------------------------------------------------
    def plan_at(self, batch: int) -> IncrementalPlan | None:
        found = self.replayed.query_at(batch)
        return self.compile(found.sql) if found is not None else None

    def wait_if_paused(self) -> bool:
        engine = self._engine()
        return self.gate.park(engine.next_batch, None)

    def boundary(self, batch: int) -> Boundary:
        if self.gate.requested_at is not None:
            return Boundary.HOLD
        self.gate.batch(False, batch)  # in progress once the poll finds its inputs (started)
        with self._lock:
            replaying, self._replaying = self._replaying, []
            request, self._request = self._request, None
        for v in replaying:  # logged as applied at this batch before a restart
            self._apply(v.number, v.sql, v.semantics, None, batch, logged=True)
        if request is not None:
            self._apply(*request, batch)
        return Boundary.RUN_EVEN_IF_EMPTY if self._installed is not None else Boundary.RUN

    def started(self, batch: int) -> None:
        # (before, a poll that found nothing counted as a batch in progress: "after N batches"
        # added then counted one batch too many)
        self.gate.batch(True, batch)

    def done(self) -> None:
        self.gate.batch(False, self._engine().next_batch)

    def guard(self, batch: int, step: str, work: Callable[[], T]) -> T:
        return self.gate.guard(batch, step, work, after_wait=lambda: self._after_wait(batch))

    def step(self, batch: int, step: str) -> None:
        self.gate.at(batch, step)
        if self.gate.park(batch, step):
            self._after_wait(batch)

    def _after_wait(self, batch: int) -> None:
        """After a pause inside a batch: a reconfiguration received meanwhile applies to this
        batch (it runs again from its start under the new plan; nothing of it was committed).
        A pause in a step after the commit (compaction) leaves it for the next batch."""
        with self._lock:
            if (self._installing or self._request is None or self._installed is not None
                    or batch <= self._committed_through):
                return
            request, self._request = self._request, None
        raise RedoBatch(before=lambda: self._apply(*request, batch), reason="reconfigured while paused")

    def before_commit(self, pending: Pending) -> dict[str, Any]:
        batch = pending.batch
        self._pending = pending
        try:
            hit = self.gate.guard(batch, "breakpoints", lambda: self._check_breakpoints(pending),
                                  after_wait=lambda: self._after_wait(batch))
            if hit is not None:
                self.log.append("breakpoint hit", id=hit.breakpoint.id, batch=batch, rows=hit.count, files=hit.files)
                self.hit = hit
                self.events.emit("breakpoint", **hit.to_json())
                self.gate.request("breakpoint")
            if self.gate.park(batch, "before commit"):
                self._resolve_commit(pending)
        except BaseException:
            self._pending = None
            raise
        fields: dict[str, Any] = {"query_version": self.version.number}
        if self._installed is not None:
            fields["reconfigured"] = self._installed
        return fields

    def _resolve_commit(self, pending: Pending) -> None:
        """Resumed before a commit: skip files (run the batch again without them), apply a
        reconfiguration first, or commit as it is."""
        with self._lock:
            skip, self._skip = self._skip, None
        if skip:
            inputs = {s: [n for n in ns if n not in skip.get(s, [])] for s, ns in pending.inputs.items()}

            def move() -> None:
                for source, names in skip.items():
                    self._quarantine(source, names, f"skipped at a breakpoint of batch {pending.batch}")

            raise RedoBatch(inputs=inputs, before=move, reason="files skipped")
        self._after_wait(pending.batch)

    def _check_breakpoints(self, pending: Pending) -> Hit | None:
        engine = self._engine()
        for bp in list(self.breakpoints.values()):
            if (bp.id, pending.batch) in self._resumed_hits:
                continue
            try:
                hit = evaluate(engine, bp, pending, engine.output.root)
            except ControlFlow:
                raise
            except Exception as e:  # noqa: BLE001 - a condition that fails on the data stops nothing
                self.error = f"breakpoint {bp.id} could not be checked at batch {pending.batch}: {first_line(e)}"
                self.events.emit("error", message=self.error)
                continue
            if hit is not None:
                return hit
        return None

    def committed(self, batch: int, record: dict[str, Any]) -> None:
        with self._lock:
            self._pending = None
            self._committed_through = batch
            if self._installed is not None:
                self.events.emit("reconfigured", **self._installed, batch=batch)
            self._installed, self._previous = None, None
        self.events.emit("batch", batch=batch, query_version=record.get("query_version"),
                         duration_s=record.get("duration_s"), rows=record.get("rows"),
                         snapshot_rows=record.get("snapshot_rows"), change_rows=record.get("change_rows"))

    def idle(self, seconds: float, stop: threading.Event) -> None:
        """Wait for the next poll; a reconfiguration asked for meanwhile ends the wait, so it
        applies at once when no batch is running (rather than after the trigger interval)."""
        self._poll.idle(seconds, stop)

    def wake(self) -> None:
        self._poll.wake()

    def close(self) -> None:
        self.gate.close()
        self._poll.wake()
        self.events.emit("stopped")

    def halt(self) -> None:
        """Stop without waiting for the batch in progress: its running step is cancelled (the
        studio's Stop during a long batch 0); :meth:`close` follows with the query's stop."""
        if self.engine is not None:
            self.gate.halt()

    # -- Spark job tags: how a pause cancels the query's running steps ---------------------------
    # SparkContext job tags (thread-local properties, which the engine's worker threads inherit),
    # not session tags: a session tag can be interrupted only from the thread that added it.
    def _tag(self, on: bool) -> None:
        sc = self._engine().spark.sparkContext
        if on:
            sc.setInterruptOnCancel(True)  # a cancelled job's tasks stop too, freeing the cores
            sc.addJobTag(self._tag_name)
        else:
            sc.removeJobTag(self._tag_name)

    def _cancel(self) -> None:
        if self.engine is not None:
            self.engine.spark.sparkContext.cancelJobsWithTag(self._tag_name)

    def _gate_changed(self) -> None:
        state = self._state_name()
        if state != self._state:
            self._state = state
            self.events.emit("state", state=state, batch=self.gate.where.batch, step=self.gate.where.step)

    # -- reconfiguration -------------------------------------------------------------------------
    def _apply(self, version: int, sql: str, semantics: str, prepared: Prepared | None, batch: int,
               logged: bool = False) -> None:
        """Install version ``version`` of the query for ``batch`` (the engine's thread)."""
        engine = self._engine()
        started = time.monotonic()
        try:
            prepared = prepared or prepare(engine, self.compile(sql), semantics, self.mixed)
            history = self._history(prepared) if prepared.rebuild else None
        except StreamfoldError as e:
            self._failed(version, batch, e)
            return
        summary = {"version": version, "semantics": semantics, "sql": sql, **prepared.summary()}
        if not logged:
            self.log.append("reconfigure applied", version=version, batch=batch, mixed=list(prepared.mixed),
                            kept_states=summary["kept_states"], rebuilt_states=summary["rebuilt_states"])
        self._installing = True
        try:
            engine.install(prepared.plan, prepared.keep, history,
                           on_failure=lambda e: self._failed(version, batch, e, rolled_back=True))
        except ControlFlow:
            raise
        except Exception as e:  # noqa: BLE001 - the old plan is back; the failure is logged and shown
            self._failed(version, batch, e)
            return
        finally:
            self._installing = False
        with self._lock:
            self._previous = (self.version, self.mixed)
            self.version = Version(version, sql, semantics, batch, prepared.mixed)
            self.mixed = frozenset(prepared.mixed)
            self._installed = {**summary, "install_s": round(time.monotonic() - started, 4)}

    def _failed(self, version: int, batch: int, error: BaseException, rolled_back: bool = False) -> None:
        with self._lock:
            if rolled_back and self._previous is not None:
                self.version, self.mixed = self._previous
            self._installed, self._previous = None, None
        message = first_line(error) if not isinstance(error, StreamfoldError) else error.message
        code = getattr(error, "code", "RECONFIGURE_FAILED")
        self.log.append("reconfigure failed", version=version, batch=batch, code=code, error=message)
        self.error = f"reconfiguration to version {version} failed at batch {batch_name(batch)}: {message}"
        self.events.emit("reconfigure failed", version=version, batch=batch, code=code, error=message)

    def _history(self, prepared: Prepared) -> dict[str, list[str]]:
        """The files every committed batch consumed, per stream the new plan reads; all must be
        there to build its states from them."""
        engine = self._engine()
        out: dict[str, list[str]] = {}
        for s in prepared.plan.streams:
            names = sorted(frozenset(engine.consumed.get(s.name, ())))
            spec = engine.specs[s.name.lower()]
            missing = [n for n in names if not os.path.exists(os.path.join(spec.path, n))]
            if missing:
                raise ControlError(
                    f"restate needs the history of {s.name}, and {len(missing)} of its consumed files are gone "
                    f"(e.g. {missing[0]})", code="RECONFIGURE_HISTORY_MISSING",
                    params={"source": s.name, "missing": len(missing), "example": missing[0]},
                    hint="put the files back, or reconfigure from now on if the change allows it", status=409)
            out[s.name] = names
        return out

    # -- actions (any thread) --------------------------------------------------------------------
    def _state_name(self) -> str:
        g = self.gate
        if g.closed:
            return "stopped"
        if g.requested_at is not None:
            return "paused" if g.paused else "pausing"
        return "running" if g.where.in_batch else "idle"

    def status(self) -> dict[str, Any]:
        engine = self.engine
        g = self.gate
        state = self._state_name()
        out: dict[str, Any] = {
            "state": state, "batch": g.where.batch, "step": g.where.step, "in_batch": g.where.in_batch,
            "last_committed": engine.next_batch - 1 if engine is not None else None,
            "query": {"version": self.version.number, "sql": self.version.sql, "semantics": self.version.semantics,
                      "since_batch": self.version.batch},
            "pause": None, "breakpoint": self.hit.to_json() if self.hit is not None and state != "idle" else None,
            "reconfiguration": None, "breakpoints": [b.to_json() for b in self.breakpoints.values()],
            "error": self.error, "events": self.events.last,
            "sinks": engine.sinks.status() if engine is not None else [],
        }
        if g.requested_at is not None:
            at = g.waiting_at
            out["pause"] = {"reason": g.reason, "batch": at.batch if at else g.where.batch,
                            "step": (at.step if at else g.where.step) or "between batches",
                            "latency_s": None if g.latency is None else round(g.latency, 4),
                            "cancelled_steps": g.cancellations}
        with self._lock:
            if self._request is not None:
                out["reconfiguration"] = {"version": self._request[0], "semantics": self._request[2],
                                          "applies": "at the next batch boundary"}
        return out

    def pause(self, wait: bool = True, timeout: float = 30.0) -> dict[str, Any]:
        """Pause at the next point; with ``wait``, return once paused (or after ``timeout`` s)."""
        g = self.gate
        if g.requested_at is None:
            self.log.append("pause", batch=g.where.batch, step=g.where.step)
            self.events.emit("action", action="pause")
            g.request("pause")
        if wait:
            g.wait_paused(timeout)
        return self.status()

    def resume(self) -> dict[str, Any]:
        if self.gate.requested_at is None:
            raise ControlError("the query is not paused", code="NOT_PAUSED", hint="pause it first", status=409)
        self.log.append("resume", batch=self.gate.where.batch)
        self.events.emit("action", action="resume")
        if self.hit is not None:
            self._resumed_hits.add((self.hit.breakpoint.id, self.hit.batch))
        self.hit = None
        self.gate.release()
        return self.status()

    def skip(self) -> dict[str, Any]:
        """At a source breakpoint: move the files its rows came from to the quarantine and run the
        batch again without them."""
        hit = self.hit
        if hit is None or not self.gate.paused or not any(hit.files.values()):
            raise ControlError("skip applies when the query is stopped at a source breakpoint",
                               code="SKIP_NOT_APPLICABLE", status=409,
                               hint="resume commits the batch as it is; skip needs rows traced to their files")
        self.log.append("skip", batch=hit.batch, files=hit.files)
        self.events.emit("action", action="skip", files=hit.files)
        with self._lock:
            self._skip = {s: list(ns) for s, ns in hit.files.items()}
        self.hit = None
        self.gate.release()
        return self.status()

    def add_breakpoint(self, kind: str, target: str | None = None, condition: str | None = None,
                       after: int | None = None) -> dict[str, Any]:
        engine = self._engine()
        if kind not in KINDS:
            raise UsageError(f"unknown breakpoint kind {kind!r}", code="BREAKPOINT_BAD_KIND",
                             params={"kind": kind}, hint=f"use one of {', '.join(KINDS)}")
        batch = None
        if kind == "after":
            if after is None or after < 1:
                raise UsageError("a breakpoint after N batches needs N ≥ 1", code="BREAKPOINT_BAD_COUNT",
                                 params={"after": after})
            where = self.gate.where
            batch = (where.batch + 1 if where.in_batch else where.batch) + after - 1
            target = condition = None
        else:
            if not condition:
                raise UsageError(f"a {kind} breakpoint needs a condition", code="BREAKPOINT_BAD_CONDITION",
                                 params={"condition": condition}, hint="e.g. amount < 0")
            parse_condition(condition)
            schema = target_schema(engine, kind, target)
            if self._scratch is None:
                self._scratch = engine.spark.newSession()
            check_condition(self._scratch, condition, schema)
            if kind == "changes":
                target = None
        with self._lock:
            bp_id = f"b{self._next_breakpoint}"
            self._next_breakpoint += 1
        bp = Breakpoint(bp_id, kind, target, condition, batch)
        self.log.append("breakpoint add", **{k: v for k, v in bp.to_json().items() if k != "description"})
        self.breakpoints[bp_id] = bp
        self.events.emit("action", action="breakpoint add", breakpoint=bp.to_json())
        return bp.to_json()

    def remove_breakpoint(self, bp_id: str) -> dict[str, Any]:
        if bp_id not in self.breakpoints:
            raise ControlError(f"no breakpoint {bp_id!r}", code="BREAKPOINT_UNKNOWN", params={"id": bp_id},
                               hint=f"the breakpoints: {', '.join(self.breakpoints) or 'none'}", status=404)
        self.log.append("breakpoint remove", id=bp_id)
        bp = self.breakpoints.pop(bp_id)
        self.events.emit("action", action="breakpoint remove", id=bp_id)
        return bp.to_json()

    def list_breakpoints(self) -> list[dict[str, Any]]:
        return [b.to_json() for b in self.breakpoints.values()]

    def inspect(self, sql: str, limit: int = 100) -> dict[str, Any]:
        """Read-only SQL over the answer, the states and the last batch (see :mod:`.inspect`)."""
        engine = self._engine()
        for attempt in (0, 1):
            batch_before = engine.next_batch
            relations, batch, committed = self._relations()
            tree = inspection.parse(sql, list(relations))
            if attempt == 0:
                self.log.append("inspect", batch=batch, committed=committed, sql=sql)
            try:
                result = inspection.run(engine.spark, tree, relations, limit)
            except UsageError:
                # the states it read may have been replaced by a commit meanwhile: once more
                if attempt == 0 and engine.next_batch != batch_before:
                    continue
                raise
            return {"batch": batch, "committed": committed, **result}
        raise AssertionError("unreachable")

    def _relations(self) -> tuple[dict[str, Callable[[], DataFrame]], int, bool]:
        engine = self._engine()
        spark = engine.spark
        pending = self._pending if self.gate.paused else None
        rels: dict[str, Callable[[], DataFrame]] = {}
        if pending is not None:
            batch, committed, inputs = pending.batch, False, pending.inputs
            snapshot, changes = pending.snapshot_path, pending.changes_path
            for n in pending.states:
                rels[n] = partial(pending.state, n)
        else:
            batch, committed = engine.next_batch - 1, True
            current = dict(engine.store.current)
            for n in engine.store.durable():  # stale after a recompute batch: refused, coded
                rels[n] = (partial(engine.not_maintained, n) if engine.stale
                           else partial(engine.store.settled, n, current[n]))  # one row per key (runs.py)
            if batch < 0:
                return rels, batch, committed
            inputs = engine.output.read_commit(batch).get("inputs", {})
            snapshot, changes = engine.output.snapshot_path(batch), engine.output.changes_path(batch)
        rels["snapshot"] = lambda: spark.read.parquet(snapshot)
        rels["changes"] = lambda: spark.read.parquet(changes)
        for s in engine.plan.streams:
            names = inputs.get(s.name, [])
            spec = engine.specs[s.name.lower()]
            if names:
                paths = [os.path.join(spec.path, n) for n in names]
                rels[f"delta_{s.name}"] = partial(_rows_of, spark, spec, s, paths)
        return rels, batch, committed

    def reconfigure(self, sql: str, semantics: str | None = None, wait: bool = False,
                    timeout: float = 600.0) -> dict[str, Any]:
        """Change the query; it applies at the next batch boundary (see :mod:`.reconfigure`)."""
        engine = self._engine()
        how = normalize_semantics(semantics)
        with self._lock:
            busy = self._request is not None or self._installed is not None or self._replaying
        if busy:
            raise ControlError("a reconfiguration is already waiting to apply", code="RECONFIGURE_PENDING",
                               hint="one reconfiguration at a time: wait for its batch to commit (resume if paused)")
        prepared = prepare(engine, self.compile(sql), how, self.mixed)  # coded errors: the running query goes on
        if prepared.rebuild:
            self._history(prepared)
        with self._lock:
            version = self._next_version
            self._next_version += 1
            self.log.append("reconfigure", version=version, sql=sql, semantics=how, batch=self.gate.where.batch)
            self._request = (version, sql, how, prepared)
            self.error = None
        self.wake()  # the query may be waiting for its next poll: the boundary is now
        seen = self.events.last
        self.events.emit("action", action="reconfigure", version=version, semantics=how)
        out: dict[str, Any] = {"version": version, **prepared.summary(), "applies": "at the next batch boundary"}
        if wait:
            out["result"] = self._wait_for_version(version, seen, timeout)
        return out

    def _wait_for_version(self, version: int, seen: int, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events.after(seen, deadline - time.monotonic()):
                seen = e["seq"]
                if e["type"] in ("reconfigured", "reconfigure failed") and e.get("version") == version:
                    return e
        return {"type": "timeout", "version": version}

    def history(self) -> list[dict[str, Any]]:
        return self.log.records()


def _rows_of(spark: Any, spec: Any, source: Any, paths: list[str]) -> DataFrame:
    """A batch's rows of a stream, as it read them (with ``_weight``)."""
    from ..runtime.sources import read_files

    return read_files(spark, spec, source, paths).drop("__bad")
