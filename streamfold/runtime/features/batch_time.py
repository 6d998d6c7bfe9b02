"""The batch time: the one time a batch evaluates ``current_timestamp()`` at (docs/windows.md).

A time bound (``WHERE ts > current_timestamp() - INTERVAL 1 HOUR``, ``plan/rules_expiry.py``)
reads the clock, and the answer must stay the batch query's answer at one instant. So before a
batch runs, the engine asks :meth:`BatchTime.begin` for its time: the wall clock, but never
earlier than the last committed batch's (a clock stepped back would bring expired rows back,
which the live rows no longer hold). The programs read it from a one-row view
(:data:`~streamfold.ir.expr.CLOCK_VIEW`, microseconds as a decimal: ``sql/bind/expiry.py``;
prepared plans set it in place before each replay, ``Prepared.tick``) and the commit records it
(``"batch_time"``, ISO 8601 UTC, and ``"batch_time_us"``), so a restart continues from it and
the answer of every batch can be checked against the batch query at its recorded time. A batch
killed before its commit is run again at a new time: nothing of it was published.

For an event-time bound (``max_event_time()``) the time is instead the largest event time the
stream has brought: the batch's rows' largest, never below the batch before's. A rerun of a
killed batch reads the same rows, so it finds the same time. The same job reads the batch's
earliest event time: when it is inside the narrowest bound, no row is late and the commit counts
none without the job that counts them.

Between batches the clock moves on while no file arrives. A query with a ``current_timestamp()``
bound asks :meth:`BatchTime.passed`, at most once per trigger interval while it is idle, whether the
wall clock has passed one of its live rows (one small job per time bound: the live rows the bound
at *now* no longer passes, ``IncrementalPlan.expiring``, limited to one row); if so it runs a batch
with no files, which removes them as any batch would and commits ``"clock_only": true``. An
event-time clock moves only with rows, so it never needs one.

Plans without a time bound read no clock and record none.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from ...ir.expr import CLOCK_COLUMN, CLOCK_VIEW, Agg, Call, Case, Column, Literal
from ...ir.rel import WEIGHT, Aggregate, DeltaScan, Filter, Project, Rel, Union
from ...ir.types import BIGINT, BOOLEAN, INT, TIMESTAMP
from ...plan.model import IncrementalPlan
from ..bundle import Bundle
from ..context import RunContext
from ..sources import TimeRange, parquet_time_range, widen
from ..views import Views

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
NO_EVENT = -62135596800000000  # 0001-01-01: the event-time clock before any event (every row is inside)


def wall_clock() -> int:
    """Now, in microseconds since the epoch (tests replace it to move time at will)."""
    return time.time_ns() // 1000


class BatchTime:
    """The batch time of each batch, from the last commit on (see the module docstring)."""

    def __init__(self, ctx: RunContext, record: dict[str, Any] | None) -> None:
        self.ctx = ctx
        self.last = int(record["batch_time_us"]) if record is not None and "batch_time_us" in record else None
        self.current: int | None = None
        self.clock_only = False  # the batch runs because the clock passed a live row, not for a file
        self._looked: int | None = None  # the wall clock (µs) at the last look between batches
        self._first: int | None = None  # the batch's earliest event time (µs), read with its largest
        self._footers: TimeRange | None = None  # the batch's event times from its files' footers (:meth:`look`)
        self._show(self.last or 0)  # the view exists before the states' programs are analysed

    def look(self, plan: IncrementalPlan, inputs: dict[str, list[str]]) -> None:
        """Before a batch is read: its earliest and latest event time from its Parquet files'
        statistics, where the event-time clock is a stream's own column (other conjuncts beside
        the bound or not) and every file's footers tell them (:func:`~..sources.parquet_time_range`);
        :meth:`begin` then needs no job, nor the batch its rows as frames when none is late."""
        self._footers = None
        scan = _clock_scan(plan)
        if scan is None:
            return
        spec = self.ctx.specs[scan.table.lower()]
        if spec.format != "parquet":
            return
        times: TimeRange = (None, None)
        stream = next(st.name for st in plan.streams if st.name.lower() == scan.table.lower())
        for name in inputs.get(stream, []):
            try:
                found = parquet_time_range(os.path.join(spec.path, name), scan.columns[0])
            except (OSError, ValueError, pa.ArrowException):  # a bad file: the batch's read reports it
                return
            if found is None:
                return
            times = widen(times, found)
        self._footers = times

    def reads_rows(self, plan: IncrementalPlan) -> bool:
        """Whether the batch needs its rows as frames for its time (after :meth:`look`): the
        largest event time's job, or the count of late rows (``IncrementalPlan.reads_rows_for_time``)."""
        if not plan.reads_rows_for_time:
            return False
        if self._footers is None:
            return True
        first, last = self._footers
        return not self._inside(plan, first, self._time(NO_EVENT if last is None else last))

    def begin(self, plan: IncrementalPlan, sql: Callable[[Rel], str] | None) -> None:
        """Fix this batch's time (when the plan reads it) and show it to the programs: the wall
        clock, or for an event-time bound the largest event time of the batch's rows (one small
        job, whose text ``sql`` gives; None: the batch runs no h, its time stays)."""
        if not plan.clocked:
            self.current = None
            return
        self._first = None
        if plan.event_time is None:
            now = wall_clock()
        elif sql is not None and self._footers is not None:
            self._first, last = self._footers
            now = NO_EVENT if last is None else last
        elif sql is not None:
            with self.ctx.clock.phase("largest event time"):
                row = self.ctx.spark.sql(sql(Project(plan.event_time, tuple(
                    (c, Call("unix_micros", (Column(c, TIMESTAMP),), BIGINT, "unix_micros({0})"))
                    for c in ("now", "first"))))).collect()[0]
            now = NO_EVENT if row[0] is None else int(row[0])
            self._first = None if row[1] is None else int(row[1])
        else:
            now = NO_EVENT
        self.current = self._time(now)
        self._show(self.current)

    def _time(self, now: int) -> int:
        """The batch time for a largest time ``now``: never below the last batch's."""
        return now if self.last is None else max(now, self.last)

    def passed(self, b: Bundle, every: float) -> bool:
        """Whether the wall clock has passed a live row since the last commit (a batch with no files
        is due to remove it); looked at no more often than ``every`` seconds, and only for a
        ``current_timestamp()`` bound after a first commit (see the module docstring)."""
        plan = b.plan
        if not plan.expiring or plan.event_time is not None or self.last is None:
            return False
        now = wall_clock()
        if now <= self.last or (self._looked is not None and now - self._looked < every * 1_000_000):
            return False
        self._looked = now
        views = Views(self.ctx.spark, "expiry")
        reads = b.reads(self.ctx, {}, {}, False)
        self._show(now)
        try:
            return any(self.ctx.spark.sql(reads.sql(rows, views)).limit(1).collect() for _, rows in plan.expiring)
        finally:
            self._show(self.last)
            views.drop()

    def record(self, plan: IncrementalPlan, sql: Callable[[Rel], str] | None) -> dict[str, Any]:
        """What the commit records of the batch time (nothing for a plan without a clock), and
        the rows each time bound dropped as late (``late_rows``, by live state): one small job
        over the batch's rows, whose text ``sql`` gives (None: the batch ran no h)."""
        if self.current is None:
            return {}
        at = EPOCH + dt.timedelta(microseconds=self.current)
        out: dict[str, Any] = {"batch_time": at.isoformat().replace("+00:00", "Z"), "batch_time_us": self.current}
        if self.clock_only:
            out["clock_only"] = True
        if plan.late and self._none_late(plan):
            out["late_rows"] = {n: 0 for n, _ in plan.late}
        elif sql is not None and plan.late:
            with self.ctx.clock.phase("late rows"):
                row = self.ctx.spark.sql(sql(late_counts(plan.late))).collect()[0]
            out["late_rows"] = {n: int(row[i] or 0) for i, (n, _) in enumerate(plan.late)}
        return out

    def _none_late(self, plan: IncrementalPlan) -> bool:
        """Whether the batch's rows are all inside its event-time bounds, known without a job: its
        earliest event time (read with its largest, :meth:`begin`) is later than the batch time
        minus the narrowest bound's interval, or it inserted no row with an event time. The
        bounds are ``ts > clock - width`` or ``>=``, so a row later than that passes every one."""
        return self.current is not None and self._inside(plan, self._first, self.current)

    @staticmethod
    def _inside(plan: IncrementalPlan, first: int | None, at: int) -> bool:
        if plan.event_time is None or plan.late_margin is None:
            return False
        return first is None or first > at - plan.late_margin

    def show_last(self) -> None:
        """Show the last committed batch's time to the programs: what the states were restored at
        (an appended state's rows that expired by then are not restored, ``StateStore.restore``)."""
        self._show(self.last or 0)

    def committed(self) -> None:
        if self.current is not None:
            self.last = self.current

    def _show(self, micros: int) -> None:
        from pyspark.sql import functions as F

        spark = self.ctx.spark
        spark.range(1).select(F.lit(micros).cast("decimal(20,0)").alias(CLOCK_COLUMN)).createOrReplaceTempView(CLOCK_VIEW)


