"""Temp views for a batch's programs: each program becomes one Spark SQL statement over them.

A program's leaves (a batch's rows, a static table, a state's old/new/delta version) are
DataFrames registered as temp views of the query's own Spark session; :mod:`.lowering` writes
the statement over those view names and one ``spark.sql`` call builds the whole plan. That keeps
the Python side to a handful of calls per batch, and the SQL Spark runs is the SQL ``explain``
shows (with the physical join hints added).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..ir.rel import DeltaScan, LoopRef, Once, Rel, Scan, StateScan
from .lowering import program, subquery

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# A leaf is a DataFrame (registered as a temp view) or SQL text of a relation over views.
Resolve = Callable[[Rel], "DataFrame | str"]


class Views:
    """Temp views standing for the DataFrames a batch's programs read; dropped after the batch."""

    def __init__(self, spark: SparkSession, prefix: str = "sf") -> None:
        self.spark = spark
        self.prefix = prefix
        self._by_id: dict[int, tuple[str, DataFrame]] = {}
        self._count = 0
        self._lock = threading.Lock()  # steps of a batch register views from several threads

    def name(self, df: DataFrame, hint: str) -> str:
        """The view name for ``df``, registering it on first use."""
        with self._lock:
            key = id(df)
            if key not in self._by_id:
                self._count += 1
                safe = re.sub(r"[^A-Za-z0-9_]", "_", hint)
                name = f"__{self.prefix}_{safe}_{self._count}"
                df.createOrReplaceTempView(name)
                self._by_id[key] = (name, df)  # holding df keeps id(df) from being reused
            return self._by_id[key][0]

    def relation(self, value: DataFrame | str, hint: str) -> str:
        """A FROM item for ``value``: a view name, or a parenthesised SQL fragment."""
        if isinstance(value, str):
            return subquery(value)
        return self.name(value, hint)

    def drop(self) -> None:
        with self._lock:
            for name, _ in self._by_id.values():
                self.spark.catalog.dropTempView(name)
            self._by_id.clear()


def leaf_hint(rel: Rel) -> str:
    if isinstance(rel, DeltaScan):
        return f"delta_{rel.table}"
    if isinstance(rel, Scan):
        return f"table_{rel.table}"
    if isinstance(rel, Once):
        return "once"
    if isinstance(rel, LoopRef):
        return "loop"
    assert isinstance(rel, StateScan)
    return f"{rel.version}_{rel.state}"


def to_sql(rel: Rel, resolve: Resolve, views: Views) -> str:
    """The statement of ``rel``, its leaves resolved by ``resolve`` and named by ``views``."""
    return program(rel, lambda leaf: views.relation(resolve(leaf), leaf_hint(leaf)))


def output_rows(df: DataFrame) -> int | None:
    """Rows an already executed DataFrame produced, read from its plan's metrics (no extra job)."""
    try:
        node = df._jdf.queryExecution().executedPlan()
        while True:
            metrics = node.metrics()
            if metrics.contains("numOutputRows"):
                return int(metrics.apply("numOutputRows").value())
            kids = node.children()
            if kids.size() == 0:
                return None
            node = kids.apply(0)
    except Exception:  # noqa: BLE001 - counts are for the log line; missing is acceptable
        return None
