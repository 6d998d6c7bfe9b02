"""Temp views for a batch's programs: each program becomes one Spark SQL statement over them.

A program's leaves (a batch's rows, a static table, a state's old/new/delta version) are
DataFrames registered as temp views of the query's own Spark session; :mod:`.lowering` writes
the statement over those view names and one ``spark.sql`` call builds the whole plan. That keeps
the Python side to a handful of calls per batch, and the SQL Spark runs is the SQL ``explain``
shows (with the physical join hints added).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..ir.rel import DeltaScan, LoopRef, Once, Rel, Scan, StateScan
from .jvm import helper_class
from .lowering import program, subquery

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# A leaf is a DataFrame (registered as a temp view) or SQL text of a relation over views.
Resolve = Callable[[Rel], "DataFrame | str"]

log = logging.getLogger("streamfold")


class _ViewCommands:
    """Temp views registered and dropped without a SQL execution each.

    ``DataFrame.createOrReplaceTempView`` builds Spark's ``CreateViewCommand`` and runs it as a
    query of its own: analysed, executed under a new SQL execution id, announced to the listener
    bus with its plan's description: milliseconds of driver CPU per view (a batch registers
    several: its rows, each state's versions, the merges' results), tens of times what running
    the same command's ``run`` directly costs (docs/journal.md, "Temp views") — what the command does
    is the same: the analysed plan stored as the view, replacing one of the same name. Dropping
    goes to the session catalog directly too (no cached plan is ever registered as a view here,
    so there is nothing to uncache). The command's constructor is Spark-internal: if it is not
    there or fails, the public API is used from then on (logged once).
    """

    def __init__(self, spark: SparkSession) -> None:
        jvm: Any = spark._jvm
        self._session = spark._jsparkSession  # type: ignore[attr-defined]
        self._catalog = self._session.sessionState().catalog()
        command = jvm.org.apache.spark.sql.execution.command
        companion = getattr(getattr(command, "CreateViewCommand$"), "MODULE$")
        immutable = jvm.scala.collection.immutable
        none = jvm.scala.Option.empty()
        self._identifier = getattr(getattr(jvm.org.apache.spark.sql.catalyst, "TableIdentifier$"), "MODULE$")
        self._new = command.CreateViewCommand
        # name, columns, comment, collation, properties, original text | plan | allow existing,
        # replace, view type, schema mode, analysed, referred temp functions
        self._before = (getattr(getattr(immutable, "Nil$"), "MODULE$"), none, none,
                        getattr(getattr(immutable, "Map$"), "MODULE$").empty(), none)
        self._after = (False, True, getattr(getattr(jvm.org.apache.spark.sql.catalyst.analysis, "LocalTempView$"), "MODULE$"),
                       getattr(companion, "apply$default$11")(), True, getattr(companion, "apply$default$13")())

    def create(self, df: DataFrame, name: str) -> None:
        command = self._new(self._identifier.apply(name), *self._before, df._jdf.logicalPlan(), *self._after)
        command.run(self._session)

    def drop(self, name: str) -> None:
        self._catalog.dropTempView(name)


_COMMANDS: dict[int, tuple[Any, _ViewCommands | None]] = {}  # id of the Java session -> (it, commands)


def use_public_api(spark: SparkSession) -> None:
    """Register ``spark``'s temp views through the public API, a SQL execution each (the A/B
    switch ``direct_views`` off: ``runtime/session.engine_session``)."""
    _COMMANDS[id(spark._jsparkSession)] = (spark._jsparkSession, None)  # type: ignore[attr-defined]


def _commands(spark: SparkSession) -> _ViewCommands | None:
    """The direct view commands of ``spark``'s session (None: use the public API)."""
    session = spark._jsparkSession  # type: ignore[attr-defined]
    held = _COMMANDS.get(id(session))
    if held is None or held[0] is not session:
        try:
            commands: _ViewCommands | None = _ViewCommands(spark)
        except Exception as e:  # noqa: BLE001 - an internal API: the public one always works
            log.info("temp views through the public API (%s)", e)
            commands = None
        held = _COMMANDS[id(session)] = (session, commands)
    return held[1]


def create_view(spark: SparkSession, df: DataFrame, name: str) -> None:
    """``df.createOrReplaceTempView(name)``, without its SQL execution (:class:`_ViewCommands`)."""
    commands = _commands(spark)
    if commands is not None:
        try:
            commands.create(df, name)
            return
        except Exception as e:  # noqa: BLE001
            log.info("temp views through the public API from now on (%s)", e)
            use_public_api(spark)
    df.createOrReplaceTempView(name)


def drop_view(spark: SparkSession, name: str) -> None:
    commands = _commands(spark)
    if commands is not None:
        commands.drop(name)
    else:
        spark.catalog.dropTempView(name)


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
                create_view(self.spark, df, name)
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
                drop_view(self.spark, name)
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
    """Rows an already executed DataFrame produced, read from its plan's metrics (no extra job):
    those of the first node that counts them, following first inputs down (one call to the JVM's
    helpers, ``PlanRows.rows``, where they are loaded)."""
    try:
        node = df._jdf.queryExecution().executedPlan()
        helper = helper_class(df.sparkSession, "PlanRows")
        if helper is not None:
            rows = helper.rows(node)
            return None if rows < 0 else int(rows)
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
