"""RANGE frames with offsets, maintained exactly: over numbers (decimal offsets too), dates
moving by days or months and timestamps by intervals, ascending and descending, with NULL
ORDER BY values and deletions — every snapshot equals DuckDB's answer on the prefix.

Bounded frames (``plan/rules_window_range.py``) recompute only the rows within the frames'
reach of a batch's rows: the dense cases put rows at every distance from the changes, so a reach
too short leaves a row's frame cut or a changed value unsent (checked by running them with the
rule's read reach halved — two of the three fail — and its near reach halved: all three fail)."""

from __future__ import annotations

import datetime as dt
import random

import pytest

import streamfold
from streamfold.runtime import runs
from streamfold.settings import env_name

from ..streams import Source, check_stream
from ..strategies import random_stream

pytestmark = [pytest.mark.spark]

E = Source("E", (("g", "INT"), ("v", "INT"), ("d", "DATE"), ("t", "TIMESTAMP")), weighted=True)
TIME_FRAMES = [
    ("days-and-months", "SELECT g, v, d, sum(v) OVER (PARTITION BY g ORDER BY d RANGE BETWEEN INTERVAL 60 DAYS "
     "PRECEDING AND CURRENT ROW) AS s, count(*) OVER (PARTITION BY g ORDER BY d DESC RANGE BETWEEN INTERVAL 2 MONTHS "
     "PRECEDING AND INTERVAL 1 MONTH FOLLOWING) AS n, max(v) OVER (PARTITION BY g ORDER BY v RANGE BETWEEN 1.5 PRECEDING "
     "AND 0.5 FOLLOWING) AS near FROM E", "incremental"),
    ("minutes", "SELECT g, v, t, max(v) OVER (PARTITION BY g ORDER BY t RANGE BETWEEN INTERVAL 5 MINUTES PRECEDING "
     "AND INTERVAL 1 MINUTE FOLLOWING) AS m, avg(v) OVER (PARTITION BY g ORDER BY t DESC RANGE BETWEEN INTERVAL 1 HOUR "
     "PRECEDING AND CURRENT ROW) AS a FROM E", "incremental"),
    # a rolling sum over an aggregate, as reports write it; one partition
    ("rolling-aggregate", "SELECT t, sum(v) AS day_v, sum(sum(v)) OVER (ORDER BY t RANGE BETWEEN INTERVAL 10 MINUTES "
     "PRECEDING AND CURRENT ROW) AS rolling FROM E GROUP BY t", "incremental"),
    ("recomputed", "SELECT g, v, d, sum(v) OVER (PARTITION BY g ORDER BY d RANGE BETWEEN INTERVAL 60 DAYS PRECEDING "
     "AND CURRENT ROW) AS s FROM E", "recompute"),
]


@pytest.mark.parametrize("qid,sql,strategy", TIME_FRAMES, ids=[q[0] for q in TIME_FRAMES])
def test_range_frames_over_dates_and_timestamps_equal_duckdb(spark, tmp_path, qid, sql, strategy):
    """RANGE frames moving by days, months and minutes (and by a decimal over a number), ascending
    and descending, with NULL times and rows deleted out of time order: every snapshot equals
    DuckDB's (which frames the same intervals); recomputed, the batch text keeps the intervals
    Spark reads."""
    batches = random_stream(random.Random(qid), [E], 4, max_rows=12, min_rows=4)
    check_stream(spark, str(tmp_path), sql, [E], batches, strategy=strategy)


# Dense rows: ORDER BY values 0..15 (as a number, as days and as minutes from one start), two
# partitions and NULL ones; each batch inserts a few and deletes a few at random places.
N = Source("N", (("g", "INT"), ("o", "INT"), ("v", "INT"), ("d", "DATE"), ("t", "TIMESTAMP")), weighted=True)
_DAY0 = dt.date(2024, 1, 1)
_T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)

DENSE = [
    ("numbers", "SELECT g, o, v, sum(v) OVER (PARTITION BY g ORDER BY o RANGE BETWEEN 2 PRECEDING AND 1 FOLLOWING) "
     "AS s, min(v) OVER (PARTITION BY g ORDER BY o RANGE BETWEEN 3 PRECEDING AND 1 PRECEDING) AS m FROM N"),
    ("days-descending", "SELECT g, d, v, count(v) OVER (PARTITION BY g ORDER BY d DESC RANGE BETWEEN INTERVAL 2 DAYS "
     "PRECEDING AND INTERVAL 1 DAY FOLLOWING) AS n FROM N"),
    ("minutes-one-partition", "SELECT t, v, avg(v) OVER (ORDER BY t RANGE BETWEEN INTERVAL 1 MINUTE FOLLOWING AND "
     "INTERVAL 3 MINUTES FOLLOWING) AS a, max(v) OVER (ORDER BY t RANGE BETWEEN INTERVAL 2 MINUTES PRECEDING AND "
     "INTERVAL 2 MINUTES FOLLOWING) AS x FROM N"),
]


def _dense(rng: random.Random, batches: int) -> list[dict[str, list[tuple]]]:
    live: list[tuple] = []
    out = []
    for b in range(batches):
        rows: list[tuple] = []
        for _ in range(12 if b == 0 else rng.randint(1, 4)):
            o = None if rng.random() < 0.08 else rng.randint(0, 15)
            row = (rng.choice([1, 2, None]), o, rng.randint(-5, 9),
                   None if o is None else _DAY0 + dt.timedelta(days=o),
                   None if o is None else _T0 + dt.timedelta(minutes=o))
            rows.append(row + (1,))
            live.append(row)
        for _ in range(rng.randint(0, 3) if b else 0):
            gone = live.pop(rng.randrange(len(live)))
            rows.append(gone + (-1,))
        out.append({"N": rows})
    return out


@pytest.mark.parametrize("qid,sql,fold", [(*q, None) for q in DENSE] + [(*DENSE[0], 0.0)],
                         ids=[q[0] for q in DENSE] + ["numbers-in-runs"])
def test_bounded_frames_recompute_only_the_rows_near_the_change(spark, tmp_path, monkeypatch, qid, sql, fold):
    """``fold``: the window's state kept as a base and a tail (its partitions looked up in both,
    the tail folded into the base after every batch), else whole."""
    if fold is not None:
        monkeypatch.setenv(env_name("runs_min_rows"), "0")
        monkeypatch.setenv(env_name("runs_fold"), repr(fold))
        monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
    plan = streamfold.compile(sql, {"N": "g INT, o INT, v INT, d DATE, t TIMESTAMP, _weight BIGINT"})
    assert any("within the frames' reach" in n for n in plan.notes), plan.notes
    said: list[str] = []
    check_stream(spark, str(tmp_path), sql, [N], _dense(random.Random(qid), 7), progress=said.append)
    if fold is not None:
        assert any(m.startswith("folding the tail of win") for m in said), said
