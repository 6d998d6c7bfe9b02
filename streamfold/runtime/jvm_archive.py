"""A class-data-sharing (CDS) archive of the classes Spark's driver loads, mapped by every JVM
streamfold starts.

A cold ``streamfold run`` (a restart, a test's subprocess, the studio) spends its first seconds
starting Spark's JVM and running its first jobs, most of it finding, reading and verifying tens of
thousands of classes in Spark's jars. Java (13 and later) can write every class a run loaded from
its class path into an archive when it exits (``-XX:ArchiveClassesAtExit``); a later JVM given
the archive (``-XX:SharedArchiveFile``) maps those classes from it, already parsed and verified.

``make setup`` makes the archive with a training run (``python -m streamfold.bench.jvm_training``:
a continuous query of a few batches and a restart, in a JVM of its own, which writes the archive
as it exits; renamed into place only when whole). It is kept in the Python environment
(``.venv/share/streamfold``; the cache directory if that cannot be written), so it goes with the
jars it was made of, and every session :func:`.session.get_spark` starts maps it. The JVM checks
that the archive matches itself and its class path (the jars, their sizes and times) and
otherwise starts as it would without one (its report of the mismatch is silenced); the archive's
name follows PySpark's version, where its jars are and the Java runtime, so an upgrade of either
makes setup write a new one. Classes Spark compiles at run time (generated code) and the helpers'
jar (:mod:`.jvm`, loaded by Spark's own class loader) are not in it. The setting ``jvm_archive``
(``STREAMFOLD_JVM_ARCHIVE=0``) starts without it.
"""

from __future__ import annotations

import hashlib
import os
import sys

from ..settings import Settings
from .jvm import _java

# the JVM's unified logging of CDS: off, so a mismatched archive (another JDK build) is not reported
# on the driver's output at every start — the JVM just starts without it
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_name() -> str:
    """The archive's file name for this PySpark installation (its jars, where they are: the class
    path the archive is valid for) and this Java runtime."""
    import pyspark

    jars = os.path.realpath(os.path.join(os.path.dirname(pyspark.__file__), "jars"))
    java = os.path.realpath(_java())
    modules = os.path.join(os.path.dirname(os.path.dirname(java)), "lib", "modules")  # the JDK's own classes
    stamp = os.stat(modules) if os.path.exists(modules) else None
    digest = hashlib.sha256(f"{pyspark.__version__}\0{jars}\0{java}\0{stamp and (stamp.st_size, stamp.st_mtime_ns)}"
                            .encode())
    return f"streamfold-jvm-{digest.hexdigest()[:16]}.jsa"


def places(settings: Settings) -> list[str]:
    """Where the archive is looked for, in order: beside the Python environment (``.venv/share/
    streamfold``: it goes with the environment whose jars it holds), then the cache directory (an
    environment that cannot be written to)."""
    name = archive_name()
    return [os.path.join(sys.prefix, "share", "streamfold", name), os.path.join(settings.jar_cache, name)]


def archive_path(settings: Settings) -> str | None:
    """The archive made for this installation, if any."""
    return next((p for p in places(settings) if os.path.exists(p)), None)


def java_options(settings: Settings) -> str:
    """The driver JVM's options to map the archive: none when it is off or not made."""
    path = archive_path(settings) if settings.jvm_archive else None
    return f"-XX:SharedArchiveFile={path} -Xshare:auto {QUIET}" if path is not None else ""
