"""States whose blocks are lost (a worker gone) are read back from the checkpoint; the batch runs
again and the run goes on, every answer exact (issue 57).

Losing a worker takes its executors' cached blocks with it; here every state's blocks are removed
from Spark's block managers between batches, which is what the next batch then finds.
"""

from __future__ import annotations

import os
import random
import time

import pyarrow as pa
import pytest

import streamfold
from streamfold.runtime.state import release

from ..controlled import Feed, check_every_commit

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64()), pa.field("_weight", pa.int64())])
QUERIES = [
    "SELECT k, count(DISTINCT v) AS d, sum(v) AS s, max(v) AS m FROM S GROUP BY k",
    "SELECT a.k, count(*) AS n FROM S a JOIN S b ON a.v = b.v GROUP BY a.k",
]


def lose_every_state_block(engine) -> int:
    """Drop the blocks of every state the engine holds, as a lost executor would; how many frames."""
    frames = list(engine.store.backings())
    for df in frames:
        release(df)
    time.sleep(1)  # unpersisting is asynchronous
    return len(frames)


@pytest.mark.parametrize("sql", QUERIES)
def test_lost_state_blocks_are_read_back_and_the_run_goes_on(spark, tmp_path, sql):
    rng = random.Random(57)
    feed = Feed(str(tmp_path / "S"), SCHEMA)
    alive: list[tuple[int, int]] = []
    out = str(tmp_path / "out")
    q = None
    recovered_batches = []
    try:
        for batch in range(6):
            rows = [(rng.randrange(6), rng.randrange(10), 1) for _ in range(rng.randrange(1, 30))]
            if alive and batch >= 2:  # deletions of rows seen before
                gone = rng.sample(alive, min(len(alive), rng.randrange(1, 6)))
                for r in gone:
                    alive.remove(r)
                rows += [(k, v, -1) for k, v in gone]
            alive += [(k, v) for k, v, w in rows if w > 0]
            feed.put(rows)
            if q is None:
                q = streamfold.start(sql, {"S": feed.directory}, out, spark=spark, partitions=2, background=False)
            if batch in (2, 4):
                assert lose_every_state_block(q.engine) > 0
            result = q.process_available()
            assert result is not None and result.batch == batch
            if "recovered" in q.commit(batch):
                recovered_batches.append(batch)
    finally:
        if q is not None:
            q.stop()
    records = check_every_commit(out, feed, sql)
    assert recovered_batches == [2, 4], [r.get("recovered") for r in records]
    first = records[2]["recovered"][0]
    assert first["attempt"] == 1 and "of a state is gone" in first["lost"]
    assert os.path.isdir(os.path.join(out, "snapshots", "000005"))
