"""Shared fixtures: one local Spark session for the whole run (tests marked ``spark`` use it)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("STREAMFOLD_SPARK_LOG_LEVEL", "ERROR")
# One JVM runs the whole suite. With 2 GB its heap ended 92 % full by the TPC-H tests in one
# fresh-clone run (full GCs back to back; about 0.9 GB of long[] retained, not yet explained —
# see docs/journal.md); 4 GB of the machine's 24 keeps the suite's time stable meanwhile.
os.environ.setdefault("STREAMFOLD_DRIVER_MEMORY", "4g")


@pytest.fixture(scope="session")
def spark():
    from streamfold.runtime.session import get_spark

    session = get_spark("local[2]", app_name="streamfold-tests")
    yield session
    session.stop()


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite golden explain files")
