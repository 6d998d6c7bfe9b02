"""Compiling a query's text for the editor, once per distinct text (Texera's compiler cache).

The studio compiles the shared text on the server, not in each browser: every edit, from
whichever viewer, reaches the server's copy of the document, which compiles it once and sends
the result to all viewers. :class:`CompileCache` then makes a text seen before — an undo, a
second query with the same text, a viewer joining — cost a dictionary lookup. The key is the
text and the inputs it was compiled against (names, formats, columns), so a new file that
changes a source's columns compiles again.

What a query can read (its **inputs**) are the workspace's source directories by their base
names, overridden or added to by the query's explicit bindings. Compiling needs no Spark.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from ..errors import SqlError, StreamfoldError
from .graph import plan_graph
from .sources import SourceDir
from .workspace import Binding, Workspace


@dataclass(frozen=True, slots=True)
class Input:
    """A table name the query may read, resolved to a workspace directory and its columns."""

    name: str
    path: str  # relative to the workspace
    format: str | None
    static: bool
    columns: tuple[tuple[str, str], ...]
    explicit: bool  # bound by the user, not found by its directory's name

    @property
    def schema(self) -> str:
        """``"col TYPE, …"`` as ``streamfold.start(schemas=…)`` takes it."""
        return ", ".join(f"`{c}` {t}" for c, t in self.columns)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "format": self.format, "static": self.static,
                "columns": [{"name": c, "type": t} for c, t in self.columns], "explicit": self.explicit}


def resolve_inputs(workspace: Workspace, bindings: list[Binding]) -> tuple[Input, ...]:
    """The query's inputs: its bindings, then every other source directory under its base name
    (a name two directories share is left out: bind one of them explicitly)."""
    out: dict[str, Input] = {}
    for b in bindings:
        workspace.resolve(b.path)
        src = workspace.sources.describe(b.path)
        out[b.name.lower()] = _input(b.name, src, b.format, b.static, True)
    found = workspace.sources.scan()
    counts: dict[str, int] = {}
    for src in found:
        counts[src.name.lower()] = counts.get(src.name.lower(), 0) + 1
    for src in found:
        key = src.name.lower()
        if key not in out and counts[key] == 1 and src.name.isidentifier():
            out[key] = _input(src.name, src, None, False, False)
    return tuple(out.values())


def _input(name: str, src: SourceDir, fmt: str | None, static: bool, explicit: bool) -> Input:
    return Input(name, src.path, fmt or src.format, static, src.columns, explicit)


@dataclass
class CompileStats:
    compiles: int = 0
    hits: int = 0


class CompileCache:
    """An LRU of compile results keyed by (text, inputs); safe to call from several threads."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.stats = CompileStats()
        self._results: OrderedDict[tuple[str, tuple[Input, ...]], dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def compile(self, text: str, inputs: tuple[Input, ...]) -> dict[str, Any]:
        key = (text, inputs)
        with self._lock:
            hit = self._results.get(key)
            if hit is not None:
                self._results.move_to_end(key)
                self.stats.hits += 1
                return hit
        result = compile_text(text, inputs)
        with self._lock:
            self.stats.compiles += 1
            self._results[key] = result
            while len(self._results) > self.size:
                self._results.popitem(last=False)
        return result


def compile_text(text: str, inputs: tuple[Input, ...]) -> dict[str, Any]:
    """The editor's view of ``text``: ``ok`` with the plan (explain's JSON and its graph) and the
    inputs it reads, or the coded error with its span (character offsets, end exclusive)."""
    import json

    from .. import explain

    known = {i.name: i.schema for i in inputs if i.columns}
    tables = [i.name for i in inputs if i.columns and i.static]
    result: dict[str, Any] = {"text": text, "ok": False, "error": None, "plan": None, "graph": None, "inputs": []}
    if not text.strip():
        result["error"] = {"code": "EMPTY_QUERY", "message": "write a query", "hint": None, "params": {},
                           "span": None, "line": None, "column": None}
        return result
    try:
        plan = json.loads(explain(text, known, tables, format="json"))
    except StreamfoldError as e:
        result["error"] = error_json(e, text, inputs)
        return result
    except Exception as e:  # noqa: BLE001 - a compiler bug must not take the studio down
        result["error"] = {"code": "INTERNAL_ERROR", "message": f"{type(e).__name__}: {e}", "hint":
                           "this is a bug in streamfold; please report it with the query", "params": {},
                           "span": None, "line": None, "column": None}
        return result
    used = {s["name"].lower() for s in plan["sources"]}
    result.update(ok=True, plan=plan, graph=plan_graph(plan),
                  inputs=[i.to_json() for i in inputs if i.name.lower() in used])
    return result


def error_json(e: StreamfoldError, text: str, inputs: tuple[Input, ...]) -> dict[str, Any]:
    """A coded error as the page shows it; an unknown table gets the studio's hint (bind a
    directory), not the command line's (``--source``)."""
    hint = e.hint
    if e.code == "UNKNOWN_TABLE":
        table = str(e.params.get("table", ""))
        empty = [i for i in inputs if i.name.lower() == table.lower() and not i.columns]
        if empty:
            hint = f"directory {empty[0].path} has no files yet, so its columns are unknown: add a first file"
        else:
            names = ", ".join(sorted(i.name for i in inputs if i.columns)) or "none yet"
            hint = f"the workspace's tables are {names}; bind a directory as {table} under Sources"
    span = None
    line = column = None
    if isinstance(e, SqlError) and e.span is not None:
        start, end = e.span
        start = max(0, min(start, len(text) - 1))
        span = [start, max(start + 1, min(end + 1, len(text)))]
        line, column = e.with_sql(text).line, e.column
    return {"code": e.code, "message": e.message, "hint": hint, "params": e.params, "span": span,
            "line": line, "column": column}
