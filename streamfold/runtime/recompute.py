"""The recompute strategy's Spark work: the batch query over every file so far, from scratch.

Each stream's files are read as the batch reader reads them (columns checked, ``_weight`` added)
and registered under the stream's own name; a stream that may delete rows is netted first — rows
grouped whole, their weights summed, each kept as many times as its net weight (a Z-set made a
bag again, as :func:`streamfold.verify.recompute` does for the bench's recompute). Static tables
are registered under theirs. The query is then the text Spark analysed for the output schema
(``spark_schema_sql``), so its answer has the snapshot's columns and types exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..ir.printer import quote
from ..plan.model import IncrementalPlan
from ..ir.rel import WEIGHT

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def register_inputs(spark: SparkSession, plan: IncrementalPlan, frames: dict[str, DataFrame],
                    table: Callable[[str], DataFrame]) -> None:
    """Every input of ``plan`` as a temp view under its name: streams from ``frames`` (all their
    files, as the batch reader gives them), netted when they may delete; tables as read."""
    for s in plan.streams:
        cols = ", ".join(quote(c) for c, _ in s.columns)
        view = f"__all_{s.name}"
        frames[s.name].createOrReplaceTempView(view)
        if s.weighted:
            text = (f"SELECT {cols} FROM (SELECT {cols}, sum({WEIGHT}) AS __w FROM {view} GROUP BY {cols}) "
                    f"LATERAL VIEW explode(sequence(1, __w)) AS __copy WHERE __w > 0")
        else:
            text = f"SELECT {cols} FROM {view}"
        spark.sql(text).createOrReplaceTempView(s.name)
    for t in plan.tables:
        table(t.name).createOrReplaceTempView(t.name)


def answer(spark: SparkSession, sql: str) -> DataFrame:
    """The query's answer over the registered inputs (lazy)."""
    return spark.sql(sql)


def measure(spark: SparkSession, sql: str) -> None:
    """Run the query to Spark's ``noop`` sink: every row computed, nothing written (a probe)."""
    spark.sql(sql).write.format("noop").mode("overwrite").save()
