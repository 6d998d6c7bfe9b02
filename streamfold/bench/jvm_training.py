"""The training run that makes the archive of Spark's classes (:mod:`streamfold.runtime.jvm_archive`):
``make setup`` runs ``python -m streamfold.bench.jvm_training``, a no-op once the archive is made.

The run is a small continuous query of a few batches — a join, groups, a distinct count,
deletions, Parquet in and out, the snapshot read back, a restart from its checkpoint — in a
process and JVM of its own, which
writes the archive as it exits (``-XX:ArchiveClassesAtExit``); the archive is renamed into place
only when whole, so a JVM never maps half of one.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile

from ..runtime.jvm_archive import QUIET, archive_path, places
from ..settings import Settings, resolve

log = logging.getLogger("streamfold")


def make(settings: Settings | None = None, timeout: float = 600) -> str | None:
    """The archive, made by a training run in a process of its own if missing; None if it could
    not be made (the reason is logged: streamfold runs as well without it, only starts slower)."""
    settings = settings or resolve(None)
    made = archive_path(settings)
    if made is not None:
        return made
    target = next((p for p in places(settings) if _writable(os.path.dirname(p))), None)
    if target is None:
        log.warning("streamfold: no JVM class archive (no place to write it: %s)", ", ".join(places(settings)))
        return None
    os.makedirs(os.path.dirname(target), exist_ok=True)
    staged = f"{target}.{os.getpid()}.part"
    try:
        done = subprocess.run([sys.executable, "-m", "streamfold.bench.jvm_training", "--train", staged],
                              capture_output=True, text=True, timeout=timeout)
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


def _writable(directory: str) -> bool:
    """Whether ``directory`` can be made (or is) and written to."""
    while not os.path.exists(directory):
        parent = os.path.dirname(directory)
        if parent == directory:
            return False
        directory = parent
    return os.access(directory, os.W_OK)


def _train(staged: str) -> None:
    """The training run: a small continuous query in a JVM that writes ``staged`` as it exits."""
    from dataclasses import replace

    import pyarrow as pa
    import pyarrow.parquet as pq
    from pyspark import SparkContext

    import streamfold

    from ..runtime.session import get_spark

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
        # three batches, then the query started again on its checkpoint (a restart reads the
        # states back: classes of their own) for a fourth
        for batches in (range(3), range(3, 4)):
            query = streamfold.start(sql, dirs, os.path.join(tmp, "out"), spark=spark, background=False)
            try:
                for batch in batches:
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


if __name__ == "__main__":  # `make setup`: python -m streamfold.bench.jvm_training
    if sys.argv[1:2] == ["--train"]:
        _train(sys.argv[2])
    else:
        logging.basicConfig(level=logging.INFO, format="%(message)s")
        path = make()
        print(f"[setup] JVM class archive: {path or 'not made (streamfold starts Spark without it)'}")
