"""A class-data-sharing (CDS) archive of the classes Spark's driver loads, mapped by every JVM
streamfold starts.

A cold ``streamfold run`` (a restart, a test's subprocess, the studio) spends its first seconds
starting Spark's JVM and running its first jobs, most of it finding, reading and verifying tens of
thousands of classes in Spark's jars. Java (13 and later) can write every class a run loaded from
its class path into an archive when it exits (``-XX:ArchiveClassesAtExit``); a later JVM given
the archive (``-XX:SharedArchiveFile``) maps those classes from it, already parsed and verified.

``make setup`` makes the archive with a training run (``python -m streamfold.runtime.jvm_archive``):
a continuous query of a few batches — a join, groups, a distinct count, Parquet in and out — in
its own JVM, which writes the archive as it exits; it is renamed into place only when whole. Every
session :func:`.session.get_spark` starts then maps it. The JVM checks that the archive matches
itself and its class path (the jars, their sizes and times) and otherwise starts as it would
without one (its report of the mismatch is silenced); the archive's name follows PySpark's version
and the Java runtime, so an upgrade of either makes setup write a new one. Classes Spark compiles
at run time (generated code) and the helpers' jar (:mod:`.jvm`, loaded by Spark's own class loader)
are not in it. The setting ``jvm_archive`` (``STREAMFOLD_JVM_ARCHIVE=0``) starts without it.
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
import tempfile

from ..settings import Settings, resolve
from .jvm import _java

log = logging.getLogger("streamfold")

# the JVM's unified logging of CDS: off, so a mismatched archive (another JDK build) is not reported
# on the driver's output at every start — the JVM just starts without it
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path(cache: str) -> str:
    """Where the archive for this PySpark and this Java runtime is (or would be)."""
    import pyspark

    java = os.path.realpath(_java())
    modules = os.path.join(os.path.dirname(os.path.dirname(java)), "lib", "modules")  # the JDK's own classes
    stamp = os.stat(modules) if os.path.exists(modules) else None
    digest = hashlib.sha256(f"{pyspark.__version__}\0{java}\0{stamp and (stamp.st_size, stamp.st_mtime_ns)}".encode())
    return os.path.join(cache, f"streamfold-jvm-{digest.hexdigest()[:16]}.jsa")


def java_options(settings: Settings) -> str:
    """The driver JVM's options to map the archive: none when it is off or not made."""
    if not settings.jvm_archive:
        return ""
    path = archive_path(settings.jar_cache)
    return f"-XX:SharedArchiveFile={path} -Xshare:auto {QUIET}" if os.path.exists(path) else ""


def make(settings: Settings | None = None, timeout: float = 600) -> str | None:
    """The archive, made by a training run in a process of its own if missing; None if it could
    not be made (the reason is logged: streamfold runs as well without it, only starts slower)."""
    settings = settings or resolve(None)
    target = archive_path(settings.jar_cache)
    if os.path.exists(target):
        return target
    os.makedirs(os.path.dirname(target), exist_ok=True)
    staged = f"{target}.{os.getpid()}.part"
    try:
        done = subprocess.run([sys.executable, "-m", "streamfold.runtime.jvm_archive", "--train", staged], capture_output=True, text=True,
                              timeout=timeout)
        if done.returncode != 0 or not os.path.exists(staged):
            log.warning("streamfold: no JVM class archive (the training run failed: %s)",
                        (done.stderr.strip().splitlines() or ["no output"])[-1])
            return None
        os.replace(staged, target)  # a JVM never maps half an archive
        return target
    except (OSError, subprocess.TimeoutExpired) as e:
        log.warning("streamfold: no JVM class archive (%s)", e)
        return None
    finally:
        if os.path.exists(staged):
            os.remove(staged)


def _train(staged: str) -> None:
    """The training run: a small continuous query in a JVM that writes ``staged`` as it exits."""
    from dataclasses import replace

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark import SparkContext

    import streamfold

    from .session import get_spark

    settings = replace(resolve(None), jvm_archive=False,
                       java_options=f"-XX:ArchiveClassesAtExit={staged} {QUIET}")
    spark = get_spark("local[2]", app_name="streamfold-archive", settings=settings)
    with tempfile.TemporaryDirectory(prefix="streamfold-archive-") as tmp:
        dirs = {name: os.path.join(tmp, name) for name in ("orders", "users")}
        for d in dirs.values():
            os.makedirs(d)
        sql = ("SELECT u.region, count(*) AS n, sum(o.amount) AS total, count(DISTINCT o.user_id) AS buyers "
               "FROM orders o JOIN users u ON o.user_id = u.id GROUP BY u.region")

        def feed(batch: int) -> None:
            weights = [1] * 45 + [-1] * 5 if batch else [1] * 50  # later batches delete some of batch 0's rows
            orders = pa.table({"user_id": [i % 7 for i in range(50)], "amount": [float(i) for i in range(50)],
                               "_weight": weights})
            users = pa.table({"id": list(range(batch * 3, batch * 3 + 3)), "region": ["n", "s", "e"],
                              "_weight": [1, 1, 1]})
            pq.write_table(orders, os.path.join(dirs["orders"], f"{batch}.parquet"))
            pq.write_table(users, os.path.join(dirs["users"], f"{batch}.parquet"))

        feed(0)
        query = streamfold.start(sql, dirs, os.path.join(tmp, "out"), spark=spark, background=False)
        try:
            for batch in range(3):
                if batch:
                    feed(batch)
                if query.process_available() is None:
                    raise RuntimeError(f"the training run's batch {batch} did not run")
                query.snapshot_pandas()
        finally:
            query.stop()
    gateway = SparkContext._gateway
    assert gateway is not None
    spark.stop()
    proc = getattr(gateway, "proc", None)
    gateway.shutdown()
    if proc is not None and proc.stdin is not None:  # the JVM exits when its stdin closes, and writes the archive
        proc.stdin.close()
        proc.wait(timeout=300)


if __name__ == "__main__":  # `make setup`: python -m streamfold.runtime.jvm_archive
    if sys.argv[1:2] == ["--train"]:
        _train(sys.argv[2])
    else:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        path = make()
        print(f"[setup] JVM class archive: {path or 'not made (streamfold starts Spark without it)'}")
