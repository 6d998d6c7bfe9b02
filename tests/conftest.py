"""Shared fixtures: one local Spark session for the whole run (tests marked ``spark`` use it)."""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("STREAMFOLD_SPARK_LOG_LEVEL", "ERROR")


@pytest.fixture(scope="session")
def spark():
    from streamfold.runtime.session import get_spark

    session = get_spark("local[2]", app_name="streamfold-tests")
    yield session
    session.stop()


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="rewrite golden explain files")
