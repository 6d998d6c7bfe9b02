"""The event times a Parquet file's footers tell (``sources.parquet_time_range``): the earliest and
latest of the rows that insert, or None wherever the statistics cannot prove them — the batch
then reads them with a job (``features/batch_time.py``). No Spark: pyarrow writes the files and
the rows are the oracle."""

from __future__ import annotations

import datetime as dt
import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamfold.runtime.sources import parquet_time_range

T0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)


def _micros(t: dt.datetime) -> int:
    return (t - T0) // dt.timedelta(microseconds=1) + int(T0.timestamp()) * 1_000_000


def _times(rng: random.Random, n: int, nulls: bool = True) -> list[dt.datetime | None]:
    return [None if nulls and rng.random() < 0.2 else T0 + dt.timedelta(milliseconds=rng.randint(-10**9, 10**9))
            for _ in range(n)]


@pytest.mark.parametrize("seed", range(6))
def test_the_range_equals_the_inserted_rows_earliest_and_latest(tmp_path, seed):
    """Random files — milli- or microseconds, NULLs, several row groups, with or without a
    ``_weight`` of positive copies, a file or a directory of parts — against the rows."""
    rng = random.Random(seed)
    unit = rng.choice(["ms", "us"])
    parts = rng.randint(1, 3)
    path = str(tmp_path / "batch.parquet")
    if parts > 1:
        os.makedirs(path)
    values: list[dt.datetime | None] = []
    for p in range(parts):
        n = rng.randint(1, 40)
        ts = _times(rng, n)
        values += ts
        columns = {"k": list(range(n)), "ts": pa.array(ts, pa.timestamp(unit, "UTC"))}
        if rng.random() < 0.5:
            columns["_weight"] = [rng.randint(1, 3) for _ in range(n)]
        target = os.path.join(path, f"part-{p}.parquet") if parts > 1 else path
        pq.write_table(pa.table(columns), target, row_group_size=rng.randint(1, 10))
    present = [_micros(t) for t in values if t is not None]
    expected = (min(present), max(present)) if present else (None, None)
    assert parquet_time_range(path, "ts") == expected
    assert parquet_time_range(path, "TS") == expected  # Spark resolves the column case-insensitively


def test_a_file_whose_footers_cannot_tell_gives_none(tmp_path):
    """A deletion (or a weight of 0) among the rows, nanoseconds, a local time, INT96, a missing
    column, statistics not written: each None, never a range that may be wrong."""
    rng = random.Random(7)
    ts = pa.array(_times(rng, 20, nulls=False), pa.timestamp("us", "UTC"))

    def write(name: str, table: pa.Table, **options) -> str:
        path = str(tmp_path / name)
        pq.write_table(table, path, **options)
        return path

    cases = {
        "deletion": write("d.parquet", pa.table({"ts": ts, "_weight": [1] * 19 + [-1]})),
        "zero weight": write("z.parquet", pa.table({"ts": ts, "_weight": [0] + [1] * 19})),
        "nanoseconds": write("n.parquet", pa.table({"ts": ts.cast(pa.timestamp("ns", "UTC"))})),
        "local time": write("l.parquet", pa.table({"ts": ts.cast(pa.timestamp("us"))})),
        "INT96": write("i.parquet", pa.table({"ts": ts}), use_deprecated_int96_timestamps=True),
        "no column": write("c.parquet", pa.table({"other": ts})),
        "no statistics": write("s.parquet", pa.table({"ts": ts}), write_statistics=False),
    }
    for case, path in cases.items():
        assert parquet_time_range(path, "ts") is None, case


def test_all_nulls_or_no_rows_give_no_time(tmp_path):
    path = str(tmp_path / "nulls.parquet")
    pq.write_table(pa.table({"ts": pa.array([None, None], pa.timestamp("us", "UTC"))}), path)
    assert parquet_time_range(path, "ts") == (None, None)
    empty = str(tmp_path / "empty.parquet")
    pq.write_table(pa.table({"ts": pa.array([], pa.timestamp("us", "UTC"))}), empty)
    assert parquet_time_range(empty, "ts") == (None, None)


@pytest.mark.parametrize("sql,schema,footers", [
    ("SELECT k, count(*) AS n FROM R WHERE ts > max_event_time() - INTERVAL 1 MINUTE GROUP BY k",
     "ts TIMESTAMP, k INT", True),
    # a computed time is not in the footers, even as the stream's one column
    ("SELECT count(*) AS n FROM R WHERE CAST(s AS TIMESTAMP) > max_event_time() - INTERVAL 1 MINUTE",
     "s STRING", False),
    ("SELECT count(*) AS n FROM R WHERE ts + INTERVAL 1 DAY > max_event_time() - INTERVAL 1 MINUTE",
     "ts TIMESTAMP", False),
    # another filter beside the bound: the clock is still the stream's column, all its rows
    ("SELECT k, count(*) AS n FROM R WHERE ts > max_event_time() - INTERVAL 1 MINUTE AND k > 2 GROUP BY k",
     "ts TIMESTAMP, k INT", True),
    ("SELECT k, ts FROM R WHERE ts > max_event_time() - INTERVAL 1 MINUTE AND k = 20", "ts TIMESTAMP, k INT", True),
])
def test_only_a_clock_over_a_streams_own_column_reads_the_footers(sql, schema, footers):
    import streamfold
    from streamfold.runtime.features.batch_time import _clock_scan

    plan = streamfold.compile(sql, {"R": schema})
    assert plan.event_time is not None
    assert (_clock_scan(plan) is not None) == footers