def _clock_scan(plan: IncrementalPlan) -> DeltaScan | None:
    """The stream scan an event-time clock reads straight (``rules_expiry._event_time``: the max of
    one of its columns as it is over the inserted rows, no other filter), or None (a computed
    time, ``CAST(s AS TIMESTAMP)``, is not in the footers)."""
    agg = plan.event_time
    if not isinstance(agg, Aggregate) or not isinstance(agg.input, Filter) or not isinstance(agg.input.input, DeltaScan):
        return None
    scan = agg.input.input
    times = [a.args[0] for _, a in agg.aggs]
    if len(scan.columns) != 1 or not all(isinstance(t, Column) and t.name == scan.fields[0].name for t in times):
        return None
    return scan


def late_counts(late: tuple[tuple[str, Rel], ...]) -> Rel:
    """One row: per time bound, the weight of the batch's rows it drops as late. The bounds' rows
    tagged and stacked, summed per tag by one aggregate (one stage over the batch's rows, where an
    aggregate per bound cross-joined took a stage each and the join's)."""
    weight = Column(WEIGHT, BIGINT)
    if len(late) == 1:
        return Aggregate(late[0][1], (), ((late[0][0], Agg("sum", (weight,), False, BIGINT)),))
    tagged = Union(tuple(Project(rows, ((_TAG, Literal(i, INT)), (WEIGHT, weight))) for i, (_, rows) in enumerate(late)))
    return Aggregate(tagged, (), tuple((n, Agg("sum", (Case(((Call("=", (Column(_TAG, INT), Literal(i, INT)), BOOLEAN),
                                                               weight),), None, BIGINT),), False, BIGINT))
                                       for i, (n, _) in enumerate(late)))


_TAG = "_bound"
