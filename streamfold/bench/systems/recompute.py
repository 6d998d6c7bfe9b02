"""The baseline without streamfold: the same SQL as a Spark batch job over all data so far."""

from __future__ import annotations

import os
from typing import Any

from ...verify import read_rows, recompute
from .base import System


class RecomputeSystem(System):
    name = "recompute"
    commit_means = "the batch job over all files so far has written its answer (Parquet, overwrite)"

    def start(self) -> None:
        self.target = os.path.join(self.ctx.work, "answer")

    def process(self, increment: int) -> dict[str, Any]:
        recompute(self.ctx.spark, self.ctx.workload.batch_sql, {**self.ctx.dirs, **self.ctx.tables}, self.target)
        return {}

    def answer(self) -> list[tuple]:
        return read_rows(self.target)

    def describe(self) -> dict[str, Any]:
        return {"job": "spark.read.parquet(dir) per source; spark.sql(query).write.parquet(answer)",
                "adaptive_execution": self.ctx.spark.conf.get("spark.sql.adaptive.enabled", None)}
