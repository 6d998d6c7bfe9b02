"""Spark DataFrames as inputs (issue 54): a streaming DataFrame is a source, a static one a table.

Spark's own file source and ``rate`` source feed a query through ``foreachBatch``; after every
engine batch the snapshot equals DuckDB's answer over the rows Spark delivered, and a micro-batch
Spark replays after a crash (its commit lost, as when the driver dies after the batch's rows were
staged) is recognised and not applied twice.
"""

from __future__ import annotations

import os
import random
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamfold.settings import Settings
from streamfold.verify import compare, duckdb_answer

from ..streams import _rows

pytestmark = [pytest.mark.spark]

E_SCHEMA = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64()), pa.field("_weight", pa.int64())])
D_ROWS = [(0, "zero"), (1, "one"), (2, "two"), (3, None)]
FILE_SQL = "SELECT d.name, count(*) AS n, sum(e.v) AS t, min(e.v) AS lo FROM E e JOIN D d ON e.k = d.k GROUP BY d.name"


def _dim(spark):
    return spark.createDataFrame(D_ROWS, "k INT, name STRING")


def _dim_arrow() -> pa.Table:
    return pa.Table.from_pylist([{"k": k, "name": n} for k, n in D_ROWS],
                                schema=pa.schema([pa.field("k", pa.int32()), pa.field("name", pa.string())]))


def _file(directory: str, i: int, rng: random.Random, live: list) -> pa.Table:
    """Inserts, NULLs among them, and deletions of rows inserted before (``_weight`` −1)."""
    rows = [(rng.choice([0, 1, 2, 3, None]), rng.choice([rng.randint(0, 50), None]), 1) for _ in range(rng.randint(3, 9))]
    for r in rng.sample(live, k=min(len(live), rng.randint(0, 2))):
        live.remove(r)
        rows.append((r[0], r[1], -1))
    live.extend(r[:2] for r in rows if r[2] == 1)
    table = pa.Table.from_pylist([dict(zip(E_SCHEMA.names, r)) for r in rows], schema=E_SCHEMA)
    pq.write_table(table, os.path.join(directory, f".{i:04d}.parquet"))
    # Spark's file source takes files in the order of their modification times (ties in any
    # order): file i is dated i ms after the epoch's second 10^9, so deletions follow the
    # insertions they delete, as a stream brings them.
    os.utime(os.path.join(directory, f".{i:04d}.parquet"), ns=(0, (10**9 * 1000 + i) * 10**6))
    os.rename(os.path.join(directory, f".{i:04d}.parquet"), os.path.join(directory, f"{i:04d}.parquet"))
    return table


def _start(spark, sql, sources, out, **kw):
    import streamfold

    return streamfold.start(sql, sources, out, spark=spark, background=False, partitions=2, endpoint=False, **kw)


def _caught_up(q) -> None:
    """Spark processed every file there is; then the engine's batch takes what it staged."""
    for s in q.feeds.sources:
        s.query.processAllAvailable()


def test_a_file_stream_joined_with_a_static_dataframe_and_a_replayed_micro_batch_applied_once(spark, tmp_path):
    src, out = str(tmp_path / "in"), str(tmp_path / "out")
    os.makedirs(src)
    rng = random.Random(2)
    live: list = []
    written: list[pa.Table] = []

    def stream():
        return spark.readStream.schema("k INT, v BIGINT, _weight BIGINT").option("maxFilesPerTrigger", 2).parquet(src)

    def check(q):
        _caught_up(q)
        assert q.process_available() is not None
        expected = duckdb_answer(FILE_SQL, {"E": written, "D": [_dim_arrow()]})
        result = compare(_rows(q.snapshot_pandas()), expected)
        assert result.matches, f"batch {q.last_batch}: {result.detail}"

    written.append(_file(src, 0, rng, live))
    q = _start(spark, FILE_SQL, {"E": stream()}, out, tables={"D": _dim(spark)})
    try:
        for i in range(1, 3):
            check(q)
            for j in range(rng.randint(1, 3)):
                written.append(_file(src, 10 * i + j, rng, live))
        check(q)
        assert q.commit(q.last_batch)["positions"]["E"]["kind"] == "spark"
    finally:
        q.stop()
    # The driver died after the last micro-batch was staged, before Spark wrote its commit: Spark
    # runs that micro-batch again over the same offsets on restart.
    commits = os.path.join(out, "_checkpoint", "sources", "E", "_spark", "commits")
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    for name in (str(last), f".{last}.crc"):
        if os.path.exists(os.path.join(commits, name)):
            os.remove(os.path.join(commits, name))
    q = _start(spark, FILE_SQL, {"E": stream()}, out, tables={"D": _dim(spark)})
    try:
        written.append(_file(src, 99, rng, live))
        check(q)
        applied = [i for b in range(q.last_batch + 1) for i in q.commit(b)["positions"]["E"]["batch_ids"]]
        assert sorted(applied) == list(range(len(applied))), f"micro-batches applied: {applied}"
    finally:
        q.stop()


