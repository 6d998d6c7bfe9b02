"""The seam between the batch loop and whoever controls a running query (:mod:`streamfold.control`).

The engine and its :class:`~streamfold.runtime.query.Query` call a :class:`BatchControl` at a few
fixed points of every batch, and nowhere else::

    wait_if_paused / boundary / done   between batches (the Query's loop): hold the query while it
                                       is paused; swap the plan (``Engine.install``) before a batch
    guard(batch, step, work)           around each step's Spark work — reading the batch, each Δstate
                                       with its merge, writing the answer, compaction: a pause waits
                                       before it; a pause that comes while it runs may cancel its
                                       Spark jobs, and then the step runs again after the resume
    step(batch, name)                  voluntary points inside a step (a loop's rounds)
    before_commit(pending)             after the batch's outputs are written, before its commit
                                       record: breakpoints; may wait; returns fields for the record
    committed(batch, record)           after the commit record is written

A step's work never changes anything the next batch reads until the commit (states are replaced
after it), so stopping a batch at any of these points — or cancelling a step and running it again
— leaves nothing half-committed. Without control, :class:`NoControl` passes through.

Control flow that is not an error travels as :class:`ControlFlow` (a ``BaseException``, so the
engine's ``except Exception`` that names failing steps never swallows it): :class:`RedoBatch`
drops the batch's work so far and runs it again from its start; :class:`QueryStopped` unwinds a
query stopped while it waits.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ..plan.model import IncrementalPlan

T = TypeVar("T")


class ControlFlow(BaseException):  # noqa: N818 - not an error: how a controller steers the batch loop
    """Raised by a controller to steer the batch loop; never a failure."""


class RedoBatch(ControlFlow):
    """Drop the batch's work so far (nothing of it is committed) and run it again from its start:
    with ``inputs`` instead of its files when given (files moved aside), after ``before`` when
    given (a reconfiguration applied first)."""

    def __init__(self, inputs: dict[str, list[str]] | None = None,
                 before: Callable[[], None] | None = None, reason: str = "") -> None:
        super().__init__(reason)
        self.inputs = inputs
        self.before = before
        self.reason = reason


class QueryStopped(ControlFlow):
    """The query was stopped while it waited at a pause point."""


class Boundary(Enum):
    """What the controller says at the boundary before a batch."""

    HOLD = "hold"  # paused (or stopping): run nothing now
    RUN = "run"  # run a batch if files arrived
    RUN_EVEN_IF_EMPTY = "run even if empty"  # a reconfiguration makes a batch without new files


@dataclass
class Pending:
    """A batch whose outputs are written and whose commit record is not: what breakpoints and
    inspection read before it is committed. The state relations are valid until the commit."""

    batch: int
    inputs: dict[str, list[str]]
    rows: dict[str, int]
    snapshot_path: str
    changes_path: str
    state: Callable[[str], DataFrame]  # a state's rows after the batch
    touched: Callable[[str], DataFrame]  # a state's rows after the batch, of the keys it touched
    states: tuple[str, ...]


class BatchControl(Protocol):
    def plan_at(self, batch: int) -> IncrementalPlan | None:
        """The plan in effect after committed batch ``batch`` if a reconfiguration changed the
        query (None: the plan the run was started with)."""

    def wait_if_paused(self) -> bool:
        """Block while the query is paused between batches; True if it waited."""

    def boundary(self, batch: int) -> Boundary:
        """Before a poll for batch ``batch``: whether to run it now (may install a new plan first)."""

    def started(self, batch: int) -> None:
        """The poll found batch ``batch``'s inputs: it runs now (a poll that finds none is not a
        batch in progress)."""

    def done(self) -> None:
        """After the poll and the batch, if any, that :meth:`boundary` allowed."""

    def guard(self, batch: int, step: str, work: Callable[[], T]) -> T:
        """Run one step's Spark work at a pause point (see the module docstring)."""

    def step(self, batch: int, step: str) -> None:
        """A voluntary pause point inside a step."""

    def before_commit(self, pending: Pending) -> dict[str, Any]:
        """Breakpoints and the last pause point of a batch; extra fields for its commit record."""

    def committed(self, batch: int, record: dict[str, Any]) -> None:
        """The batch's commit record is durable."""

    def idle(self, seconds: float, stop: threading.Event) -> None:
        """Between two polls: wait ``seconds``, or less — until the query stops, an action that
        applies at the next boundary (a reconfiguration) is asked for, or :meth:`wake`."""

    def wake(self) -> None:
        """A file landed in a source directory (:mod:`.watch`): end the wait of :meth:`idle`."""

    def close(self) -> None:
        """The query stops: release whatever waits (it unwinds with :class:`QueryStopped`)."""


class PollWait:
    """The wait between two polls, which :meth:`wake` ends early (a file landed: :mod:`.watch`; an
    action for the next boundary; the query stopping). Shared by :class:`NoControl` and the
    controller."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def idle(self, seconds: float, stop: threading.Event) -> None:
        if not stop.is_set():  # a stop closes the hooks, which wakes this too
            self._event.wait(seconds)
        self._event.clear()

    def wake(self) -> None:
        self._event.set()


class NoControl:
    """The batch loop without a controller: every point passes through."""

    def __init__(self) -> None:
        self._poll = PollWait()

    def plan_at(self, batch: int) -> IncrementalPlan | None:
        return None

    def wait_if_paused(self) -> bool:
        return False

    def boundary(self, batch: int) -> Boundary:
        return Boundary.RUN

    def started(self, batch: int) -> None:
        pass

    def done(self) -> None:
        pass

    def guard(self, batch: int, step: str, work: Callable[[], T]) -> T:
        return work()

    def step(self, batch: int, step: str) -> None:
        pass

    def before_commit(self, pending: Pending) -> dict[str, Any]:
        return {}

    def committed(self, batch: int, record: dict[str, Any]) -> None:
        pass

    def idle(self, seconds: float, stop: threading.Event) -> None:
        self._poll.idle(seconds, stop)

    def wake(self) -> None:
        self._poll.wake()

    def close(self) -> None:
        self._poll.wake()
