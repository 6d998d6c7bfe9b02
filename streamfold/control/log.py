"""The control log: every control action, durable before it acts, with the batch it applied to.

Texera's hybrid logging (seed 002 §2.3): the content and order of control messages are logged;
of the data only its order is, and streamfold's checkpoint has that already (``offsets/<batch>.json``
names each batch's files before the batch runs). Operators are deterministic, so a restart that
replays both — each batch over its files, each action at the batch it applied to — gives every
batch the same answer, and no committed answer changes (the output-commit guarantee).

The log is ``CHECKPOINT/control.log``: one JSON object per line, appended and fsynced before the
action takes effect (and before a request is acknowledged). A last line cut short by a crash is
ignored: its action was never acknowledged. :func:`replay` reads the log back into what a
restarted run needs: the breakpoints, the query version in effect after each batch, the
reconfigurations still to apply, whether the query comes back paused.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any



class ControlLog:
    """Append-only, fsynced JSON lines; each record gets a sequence number and a time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._records = _read(path)
        self._seq = max((r.get("seq", 0) for r in self._records), default=0)

    def append(self, action: str, **fields: Any) -> dict[str, Any]:
        with self._lock:
            self._seq += 1
            record = {"seq": self._seq, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      "action": action, **fields}
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            line = json.dumps(record, sort_keys=True, default=str) + "\n"
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            self._records.append(record)
            return record

    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._records)


def _read(path: str) -> list[dict[str, Any]]:
    if not os.path.exists(path):
        return []
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                out.append(json.loads(line))
            except ValueError:  # a line cut short by a crash: never acknowledged
                break
    return out


@dataclass(frozen=True)
class Version:
    """A query version applied at a batch (version 1 is the query the run was started with)."""

    number: int
    sql: str
    semantics: str  # "restate" or "from now on"
    batch: int  # the first batch it answered
    mixed: tuple[str, ...] = ()  # states holding rows under older logic ("from now on")


@dataclass
class Replay:
    """What a restarted run takes from its control log."""

    breakpoints: dict[str, dict[str, Any]] = field(default_factory=dict)  # id -> its "breakpoint add" record
    versions: list[Version] = field(default_factory=list)  # applied, oldest first
    received: list[dict[str, Any]] = field(default_factory=list)  # reconfigurations not applied nor failed
    paused: bool = False  # a pause was asked for and not resumed
    hit: tuple[str, int] | None = None  # (breakpoint, batch) the query stopped at and was not resumed from
    resumed_hits: set[tuple[str, int]] = field(default_factory=set)  # hits resumed from: not to stop at again
    skipped: dict[int, dict[str, list[str]]] = field(default_factory=dict)  # batch -> files moved aside
    next_version: int = 2
    next_breakpoint: int = 1

    def query_at(self, batch: int) -> Version | None:
        """The version in effect after committed batch ``batch`` (None: the original query)."""
        found = [v for v in self.versions if v.batch <= batch]
        return found[-1] if found else None

    def applied_at(self, batch: int) -> list[Version]:
        return [v for v in self.versions if v.batch == batch]


def replay(records: list[dict[str, Any]]) -> Replay:
    out = Replay()
    received: dict[int, dict[str, Any]] = {}
    applied: dict[int, Version] = {}
    for r in records:
        action = r.get("action")
        if action == "breakpoint add":
            out.breakpoints[r["id"]] = r
            out.next_breakpoint = max(out.next_breakpoint, int(r["id"].lstrip("b")) + 1)
        elif action == "breakpoint remove":
            out.breakpoints.pop(r["id"], None)
        elif action == "pause":
            out.paused = True
        elif action == "breakpoint hit":
            out.hit = (r["id"], r["batch"])
        elif action in ("resume", "skip"):
            if out.hit is not None and action == "resume":
                out.resumed_hits.add(out.hit)
            if action == "skip":
                files = out.skipped.setdefault(r["batch"], {})
                for source, names in r["files"].items():
                    files.setdefault(source, []).extend(names)
            out.paused, out.hit = False, None
        elif action == "reconfigure":
            received[r["version"]] = r
            out.next_version = max(out.next_version, r["version"] + 1)
        elif action == "reconfigure applied":
            req = received.pop(r["version"])
            applied[r["version"]] = Version(r["version"], req["sql"], req["semantics"], r["batch"],
                                            tuple(r.get("mixed", ())))
        elif action == "reconfigure failed":
            received.pop(r["version"], None)
            applied.pop(r["version"], None)
    out.versions = sorted(applied.values(), key=lambda v: v.number)
    out.received = sorted(received.values(), key=lambda r: r["version"])
    return out
