"""A throw-away PostgreSQL server for the sinks' tests (``streamfold.bench.pgserver``), one per
session, on a loopback port; skipped where PostgreSQL is not installed."""

from __future__ import annotations

import pytest

from streamfold.bench.pgserver import Postgres, bin_dir, throwaway_postgres

__all__ = ["Postgres", "postgres"]


@pytest.fixture(scope="session")
def postgres():
    if bin_dir() is None:
        pytest.skip("PostgreSQL is not installed (make setup installs Debian's postgresql)")
    with throwaway_postgres() as server:
        yield server
