"""The hook: called after each commit with the batch's number, changes and snapshot (Spark
DataFrames, the ``foreachBatch`` convention), in order, at least once: a hook that raises is
called again for the same batch after the next commit, and a restart does not call it again for
batches it returned from."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfold

pytestmark = [pytest.mark.spark]

SQL = "SELECT k, sum(v) AS total FROM S GROUP BY k"


def _file(src: str, i: int, rows: list[tuple[int, int]]) -> None:
    pq.write_table(pa.table({"k": pa.array([r[0] for r in rows], pa.int32()),
                             "v": pa.array([r[1] for r in rows], pa.int64())}), os.path.join(src, f"{i:04d}.parquet"))


def test_the_hook_sees_every_committed_batch_in_order_at_least_once(spark, tmp_path):
    src = tmp_path / "S"
    src.mkdir()
    calls: list[tuple[int, list, list]] = []
    failures = {1: 2}  # batch 1 fails twice: the hook lags two batches behind

    def hook(batch, changes, snapshot):
        if failures.get(batch):
            failures[batch] -= 1
            raise RuntimeError("the service is down")
        calls.append((batch, sorted(map(tuple, changes.collect())), sorted(map(tuple, snapshot.collect()))))

    def start():
        return streamfold.start(SQL, {"S": str(src)}, str(tmp_path / "out"), schemas={"S": "k INT, v BIGINT"},
                                spark=spark, background=False, sinks=[hook], partitions=2,
                                keep_snapshots=1)  # but not those a sink has yet to receive

    query = start()
    try:
        _file(str(src), 0, [(1, 1), (2, 2)])
        r0 = query.process_available()
        _file(str(src), 1, [(1, 10)])
        r1 = query.process_available()  # the hook raises: the batch stays committed, one behind
        _file(str(src), 2, [(3, 3)])
        r2 = query.process_available()  # batch 1 fails again
        _file(str(src), 3, [(4, 4)])
        r3 = query.process_available()  # batches 1, 2 and 3, their snapshots kept for it
    finally:
        query.stop()
    (name,) = r0.sink_lags
    assert [r.sink_lags[name] for r in (r0, r1, r2, r3)] == [0, 1, 2, 0]
    assert [c[0] for c in calls] == [0, 1, 2, 3]
    assert calls[1][1] == [(1, 1, -1), (1, 11, 1)]  # changes with _weight
    assert calls[1][2] == [(1, 11), (2, 2)]  # the snapshot after batch 1, though two batches old
    assert calls[2][2] == [(1, 11), (2, 2), (3, 3)]  # the snapshot after batch 2

    query = start()  # a restart: the hook returned from every batch, so it is not called again
    try:
        _file(str(src), 4, [(2, 5)])
        query.process_available()
    finally:
        query.stop()
    assert [c[0] for c in calls] == [0, 1, 2, 3, 4]
    assert sorted(os.listdir(tmp_path / "out" / "snapshots")) == ["000004"]  # pruned once delivered
