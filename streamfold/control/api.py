"""A running query with its control actions, and :func:`start`, which makes one.

``streamfold.start`` and ``streamfold run`` come here: the query runs under a
:class:`~.controller.Controller` (which replays the checkpoint's control log first), and its
endpoint listens on 127.0.0.1 unless told otherwise. The Python API has the endpoint's actions
as methods, calling the controller directly.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..plan.compilation import Compilation
from ..plan.matrix import DEFAULT_POLICY
from ..plan.model import IncrementalPlan
from ..runtime.config import QueryConfig, input_specs
from ..runtime.engine import Engine
from ..runtime.query import Query, compile_run
from ..runtime.session import get_spark
from ..runtime.staged import dataframe_inputs
from ..settings import Settings, resolve
from .controller import Controller
from .pause import GRACE_S
from .server import LOOPBACK, Endpoint

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession

    from ..runtime.staged import SparkFeeds


class ControlledQuery(Query):
    """A continuous query (see :class:`~streamfold.runtime.query.Query`) that can be paused,
    resumed, stopped at breakpoints, inspected and reconfigured while it runs."""

    def __init__(self, engine: Engine, spark: SparkSession, controller: Controller) -> None:
        super().__init__(engine, spark)
        self.controller = controller
        self.endpoint: Endpoint | None = None
        self.feeds: SparkFeeds | None = None

    def process_available(self) -> Any:
        """As :meth:`Query.process_available`; a Spark stream feeding a source that failed is
        raised here (coded ``SPARK_SOURCE_FAILED``) rather than starving the query quietly."""
        if self.feeds is not None:
            self.feeds.check()
        return super().process_available()

    def feeding(self) -> bool:
        """A Spark stream that has not run its first trigger, or runs one, or found data in its
        last, is still staging input: ``until_idle`` does not count that time as quiet."""
        return self.feeds is not None and self.feeds.busy()

    @property
    def control_url(self) -> str | None:
        """The endpoint's URL (its token is in OUTPUT/_control.json), or None without one."""
        return self.endpoint.url if self.endpoint is not None else None

    def status(self) -> dict[str, Any]:
        """State (running, idle, pausing, paused, stopped), batch and step, the pause, the
        breakpoint hit, the query version, a pending reconfiguration."""
        return self.controller.status()

    def pause(self, wait: bool = True, timeout: float = 30.0) -> dict[str, Any]:
        """Pause at the next step boundary (cancelling a step that runs long, to redo it on resume);
        with ``wait``, return once paused. Files that arrive meanwhile wait."""
        return self.controller.pause(wait, timeout)

    def resume(self) -> dict[str, Any]:
        """Go on; at a breakpoint, commit the batch as it is (or under a new query if one was given)."""
        return self.controller.resume()

    def skip(self) -> dict[str, Any]:
        """At a source breakpoint: quarantine the offending files and run the batch without them."""
        return self.controller.skip()

    def add_breakpoint(self, kind: str, target: str | None = None, condition: str | None = None,
                       after: int | None = None) -> dict[str, Any]:
        """``kind`` is source (``target`` a stream), changes, state (``target`` a state's explain
        name) with a SQL ``condition``, or after with ``after`` = N batches."""
        return self.controller.add_breakpoint(kind, target, condition, after)

    def remove_breakpoint(self, bp_id: str) -> dict[str, Any]:
        return self.controller.remove_breakpoint(bp_id)

    def breakpoints(self) -> list[dict[str, Any]]:
        return self.controller.list_breakpoints()

    def inspect(self, sql: str, limit: int = 100) -> dict[str, Any]:
        """Read-only SQL over snapshot, changes, the states and delta_<source>: columns and rows."""
        return self.controller.inspect(sql, limit)

    def inspect_pandas(self, sql: str, limit: int = 100) -> pd.DataFrame:
        import pandas as pd

        result = self.inspect(sql, limit)
        return pd.DataFrame(result["rows"], columns=[c["name"] for c in result["columns"]])

    def reconfigure(self, sql: str, semantics: str = "restate", wait: bool = False,
                    timeout: float = 600.0) -> dict[str, Any]:
        """Change the query at the next batch boundary: ``restate`` (its answer over all data) or
        ``from now on`` (new logic for the rows that arrive after the boundary)."""
        return self.controller.reconfigure(sql, semantics, wait, timeout)

    def history(self) -> list[dict[str, Any]]:
        """The control log: every action, with the batch it applied to."""
        return self.controller.history()

    def events(self, after: int = 0, timeout: float = 0.0) -> list[dict[str, Any]]:
        return self.controller.events.after(after, timeout)

    def stop(self) -> None:
        try:
            if self.feeds is not None:  # the Spark streams staging its DataFrame sources
                self.feeds.stop()
            super().stop()
        finally:
            if self.endpoint is not None:
                self.endpoint.stop()
                self.endpoint = None


