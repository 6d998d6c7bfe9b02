"""Prepared batches: a warm batch replays plans built once (``runtime/prepared.py``).

One batch, the *capture*, is planned over slots — its streams' rows and its states are read
through them, and its merges are kept per job — and later batches point the slots at their rows
and run the same plans: no SQL analysed, nothing planned, no code generated. After a large
history's commit, batch 1's plans are captured *ahead* of it over the committed states (no job
runs, nothing is written) and run over a sample of the history's rows (up to ``WARM_RUNS``
times, giving way to a waiting file), the result discarded, so that the JVM has compiled their
paths before batch 1 replays them. Which batches capture or replay is decided by
:func:`..shape.decide`; this module does what it says.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING

from ...plan.model import LOOPS
from ..batch import BatchReads
from ..bundle import Bundle
from ..checkpoint import batch_name
from ..context import RunContext
from ..emit import stacked_frame
from ..failures import batch_failure
from ..inputs import first_line
from ..outputs import outputs_sql, write_collected
from ..prepared import Prepared
from .. import shape
from ..shape import PreparedFacts, ahead_single, outputs_estimate, tasks
from ..sources import check_file
from ..steps import apply_h, release_batch
from ..views import Views

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

log = logging.getLogger("streamfold")


class PreparedBatches:
    """The prepared plans of the plan in effect (``plans``: None where it cannot have them)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.plans: Prepared | None = None
        self.capturing = False  # a capture is being planned (this batch's, or the next one's ahead)
        self._clocked = False  # the bundle's plan reads the batch time (each replay sets it)

    def reset(self, b: Bundle) -> None:
        """Plans for a new bundle: none yet (the first batch that can captures)."""
        self._clocked = b.plan.clocked
        self.plans = self._new() if self.preparable(b) else None
        self.capturing = False

    def _new(self) -> Prepared:
        return Prepared(self.ctx.spark, self.ctx.config.settings, self._clocked)

    def preparable(self, b: Bundle) -> bool:
        """Whether a batch of the plan could run prepared plans: no loops (their rounds are planned
        as they go), no hybrid or watched equi-join (decided on before the outputs, by jobs of
        their own; a join matrix's migration, decided after them, plans afresh), Parquet streams
        (other formats are checked by a job of their own), few states (``PREPARED_MAX_STATES``).
        A time bound's batch time is set in the plans before each replay (:meth:`Prepared.tick`)."""
        plan = b.plan
        return (Prepared.available(self.ctx.spark, self.ctx.config.settings) and not plan.watched
                and not any(mx.hybrid is not None for mx in plan.matrices)
                and sum(not s.static for s in plan.states) <= shape.PREPARED_MAX_STATES
                and not any(isinstance(s, LOOPS) for s in plan.delta)
                and all(self.ctx.specs[s.name.lower()].format == "parquet" for s in plan.streams))

    @property
    def ready(self) -> bool:
        return self.plans is not None and self.plans.ready

    def usable(self) -> bool:
        """Whether plans exist that were not refused (the cost model counts on replays)."""
        return self.plans is not None and self.plans.refused is None

    def facts(self, b: Bundle) -> PreparedFacts | None:
        p = self.plans
        if p is None:
            return None
        return PreparedFacts(refused=p.refused is not None, ready=p.ready, single=p.single, ahead=p.ahead,
                             keeps=bool(p.keeps), capturable=p.ready or capturable(b))

    def afresh(self) -> None:
        """The next batch that can captures its plans anew; the indexes of the old ones' bases are
        dropped from the JVM (``Prepared.release``)."""
        if self.plans is not None:
            self.plans.release()
        self.plans = self._new()

    def invalidated(self) -> None:
        """The states the plans were captured over changed layout (runs started, a migration):
        plans that are ready or hold the last batch's merges are given up."""
        p = self.plans
        if p is not None and (p.ready or p.keeps):
            self.afresh()

    # -- a batch ---------------------------------------------------------------------------------
    def capture(self, b: Bundle, frames: dict[str, DataFrame], views: Views, inputs: dict[str, list[str]],
                single: bool, ahead: bool = False) -> dict[str, DataFrame]:
        """Plan this batch over slots: its streams' rows and its states are read through them, and
        its merges are kept per job. Returns the batch's frames so read. ``ahead``: planned before
        the batch (:meth:`prepare_ahead`), its streams' slots empty."""
        p = self.plans
        assert p is not None
        p.single = single  # states still hash-partitioned (batch 0's) are gathered by the capture
        store = b.store
        for n in store.durable():
            backing = store.backing(n)
            assert backing is not None  # (shape: capturable)
            empty = False
            if n in store.bases:  # runs.py: the base read through a slot of its own, re-pointed by a fold
                base, held = store.bases[n]
                store.bases[n] = (p.base(n, base), held)
                # an empty tail: a slot that reads nothing, laid out as the base's merge (its backing)
                empty = store.tails[n] is None
            store.current[n] = p.state(n, backing, partial(_new_rows, b, n, views), empty)
            if n in store.bases:
                store.tails[n] = p.merged(n)
        store.keep = p.keep
        self.capturing = True
        p.plan_without_broadcasts(self._broadcast_statics(b))
        return {n: p.stream(n, df, self._file_columns(b, n, inputs.get(n, [])), ahead) for n, df in frames.items()}

    def collect(self) -> Callable[[DataFrame], pa.Table] | None:
        """What collects a capture's outputs (its job is kept for the replays), while capturing."""
        return self.plans.outputs if self.capturing and self.plans is not None else None

    def kept(self, name: str, rows: int | None) -> DataFrame | None:
        """State ``name`` as the last job of the prepared plans left it, estimated at ``rows`` rows
        (None: they do not hold it)."""
        p = self.plans
        if p is None or name not in p.states:
            return None
        return p.current(name, rows)[0]

    def rebase(self, name: str, base: DataFrame, nulls_appeared: bool) -> None:
        """A fold made a new base of state ``name``: the plans read it through their slot for it,
        or — if they cannot take it, or it has NULL keys that plans looking keys up with ``=`` were
        not built for (``lowering.runs_merged``) — the next batch captures again."""
        p = self.plans
        if p is not None and (p.ready or p.keeps) and (nulls_appeared or not p.rebase(name, base)):
            self.afresh()

    def replay(self, b: Bundle, batch: int, reads: BatchReads, now: int | None,
               answer_ready: Callable[[pa.Table, pa.Table], None] | None = None) -> tuple[int, int]:
        """A batch run by the prepared plans: slots pointed at its rows and the kept states, the
        batch time ``now`` (µs; None: the plan reads none) set, one job for every merge and the
        outputs, its parts written (``answer_ready``: as in :func:`..outputs.write`)."""
        p = self.plans
        assert p is not None
        clock = self.ctx.clock
        try:
            with clock.part("prepared: point the slots"):
                p.bind(reads.frames)
                p.tick(now)
            with clock.part("prepared: the job + Arrow"):
                table = p.run()
            written = write_collected(self.ctx, b, batch, table, answer_ready)
        except Exception as e:  # noqa: BLE001
            raise batch_failure(batch, "write", "writing its answer", e, self.ctx.local, self.ctx.config.settings) from e
        for name, (_, frame) in p.keeps.items():
            if name in p.states:
                reads.merged[name] = frame
        b.store.executed(p.executed)
        return written

    def finish(self, prepared: Prepared | None, committed: bool) -> None:
        """The end of a batch that used ``prepared`` (its mode was not None): a capture's planning
        ends; a batch that failed frees what its job kept and the next batch plans afresh."""
        if prepared is not None and not committed:
            prepared.failed()
            if prepared.refused is None:
                prepared.release()
            self.plans = self._new() if prepared.refused is None else prepared
        if self.capturing and prepared is not None:
            prepared.planned()
        self.capturing = False

    # -- after a history's commit ----------------------------------------------------------------
    def prepare_ahead(self, b: Bundle, batch: int, inputs: dict[str, list[str]],
                      outputs_seen: tuple[int, int, int] | None, gives_way: Callable[[], bool]) -> None:
        """After batch ``batch``'s commit (the history's), capture the next batch's plans ahead of
        it, so that it is already a replay: without this the first increment plans every merge
        and the outputs, builds the prepared plans and generates their code. The capture is
        planned over the states as committed and each stream's last file of the batch (for its
        columns and its scan, which later batches re-point), its streams' slots reading nothing;
        no job runs, nothing is written, and the store is left as it was. The next batch runs the
        plans if it fits them as a capture would have (:func:`..shape.decide`), else plans afresh.
        ``outputs_seen``: what the batch's outputs held (the next batch's are estimated from it);
        ``gives_way``: whether a file is waiting that the warm-up's later runs give way to."""
        ctx, store = self.ctx, b.store
        p = self.plans
        if (p is None or p.refused is not None or p.ready or p.keeps
                or any(r is None for r in store.rows.values()) or not capturable(b)):
            return
        held = sum(r or 0 for r in store.rows.values())
        if outputs_estimate(held, 0, False, outputs_seen) > shape.SMALL_ROWS:  # the next batch is planned eagerly
            return
        ctx.progress(f"batch {batch_name(batch)}: preparing the next batch's plans")
        views = Views(ctx.spark, f"ahead{batch + 1}")
        temps: list[DataFrame] = []
        put_back = store.hold()
        last = {s.name: inputs[s.name][-1:] for s in b.plan.streams if inputs.get(s.name)}
        cached: list[DataFrame] = []
        try:  # (after the commit: nothing here may fail the batch)
            with ctx.clock.aside():
                frames, _, cached = b.reader.read(last, cache=b.reread)
                single = ahead_single(held, ctx.one_partition)
                frames = self.capture(b, {n: df.coalesce(1) for n, df in frames.items()}, views, last, single,
                                      ahead=True)
                reads = b.reads(ctx, frames, {s.name: 0 for s in b.plan.streams}, False, single)
                reads.merge_all = True
                apply_h(ctx, b, batch + 1, reads, views, False, temps, guarded=False)
                store.keep = None
                outputs = outputs_sql(ctx, b, batch + 1, reads.merged, reads.new, views, False, None)
                stacked = stacked_frame(ctx.spark, [(sql, cols) for sql, _, cols in outputs],
                                        tasks(held, ctx.cores), bool(b.plan.answer.order))
                p.plan_outputs(stacked)
                p.captured_ahead()
                if p.ready:
                    self._warm_up(b, batch, p, last, gives_way)
        except Exception as e:  # noqa: BLE001 - the next batch plans afresh
            log.info("streamfold: the next batch's plans were not prepared ahead (%s)", first_line(e))
            self.afresh()
        finally:
            p.planned()
            self.capturing = False
            put_back()
            release_batch(views, temps, cached, None)

    def _warm_up(self, b: Bundle, batch: int, p: Prepared, inputs: dict[str, list[str]],
                 gives_way: Callable[[], bool]) -> None:
        """Run the plans captured ahead over a sample of the history's rows (``WARM_ROWS`` of each
        stream's last file), keeping nothing: the first replay otherwise pays the JIT compilation
        of every path rows take through the job — joins probed, aggregates merged — on top of the
        batch. Rows the states already hold: what the job computes from them is wrong and is
        dropped (no answer, no state), as an empty run's is. Once, then up to ``WARM_RUNS`` times
        in all while no file waits: a waiting batch goes first (``maintenance.py``), and its own
        run warms the plans as the next one would."""
        sample = b.reader.sample(inputs, shape.WARM_ROWS)
        if sample is None:  # (not Parquet: the first replay warms them)
            return
        self.ctx.progress(f"batch {batch_name(batch)}: warming the next batch's plans")
        began = time.monotonic()
        runs = 0
        for _ in range(shape.WARM_RUNS):
            if runs and gives_way():
                break
            p.run_discarded(sample)
            runs += 1
        log.info("streamfold: batch %s: the next batch's plans warmed (%d runs) in %.2f s", batch_name(batch),
                 runs, time.monotonic() - began)

    # -- helpers ---------------------------------------------------------------------------------
    def _broadcast_statics(self, b: Bundle) -> frozenset[str]:
        """The static states a capture broadcasts into the joins that read them: those within
        Spark's broadcast threshold by their size estimate (their true rows, ``state._with_size``)."""
        spark = self.ctx.spark
        limit = int(spark._jsparkSession.sessionState().conf().autoBroadcastJoinThreshold())
        if limit <= 0:
            return frozenset()
        found = set()
        for name, d in b.store.defs.items():
            if d.static:
                size = b.store.current[name]._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
                if int(size if isinstance(size, int) else size.toString()) <= limit:
                    found.add(name)
        return frozenset(found)

    def _file_columns(self, b: Bundle, stream: str, names: list[str]) -> tuple | None:
        """The columns the files of ``stream`` share (what a prepared file scan reads), or None."""
        spec = self.ctx.specs[stream.lower()]
        sigs = {check_file(spec, b.catalog[stream], os.path.join(spec.path, n))[0] for n in names}
        return sigs.pop() if len(sigs) == 1 and spec.format == "parquet" else None


def capturable(b: Bundle) -> bool:
    """Whether every state is held as a merge's rows, which a capture reads through slots."""
    store = b.store
    for n in store.durable():
        backing = store.backing(n)  # (a state in runs with an empty tail: its base's merge)
        # not a merge's rows (restored, new), or the merge of another definition of the state (a
        # "from now on" reconfiguration transforms the state it had: its merge lacks the new columns)
        if (backing is None or "__touched" not in backing.columns
                or not set(store.schemas[n].fieldNames()) <= set(backing.columns)):
            return False
    return True


def _new_rows(b: Bundle, name: str, views: Views, merged: DataFrame) -> DataFrame:
    return b.store.as_frame(b.store.new_view(name, merged, views))
