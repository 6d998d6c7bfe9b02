"""The strategy of each batch: maintain the states, recompute the answer, or rebuild the states.

``--strategy incremental`` maintains the states batch by batch; ``recompute`` answers every
batch with the batch query over every file so far (``runtime/recompute.py``, in a session of
its own), after which the states are *stale*; ``auto`` lets the cost model (``runtime/strategy.py``),
calibrated from the batches it measured, choose — and rebuild stale states from the history once
recomputing has cost what a rebuild costs. Each commit records the choice (``"strategy"``) and,
under ``auto``, why (``"cost"``). See docs/strategy.md.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import StreamfoldError
from ..bundle import Bundle
from .. import shape
from ..checkpoint import batch_name
from ..context import RunContext
from ..hooks import Pending
from ..inputs import first_line
from ..installed import Installed
from ..outputs import write_recomputed
from ..rebuild import rebuild_states
from ..record import commit_record, sources_only_stats
from ..state import materialize, release
from ..strategy import WINDOW, Choice, CostModel
from ..views import Views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger("streamfold")
NOT_RECOMPUTABLE = ("this plan cannot be recomputed from scratch (an iteration, a time bound, or an IN subquery "
                    "whose NULL Spark's batch plan loses: runtime/bundle.py, recomputer_for)")


class Later(Protocol):
    """Work after a commit that gives way to a waiting file (``maintenance.PostCommit``; a
    feature module does not import another)."""

    def offer(self, batch: int, name: str, work: Callable[[], None]) -> bool: ...

    def cancel(self, name: str) -> None: ...


class Strategies:
    """The cost model, the history's rows, and whether the states are stale (not maintained
    since a recompute batch)."""

    def __init__(self, ctx: RunContext, can_recompute: bool, stale: bool) -> None:
        self.ctx = ctx
        self.cost = CostModel(ctx.config.strategy if can_recompute else "incremental")
        self.asked = ctx.config.strategy  # what the user asked for (the commits say why when not taken)
        if not can_recompute and self.asked != "incremental":
            log.warning("streamfold: --strategy %s: every batch is incremental: %s", self.asked, NOT_RECOMPUTABLE)
        self.history_rows = 0  # rows of every committed batch
        self.probe: Choice | None = None  # a recompute to measure after the batch's commit
        self.stale = stale
        self._later: Later | None = None  # where the states' floor was offered after batch 0
        # The history holds a deletion: every recompute from here on nets the streams that may
        # delete (runtime/netting.py), at several times the cost of one that reads them as they are,
        # and the model predicts it from recomputes measured so (``CostModel._measured``).
        self.deletes = False

    def choose(self, b: Bundle, batch: int, rows: Mapping[str, int], installing: bool, preparable: bool,
               inputs: Mapping[str, list[str]] | None = None) -> Choice:
        """The strategy of batch ``batch`` (its files ``inputs``, per stream; ``rows`` their rows)."""
        if inputs is not None and self.cost.mode == "auto" and not self.deletes and b.recomputer is not None:
            self.deletes = any(b.recomputer.nets(s, inputs.get(s.name, [])) for s in b.plan.streams)
        if batch == 0 and b.recomputer is not None and not installing:
            states = sum(not s.static for s in b.plan.states)
            return self.cost.first(sum(rows.values()), states, shape.ONE_TASK_ROWS, shape.PREPARED_MAX_STATES)
        if batch == 0:
            return Choice("incremental", "batch 0 builds the states")
        if installing:
            return Choice("incremental", "the first batch of a reconfigured plan")
        if b.recomputer is None:
            return Choice("incremental", NOT_RECOMPUTABLE)
        if self.stale and self.cost.mode == "auto" and self.cost.states_floor is None:
            self._measure_states(b)  # (a restart, or a file came before batch 0's commit was followed by it)
        choice = self.cost.choose(self.stale, sum(rows.values()), self.history_rows, preparable, self.deletes)
        if self.stale and choice.strategy == "incremental":  # stale states are never merged into
            return Choice("rebuild", choice.reason, choice.estimates, choice.probe)
        if not self.stale and choice.strategy == "rebuild":  # nothing to rebuild
            return Choice("incremental", choice.reason, choice.estimates, choice.probe)
        return choice

    def record(self, choice: Choice, rows: Mapping[str, int]) -> dict[str, Any]:
        """The commit's ``strategy``, its ``cost`` (why, and the estimates), the history's rows,
        and under ``auto`` whether the history holds a deletion (``history_deletes``)."""
        record: dict[str, Any] = {"strategy": choice.strategy, "history_rows": self.history_rows + sum(rows.values())}
        if self.asked != "incremental" or choice.strategy != "incremental":
            record["cost"] = choice.record()
        if self.deletes:
            record["history_deletes"] = True
        return record

    def observe(self, batch: int, choice: Choice, rows: Mapping[str, int], seconds: float, warm: bool = False) -> None:
        batch_rows = sum(rows.values())
        self.history_rows += batch_rows
        self.cost.observe(choice.strategy, batch == 0, batch_rows, self.history_rows, seconds, warm, self.deletes)
        self.probe = choice if choice.probe else None

    def resume(self, last: int) -> None:
        """The history's rows and the cost model's calibration, from the last commits."""
        output = self.ctx.output
        # The last batches, and batch 0 (a build: the per-row rate that predicts recomputes and
        # rebuilds); without it a restart after batch 2 × WINDOW left the model nothing to predict
        # a recompute with.
        window = range(max(0, last - 2 * WINDOW), last + 1)
        records = [output.read_commit(b) for b in ([0] if window.start > 0 else []) + list(window)]
        if "history_rows" in records[-1]:
            self.history_rows = int(records[-1]["history_rows"])
        else:  # written by a streamfold without strategies: every batch's rows
            self.history_rows = sum(sum(output.read_commit(b).get("rows", {}).values()) for b in range(last + 1))
        self.cost.resume(records)
        self.deletes = bool(records[-1].get("history_deletes"))
        if records[0]["batch"] == 0 and records[0].get("strategy") == "recompute":  # a small history (cost.first)
            self.cost.small = shape.ONE_TASK_ROWS

    def after_recompute(self, b: Bundle, batch: int, later: Later) -> None:
        """After a recompute batch's commit. Batch 0 recomputed a small history for a plan of many
        states (``CostModel.first``): what each state would cost a batch at least is measured now,
        off the batch's path, for batch 1's choice between recomputing and building them (which
        measures it itself when a file waiting deferred this)."""
        if batch == 0 and self.cost.mode == "auto" and self.cost.states_floor is None and self.cost.small is not None:
            self._later = later
            with self.ctx.clock.phase("the states' floor measured (cost model)"):
                later.offer(batch, "measure the states' floor", partial(self._measure_states, b))

    def _measure_states(self, b: Bundle) -> None:
        """What each of the plan's states costs a batch at least: a merge's job over one row — an
        aggregate kept as a state is, checkpointed on the executors — timed on this machine twice,
        the lesser kept."""
        if self._later is not None:
            self._later.cancel("measure the states' floor")
        states = sum(not s.static for s in b.plan.states)
        spark = self.ctx.spark
        times = []
        for _ in range(2):
            began = time.monotonic()
            release(materialize(spark.range(1).groupBy("id").count()))
            times.append(time.monotonic() - began)
        self.cost.observe_states(states, min(times))

    # -- measuring a recompute -------------------------------------------------------------------
    def measure_recompute(self, b: Bundle, batch: int, batch_rows: int, history: dict[str, list[str]]) -> None:
        """A probe after the batch's commit: what a recompute batch computes — the query over
        ``history`` (every file so far), and its changes from the snapshot just committed —
        written nowhere. A first run in this JVM pays code generation and JIT compilation that
        later ones do not: when it is dearer than an incremental batch (when it matters), it is
        measured once more and the lesser time kept."""
        recomputer = b.recomputer
        assert recomputer is not None
        self.ctx.progress(f"batch {batch_name(batch)}: measuring a recompute (cost model)")
        outputs = partial(self._probe_outputs, b, batch)
        seconds = recomputer.measure(history, outputs)
        incremental = self.cost.predicted("incremental", batch_rows, self.history_rows)
        if incremental is not None and seconds > incremental:
            seconds = min(seconds, recomputer.measure(history, outputs))
        # A recompute batch also lists its files and commits, as the batch just measured did: its
        # own times for those. Not its "write" phase: in an incremental batch that is the job that
        # runs h, the merges and the outputs (up to the whole batch), which counted as the
        # recompute's too would make every recompute look as dear as an incremental batch.
        around = sum(self.ctx.clock.timings.get(p, 0.0) for p in ("read", "commit"))
        self.cost.observe("probe", False, 0, self.history_rows, seconds + around, netted=self.deletes)

    def _probe_outputs(self, b: Bundle, batch: int, answer: DataFrame) -> None:
        """What a recompute batch does with its answer, into a scratch directory: the answer
        kept, the snapshot and its changes from batch ``batch``'s snapshot written."""
        views = Views(answer.sparkSession, f"p{batch}")
        held = materialize(answer)
        try:
            with tempfile.TemporaryDirectory(prefix="streamfold-probe-") as scratch:
                write_recomputed(self.ctx, b, batch, held, views, self.ctx.output.snapshot_path(batch),
                                 (os.path.join(scratch, "snapshot"), os.path.join(scratch, "changes")))
        finally:
            views.drop()
            release(held)

    def calibrate(self, b: Bundle, batch: int, batch_rows: int, history: dict[str, list[str]],
                  empty_increment: Callable[[], float]) -> bool:
        """Under ``--strategy auto``, after the history's commit and the capture ahead: an empty
        increment (``empty_increment``: the prepared plans run once over no rows — what an
        incremental batch costs at least) and a recompute measured (the probe the first
        incremental batch would otherwise be followed by). When even an increment of no rows
        costs more than a recompute, batch 1 is already a recompute: a query whose increments
        cost several recomputes no longer pays two of them to learn it. A first run in this JVM
        pays code generation and JIT compilation that later ones do not: each is run again when
        it decides the choice, and the lesser time kept. False: it failed (logged)."""
        self.ctx.progress(f"batch {batch_name(batch)}: measuring an empty increment and a recompute (cost model)")
        try:
            floor = empty_increment()
            self.cost.observe_floor(floor)
            self.measure_recompute(b, batch, batch_rows, history)
            recompute = self.cost.predicted("recompute", 0, self.history_rows, self.deletes)
            if recompute is not None and floor > recompute:
                self.cost.observe_floor(min(floor, empty_increment()))
        except Exception as e:  # noqa: BLE001 - then the first increments are measured as before
            log.info("streamfold: the cost model was not calibrated after the history (%s)", first_line(e))
            return False
        return True

    # -- a recompute batch -----------------------------------------------------------------------
    def recompute(self, b: Bundle, batch: int, inputs: dict[str, list[str]], rows: dict[str, int],
                  history: dict[str, list[str]], cached: list[DataFrame], start: float,
                  choice: Choice) -> tuple[dict[str, Any], float]:
        """The batch by the recompute strategy, up to its commit: the answer from ``history``
        (every file so far, this batch's included), its changes from the last snapshot; no state
        is written, and the states are stale from here on. The commit record and the time of the
        commit."""
        ctx = self.ctx
        recomputer = b.recomputer
        assert recomputer is not None
        views = Views(recomputer.spark, f"b{batch}")
        held: DataFrame | None = None
        try:
            with ctx.clock.phase("recompute"):
                cached += ctx.control.guard(batch, "recompute: read", lambda: recomputer.register(history))
                held = ctx.control.guard(batch, "answer", lambda: materialize(recomputer.answer()))
            with ctx.clock.phase("write"):
                snap_rows, change_rows = write_recomputed(
                    ctx, b, batch, held, views, ctx.output.snapshot_path(batch - 1),
                    (ctx.output.snapshot_path(batch), ctx.output.changes_path(batch)))
            pending = Pending(batch, inputs, dict(rows), ctx.output.snapshot_path(batch),
                              ctx.output.changes_path(batch), state=not_maintained,
                              touched=not_maintained, states=())
            extra = ctx.control.before_commit(pending)
            extra.update(self.record(choice, rows))
            record = commit_record(batch, inputs, rows, time.monotonic() - start, snap_rows, change_rows, {}, {},
                                   sources_only_stats(rows), extra)
            with ctx.clock.phase("commit"):
                ctx.output.commit(batch, record)
            committed_at = time.monotonic()
        finally:
            views.drop()
            for df in cached:
                df.unpersist()
            if held is not None:
                release(held)
        self.stale = True
        self.observe(batch, choice, rows, committed_at - start)
        return record, committed_at

    # -- rebuilding stale states -----------------------------------------------------------------
    def rebuild(self, b: Bundle, fresh: Bundle, batch: int, history: dict[str, list[str]]) -> Installed:
        """The cost model's rebuild: ``fresh`` (a new bundle of the same plan) gets the states built
        again from ``history``; the batch then runs as a newly installed plan's first (its states
        written whole, its changes from the last snapshot). On failure ``fresh``'s states are freed."""
        self.ctx.progress(f"batch {batch_name(batch)}: rebuilding the states from the history")
        try:
            rebuild_states(self.ctx, fresh, batch, history, {})
        except BaseException:
            fresh.store.release_except(b.store.backings())
            raise
        previous = self.ctx.output.snapshot_path(batch - 1)
        return Installed(b, reset=False, before=previous if os.path.isdir(previous) else None, whole=True, rebuild=True)


def not_maintained(name: str) -> DataFrame:
    raise StreamfoldError(f"state {name} is not maintained: this batch recomputed the answer from scratch",
                          code="STATE_NOT_MAINTAINED", params={"state": name},
                          hint="states are kept while the cost model chooses incremental batches "
                               "(--strategy incremental keeps them always)")
