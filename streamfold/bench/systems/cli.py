"""streamfold as a user runs it: ``streamfold run`` in a process of its own, measured from outside.

The increment's files are renamed into the source directories (as for every system); the clock
stops when a reader polling every 2 ms sees the commit that takes in the last of them
(``commits/<batch>.json``, published atomically). So the figure is what a user gets: the poll
interval (``--trigger 0.02``), the batch, its commit — none of the bench's in-process shortcuts.
A poll may see an increment's sources at different moments (one file renamed, the next not
yet), so an increment may land in more than one batch: its latency runs to the batch that
completes it.

Its JVM is its own, so the bench's warm-up (which runs in the shared JVM) does not warm it: the
first ``warm_increments`` increments are run and reported, and left out of its median.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from ...verify import read_rows
from .base import System

POLL_S = 0.002  # how often the reader looks for the commit
TRIGGER_S = 0.02  # how often `streamfold run` looks for new files


def run_command(sql: str, sources: dict[str, str], output: str, tables: dict[str, str] | None = None) -> list[str]:
    """The command line of ``streamfold run`` over these sources and tables, as a user types it,
    polling every :data:`TRIGGER_S` seconds (this interpreter: the project's environment)."""
    args = [sys.executable, "-m", "streamfold", "run", sql, "--output", output, "--trigger", str(TRIGGER_S), "--quiet"]
    for name, path in sources.items():
        args += ["--source", f"{name}={path}"]
    for name, path in (tables or {}).items():
        args += ["--table", f"{name}={path}"]
    return args


class CliSystem(System):
    name = "streamfold-cli"
    commit_means = (f"commits/<batch>.json of `streamfold run --trigger {TRIGGER_S}` (its own process) seen by a "
                    f"reader polling every {POLL_S * 1000:.0f} ms, for the batch that takes in the increment's last file")
    counts_jobs = False  # its jobs run in another JVM
    own_process = True
    warm_increments = 5  # the back-to-back figure is the median of increments 6–25

    def start(self) -> None:
        self.out = os.path.join(self.ctx.work, "out")
        self.commits = os.path.join(self.out, "commits")
        args = run_command(self.ctx.workload.sql, self.ctx.dirs, self.out, self.ctx.tables)
        self.log_path = os.path.join(self.ctx.work, "streamfold-run.log")
        self._log = open(self.log_path, "w", encoding="utf-8")  # noqa: SIM115 - held until close()
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.seen: set[str] = set()  # commit files read so far
        self.consumed: dict[str, set[str]] = {}  # source -> files committed so far
        self.last_batch = -1

    def process(self, increment: int) -> dict[str, Any]:
        wanted = {name: {n for n in os.listdir(d) if n.startswith(f"{increment:06d}-")}
                  for name, d in self.ctx.dirs.items()}
        engine_s = 0.0
        while not all(files <= self.consumed.get(name, set()) for name, files in wanted.items()):
            new = sorted(n for n in (os.listdir(self.commits) if os.path.isdir(self.commits) else [])
                         if n.endswith(".json") and not n.startswith(".") and n not in self.seen)
            if not new:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"streamfold run exited with code {self.proc.returncode}: {self._tail()}")
                time.sleep(POLL_S)
                continue
            for n in new:
                self.seen.add(n)
                with open(os.path.join(self.commits, n), encoding="utf-8") as fh:
                    record = json.load(fh)
                for source, files in record["inputs"].items():
                    self.consumed.setdefault(source, set()).update(files)
                engine_s += float(record.get("duration_s", 0.0))
                self.last_batch = max(self.last_batch, int(record["batch"]))
        return {"engine_s": round(engine_s, 4), "batch": self.last_batch}

    def answer(self) -> list[tuple]:
        return read_rows(os.path.join(self.out, "snapshots", f"{self.last_batch:06d}"))

    def describe(self) -> dict[str, Any]:
        return {"command": f"streamfold run QUERY --source … --output OUT --trigger {TRIGGER_S} --quiet",
                "warm_increments": self.warm_increments}

    def close(self) -> None:
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if getattr(self, "_log", None) is not None:
            self._log.close()

    def _tail(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                return " | ".join(fh.read().strip().splitlines()[-5:])
        except OSError:
            return ""
