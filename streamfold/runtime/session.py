"""The Spark session streamfold runs on, and the settings its state handling relies on."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import interrupted
from ..settings import Settings, resolve
from . import jvm, jvm_archive
from .views import use_public_api

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"


def get_spark(master: str | None = None, app_name: str = "streamfold", progress: bool = False,
              conf: Mapping[str, str] | None = None, settings: Settings | None = None) -> SparkSession:
    """The active Spark session, or a new one on ``master`` (``local[*]`` by default) with
    streamfold's configuration, then ``conf``. ``settings`` (the environment's if not given) size
    the JVM: driver memory, Java options, the code cache, the memory page, the log level."""
    os.environ.setdefault("PYSPARK_PYTHON", _python())
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    settings = resolve(settings)
    log_config = os.path.join(os.path.dirname(__file__), "log4j2.properties")
    # Spark's cleaner calls System.gc() every periodicGC.interval (below); run it as a concurrent
    # cycle, not a full collection that stops every thread and adds its pause to whichever batch
    # it falls in.
    #
    # G1's heap sizing (docs/journal.md, "Memory"): every batch allocates byte arrays of a few
    # megabytes (its outputs travel to the driver as Arrow), which G1 with its default 1 MB
    # regions treats as humongous objects; their bursts set off "preventive" collections, and G1
    # answered the pause time by growing the heap batch after batch. With 16 MB regions they are
    # young objects, and with GCTimeRatio=4 the heap grows only when over a fifth of the time goes
    # to GC: the committed heap stays flat over a long run, latency unchanged.
    #
    # A heap that runs out ends the JVM at once (ExitOnOutOfMemoryError, exit code 3): Spark's own
    # handler calls System.exit, whose shutdown hooks stop the SparkContext and can wait forever
    # on the very job that ran out, leaving a process that neither answers nor exits (issue 59,
    # TPC-DS Q78). Python then finds the JVM gone and reports the batch (failures.jvm_exit).
    java_options = (f"-Dlog4j2.configurationFile=file:{log_config} -XX:+ExplicitGCInvokesConcurrent "
                    "-XX:G1HeapRegionSize=16m -XX:GCTimeRatio=4 -XX:+ExitOnOutOfMemoryError "
                    + " ".join(o for o in (jvm_archive.java_options(settings), settings.java_options) if o))
    builder = (
        SparkSession.builder.master(master or DEFAULT_MASTER)
        .config("spark.driver.extraJavaOptions", java_options)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "true" if progress else "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", settings.driver_memory)
        .config("spark.sql.shuffle.partitions", "4")
        # Spark keeps the classes it compiles for generated code (whole stages, projections,
        # predicates, orderings) in a cache of 100 by default, least recently used out. A query's
        # batches run the same plans again and again, and one TPC-H plan's job alone needs more
        # than 100: the cache evicted each class before its next use, so every batch compiled them
        # all again with Janino and the JVM's JIT compiled the new classes again. With room for a
        # run's plans a warm batch compiles nothing (docs/journal.md, "Stop 47"); metaspace is
        # the same either way (evicted classes are not unloaded at once).
        .config("spark.sql.codegen.cache.maxEntries", str(settings.codegen_cache))
        # Spark 4.3 builds a broadcast join's hash table on a long key (LongToUnsafeRowMap) in a
        # memory page of at least this size, and the driver keeps every broadcast until the plans
        # that use it are collected: with the default (64 MB for a 2 GB driver) each small state
        # broadcast into a join held a whole page of heap, and a TPC-H Q21 batch holds many at once
        # (docs/journal.md, "Long runs"). Sorts and aggregates only take more, smaller pages.
        .config("spark.buffer.pageSize", settings.page_size)
        # Spark keeps a record of every job, stage and SQL execution (plans as text, metrics) for
        # its UI and status API even with the UI off — 1,000 of each by default, live heap that
        # grows with every batch until the limits are reached. A running query needs few.
        .config("spark.ui.retainedJobs", "100")
        .config("spark.ui.retainedStages", "100")
        .config("spark.sql.ui.retainedExecutions", "50")
        # A task's result above this size is not sent back with its status but stored in the block
        # manager and fetched from there by the driver (the default is 1 MB). A small batch's one
        # task returns its outputs as Arrow, a few megabytes for a groupBy's ten thousand keys, and
        # the fetch was a visible share of the batch (docs/journal.md, "Stop 41"). Results stay
        # well under spark.rpc.message.maxSize (128 MB), which bounds a direct result.
        .config("spark.task.maxDirectResultSize", "64m")
        # Replaced states are released explicitly; let the cleaner also drop what Python frees.
        .config("spark.cleaner.periodicGC.interval", "1min")
    )
    extra = {**_network(master or DEFAULT_MASTER, settings), **dict(conf or {})}
    from .jvm import helper_jar

    # prepared plans' classes (runtime/jvm.py); without them batches run the plain way
    jar = helper_jar(cache=settings.jar_cache)
    if jar is not None:
        extra["spark.jars"] = ",".join(j for j in (extra.get("spark.jars"), jar) if j)
    for key, value in extra.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    _warn_unauthenticated(spark)
    _quiet_python_loggers()
    spark.sparkContext.setLogLevel(settings.spark_log_level)
    return spark


def _network(master: str, settings: Settings) -> dict[str, str]:
    """Where the driver listens. With a local master nothing but this process talks to it, so its
    RPC and block manager bind the loopback address (``bind_address``); with a cluster master the
    executors must reach it, and the user's Spark configuration decides."""
    if not master.startswith("local"):
        return {}
    return {"spark.driver.bindAddress": settings.bind_address, "spark.driver.host": settings.bind_address}


