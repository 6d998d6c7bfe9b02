"""A running query with its control actions, and :func:`start`, which makes one.

``streamfold.start`` and ``streamfold run`` come here: the query runs under a
:class:`~.controller.Controller` (which replays the checkpoint's control log first), and its
endpoint listens on 127.0.0.1 unless told otherwise. The Python API has the endpoint's actions
as methods, calling the controller directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

from ..runtime.engine import Engine
from ..runtime.query import Query, compile_sql, input_catalog, make_config
from ..runtime.session import get_spark
from .controller import Controller
from .pause import GRACE_S
from .server import LOOPBACK, Endpoint

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import SparkSession


class ControlledQuery(Query):
    """A continuous query (see :class:`~streamfold.runtime.query.Query`) that can be paused,
    resumed, stopped at breakpoints, inspected and reconfigured while it runs."""

    def __init__(self, engine: Engine, spark: SparkSession, controller: Controller) -> None:
        super().__init__(engine, spark)
        self.controller = controller
        self.endpoint: Endpoint | None = None

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
            super().stop()
        finally:
            if self.endpoint is not None:
                self.endpoint.stop()
                self.endpoint = None


def start(sql: str, sources: Mapping[str, str], output: str, *, tables: Mapping[str, str],
          formats: Mapping[str, str], schemas: Mapping[str, str], checkpoint: str | None, trigger: float,
          spark: SparkSession | None, master: str | None, background: bool,
          progress: Callable[[str], None] | None = None, endpoint: bool = True, control_host: str = LOOPBACK,
          control_port: int = 0, pause_grace: float = GRACE_S, **options: Any) -> ControlledQuery:
    """Start ``sql`` under a controller, with its endpoint unless ``endpoint`` is False."""
    until_idle = options.pop("until_idle", None)
    config = make_config(sql, sources, output, tables, formats, schemas, checkpoint=checkpoint, trigger=trigger,
                         until_idle=until_idle, **options)
    session = spark if spark is not None else get_spark(master)
    catalog = input_catalog(session, config)  # every input's, so a new query may read any of them
    controller = Controller(config, partial(compile_sql, catalog=catalog, policy=config.matrix_policy), grace=pause_grace)
    engine = Engine(session, compile_sql(config.sql, catalog, config.matrix_policy), config, progress=progress, control=controller)
    query = ControlledQuery(engine, session, controller)
    try:
        controller.attach(engine)
        if endpoint:
            query.endpoint = Endpoint(controller, config.output, control_host, control_port)
    except BaseException:
        engine.close()
        raise
    if background:
        query.start_background(trigger, until_idle)
    return query