RATE_SQL = ("SELECT d.name, count(*) AS n, sum(u.x) AS t FROM "
            "(SELECT CAST(value % 4 AS INT) AS k, value AS x FROM R UNION ALL SELECT k, v AS x FROM E) u "
            "JOIN D d ON u.k = d.k GROUP BY d.name")


def test_a_rate_stream_and_a_file_stream_in_one_query_joined_with_a_static_dataframe(spark, tmp_path):
    """Two streaming sources: each engine batch takes the micro-batches both finished. The rate
    source's rows are checked to be 0, 1, 2, … each once (what it generates), then the answer
    against DuckDB over them and the files."""
    src, out = str(tmp_path / "in"), str(tmp_path / "out")
    os.makedirs(src)
    rng = random.Random(6)
    live: list = []
    written = [_file(src, 0, rng, live)]
    rate = spark.readStream.format("rate").option("rowsPerSecond", 50).option("numPartitions", 1).load()
    files = spark.readStream.schema("k INT, v BIGINT, _weight BIGINT").parquet(src)
    q = _start(spark, RATE_SQL, {"R": rate, "E": files}, out, tables={"D": _dim(spark)})
    try:
        staged = os.path.join(out, "_checkpoint", "sources", "R")
        for i in range(1, 3):
            deadline = time.monotonic() + 60
            while not any(n.startswith("spark-b") for n in os.listdir(staged)) and time.monotonic() < deadline:
                time.sleep(0.2)
            written.append(_file(src, i, rng, live))
            time.sleep(1.0)
            q.process_available()
        for s in q.feeds.sources:
            s.stop()
        while q.process_available() is not None:
            pass
        inputs = {n: [] for n in "RE"}
        for b in range(q.last_batch + 1):
            for name, names in q.commit(b)["inputs"].items():
                inputs[name] += names
        rate_rows = pa.concat_tables([pq.read_table(os.path.join(staged, n)) for n in inputs["R"]])
        values = sorted(rate_rows.column("value").to_pylist())
        assert values and values == list(range(len(values))), "the rate source's rows, each once"
        e_staged = os.path.join(out, "_checkpoint", "sources", "E")
        e_rows = [pq.read_table(os.path.join(e_staged, n)) for n in inputs["E"]]
        assert sum(t.num_rows for t in e_rows) == sum(t.num_rows for t in written)
        expected = duckdb_answer(RATE_SQL, {"R": [rate_rows], "E": written, "D": [_dim_arrow()]})
        result = compare(_rows(q.snapshot_pandas()), expected)
        assert result.matches, result.detail
    finally:
        q.stop()


def test_until_idle_waits_for_a_spark_stream_that_still_stages_files(spark, tmp_path):
    """Quiet means no input on its way: with one file per micro-batch and Spark triggering every
    second, the engine sees nothing new for longer than ``until_idle`` between micro-batches —
    the run still returns only once Spark has staged every file and the engine applied them."""
    src, out = str(tmp_path / "in"), str(tmp_path / "out")
    os.makedirs(src)
    rng, live = random.Random(4), []
    written = [_file(src, i, rng, live) for i in range(4)]
    df = spark.readStream.schema("k INT, v BIGINT, _weight BIGINT").option("maxFilesPerTrigger", 1).parquet(src)
    q = _start(spark, FILE_SQL, {"E": df}, out, tables={"D": _dim(spark)}, settings=Settings(spark_trigger=1.0))
    try:
        q.run(trigger=0.1, until_idle=0.3)
        result = compare(_rows(q.snapshot_pandas()), duckdb_answer(FILE_SQL, {"E": written, "D": [_dim_arrow()]}))
        assert result.matches, f"after the run: {result.detail}"
    finally:
        q.stop()


@pytest.mark.parametrize("given,ms", [(None, 100), (0.25, 250)])
def test_a_spark_sources_stream_looks_for_input_every_spark_trigger_seconds(spark, tmp_path, given, ms):
    """A Spark stream has no change notification: its trigger is its latency, 0.1 s unless
    ``spark_trigger`` says otherwise — not the query's ``trigger``, the poll of directories."""
    os.makedirs(tmp_path / "in")
    df = spark.readStream.schema("k INT, v BIGINT, _weight BIGINT").parquet(str(tmp_path / "in"))
    settings = Settings() if given is None else Settings(spark_trigger=given)
    q = _start(spark, FILE_SQL, {"E": df}, str(tmp_path / "out"), tables={"D": _dim(spark)}, trigger=5.0,
               settings=settings)
    try:
        (source,) = q.feeds.sources
        assert str(source.query._jsq.streamingQuery().trigger()) == f"ProcessingTimeTrigger({ms})"
    finally:
        q.stop()