def _warn_unauthenticated(spark: SparkSession) -> None:
    """A cluster master without ``spark.authenticate``: anyone who reaches the driver's or an
    executor's port can submit work. Say so once, where the run starts."""
    conf = spark.sparkContext.getConf()
    master = conf.get("spark.master", DEFAULT_MASTER) or DEFAULT_MASTER
    if not master.startswith("local") and conf.get("spark.authenticate", "false").lower() != "true":
        logging.getLogger("streamfold").warning(
            "Spark master %s without spark.authenticate: the driver's and executors' ports accept anyone "
            "who reaches them; see docs/cluster.md to turn authentication (and TLS) on", master)


def _quiet_python_loggers() -> None:
    """PySpark logs every failed SQL analysis from Python, with the whole plan (megabytes for an
    unrolled iteration); streamfold reports those errors itself (SPARK_REJECTED, a bench's
    "Spark rejects the query"). The log4j settings do not reach these Python loggers. py4j logs
    a call that finds the JVM gone with its traceback, on the root logger; once the JVM has
    exited, streamfold reports that as the batch's failure, naming what the JVM exited of."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
    for logger in (logging.getLogger(), logging.getLogger("py4j.clientserver"), logging.getLogger("py4j.java_gateway")):
        if not any(isinstance(f, _AfterJvmExit) for f in logger.filters):  # (a logger's filters see its own records)
            logger.addFilter(_AfterJvmExit())


class _AfterJvmExit(logging.Filter):
    """Drops py4j's "Exception while sending command." once Spark's JVM has exited, and what it
    logs of a Ctrl-C (the command line says it was interrupted)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from .failures import JVM_EXIT_WAIT_S, jvm_exit

        # (py4j shutting the connection Ctrl-C broke: "Exception occurred while shutting down connection")
        if record.msg == "KeyboardInterrupt while sending command." or interrupted(record.exc_info and record.exc_info[1]):
            return False
        return not (record.msg == "Exception while sending command." and jvm_exit(JVM_EXIT_WAIT_S) is not None)


