"""The archive of Spark's classes (runtime/jvm_archive.py): made by `make setup`, mapped by the
JVMs streamfold starts — and when it is off or missing, not asked for."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from streamfold.bench import jvm_training
from streamfold.runtime import jvm_archive
from streamfold.settings import Settings


def test_the_options_name_the_archive_only_when_it_is_made_and_on(tmp_path, monkeypatch):
    monkeypatch.setattr(jvm_archive.sys, "prefix", str(tmp_path / "venv"))
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    assert jvm_archive.java_options(settings) == "" and jvm_archive.archive_path(settings) is None  # not made
    beside, cached = jvm_archive.places(settings)
    assert beside.startswith(str(tmp_path / "venv" / "share" / "streamfold"))
    assert cached.startswith(str(tmp_path / "cache")) and cached.endswith(".jsa")
    os.makedirs(os.path.dirname(cached))
    open(cached, "wb").close()
    assert jvm_archive.java_options(settings) == f"-XX:SharedArchiveFile={cached} -Xshare:auto {jvm_archive.QUIET}"
    os.makedirs(os.path.dirname(beside))
    open(beside, "wb").close()  # the environment's own comes first
    assert jvm_archive.archive_path(settings) == beside
    assert jvm_archive.java_options(Settings(cache_dir=str(tmp_path / "cache"), jvm_archive=False)) == ""
    assert jvm_training.make(settings) == beside  # made already: nothing to do


@pytest.mark.spark
def test_the_archive_setup_made_maps_into_sparks_driver():
    """`-Xshare:on` makes a JVM that cannot map its archive exit at once: a session started with it
    (after the options streamfold gives, so it wins over -Xshare:auto) runs a job only if the
    archive matches this Java and Spark's class path."""
    assert jvm_archive.archive_path(Settings()) is not None, "make setup makes the archive"
    code = ("from streamfold.runtime.session import get_spark; "
            "print(get_spark('local[1]').range(5).count())")
    env = {**os.environ, "STREAMFOLD_JAVA_OPTIONS": "-Xshare:on"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0 and done.stdout.strip().endswith("5"), done.stderr[-3000:]
