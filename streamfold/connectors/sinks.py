"""Sinks by name: a ``--sink`` endpoint or a Python hook, checked and opened.

``postgres://…?table=NAME`` opens :class:`.postgres_sink.PostgresSink`, ``PATH:delta``
:class:`.delta_sink.DeltaSink`, a callable :class:`.hook_sink.HookSink`. A sink spec is checked
where the run's options are (no connection yet): an endpoint of another kind is a coded usage
error. Opening connects, and creates or checks the sink's tables.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

from ..errors import UsageError
from . import Endpoint, SinkConnector, parse_endpoint
from .committed import AnswerShape

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SinkSpec = Union[str, Endpoint, Callable[[int, Any, Any], None]]
SINK_KINDS = ("postgres", "delta")


def check_sink(spec: SinkSpec) -> Endpoint | Callable[[int, Any, Any], None]:
    """``spec`` as an endpoint (or the hook itself); a coded error if no sink can be made of it."""
    if callable(spec):
        return spec
    endpoint = spec if isinstance(spec, Endpoint) else parse_endpoint(str(spec), role="sink")
    if endpoint.kind not in SINK_KINDS:
        raise UsageError(f"{endpoint.shown()} is not a sink", code="BAD_ENDPOINT", params={"spec": endpoint.shown()},
                         hint="a sink is postgres://USER@HOST:PORT/DB?table=NAME or PATH:delta "
                              "(streamfold's own output is --output)")
    if endpoint.kind == "postgres" and not endpoint.option("table"):
        raise UsageError(f"the sink {endpoint.shown()} names no table", code="BAD_ENDPOINT",
                         params={"spec": endpoint.shown()}, hint="add ?table=NAME to the URL")
    changes = endpoint.option("changes")
    if endpoint.kind == "postgres" and changes is not None and changes in ("", endpoint.option("table")):
        raise UsageError(f"the sink {endpoint.shown()} names a changes table that is empty or the answer's own",
                         code="BAD_ENDPOINT", params={"spec": endpoint.shown()},
                         hint="give the changes a table of their own: ?table=NAME&changes=NAME_changes")
    return endpoint


def sink_name(spec: SinkSpec, index: int) -> str:
    checked = check_sink(spec)
    if isinstance(checked, Endpoint):
        table = checked.option("table")
        return checked.shown() + (f"?table={table}" if table else "")
    from .hook_sink import hook_name

    return hook_name(checked, index)


def open_sink(spec: SinkSpec, index: int, shape: AnswerShape, spark: SparkSession, record_dir: str) -> SinkConnector:
    """The sink ``spec`` names, connected and ready (its tables created or checked)."""
    checked = check_sink(spec)
    if not isinstance(checked, Endpoint):
        from .hook_sink import HookSink

        return HookSink(checked, sink_name(spec, index), spark, record_dir)
    if checked.kind == "postgres":
        from .postgres_sink import PostgresSink

        sink: SinkConnector = PostgresSink(checked, shape)
    else:
        from .delta_sink import DeltaSink

        sink = DeltaSink(checked, shape)
    sink.name = sink_name(spec, index)
    return sink
