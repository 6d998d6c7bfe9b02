"""streamfold itself, through its Python API, driven without a poll delay.

``background=False``: nothing polls; the runner calls ``process_available()`` right after an
increment's files appear, so the latency is "file appears → answer committed" without the
trigger interval a background poll would add (on average half of it).

An iteration runs in mode ``EXACT`` as the workload writes it (``streamfold``), or in another
mode as a system of its own: ``streamfold-differential``, ``streamfold-diffusion`` (approximate).
"""

from __future__ import annotations

import os
from typing import Any

from ...verify import read_rows
from .base import System


class StreamfoldSystem(System):
    name = "streamfold"
    commit_means = ("commits/<batch>.json published (snapshot and changes written before it), driven "
                    "right after the files appear, no poll delay; the batch's whole cycle — until "
                    "process_available() returns, with the next batch's state views — is cycle_s")
    mode = "exact"  # the iteration's mode, for a workload with one
    strategy = "incremental"  # the per-batch strategy (docs/strategy.md)

    def start(self) -> None:
        from ...runtime.config import QueryConfig, input_specs
        from ...runtime.query import start

        w = self.ctx.workload
        sql = w.sql if self.mode == "exact" else w.in_mode(self.mode)
        streams, statics = input_specs(self.ctx.dirs, self.ctx.tables)
        config = QueryConfig(sql, streams, os.path.join(self.ctx.work, "out"), statics,
                             profile=bool(self.ctx.options.get("profile")), strategy=self.strategy)
        self.query = start(config, spark=self.ctx.spark, background=False)

    def process(self, increment: int) -> dict[str, Any]:
        result = self.query.process_available()
        if result is None:
            raise RuntimeError(f"streamfold found no new file for increment {increment}")
        self.result = result
        return {"strategy": self.query.commit(result.batch).get("strategy"),
                "timings": {k: round(v, 4) for k, v in result.timings.items()},
                "engine_s": round(result.duration_s, 4), "committed_at": result.committed_at,
                "state_rows": result.state_rows, "state_bytes": result.state_bytes,
                "snapshot_rows": result.snapshot_rows, "change_rows": result.change_rows}

    def after(self) -> dict[str, Any]:
        waterfall = self.result.waterfall()
        return {"waterfall": waterfall.to_json()} if waterfall is not None else {}

    def answer(self) -> list[tuple]:
        return read_rows(self.query.engine.output.snapshot_path(self.query.last_batch))

    def describe(self) -> dict[str, Any]:
        return {"api": "streamfold.start(..., background=False) + Query.process_available()",
                "partitions": self.query.engine.spark.conf.get("spark.sql.shuffle.partitions"),
                "iteration_mode": self.mode if self.ctx.workload.steps is not None else None,
                "strategy": self.strategy}

    def close(self) -> None:
        if getattr(self, "query", None) is not None:
            self.query.stop()


class DifferentialSystem(StreamfoldSystem):
    """The workload's iteration in ``MODE DIFFERENTIAL``: every step's result kept and updated."""

    name = "streamfold-differential"
    mode = "differential"


class DiffusionSystem(StreamfoldSystem):
    """The workload's iteration in ``MODE DIFFUSION`` (seed 000 Algorithm 1): approximate."""

    name = "streamfold-diffusion"
    mode = "diffusion"
    exact = False


class AutoSystem(StreamfoldSystem):
    """streamfold with ``strategy="auto"``: the cost model chooses, per batch, between maintaining
    the states and recomputing the answer (docs/strategy.md); each increment's choice is reported."""

    name = "streamfold-auto"
    strategy = "auto"
