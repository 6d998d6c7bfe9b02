"""The baseline without streamfold: the same SQL as a Spark batch job over all data so far."""

from __future__ import annotations

import os
import time
from typing import Any

from ..check import read_rows
from .base import System


def recompute_answer(spark: Any, sql: str, dirs: dict[str, str], target: str) -> float:
    """Seconds to compute ``sql`` from scratch over every file in ``dirs`` (sources and static
    tables, by name) and write it to ``target``.

    A fresh session each time, so nothing (temp views, cached plans) is carried between runs:
    what a scheduled batch job would do.
    """
    session = spark.newSession()
    start = time.monotonic()
    for name, d in dirs.items():
        session.read.parquet(d).createOrReplaceTempView(name)
    session.sql(sql).write.mode("overwrite").parquet(target)
    return time.monotonic() - start


class RecomputeSystem(System):
    name = "recompute"
    commit_means = "the batch job over all files so far has written its answer (Parquet, overwrite)"

    def start(self) -> None:
        self.target = os.path.join(self.ctx.work, "answer")

    def process(self, increment: int) -> dict[str, Any]:
        recompute_answer(self.ctx.spark, self.ctx.workload.batch_sql, {**self.ctx.dirs, **self.ctx.tables},
                         self.target)
        return {}

    def answer(self) -> list[tuple]:
        return read_rows(self.target)

    def describe(self) -> dict[str, Any]:
        return {"job": "spark.read.parquet(dir) per source; spark.sql(query).write.parquet(answer)",
                "adaptive_execution": self.ctx.spark.conf.get("spark.sql.adaptive.enabled", None)}
