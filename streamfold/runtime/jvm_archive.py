"""A class-data-sharing (CDS) archive of the classes Spark's driver loads, mapped by every JVM
streamfold starts.

A cold ``streamfold run`` (a restart, a test's subprocess, the studio) spends its first seconds
starting Spark's JVM and running its first jobs, most of it finding, reading and verifying tens of
thousands of classes in Spark's jars. Java (13 and later) can write every class a run loaded from
its class path into an archive when it exits (``-XX:ArchiveClassesAtExit``); a later JVM given
the archive (``-XX:SharedArchiveFile``) maps those classes from it, already parsed and verified.

``make setup`` makes the archive with a training run (``python -m streamfold.bench.jvm_training``):
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
import os

from ..settings import Settings
from .jvm import _java

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
