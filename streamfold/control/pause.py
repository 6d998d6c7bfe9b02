"""Pausing a running query: voluntary suspension at predetermined points (seed 002 §2.2), and
cancellation of a step that runs long.

The points are the engine's (:mod:`streamfold.runtime.hooks`): before each step's Spark work, at
a loop's rounds, before the commit, between batches. After a pause request, every thread of the
query that reaches a point waits there until the resume — without busy-waiting, as Texera's
workers block on their control channel.

A step may run one Spark job for a minute (batch 0 over a large history). If a thread has not
reached a point ``grace`` seconds after the request, the jobs of every step still working are
cancelled — each guarded step runs with a Spark job tag of the query's own, so only its jobs are —
and the step raises, waits at its point, and runs again from its start after the resume. A step
changes nothing the next batch reads (states are replaced only after the batch's commit), so
running it again is exact. Jobs may start just after a cancellation; it is repeated every
``CANCEL_EVERY`` seconds until every thread waits.

The query is *paused* when a pause is requested and none of its threads is working: each waits at
a point, or the query is between batches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from ..runtime.hooks import ControlFlow, QueryStopped

T = TypeVar("T")

GRACE_S = 0.1  # how long a pause waits for a voluntary point before cancelling the running jobs
CANCEL_EVERY = 0.05  # then, how often the cancellation is repeated until every thread waits
HALT_CANCELLING_S = 5.0  # how long a halt repeats its cancellation before leaving the step to end


@dataclass
class Where:
    """Where the query is: the batch it is running (or the next one), the step, and whether a
    batch is in progress."""

    batch: int
    step: str | None
    in_batch: bool


class Gate:
    """The pause state of one query, shared by its threads and the control actions."""

    def __init__(self, cancel: Callable[[], None], tag: Callable[[bool], None], grace: float = GRACE_S,
                 on_change: Callable[[], None] | None = None) -> None:
        self._cancel = cancel  # cancel the jobs of the query's guarded steps
        self._tag = tag  # tag (True) or untag (False) the calling thread's Spark jobs
        self.grace = grace
        self._on_change = on_change or (lambda: None)
        self._cond = threading.Condition()
        self._local = threading.local()
        self.requested_at: float | None = None  # monotonic time of the pending pause request
        self.reason = ""
        self.where = Where(0, None, False)
        self.waiting_at: Where | None = None  # the first point a thread waits at, while paused
        self.paused_at: float | None = None
        self.latency: float | None = None  # request → paused, of the last pause
        self.cancellations = 0  # steps cancelled (to run again) during this pause
        self._parked = 0
        self._working = 0
        self._active = False  # a batch (or a reconfiguration) is in progress
        self._epoch = 0  # bumped at each cancellation: a step that fails after it ran again
        self._closed = False

    # -- state -----------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def paused(self) -> bool:
        with self._cond:
            return self._is_paused()

    def _is_paused(self) -> bool:
        return self.requested_at is not None and self._working == 0 and (self._parked > 0 or not self._active)

    def _changed(self) -> None:
        """Called with the lock held after any change: note the moment the query became paused."""
        if self._is_paused() and self.paused_at is None:
            self.paused_at = time.monotonic()
            assert self.requested_at is not None
            self.latency = self.paused_at - self.requested_at
        self._cond.notify_all()
        self._on_change()

    def request(self, reason: str) -> bool:
        """Ask for a pause; False if one is pending already."""
        with self._cond:
            if self._closed or self.requested_at is not None:
                return False
            self.requested_at, self.reason = time.monotonic(), reason
            self.paused_at, self.latency, self.cancellations = None, None, 0
            self._changed()
        threading.Thread(target=self._canceller, name="streamfold-pause", daemon=True).start()
        return True

    def release(self) -> bool:
        """Resume; False if no pause was pending."""
        with self._cond:
            if self.requested_at is None:
                return False
            self.requested_at, self.paused_at, self.waiting_at = None, None, None
            self._changed()
            return True

    def wait_paused(self, timeout: float) -> bool:
        """Wait until the query is paused (or the request is withdrawn); True if paused."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.requested_at is not None and not self._is_paused() and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            return self._is_paused()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._changed()

    def halt(self) -> None:
        """Close now: the running steps' jobs are cancelled as a pause cancels them, and their
        threads, back at their points, see the query stopped. The batch is not committed; the
        next run does it again."""
        deadline = time.monotonic() + HALT_CANCELLING_S
        with self._cond:
            self._closed = True
            self._changed()
            while self._working > 0 and time.monotonic() < deadline:  # a job may start just after
                self._cancel_round()

    # -- the engine's points ---------------------------------------------------------------------
    def batch(self, active: bool, batch: int) -> None:
        """A batch starts (``active``) or the query goes back between batches."""
        with self._cond:
            self._active = active
            self.where = Where(batch, None, active)
            self._changed()

    def at(self, batch: int, step: str | None) -> None:
        with self._cond:
            self.where = Where(batch, step, self._active)
        self._on_change()

    def park(self, batch: int, step: str | None) -> bool:
        """Wait here while a pause is requested; True if it waited. Raises QueryStopped if the
        query is stopped meanwhile."""
        inside = getattr(self._local, "depth", 0) > 0
        with self._cond:
            if self._closed:
                raise QueryStopped()
            if self.requested_at is None:
                return False
            self._parked += 1
            if inside:
                self._working -= 1
            if self.waiting_at is None:
                self.waiting_at = Where(batch, step, self._active)
            self._changed()
            try:
                while self.requested_at is not None and not self._closed:
                    self._cond.wait()
            finally:
                self._parked -= 1
                if inside:
                    self._working += 1
                self._changed()
            if self._closed:
                raise QueryStopped()
            return True

    def guard(self, batch: int, step: str, work: Callable[[], T],
              after_wait: Callable[[], None] | None = None) -> T:
        """Run ``work`` at a pause point; if a pause cancels its jobs, wait and run it again.
        ``after_wait`` is called after a wait (it may redirect the batch)."""
        while True:
            if self.park(batch, step) and after_wait is not None:
                after_wait()
            self.at(batch, step)
            depth = getattr(self._local, "depth", 0)
            with self._cond:
                self._working += 1
                epoch = self._epoch
            self._local.depth = depth + 1
            if depth == 0:
                self._tag(True)
            try:
                return work()
            except ControlFlow:
                raise
            except BaseException:
                with self._cond:
                    cancelled = self._epoch != epoch
                    if cancelled:
                        self.cancellations += 1
                if not cancelled:
                    raise
                # cancelled by a pause: wait at this point, then run the step again
            finally:
                if depth == 0:
                    self._tag(False)
                self._local.depth = depth
                with self._cond:
                    self._working -= 1
                    self._changed()

    # -- cancellation ----------------------------------------------------------------------------
    def _canceller(self) -> None:
        with self._cond:
            started = self.requested_at
            deadline = time.monotonic() + self.grace
            while self._pending(started) and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            while self._pending(started):
                self._cancel_round()

    def _cancel_round(self) -> None:
        """Cancel the running step's Spark jobs once, the lock released meanwhile (the step ends
        through it), then wait a little for the next look. Called with the lock held."""
        self._epoch += 1
        self._cond.release()
        try:
            self._cancel()
        finally:
            self._cond.acquire()
        self._cond.wait(CANCEL_EVERY)

    def _pending(self, started: float | None) -> bool:
        return self.requested_at == started and not self._closed and not self._is_paused()
