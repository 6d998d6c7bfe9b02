"""The studio's workspace: a directory whose subdirectories are the sources, and the studio's
own files under ``.studio/`` — queries, their shared text, their runs' outputs and their logs.

Layout (everything the studio writes is under ``WORKSPACE/.studio/``, which the source search
skips as it skips every hidden name)::

    .studio/queries/<id>/query.json        name, table bindings
    .studio/queries/<id>/query.sql         the text, as last edited (readable by hand)
    .studio/queries/<id>/doc.yjs           the shared document (Yjs update), the text's history
    .studio/queries/<id>/log.jsonl         the actions and errors, one JSON object a line
    .studio/queries/<id>/runs/<n>/run.json the run's query text and sources
    .studio/queries/<id>/runs/<n>/output/  snapshots/, changes/, commits/, _checkpoint/

Invariant: every path the studio reads or writes on a request's behalf comes out of
:meth:`Workspace.resolve`, which refuses anything that is not inside the workspace once
symbolic links are followed (``PATH_OUTSIDE_WORKSPACE``).
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..runtime import files
from .sources import SourceScanner

STUDIO_DIR = ".studio"
_QUERY_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_TABLE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class Binding:
    """A table name of the query bound to a workspace directory (``path`` relative to it)."""

    name: str
    path: str
    format: str | None = None  # None: the directory's own (by its files)
    static: bool = False  # a table read once, not a stream

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "format": self.format, "static": self.static}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Binding:
        name = str(data.get("name", "")).strip()
        if not _TABLE_NAME.match(name):
            raise UsageError(f"{name!r} is not a table name", code="BAD_TABLE_NAME", params={"name": name},
                             hint="letters, digits and _, not starting with a digit")
        fmt = data.get("format")
        if fmt not in (None, "parquet", "csv", "json"):
            raise UsageError(f"unknown format {fmt!r}", code="BAD_FORMAT", params={"format": fmt},
                             hint="use parquet, csv or json")
        return cls(name, str(data.get("path", "")), fmt, bool(data.get("static", False)))


@dataclass(slots=True)
class QueryMeta:
    id: str
    name: str
    created: float
    bindings: list[Binding] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "created": self.created,
                "bindings": [b.to_json() for b in self.bindings]}


class Workspace:
    """One workspace directory; safe to share between threads (it keeps no mutable state but
    the source scanner's cache, which locks)."""

    def __init__(self, root: str) -> None:
        if not os.path.isdir(root):
            raise UsageError(f"workspace {root} is not a directory", code="WORKSPACE_NOT_FOUND",
                             params={"path": root}, hint="create it, or pass --workspace DIR")
        self.root = os.path.realpath(root)
        self.state_dir = os.path.join(self.root, STUDIO_DIR)
        os.makedirs(os.path.join(self.state_dir, "queries"), exist_ok=True)
        self.sources = SourceScanner(self.root)

    # -- paths -----------------------------------------------------------------------------------
    def resolve(self, rel: str, *, directory: bool = True) -> str:
        """The absolute path of ``rel`` (relative to the workspace), refused unless it stays
        inside the workspace after following links, and (``directory``) is an existing directory."""
        if not isinstance(rel, str) or not rel or "\x00" in rel or os.path.isabs(rel):
            raise _outside(rel)
        path = os.path.realpath(os.path.join(self.root, rel))
        if os.path.commonpath([path, self.root]) != self.root or path == self.root:
            raise _outside(rel)
        if os.path.commonpath([path, self.state_dir]) == self.state_dir:
            raise _outside(rel)  # the studio's own files are not sources
        if directory and not os.path.isdir(path):
            raise UsageError(f"{rel} is not a directory of the workspace", code="NOT_A_DIRECTORY",
                             params={"path": rel}, hint="choose a directory from the sources list")
        return path

    # -- queries ---------------------------------------------------------------------------------
    def query_dir(self, qid: str) -> str:
        if not _QUERY_ID.match(qid or ""):
            raise UsageError(f"no query {qid!r}", code="UNKNOWN_QUERY", params={"query": qid})
        path = os.path.join(self.state_dir, "queries", qid)
        if not os.path.isfile(os.path.join(path, "query.json")):
            raise UsageError(f"no query {qid!r}", code="UNKNOWN_QUERY", params={"query": qid})
        return path

    def queries(self) -> list[QueryMeta]:
        base = os.path.join(self.state_dir, "queries")
        out = []
        for name in sorted(os.listdir(base)):
            if _QUERY_ID.match(name) and os.path.isfile(os.path.join(base, name, "query.json")):
                out.append(self.load_meta(name))
        return sorted(out, key=lambda m: m.created)

    def create_query(self, name: str, text: str = "") -> QueryMeta:
        slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "query"
        qid = f"{slug}-{uuid.uuid4().hex[:6]}"
        meta = QueryMeta(qid, name.strip() or slug, time.time())
        os.makedirs(os.path.join(self.state_dir, "queries", qid, "runs"))
        self.save_text(qid, text, meta)
        return meta

    def load_meta(self, qid: str) -> QueryMeta:
        data = files.read_json(os.path.join(self.query_dir(qid), "query.json"))
        return QueryMeta(data["id"], data["name"], data["created"],
                         [Binding.from_json(b) for b in data.get("bindings", [])])

    def save_meta(self, meta: QueryMeta) -> None:
        files.write_json(os.path.join(self.state_dir, "queries", meta.id, "query.json"), meta.to_json())

    def save_text(self, qid: str, text: str, meta: QueryMeta | None = None) -> None:
        if meta is not None:
            self.save_meta(meta)
        _write_bytes(os.path.join(self.query_dir(qid), "query.sql"), text.encode("utf-8"))

    def load_text(self, qid: str) -> str:
        path = os.path.join(self.query_dir(qid), "query.sql")
        with open(path, encoding="utf-8") as fh:
            return fh.read()

    def load_doc(self, qid: str) -> bytes | None:
        path = os.path.join(self.query_dir(qid), "doc.yjs")
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as fh:
            return fh.read()

    def save_doc(self, qid: str, update: bytes, text: str) -> None:
        _write_bytes(os.path.join(self.query_dir(qid), "doc.yjs"), update)
        self.save_text(qid, text)

    # -- logs ------------------------------------------------------------------------------------
    def append_log(self, qid: str, entry: dict[str, Any]) -> None:
        with open(os.path.join(self.query_dir(qid), "log.jsonl"), "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry, default=str) + "\n")

    def read_log(self, qid: str, last: int = 500) -> list[dict[str, Any]]:
        path = os.path.join(self.query_dir(qid), "log.jsonl")
        if not os.path.isfile(path):
            return []
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()[-last:]
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:  # a line cut by a crash
                continue
        return out

    # -- runs ------------------------------------------------------------------------------------
    def runs(self, qid: str) -> list[int]:
        base = os.path.join(self.query_dir(qid), "runs")
        return sorted(int(n) for n in os.listdir(base) if n.isdigit() and os.path.isfile(os.path.join(base, n, "run.json")))

    def run_dir(self, qid: str, run: int) -> str:
        return os.path.join(self.query_dir(qid), "runs", f"{run:04d}")

    def read_run(self, qid: str, run: int) -> dict[str, Any]:
        return files.read_json(os.path.join(self.run_dir(qid, run), "run.json"))  # type: ignore[no-any-return]

    def new_run(self, qid: str, spec: dict[str, Any]) -> int:
        """The run to start for ``spec`` (query text and sources): the last run if it had the same
        spec — the output and checkpoint resume — else a new one."""
        done = self.runs(qid)
        if done and self.read_run(qid, done[-1])["spec"] == spec:
            return done[-1]
        run = (done[-1] + 1) if done else 1
        files.write_json(os.path.join(self.run_dir(qid, run), "run.json"), {"run": run, "spec": spec,
                                                                           "created": time.time()})
        return run


def _outside(rel: object) -> UsageError:
    return UsageError(f"{rel!r} is not inside the workspace", code="PATH_OUTSIDE_WORKSPACE", params={"path": rel},
                      hint="sources are directories of the workspace, given relative to it")


def _write_bytes(path: str, data: bytes) -> None:
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)
