"""A hook for anything else: a Python callable told of every committed batch, at least once.

``streamfold.start(..., sinks=[fn])`` calls ``fn(batch, changes, snapshot)`` after each commit,
in batch order, with the batch's number and its changes (with ``_weight``) and snapshot as Spark
DataFrames read from streamfold's output — the ``foreachBatch`` convention of Spark Structured
Streaming. The last batch a hook returned from is recorded under the checkpoint
(``sinks/<name>.json``) once it returns, so a restart calls it for the batches after that one.

The contract is **at least once**: a run killed after the hook returned and before the record
is written calls it again for that batch. A hook that must be exactly-once makes its own write
idempotent by the batch number (as the PostgreSQL and Delta sinks do: they store the batch in
the same transaction as the rows). A hook that raises stops delivery to it; the batch stays
committed and the hook is called again for it later (the next batch, or the next run).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import SinkError
from .committed import CommittedBatch

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Hook = Callable[[int, Any, Any], None]


def hook_name(fn: Hook, index: int) -> str:
    """How a hook is named in progress lines and its record: its function's name and position."""
    qual = getattr(fn, "__qualname__", type(fn).__name__)
    return f"hook:{qual}#{index}".replace("<", "").replace(">", "").replace("/", "_")


class HookSink:
    def __init__(self, fn: Hook, name: str, spark: SparkSession, record_dir: str) -> None:
        self.fn, self.name, self.spark = fn, name, spark
        self.record = os.path.join(record_dir, self.name.replace(":", "-") + ".json")

    def applied(self) -> int:
        try:
            with open(self.record, encoding="utf-8") as fh:
                return int(json.load(fh)["batch"])
        except FileNotFoundError:
            return -1

    def write(self, committed: CommittedBatch) -> None:
        read = self.spark.read.parquet
        try:
            self.fn(committed.batch, read(committed.changes_path), read(committed.snapshot_path))
        except Exception as e:  # noqa: BLE001 - the user's code: any failure is reported, coded
            raise SinkError(f"sink {self.name} failed on batch {committed.batch}: {e}", code="SINK_HOOK",
                                  params={"sink": self.name, "batch": committed.batch},
                                  hint="the batch stays committed; the hook is called again for it") from e
        os.makedirs(os.path.dirname(self.record), exist_ok=True)
        tmp = self.record + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"batch": committed.batch}, fh)
        os.replace(tmp, self.record)

    def close(self) -> None:
        pass