def start(sql: str | Compilation, sources: Mapping[str, Any], output: str, *,
          tables: Mapping[str, Any] | None = None, formats: Mapping[str, str] | None = None,
          schemas: Mapping[str, str] | None = None, checkpoint: str | None = None, trigger: float = 1.0,
          until_idle: float | None = None, partitions: int | None = None, on_bad_file: str = "stop",
          compact_every: int = 20, keep_snapshots: int | None = None, profile: bool = False,
          matrix_epsilon: float | None = 1.0, matrix_cells: int = 4, matrix_equi: str = DEFAULT_POLICY.equi,
          matrix_start: tuple[int, int] | None = None, strategy: str = "incremental",
          settings: Settings | None = None, spark: SparkSession | None = None, master: str | None = None,
          background: bool = True, progress: Callable[[str], None] | None = None, endpoint: bool = True,
          control_host: str = LOOPBACK, control_port: int = 0, pause_grace: float = GRACE_S,
          sinks: Sequence[Any] = ()) -> ControlledQuery:
    """Start ``sql`` (its text, or its compilation with the text parsed) under a controller, with
    its endpoint unless ``endpoint`` is False (see :func:`streamfold.start`). Every option is
    checked here, before Spark starts (coded ``BAD_OPTION``, ``BAD_SETTING``), and so is the
    query's syntax."""
    compilation = sql if isinstance(sql, Compilation) else Compilation(sql)
    compilation.parsed  # noqa: B018 - a syntax error is reported before a JVM starts for it
    # Spark DataFrames: staged into the checkpoint (a streaming one by a Spark stream started below)
    sources, tables, schemas, feeds = dataframe_inputs(sources, tables, schemas,
                                                       checkpoint or os.path.join(output, "_checkpoint"))
    streams, statics = input_specs(sources, tables, formats, schemas)
    config = QueryConfig(
        sql=compilation.text, sources=streams, output=output, tables=statics, checkpoint=checkpoint, trigger=trigger,
        until_idle=until_idle, partitions=partitions, on_bad_file=on_bad_file, compact_every=compact_every,
        keep_snapshots=keep_snapshots, profile=profile, matrix_epsilon=matrix_epsilon, matrix_cells=matrix_cells,
        matrix_equi=matrix_equi, matrix_start=matrix_start, strategy=strategy, settings=resolve(settings),
        sinks=tuple(sinks))
    check_endpoint(control_port, pause_grace)
    query = launch(config, compilation, spark=spark, master=master, background=background, progress=progress,
                   endpoint=endpoint, control_host=control_host, control_port=control_port, pause_grace=pause_grace)
    query.feeds = feeds
    try:
        feeds.start(config.settings.spark_trigger)
    except BaseException:
        query.stop()
        raise
    return query


def check_endpoint(control_port: int, pause_grace: float) -> None:
    """Refuse a port or a pause grace the endpoint cannot work with."""
    if isinstance(control_port, bool) or not isinstance(control_port, int) or not 0 <= control_port <= 65535:
        raise UsageError(f"control_port cannot be {control_port!r}", code="BAD_OPTION",
                         params={"option": "control_port", "value": control_port},
                         hint="control_port (--control-port) is 0 (any free port) to 65535")
    if isinstance(pause_grace, bool) or not isinstance(pause_grace, (int, float)) or pause_grace < 0:
        raise UsageError(f"pause_grace cannot be {pause_grace!r}", code="BAD_OPTION",
                         params={"option": "pause_grace", "value": pause_grace},
                         hint="pause_grace takes seconds, at least 0")


def launch(config: QueryConfig, compilation: Compilation, *, spark: SparkSession | None, master: str | None,
           background: bool, progress: Callable[[str], None] | None, endpoint: bool, control_host: str,
           control_port: int, pause_grace: float) -> ControlledQuery:
    """Run a checked ``config`` whose query ``compilation`` parsed: its inputs' schemas read (in
    ``spark``, or a session started on ``master`` with the config's settings), the query bound and
    planned against them, the engine started under a controller."""
    session = spark if spark is not None else get_spark(master, settings=config.settings)
    compiled = compile_run(session, config, compilation)
    catalog = compiled.catalog  # every input's, so a reconfiguration's query may read any of them
    assert catalog is not None

    def compile_text(text: str) -> IncrementalPlan:
        return Compilation(text, catalog, config.matrix_policy,
                           push_down_groups=config.settings.push_down_groups).plan

    controller = Controller(config, compile_text, grace=pause_grace)
    engine = Engine(session, compiled.plan, config, progress=progress, control=controller)
    query = ControlledQuery(engine, session, controller)
    try:
        controller.attach(engine)
        if endpoint:
            query.endpoint = Endpoint(controller, config.output, control_host, control_port)
    except BaseException:
        engine.close()
        raise
    if background:
        query.start_background(config.trigger, config.until_idle)
    return query
