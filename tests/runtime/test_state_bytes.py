"""Each commit records its states' bytes as Spark's block stores count them (runtime/storage.py).

The figures come from the block manager master, for the blocks the batch's merges left — a
plain batch's checkpoints and a prepared job's kept merges alike — so they follow the states'
rows batch by batch, and for a checkpointed state they equal what Spark's public storage API
reports for its RDD.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfold
from streamfold.runtime.storage import StateBytes, parse_rdd_bytes, size_text, states_line

pytestmark = pytest.mark.spark


def _write(directory: Path, i: int, rng: random.Random, rows: int, keys: int) -> None:
    pq.write_table(pa.table({"x": pa.array([rng.randrange(keys) for _ in range(rows)], pa.int32()),
                             "y": pa.array([rng.randrange(100) for _ in range(rows)], pa.int32())}),
                   os.path.join(directory, f"{i:04d}.parquet"))


def test_parse_rdd_bytes_sums_memory_and_disk() -> None:
    assert parse_rdd_bytes("") == {}
    assert parse_rdd_bytes("7 100 0;12 0 2048;3 5 6") == {7: 100, 12: 2048, 3: 11}


def test_each_commit_records_its_states_bytes_as_spark_stores_them(spark, tmp_path: Path) -> None:
    src, out = tmp_path / "in", tmp_path / "out"
    src.mkdir()
    query = streamfold.start("SELECT x, count(*) AS n, sum(y) AS s FROM S GROUP BY x", {"S": str(src)}, str(out),
                             spark=spark, schemas={"S": "x INT, y INT"}, background=False, endpoint=False,
                             partitions=2)
    rng = random.Random(3)
    records = []
    try:
        # batch 0 plain, 1 captures the prepared plans, 2-3 replay them; 3 adds 100 times the keys
        for i, (rows, keys) in enumerate([(2000, 50), (200, 50), (200, 50), (8000, 5000)]):
            _write(src, i, rng, rows, keys)
            result = query.process_available()
            assert result is not None and result.batch == i
            records.append(query.commit(i))
            assert result.state_bytes == records[-1]["state_bytes"]
            if i == 0:
                # Spark's public storage figures (fed by its listener bus: they may lag a moment)
                # for the RDD the state's checkpoint is: what the commit recorded.
                public = StateBytes(spark)
                public._helpers = None
                deadline = time.monotonic() + 10
                while public.measure(query.engine.store, {}, {}) != records[0]["state_bytes"] \
                        and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert public.measure(query.engine.store, {}, {}) == records[0]["state_bytes"]
    finally:
        query.stop()
    assert [r.get("prepared") for r in records] == [None, "capture", "replay", "replay"]
    for r in records:
        assert list(r["state_bytes"]) == list(r["state_rows"]) == ["agg"]
        assert r["state_bytes"]["agg"] > 0
    sizes = [r["state_bytes"]["agg"] for r in records]
    rows = [r["state_rows"]["agg"] for r in records]
    assert rows[:3] == [50, 50, 50] and rows[3] > 3000
    assert max(sizes[:3]) < 2 * min(sizes[:3])  # the same 50 keys: about the same bytes
    assert sizes[3] > 20 * sizes[2]  # a hundred times the keys: many times the bytes


def test_largest_state_first_and_every_state_of_a_join_measured(spark, tmp_path: Path) -> None:
    dirs = {n: tmp_path / "in" / n for n in ("A", "B")}
    for d in dirs.values():
        d.mkdir(parents=True)
    rng = random.Random(5)
    _write(dirs["A"], 0, rng, 6000, 3000)
    _write(dirs["B"], 0, rng, 100, 3000)
    query = streamfold.start("SELECT A.x, count(*) AS n FROM A JOIN B ON A.x = B.x GROUP BY A.x",
                             {n: str(d) for n, d in dirs.items()}, str(tmp_path / "out"), spark=spark,
                             schemas={"A": "x INT, y INT", "B": "x INT, y INT"}, background=False,
                             endpoint=False, partitions=2)
    try:
        result = query.process_available()
    finally:
        query.stop()
    assert result is not None
    sizes, rows = result.state_bytes, result.state_rows
    assert set(sizes) == set(rows) and all(sizes[n] > 0 for n in rows if rows[n])
    assert list(sizes.values()) == sorted(sizes.values(), reverse=True)
    biggest = max(rows, key=lambda n: rows[n])
    assert next(iter(sizes)) == biggest


def test_the_states_line_puts_the_largest_state_first() -> None:
    line = states_line("000009", {"agg": 209, "in_a": 86_567, "in_b": 500},
                       {"in_a": 10 * 2**20 + 2**19, "agg": 41_062, "in_b": 912})
    assert line == ("states after batch 000009: in_a 86,567 rows 10.5 MB · agg 209 rows 40.1 KB · "
                    "in_b 500 rows 912 B │ 10.5 MB in all")
    assert states_line("000001", {"b": 5, "a": 7}, {}) == "states after batch 000001: a 7 rows · b 5 rows"
    assert size_text(3 * 2**30 + 2**29) == "3.5 GB" and size_text(2**40) == "1024.0 GB"
