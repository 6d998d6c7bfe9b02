"""The handle of a running query, for notebooks and programs (the CLI is a thin layer on it)."""

from __future__ import annotations

import gc
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..plan.compilation import Compilation
from ..sql import Catalog
from .checkpoint import batch_name
from .config import BatchResult, QueryConfig
from .engine import Engine
from .hooks import Boundary, QueryStopped
from .session import get_spark
from .sources import infer_schema
from .staged import watched_paths
from .watch import SourceWatch

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession


class GarbageCollector:
    """Frees a finished batch's py4j proxies, and with them the JVM objects they hold.

    Every py4j proxy a method was called on is in a reference cycle (``JavaObject._methods``
    holds ``JavaMember``s whose ``container`` is the proxy), so only Python's cyclic collector
    frees it and tells the JVM to drop the object: a batch's DataFrames, their query executions
    and plans. Left to Python's own schedule (a full collection when the objects that survived
    collections grow by a quarter), a long run kept several batches' plans live, and the JVM's
    heap grew batch after batch (TPC-H Q21 through ``streamfold run``: docs/journal.md, "Long runs").

    A full collection over the objects PySpark, sqlglot and DuckDB bring is not free, and a small
    batch would notice it: it runs after a batch once the batches since the last one took
    ``1/share`` times as long as that one did, so at most ``share`` of the run's time goes to it.
    """

    def __init__(self, share: float = 0.05) -> None:
        self.share = share
        self.cost = 0.0  # seconds the last collection took
        self.since = 0.0  # seconds of batches since it

    def after_batch(self, seconds: float) -> bool:
        """Whether the batches since the last collection paid for one (:meth:`collect`)."""
        self.since += seconds
        return self.since * self.share >= self.cost

    def collect(self) -> None:
        start = time.perf_counter()
        gc.collect()
        self.cost = time.perf_counter() - start
        self.since = 0.0


