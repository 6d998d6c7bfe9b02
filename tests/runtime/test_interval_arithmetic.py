"""Timestamps and dates moved by intervals, as Spark moves them (``sql/bind_expr/arithmetic.py``):
``ts ± INTERVAL n DAY`` keeps its time of day (it was read as ``date_add``, a DATE), hours down to
microseconds move a timestamp or make a date one, months keep the time and clamp the day. Random
rows with NULLs and deletions, random batches, every snapshot against DuckDB on the prefix."""

from __future__ import annotations

import random

import pytest

from ..streams import Source, check_stream
from ..strategies import random_stream

pytestmark = pytest.mark.spark

R = Source("R", (("k", "INT"), ("ts", "TIMESTAMP"), ("d", "DATE")), weighted=True)

QUERIES = {
    "moved columns": (
        "SELECT k, ts + INTERVAL 1 DAY AS a, ts - INTERVAL 90 MINUTES AS b, d + INTERVAL 2 HOURS AS c, "
        "ts + INTERVAL 1500 MILLISECONDS AS e, ts + INTERVAL 1 MONTH AS f, d - INTERVAL 3 DAYS AS g, "
        "ts - INTERVAL 1 YEAR AS h FROM R"),
    "grouped and filtered": (
        "SELECT a, count(*) AS n, min(k) AS lo FROM (SELECT k, ts + INTERVAL 10 MINUTES AS a FROM R "
        "WHERE ts - INTERVAL 1 WEEK < TIMESTAMP '2023-12-25 00:05:00' OR d + INTERVAL 36 HOURS > ts) t GROUP BY a"),
}


@pytest.mark.parametrize("name", list(QUERIES))
@pytest.mark.parametrize("seed", [1, 2])
def test_intervals_move_timestamps_as_spark_does(spark, tmp_path, name, seed):
    batches = random_stream(random.Random(f"interval-{name}-{seed}"), [R], batches=4, max_rows=10, min_rows=2)
    run = check_stream(spark, str(tmp_path), QUERIES[name], [R], batches)
    assert run.batches == 4 and any(run.snapshots)


def test_unix_timestamp_of_a_timestamp_reads_it_not_the_clock(spark, tmp_path):
    """``unix_timestamp(ts)`` is the instant's whole seconds since 1970 (floored before it), as in
    Spark; without an argument it is the clock (NONDETERMINISTIC_FUNCTION)."""
    sql = "SELECT k, unix_timestamp(ts) AS e, count(*) AS n FROM R WHERE unix_timestamp(ts) % 2 = 0 OR k > 1 GROUP BY 1, 2"
    oracle = ("SELECT k, CAST(floor(epoch(ts)) AS BIGINT) AS e, count(*) FROM R "
              "WHERE CAST(floor(epoch(ts)) AS BIGINT) % 2 = 0 OR k > 1 GROUP BY 1, 2")
    batches = random_stream(random.Random("unix-timestamp"), [R], batches=4, max_rows=10, min_rows=2)
    run = check_stream(spark, str(tmp_path), sql, [R], batches, oracle_sql=oracle)
    assert run.batches == 4 and any(run.snapshots)
