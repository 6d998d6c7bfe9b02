"""A static table's size as Spark plans with it: at least its rows' true size, not its files'.

Spark estimates a file table's size as its files' bytes times ``spark.sql.sources.fileCompressionFactor``
(1 by default) and broadcasts a join side whose estimate is under ``autoBroadcastJoinThreshold``.
Parquet compresses repetitive columns many times over: TPC-DS's ``customer_demographics`` is an
8 MB file holding 1.9 million rows, a few hundred megabytes once built into a broadcast hash table,
and every batch that joined it with another dimension failed with Spark's "Not enough memory to
build and broadcast the table" (issue 59, Q10 and Q35). Spark offers no API to set a file
relation's statistics, so the query's own session (``engine_session``) gets a compression factor
that makes every static table it reads estimated at no less than its rows times Spark's width of
a row: the factor only ever rises, so an estimate errs on the side of a shuffle, never of a
broadcast of something whose true size is unknown-large.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

FACTOR = "spark.sql.sources.fileCompressionFactor"


def true_bytes(df: DataFrame, rows: int) -> int:
    """``rows`` rows of ``df``'s columns at Spark's estimate of a row's width."""
    jvm: Any = df.sparkSession._jvm
    utils = jvm.org.apache.spark.sql.catalyst.plans.logical.statsEstimation.EstimationUtils
    plan = df._jdf.queryExecution().analyzed()
    return rows * int(str(utils.getSizePerRow(plan.output(), getattr(utils, "getSizePerRow$default$2")())))


def estimated_bytes(df: DataFrame) -> int:
    return int(str(df._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()))


def at_least_true_size(df: DataFrame, rows: int) -> float:
    """Raise the session's file compression factor until Spark estimates ``df`` (a static table
    read from files, ``rows`` rows) at its true size or more; the factor now in effect."""
    spark = df.sparkSession
    factor = float(spark.conf.get(FACTOR) or "1.0")
    estimate, true = estimated_bytes(df), true_bytes(df, rows)
    if estimate <= 0 or true <= estimate:
        return factor
    factor = math.ceil(factor * true / estimate * 100) / 100  # a little over, never under
    spark.conf.set(FACTOR, str(factor))
    return factor
