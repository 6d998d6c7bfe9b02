"""streamfold's JVM helpers: a few Java classes (``java/*.java``) compiled into a jar Spark loads.

Prepared plans (:mod:`.prepared`) need two RDD classes Spark does not have — a leaf whose rows
are set before each job and a merge kept once per job — and executors must load them, so they
are a jar on the session's classpath, not code compiled inside the driver. The jar is built once
per source text and PySpark version with Janino, the Java compiler Spark itself ships (so a Java
runtime is enough: no JDK), and cached under ``~/.cache/streamfold`` (the setting ``cache_dir``).
``make setup`` builds it; a session started without it runs every batch the plain way.
"""

from __future__ import annotations

import glob
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
import weakref
import zipfile
from typing import Any

from ..settings import resolve

log = logging.getLogger("streamfold")

_SOURCES = os.path.join(os.path.dirname(__file__), "java")
_built: str | None = None
_failed: str | None = None


def _spark_jars() -> str:
    import pyspark

    return os.path.join(os.path.dirname(pyspark.__file__), "jars")


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return os.path.join(home, "bin", "java")
    return shutil.which("java") or "java"


def _target(cache: str) -> str:
    import pyspark

    digest = hashlib.sha256(pyspark.__version__.encode())
    for path in sorted(glob.glob(os.path.join(_SOURCES, "*.java"))):
        with open(path, "rb") as f:
            digest.update(os.path.basename(path).encode() + b"\0" + f.read())
    return os.path.join(cache, f"streamfold-jvm-{digest.hexdigest()[:16]}.jar")


def helper_jar(build: bool = True, cache: str | None = None) -> str | None:
    """The helpers' jar in directory ``cache`` (the settings' ``jar_cache`` if not given), built
    if missing (a few seconds, once); None if it cannot be built (the reason is logged once, and
    streamfold runs without prepared plans)."""
    global _built, _failed
    if _built is not None:
        return _built
    if _failed is not None:
        return None
    target = _target(cache if cache is not None else resolve(None).jar_cache)
    if os.path.exists(target):
        _built = target
        return target
    if not build:
        return None
    try:
        _compile(target)
    except Exception as e:  # noqa: BLE001 - without the jar every batch runs the plain way
        _failed = str(e)
        log.warning("streamfold: JVM helpers not built (%s); batches run without prepared plans", e)
        return None
    _built = target
    return target


def _compile(target: str) -> None:
    jars = _spark_jars()
    sources = sorted(glob.glob(os.path.join(_SOURCES, "*.java")))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="streamfold-jvm-") as tmp:
        classes = os.path.join(tmp, "classes")
        os.makedirs(classes)
        classpath = os.pathsep.join(sorted(glob.glob(os.path.join(jars, "*.jar"))))
        done = subprocess.run([_java(), "-cp", os.path.join(jars, "*"),
                               "org.codehaus.commons.compiler.samples.CompilerDemo",
                               "-d", classes, "-classpath", classpath, *sources],
                              capture_output=True, text=True, timeout=300)
        if done.returncode != 0 or not glob.glob(os.path.join(classes, "**", "*.class"), recursive=True):
            raise RuntimeError(f"Janino failed: {(done.stderr or done.stdout).strip()[:500]}")
        partial = os.path.join(tmp, "helpers.jar")
        with zipfile.ZipFile(partial, "w") as z:
            for root, _, names in os.walk(classes):
                for n in sorted(names):
                    path = os.path.join(root, n)
                    z.write(path, os.path.relpath(path, classes))
        staged = f"{target}.{os.getpid()}.part"  # renamed into place: a concurrent build never sees half a jar
        shutil.copyfile(partial, staged)
        os.replace(staged, target)


_CLASSES: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()  # JVM view → name → class


def helper_class(spark: Any, name: str) -> Any:
    """The helper class ``name`` (``java/<name>.java``) of ``spark``'s JVM, or None without the
    helpers; looked up once per JVM."""
    view = spark._jvm
    known = _CLASSES.setdefault(view, {})
    if name not in known:
        known[name] = getattr(view.streamfold.jvm, name) if loaded(spark) else None
    return known[name]


def loaded(spark: Any) -> bool:
    """Whether the session's JVM has the helpers (a session started by streamfold has)."""
    try:
        from py4j.java_gateway import JavaClass

        return isinstance(spark._jvm.streamfold.jvm.SlotRDD, JavaClass)
    except Exception:  # noqa: BLE001
        return False


if __name__ == "__main__":  # `make setup` builds the jar: python -m streamfold.runtime.jvm
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    jar = helper_jar()
    print(f"[setup] JVM helpers: {jar or 'not built: ' + str(_failed)}")
