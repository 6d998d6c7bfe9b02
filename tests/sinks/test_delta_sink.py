"""The Delta sink: after every batch the answer table, read by delta-rs, equals DuckDB's answer
on the prefix; the changes table adds up to it; each batch is one commit per table carrying the
query's application transaction, so a replayed batch is skipped."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from streamfold.verify import compare, duckdb_answer

from ..streams import Source, check_stream
from ..strategies import random_stream
from .oracle import delta_app_ids, delta_changes_netted, delta_rows, plain

pytestmark = [pytest.mark.spark]

R = Source("R", (("a", "INT"), ("b", "INT"), ("c", "DOUBLE"), ("s", "STRING"), ("d", "DATE")), weighted=True)
S = Source("S", (("k", "INT"), ("v", "INT"), ("w", "DOUBLE")), weighted=True)
QUERIES = [
    ("grouped", "SELECT a, s, count(*) AS n, sum(c) AS t, min(d) AS first FROM R GROUP BY a, s", [R]),
    ("join-multiset", "SELECT R.s, S.v FROM R JOIN S ON R.a = S.k", [R, S]),
    ("top-k", "SELECT a, count(*) AS n FROM R GROUP BY a ORDER BY n DESC, a LIMIT 3", [R]),
]


@pytest.mark.parametrize("qid,sql,sources", QUERIES, ids=[q[0] for q in QUERIES])
def test_delta_tables_equal_duckdb_after_every_batch(spark, tmp_path, qid, sql, sources):
    from deltalake import DeltaTable

    from streamfold.connectors.delta_sink import changes_path

    rng = random.Random(qid)
    batches = random_stream(rng, sources, batches=4, max_rows=10, min_rows=2)
    path = str(tmp_path / "answer")
    seen = []

    def check(batch, snapshot, prefix):
        expected = [tuple(plain(v) for v in r) for r in duckdb_answer(sql, prefix)]
        result = compare(delta_rows(path), expected)
        assert result.matches, f"batch {batch}: the Delta table differs from DuckDB: {result.detail}"
        net = delta_changes_netted(changes_path(path))
        counted = Counter(tuple(plain(v) for v in r) for r in snapshot)
        assert +net == counted, f"batch {batch}: the changes table does not add up to the answer"
        answer, changes = DeltaTable(path), DeltaTable(changes_path(path))
        (app,) = delta_app_ids(path)
        assert answer.transaction_version(app) == batch == changes.transaction_version(app)
        seen.append(answer.version())

    run = check_stream(spark, str(tmp_path), sql, sources, batches, check=check, sinks=[f"{path}:delta"])
    assert run.batches == 4 and seen == sorted(set(seen))  # one commit per batch


def test_a_replayed_batch_is_skipped(tmp_path):
    """The sink given a batch it holds (a restart between its commit and streamfold's record of
    it) writes nothing: the transaction id recognises it."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from deltalake import DeltaTable

    from streamfold.connectors import parse_endpoint
    from streamfold.connectors.committed import AnswerShape, CommittedBatch
    from streamfold.connectors.delta_sink import DeltaSink, changes_path

    shape = AnswerShape((("k", "int"), ("n", "bigint")), ("k",), "q1")
    snap, chg = tmp_path / "snap", tmp_path / "chg"
    snap.mkdir()
    chg.mkdir()
    pq.write_table(pa.table({"k": pa.array([1, None], pa.int32()), "n": pa.array([2, 1], pa.int64())}),
                   snap / "part-0.parquet")
    pq.write_table(pa.table({"k": pa.array([1, None], pa.int32()), "n": pa.array([2, 1], pa.int64()),
                             "_weight": pa.array([1, 1], pa.int64())}), chg / "part-0.parquet")
    path = str(tmp_path / "t")
    sink = DeltaSink(parse_endpoint(f"{path}:delta", "sink"), shape)
    assert sink.applied() == -1
    batch = CommittedBatch(0, str(snap), str(chg), shape)
    sink.write(batch)
    versions = DeltaTable(path).version(), DeltaTable(changes_path(path)).version()
    sink.write(batch)
    assert (DeltaTable(path).version(), DeltaTable(changes_path(path)).version()) == versions
    assert sink.applied() == 0
    assert sorted(delta_rows(path), key=repr) == sorted([(1, 2), (None, 1)], key=repr)
