"""Bounds by the day (issue 56): ``WHERE day >= current_date() - INTERVAL 7 DAYS`` (and
``date_sub(current_date(), n)``, ``current_date() - n``, ``date_add(current_date(), -n)``) read
the date of each batch's recorded time (UTC). After every batch — the clock moving by days, once
backwards (the batch time stays), rows deleted and dates out of order — the snapshot equals
DuckDB's answer over the prefix on the date the commit records, and rows whose day the clock
passed leave as deletions in changes/ (check_stream checks the changes)."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from streamfold.runtime.checkpoint import OutputDir
from streamfold.runtime.features import batch_time
from streamfold.verify import compare, duckdb_answer

from ..streams import Source, assert_refused, check_stream
from ..strategies import random_stream

pytestmark = [pytest.mark.spark]

R = Source("R", (("k", "INT"), ("day", "DATE"), ("ts", "TIMESTAMP"), ("v", "INT")), weighted=True)
T0 = dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)
DAY = 86_400_000_000
# the wall clock at each batch, in days after T0 (and a few hours: the date is what counts); the
# third steps back; the random dates are 2020-01-01, 2020-02-29 and 2021-12-31
CLOCK = [1.25, 62.5, 60.1, 700.9, 735.3]
# for the random event times: minutes around 2024-01-01 (and one in 1969)
AROUND_2024 = [1460.5, 1462.5, 1461.0, 1470.2, 1475.0]


def moving_clock(monkeypatch, days: list[float]) -> None:
    times = iter(days)
    start = int(T0.timestamp()) * 1_000_000
    monkeypatch.setattr(batch_time, "wall_clock", lambda: start + int(next(times) * DAY))


def today(record) -> str:
    """The batch's date, as DuckDB reads a DATE literal."""
    return dt.datetime.fromtimestamp(record["batch_time_us"] / 1e6, dt.timezone.utc).date().isoformat()


QUERIES = [
    ("groupby-interval",
     "SELECT k, count(*) AS n, sum(v) AS t FROM R WHERE day >= current_date() - INTERVAL 7 DAYS GROUP BY k",
     lambda r: f"SELECT k, count(*), sum(v) FROM R WHERE day >= DATE '{today(r)}' - 7 GROUP BY k", CLOCK),
    ("rows-date-sub",
     "SELECT k, day, v FROM R WHERE v > 1 AND day > date_sub(current_date(), 30)",
     lambda r: f"SELECT k, day, v FROM R WHERE v > 1 AND day > DATE '{today(r)}' - 30", CLOCK),
    ("reversed-and-weeks",
     "SELECT day, count(*) AS n FROM R WHERE curdate() - INTERVAL 1 WEEK < day GROUP BY day",
     lambda r: f"SELECT day, count(*) FROM R WHERE day > DATE '{today(r)}' - 7 GROUP BY day", CLOCK),
    ("timestamp-by-date-add",
     "SELECT k, count(*) AS n FROM R WHERE ts >= date_add(current_date(), -1) GROUP BY k",
     lambda r: f"SELECT k, count(*) FROM R WHERE ts >= CAST(DATE '{today(r)}' - 1 AS TIMESTAMP) GROUP BY k",
     AROUND_2024),
]


@pytest.mark.parametrize("qid,sql,oracle,clock", QUERIES, ids=[q[0] for q in QUERIES])
def test_rows_leave_as_the_date_passes_them_and_equal_duckdb(spark, tmp_path, monkeypatch, qid, sql, oracle, clock):
    moving_clock(monkeypatch, clock)
    batches = random_stream(random.Random(f"date-bound-{qid}"), [R], batches=len(clock), max_rows=10, min_rows=3)
    output = OutputDir(str(tmp_path / "out"))
    moved: list[bool] = []

    def check(batch, snapshot, prefix):
        if batch == len(clock) - 1:  # the last answer is not the one the first batch's date would give
            first = oracle(output.read_commit(0))
            moved.append(not compare(snapshot, duckdb_answer(sql, prefix, duckdb_sql=first)).matches)

    run = check_stream(spark, str(tmp_path), sql, [R], batches, oracle_sql=oracle, check=check)
    assert run.batches == len(clock)
    assert any(run.snapshots), "nothing inside the bound: the test would prove nothing"
    assert moved == [True], "no row left as the date moved: the test would prove nothing"


def test_a_bound_by_the_day_is_recomputed_by_the_same_date(spark, tmp_path, monkeypatch):
    moving_clock(monkeypatch, CLOCK)
    _, sql, oracle, _ = QUERIES[0]
    batches = random_stream(random.Random("date-bound-recompute"), [R], batches=len(CLOCK), max_rows=10, min_rows=3)
    run = check_stream(spark, str(tmp_path), sql, [R], batches, oracle_sql=oracle, strategy="recompute")
    assert run.batches == len(CLOCK) and any(run.snapshots)


def test_a_bound_by_the_day_that_is_not_a_lower_bound_of_whole_days_is_refused():
    assert_refused([
        ("SELECT k FROM R WHERE day >= current_date() - INTERVAL 3 HOURS", "INVALID_TIME_BOUND"),
        ("SELECT k FROM R WHERE day <= current_date()", "UNSUPPORTED_TIME_BOUND"),
        ("SELECT k FROM R WHERE k > 1 OR day >= current_date() - 7", "UNSUPPORTED_TIME_BOUND"),
        ("SELECT k FROM R WHERE k >= current_date() - 7", "TYPE_MISMATCH"),
        ("SELECT k, current_date() AS d FROM R", "NONDETERMINISTIC_FUNCTION"),
    ], {"R": R.schema_sql()})
