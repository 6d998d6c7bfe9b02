"""``streamfold bench``: one workload through several systems, same machine, same data, one run.

A workload (:mod:`.workloads`) is a query, its sources and a schedule — a history, then
increments. :mod:`.data` generates its files once; every system (:mod:`.systems`) gets its own
source directories into which the same files are made to appear, increment by increment, and
is driven until its answer over all data so far is committed. The runner (:mod:`.runner`) times
that, checks each system's final answer against DuckDB (:mod:`streamfold.verify`), and the report
(:mod:`.report`, :mod:`.plot`) writes ``results.json``, ``results.md`` and ``plot.png``.
"""

from __future__ import annotations

from .runner import BenchOptions, run_bench
from .workloads import WORKLOADS, Workload

__all__ = ["WORKLOADS", "BenchOptions", "Workload", "run_bench"]
