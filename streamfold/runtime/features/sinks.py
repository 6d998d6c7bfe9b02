"""After a commit: each sink receives the committed batches it does not hold yet, in order.

Streamfold's own output is the source of truth. A batch is committed first (``commits/<batch>.json``);
only then does a sink show it, read back from ``snapshots/`` and ``changes/``
(:class:`streamfold.connectors.committed.CommittedBatch`) or handed over as written. Each sink remembers the last batch it
holds, in the same atomic write as the rows (a PostgreSQL progress row in the batch's transaction,
Delta's application transaction id; a hook's record once it returns), so delivering is
"every committed batch after the sink's last, in order": a restart, an outage, a kill between the
commit and the sink's write all end with the sink catching up, never applying a batch twice.

A two-phase sink (PostgreSQL, Delta) does the batch's work beside the engine's commit: as soon
as the batch's answer is on the driver (a small batch's, before it is written) or once it is
written, :meth:`Sinks.prepare` applies it in a thread — in the sink's open transaction, or as
files no Delta log names yet — and after the commit :meth:`Sinks.deliver` only commits that
transaction or log entry. The sink's rows become visible after the output's commit either way.

A sink that fails while the run goes on (its server down, a disk full) delays delivery, never a
commit: the coded error is logged with its hint, the sink is retried after the next commit, and
each batch's line reports how many batches it lags. What is wrong from the start (a wrong
password, a table with other columns, a sink ahead of the output) stops the run before its first
batch, with a coded error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from ...connectors.committed import AnswerShape, CommittedBatch, Prepared
from ...connectors.sinks import open_sink
from ...errors import SinkError, StreamfoldError, UsageError
from ...plan.answer_key import answer_key
from ..checkpoint import batch_name, fingerprint

if TYPE_CHECKING:
    import pyarrow as pa

    from ...connectors import SinkConnector
    from ...plan.model import IncrementalPlan
    from ..context import RunContext

log = logging.getLogger("streamfold")


def query_id(ctx: RunContext) -> str:
    """The identity progress is recorded under in a sink: the query and where its output is."""
    return fingerprint({"sql": ctx.config.sql.strip(), "output": ctx.output.root})[:16]


class Sinks:
    """The run's sinks, opened, each with the last batch it holds."""

    def __init__(self, ctx: RunContext, plan: IncrementalPlan, columns: list[tuple[str, str]],
                 last_committed: int) -> None:
        self.ctx = ctx
        self.shape = AnswerShape(tuple(columns), answer_key(plan), query_id(ctx))
        self.sinks: list[SinkConnector] = []
        self.held: dict[str, int] = {}
        self.unsure: set[str] = set()  # failed: may or may not hold the batch it was given
        self._worker: ThreadPoolExecutor | None = None
        self._prepared: tuple[int, Future[dict[str, Prepared | BaseException]]] | None = None
        try:
            for i, spec in enumerate(ctx.config.sinks):
                sink = open_sink(spec, i, self.shape, ctx.spark, f"{ctx.checkpoint.root}/sinks")
                self.sinks.append(sink)
                held = sink.applied()
                if held > last_committed:
                    raise SinkError(
                        f"sink {sink.name} holds batch {held}, but the output's last commit is {last_committed}",
                        code="SINK_AHEAD", params={"sink": sink.name, "held": held, "committed": last_committed},
                        hint="the sink was written by an earlier run of this query into an output that is gone: "
                             "drop its tables (and its progress row) or name another")
                self.held[sink.name] = held
        except BaseException:
            self.close()
            raise

    def early(self, batch: int) -> Callable[[pa.Table, pa.Table], None] | None:
        """Where the batch's snapshot and changes go when they reach the driver before they are
        written (a small batch's outputs): :meth:`prepare` with them in hand, or None without a
        two-phase sink to start."""
        if not self._ready(batch):
            return None
        return lambda snapshot, changes: self.prepare(batch, (snapshot, changes))

    def _ready(self, batch: int) -> list[SinkConnector]:
        """The two-phase sinks that can take ``batch`` now: they hold the batch before it."""
        return [s for s in self.sinks if hasattr(s, "prepare") and s.name not in self.unsure
                and self.held[s.name] == batch - 1]

    def prepare(self, batch: int, answer: tuple[pa.Table, pa.Table] | None = None) -> None:
        """Start applying ``batch`` — computed, not yet committed — to each two-phase sink that
        holds the batch before it, in a thread beside the rest of the batch; :meth:`deliver`
        commits what it prepared once streamfold's commit is on disk, :meth:`abandon` drops it.
        The sink's transaction is open meanwhile and becomes visible only after the output's
        commit, so a sink is never ahead of the output (a kill in between: the server rolls it
        back). Started once per batch: as soon as its snapshot and changes are on the driver
        (``answer``, through :meth:`early`), else once they are written (read back)."""
        if self._prepared is not None and self._prepared[0] == batch:
            if answer is None:
                return
            self.abandon()  # the step ran again (a pause cancelled it): its answer anew
        ready = self._ready(batch)
        if not ready:
            return
        if self._worker is None:
            self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="streamfold-sinks")
        committed = self._committed(batch, answer)

        def run() -> dict[str, Prepared | BaseException]:
            done: dict[str, Prepared | BaseException] = {}
            for sink in ready:
                try:
                    done[sink.name] = sink.prepare(committed)  # type: ignore[attr-defined]
                except Exception as e:  # noqa: BLE001 - reported by deliver, which retries the batch
                    done[sink.name] = e
            return done

        self._prepared = (batch, self._worker.submit(run))

    def abandon(self) -> None:
        """The batch :meth:`prepare` started was not committed: its sinks' transactions dropped."""
        pending, self._prepared = self._prepared, None
        if pending is not None:
            for staged in pending[1].result().values():
                if isinstance(staged, Prepared):
                    staged.abort()

    def _committed(self, batch: int, answer: tuple[pa.Table, pa.Table] | None = None) -> CommittedBatch:
        return CommittedBatch(batch, self.ctx.output.snapshot_path(batch), self.ctx.output.changes_path(batch),
                              self.shape, answer)

    def _finish_prepared(self, upto: int) -> None:
        """Commit what :meth:`prepare` applied of a batch now committed (a failure: the sink is
        retried as any failed sink is)."""
        pending, self._prepared = self._prepared, None
        if pending is None:
            return
        batch, future = pending
        for name, staged in future.result().items():
            if isinstance(staged, BaseException):  # rolled back: written again below, as any batch
                log.debug("sink %s could not prepare batch %d: %s", name, batch, staged)
                continue
            if batch > upto:
                staged.abort()
                continue
            try:
                staged.commit()
                self.held[name] = batch
            except StreamfoldError as e:  # it may or may not hold the batch now: asked before the next
                self.unsure.add(name)
                log.warning("%s (retried after the next commit)", e)

    def deliver(self, upto: int) -> dict[str, int]:
        """Every committed batch up to ``upto`` each sink lacks, in order; how many each lags after."""
        self._finish_prepared(upto)
        for sink in self.sinks:
            try:
                if sink.name in self.unsure:
                    self.held[sink.name] = sink.applied()
                    self.unsure.discard(sink.name)
                held = self.held[sink.name]
                for batch in range(held + 1, upto + 1):
                    self.ctx.progress(f"batch {batch_name(batch)}: delivering to {sink.name}")
                    sink.write(self._committed(batch))
                    self.held[sink.name] = batch
            except StreamfoldError as e:
                self.unsure.add(sink.name)
                log.warning("%s (retried after the next commit)", e)
        return self.lags(upto)

    def check_answer(self, columns: list[tuple[str, str]], key: tuple[str, ...] | None) -> None:
        """A reconfiguration's new answer must fit the tables the sinks keep: the same columns,
        types and key (a hook takes any answer). A coded error, before anything changes, if not."""
        tables = [s.name for s, spec in zip(self.sinks, self.ctx.config.sinks) if not callable(spec)]
        if not tables or (tuple(columns) == self.shape.columns and key == self.shape.key):
            return
        def shown(cols: tuple[tuple[str, str], ...] | list[tuple[str, str]], k: tuple[str, ...] | None) -> str:
            return ", ".join(f"{c} {t}" for c, t in cols) + (" (a multiset)" if k is None else f" (key: {', '.join(k) or 'none'})")

        raise UsageError(
            f"the new query's answer ({shown(columns, key)}) does not fit the sinks' tables "
            f"({shown(self.shape.columns, self.shape.key)})", code="RECONFIGURE_SINK_ANSWER",
            params={"sinks": tables, "columns": [f"{c} {t}" for c, t in columns]},
            hint="keep the answer's columns, types and grouping key; to change them, stop the run and start the "
                 "new query with sinks that name new tables")

    def lags(self, upto: int) -> dict[str, int]:
        """How many committed batches each sink does not hold (as far as it is known)."""
        return {s.name: upto - self.held[s.name] for s in self.sinks}

    def needed(self) -> int | None:
        """The first batch some sink has not received (its snapshot must outlive pruning), or None."""
        return min((h + 1 for h in self.held.values()), default=None)

    def status(self) -> list[dict[str, object]]:
        """Each sink, the last batch it holds and whether it failed since (the controller's status)."""
        return [{"sink": s.name, "delivered": self.held[s.name], "failing": s.name in self.unsure}
                for s in self.sinks]

    def close(self) -> None:
        try:
            self.abandon()
        except Exception as e:  # noqa: BLE001 - closing is best effort
            log.debug("abandoning prepared sink writes: %s", e)
        if self._worker is not None:
            self._worker.shutdown(wait=True)
            self._worker = None
        for sink in self.sinks:
            try:
                sink.close()
            except Exception as e:  # noqa: BLE001 - closing is best effort
                log.debug("closing sink %s: %s", sink.name, e)