class Query:
    """A continuous query: its engine, optionally a background thread polling for new files.

    ``results`` holds the last :attr:`RESULTS_KEPT` batches' results (each batch's commit record
    stays in ``OUTPUT/commits/``): a run of months would otherwise keep one per batch in memory,
    with its waterfall under ``profile``.
    """

    RESULTS_KEPT = 1000

    def __init__(self, engine: Engine, spark: SparkSession) -> None:
        self.engine = engine
        self.spark = spark
        self._lock = threading.Lock()
        self._committed = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.results: deque[BatchResult] = deque(maxlen=self.RESULTS_KEPT)
        self.on_batch: Callable[[BatchResult], None] | None = None
        # told a batch's files before it runs (progress.py shows them while it runs)
        self.on_inputs: Callable[[int, dict[str, list[str]]], None] | None = None
        self.garbage = GarbageCollector()

    # -- running ---------------------------------------------------------------------------------
    @property
    def last_batch(self) -> int:
        """The last committed batch, or -1 before the first."""
        return self.engine.next_batch - 1

    def process_available(self) -> BatchResult | None:
        """Run one batch over the files that appeared since the last one (None if there are none,
        or if the query is paused)."""
        control = self.engine.control
        with self._lock:
            try:
                decision = control.boundary(self.engine.next_batch)
                if decision is Boundary.HOLD:
                    return None
                inputs = self.engine.poll()
                if inputs is None and decision is Boundary.RUN_EVEN_IF_EMPTY:
                    inputs = {s.name: [] for s in self.engine.plan.streams}
                clock_only = inputs is None and self.engine.expiring()  # rows leave as time passes
                if clock_only:
                    inputs = {s.name: [] for s in self.engine.plan.streams}
                if inputs is None:  # idle: the work after the last commit that gave way to a file
                    with self.engine.ctx.clock.aside():
                        self.engine.post_commit.run_pending()
                    return None
                start = time.monotonic()
                if self.on_inputs:
                    self.on_inputs(self.engine.next_batch, inputs)
                control.started(self.engine.next_batch)
                result = self.engine.run_batch(inputs, clock_only)
            except Exception as e:
                self.engine.starved(self.engine.next_batch, e)
                raise
            finally:
                control.done()
            # The batch's frames are unreachable now; a collection gives way to a waiting file.
            if self.garbage.after_batch(time.monotonic() - start):
                self.engine.post_commit.offer(self.engine.next_batch - 1, "garbage collection", self.garbage.collect)
            if result is not None:
                self.results.append(result)
                if self.on_batch:
                    self.on_batch(result)
            self._committed.notify_all()
            return result

    def run(self, trigger: float = 1.0, until_idle: float | None = None) -> None:
        """Poll every ``trigger`` seconds in this thread — at once when a file lands in a stream's
        directory (:mod:`.watch`, Linux) — and return after ``until_idle`` quiet seconds (time
        paused does not count), or when the query is stopped."""
        idle_since = time.monotonic()
        # Between polls the wait ends as soon as a file lands in a stream's directory (watch.py).
        watch = SourceWatch(watched_paths(self.engine.specs.values()),
                            self.engine.control.wake, enabled=self.engine.config.settings.watch)
        watch.start()
        try:
            while not self._stop.is_set():
                if self.engine.control.wait_if_paused():
                    idle_since = time.monotonic()
                result = self.process_available()
                # (a batch the clock ran, with no file, leaves the query quiet: rows only left it)
                if (result is not None and not result.clock_only) or self.engine.recovery.pending:
                    idle_since = time.monotonic()
                    continue
                executors = self.engine.watch
                if executors is not None and (starved := executors.idle_failure(self.engine.next_batch)):
                    raise starved  # no executor since the last commit: none would read the next files
                if self.feeding():  # a source's own stream still stages input: not quiet
                    idle_since = time.monotonic()
                elif until_idle is not None and time.monotonic() - idle_since >= until_idle:
                    return
                self.engine.control.idle(trigger, self._stop)
        except QueryStopped:
            return
        finally:
            watch.close()

    def feeding(self) -> bool:
        """Whether input is still on its way into the sources (a Spark stream staging it)."""
        return False

    def start_background(self, trigger: float, until_idle: float | None = None) -> None:
        def loop() -> None:
            try:
                self.run(trigger, until_idle)
            except BaseException as e:  # noqa: BLE001 - surfaced by wait_for_batch / stop
                with self._lock:
                    self._error = e
                    self._committed.notify_all()

        self._thread = threading.Thread(target=loop, name="streamfold-query", daemon=True)
        self._thread.start()

    def wait_for_batch(self, batch: int | None = None, timeout: float | None = None) -> int:
        """Block until ``batch`` (default: the next one) is committed; returns the last batch."""
        target = self.last_batch + 1 if batch is None else batch
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self.engine.next_batch - 1 < target:
                if self._error is not None:
                    raise self._error
                if self._thread is None:
                    raise UsageError("the query is not running in the background", code="NOT_RUNNING",
                                     hint="call process_available(), or start(..., background=True)")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"batch {target} was not committed within {timeout} s")
                self._committed.wait(timeout=0.2 if remaining is None else min(0.2, remaining))
            return self.engine.next_batch - 1

    def stop(self) -> None:
        """Stop polling (a batch in progress finishes first) and release the query's state."""
        self._stop.set()
        self.engine.control.close()
        if self._thread is not None:
            self._thread.join()
        self.engine.close()
        if self._error is not None and not isinstance(self._error, KeyboardInterrupt):
            raise self._error

    def __enter__(self) -> Query:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- reading the answer ----------------------------------------------------------------------
    def _batch(self, batch: int | None) -> int:
        b = self.last_batch if batch is None else batch
        if b < 0:
            raise UsageError("no batch has been committed yet", code="NO_BATCH",
                             hint="wait_for_batch() first, or add files to the sources")
        return b

    def snapshot(self, batch: int | None = None) -> DataFrame:
        """The answer after ``batch`` (default: the last committed one), as a Spark DataFrame."""
        return self.spark.read.parquet(self.engine.output.snapshot_path(self._batch(batch)))

    def changes(self, batch: int | None = None) -> DataFrame:
        """The rows whose multiplicity changed in ``batch``, with ``_weight``, as a Spark DataFrame."""
        return self.spark.read.parquet(self.engine.output.changes_path(self._batch(batch)))

    def snapshot_pandas(self, batch: int | None = None) -> pd.DataFrame:
        """The answer after ``batch`` as pandas, read straight from Parquet (in ORDER BY order)."""
        return _read_pandas(self.engine.output.snapshot_path(self._batch(batch)))

    def changes_pandas(self, batch: int | None = None) -> pd.DataFrame:
        return _read_pandas(self.engine.output.changes_path(self._batch(batch)))

    def commit(self, batch: int | None = None) -> dict[str, Any]:
        """The commit record of ``batch``: its inputs, timing and row counts."""
        return self.engine.output.read_commit(self._batch(batch))

    def explain(self, format: str = "text") -> str:  # noqa: A002
        from ..plan import explain_json, explain_text

        return explain_json(self.engine.plan) if format == "json" else explain_text(self.engine.plan)


def _read_pandas(path: str) -> pd.DataFrame:
    import pandas as pd
    import pyarrow.parquet as pq

    parts = sorted(n for n in os.listdir(path) if n.endswith(".parquet") and not n.startswith((".", "_")))
    tables = [pq.read_table(os.path.join(path, n)) for n in parts]
    if not tables:
        return pd.DataFrame()
    import pyarrow as pa

    return pa.concat_tables(tables).to_pandas()


def input_catalog(spark: SparkSession, config: QueryConfig) -> Catalog:
    """Every configured input's schema, given or read from its files."""
    return Catalog([infer_schema(s, spark) for s in config.inputs])


def compile_run(spark: SparkSession, config: QueryConfig, compilation: Compilation | None = None) -> Compilation:
    """The configured query compiled against its inputs' schemas (given, or read from their
    files) with the run's join matrix policy; ``compilation`` (of ``config.sql``, parsed already)
    lends it its parse. Its plan (coded errors if there is none) is what the engine runs."""
    text = compilation if compilation is not None else Compilation(config.sql)
    return text.against(input_catalog(spark, config), config.matrix_policy, config.settings.push_down_groups)


def start(config: QueryConfig, spark: SparkSession | None = None, master: str | None = None, background: bool = True,
          progress: Callable[[str], None] | None = None, compilation: Compilation | None = None) -> Query:
    """Compile the configured query and start its engine, without a controller (the bench's and
    the demo's runs; :func:`streamfold.start` runs one under a controller)."""
    session = spark if spark is not None else get_spark(master, settings=config.settings)
    engine = Engine(session, compile_run(session, config, compilation).plan, config, progress=progress)
    query = Query(engine, session)
    if background:
        query.start_background(config.trigger, config.until_idle)
    return query


__all__ = ["Query", "batch_name", "compile_run", "input_catalog", "start"]