def plain_interrupts() -> None:
    """Ctrl-C in a command-line process raises KeyboardInterrupt and nothing else.

    PySpark's own SIGINT handler cancels every Spark job from inside the handler: a py4j call
    made while the interrupted thread waits on the same connection, which fails ("reentrant
    call") and printed two tracebacks before the command's own "interrupted". The command line
    cancels the jobs itself (:func:`cancel_jobs`) once the interrupt has unwound."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def cancel_jobs(spark: SparkSession) -> None:
    """Cancel Spark's running jobs (after an interrupt), if the JVM still answers."""
    try:
        spark.sparkContext.cancelAllJobs()
    except Exception:  # noqa: BLE001 - the JVM may be gone; the process is ending anyway
        pass


def engine_session(spark: SparkSession, partitions: int, settings: Settings | None = None) -> SparkSession:
    """A session of its own for one running query: its settings and temp views stay its own
    (views through Spark's public API under the A/B switch ``direct_views`` off).

    Adaptive execution is off: with it, Spark hides a materialized state's hash partitioning
    and every merge would shuffle the whole state instead of only the batch's delta.
    """
    session = spark.newSession()
    if not resolve(settings).direct_views:
        use_public_api(session)
    session.conf.set("spark.sql.adaptive.enabled", "false")
    session.conf.set("spark.sql.shuffle.partitions", str(partitions))
    # Spark 4.3 fails to rewrite constraints a checkpointed state carries through UNION ALL
    # ("key not found: x.B#…" in UnionBase.rewriteConstraints); our plans gain nothing from them.
    session.conf.set("spark.sql.constraintPropagation.enabled", "false")
    session.conf.set("spark.sql.session.timeZone", spark.conf.get("spark.sql.session.timeZone") or "UTC")
    # Runtime bloom filters are for a large scan joined with a filtered small side. A batch's
    # programs join small deltas with states already partitioned on their keys; a filter would
    # cost a job of its own (which, over a lazily checkpointed merge, computes it once more) and
    # put its bit array (1-8 MB) into every task of the stage that reads it.
    session.conf.set("spark.sql.optimizer.runtime.bloomFilter.enabled", "false")
    # A join (or an aggregate over a union) whose inputs are all one partition stays in that
    # partition only while Spark's size estimate of each is within this bound (128 MB by
    # default); else it shuffles them into spark.sql.shuffle.partitions. A state's estimate is
    # Spark's product of its merges' sides, capped at 2^40 (state.py), not its rows, so a batch
    # over small states in one partition (the batch's job, or the prepared plans captured from
    # it) was cut into a stage per shuffle: TPC-H Q02 with its states reduced to a few hundred
    # rows ran three times as many stages a batch (docs/journal.md, "Stop 49").
    # Only what streamfold made one partition is one: small states and batches (engine.py).
    session.conf.set("spark.sql.maxSinglePartitionBytes", str((1 << 63) - 1))
    # Joins of a delta with a state are hinted; keep broadcasting small static tables.
    session.conf.set("spark.sql.autoBroadcastJoinThreshold", str(10 * 1024 * 1024))
    # Column references without their views' names once optimized (java/Unqualified.java): a
    # union of a state's changes then keeps the state's hash partitioning.
    if resolve(settings).unqualified and jvm.loaded(session):
        session._jvm.streamfold.jvm.Unqualified.install(session._jsparkSession)  # type: ignore[union-attr]
    return session


def local_heap(spark: SparkSession) -> int:
    """The driver JVM's heap in bytes (``Runtime.maxMemory``), which a local run's executors
    share; 0 if it cannot be asked."""
    try:
        return int(spark._jvm.java.lang.Runtime.getRuntime().maxMemory())  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - only a bound's hint (shape.collects)
        return 0


def default_partitions(spark: SparkSession) -> int:
    """State partitions when neither the run nor the settings give them (``partitions``): as many
    as the cores Spark has, at least 2.

    A warm batch is a few small tasks per stage over states already partitioned on their keys,
    and each task pays its deserialization and scheduling whatever its rows: with two partitions
    per core TPC-H SF 1's increments were slower than with one (docs/journal.md, "Stop 50").
    """
    return max(2, spark.sparkContext.defaultParallelism)


def _python() -> str:
    import sys

    return sys.executable
