"""The runtime's public contract: output layout, formats, bad input, checkpoints, resuming."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfold
from streamfold.errors import BadInputError, BindError, CheckpointError, SourceError, UsageError
from streamfold.runtime import files, shape
from streamfold.runtime.features.maintenance import compact

from streamfold.verify import compare, duckdb_answer

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64())])


def put(directory: str, name: str, rows: list[tuple], schema: pa.Schema = SCHEMA) -> None:
    os.makedirs(directory, exist_ok=True)
    names = schema.names
    table = pa.Table.from_pylist([dict(zip(names, r)) for r in rows], schema=schema)
    pq.write_table(table, os.path.join(directory, name))


def rows_of(query, batch=None) -> list[tuple]:
    return [tuple(r) for r in query.snapshot_pandas(batch).itertuples(index=False, name=None)]


def start(spark, tmp, sql, **kw):
    kw.setdefault("partitions", 2)
    kw.setdefault("background", False)
    sources = kw.pop("sources", {"S": os.path.join(tmp, "S")})
    return streamfold.start(sql, sources, os.path.join(tmp, "out"), spark=spark, **kw)


def test_output_layout_commits_and_hidden_files(spark, tmp_path):
    tmp = str(tmp_path)
    src = os.path.join(tmp, "S")
    put(src, "b.parquet", [(1, 10), (2, 20)])
    put(src, "a.parquet", [(1, 5)])
    put(src, ".writing.parquet", [(9, 9)])
    put(src, "_ignored.parquet", [(9, 9)])
    q = start(spark, tmp, "SELECT k, sum(v) AS total FROM S GROUP BY k")
    try:
        first = q.process_available()
        assert first is not None and first.batch == 0
        assert q.process_available() is None  # nothing new: no batch
        put(src, "c.parquet", [(2, 1), (3, 3)])
        assert q.process_available().batch == 1
        out = os.path.join(tmp, "out")
        assert sorted(os.listdir(os.path.join(out, "commits"))) == ["000000.json", "000001.json"]
        commit0 = json.load(open(os.path.join(out, "commits", "000000.json")))
        assert commit0["batch"] == 0
        assert commit0["inputs"] == {"S": ["a.parquet", "b.parquet"]}  # name order, hidden files skipped
        assert commit0["duration_s"] > 0
        assert sorted(rows_of(q, 0)) == [(1, 15), (2, 20)]
        assert sorted(rows_of(q, 1)) == [(1, 15), (2, 21), (3, 3)]
        changes = sorted(tuple(r) for r in q.changes_pandas(1).itertuples(index=False, name=None))
        assert changes == [(2, 20, -1), (2, 21, 1), (3, 3, 1)]
        assert list(q.changes_pandas(1).columns) == ["k", "total", "_weight"]
        assert q.commit(1)["inputs"] == {"S": ["c.parquet"]}
    finally:
        q.stop()


def test_output_names_and_types_are_sparks(spark, tmp_path):
    tmp = str(tmp_path)
    put(os.path.join(tmp, "S"), "a.parquet", [(1, 10), (1, 11)])
    q = start(spark, tmp, "SELECT k, avg(v), count(*), sum(v) FROM S GROUP BY k")
    try:
        q.process_available()
        df = q.snapshot()
        assert df.columns == ["k", "avg(v)", "count(1)", "sum(v)"]
        assert [f.dataType.simpleString() for f in df.schema.fields] == ["int", "double", "bigint", "bigint"]
    finally:
        q.stop()


def test_two_columns_spark_names_alike_are_refused_at_start(spark, tmp_path):
    # Spark names both unnamed subqueries `scalarsubquery(k)`; Parquet needs distinct names.
    tmp = str(tmp_path)
    put(os.path.join(tmp, "S"), "a.parquet", [(1, 10)])
    sql = "SELECT k, (SELECT sum(v) FROM S x WHERE x.k = S.k), (SELECT count(*) FROM S y WHERE y.k > S.k) FROM S"
    with pytest.raises(BindError) as info:
        start(spark, tmp, sql)
    assert info.value.code == "DUPLICATE_OUTPUT_COLUMN"
    assert info.value.params == {"column": "scalarsubquery(k)"}


@pytest.mark.slow
def test_order_by_is_the_order_of_the_snapshot_file(spark, tmp_path):
    tmp = str(tmp_path)
    put(os.path.join(tmp, "S"), "a.parquet", [(i % 7, i) for i in range(50)])
    q = start(spark, tmp, "SELECT k, sum(v) AS t FROM S GROUP BY k ORDER BY t DESC")
    try:
        q.process_available()
        snap = os.path.join(tmp, "out", "snapshots", "000000")
        parts = sorted(n for n in os.listdir(snap) if n.endswith(".parquet"))
        totals = [t for p in parts for t in pq.read_table(os.path.join(snap, p)).column("t").to_pylist()]
        assert totals == sorted(totals, reverse=True) and len(totals) == 7
    finally:
        q.stop()


@pytest.mark.slow
@pytest.mark.parametrize("ordered", [False, True])
def test_a_batch_outputs_in_several_tasks(spark, tmp_path, monkeypatch, ordered):
    """A small batch's outputs are computed by one task (every other test), a larger one's by a
    task per core — or, for an ordered answer, not regrouped at all; the answers equal DuckDB's
    after every batch, with deletions."""
    monkeypatch.setattr(shape, "ONE_TASK_ROWS", 0)
    sql = "SELECT k, sum(v) AS t, count(*) AS n FROM S GROUP BY k" + (" ORDER BY t DESC, k" if ordered else "")
    weighted = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64()), pa.field("_weight", pa.int64())])
    src = os.path.join(str(tmp_path), "S")
    first = [(i % 11, i, 1) for i in range(60)]
    # later batches insert rows and delete some of the first batch's (every key keeps rows)
    batches = [first] + [[(i % 11, i * (b + 1), 1) for i in range(40)] + [r[:2] + (-1,) for r in first[b::7]]
                         for b in (1, 2)]
    put(src, "0.parquet", batches[0], schema=weighted)
    q = start(spark, str(tmp_path), sql, partitions=4)
    try:
        seen: list[pa.Table] = []
        for b, rows in enumerate(batches):
            if b:
                put(src, f"{b}.parquet", rows, schema=weighted)
            seen.append(pa.Table.from_pylist([dict(zip(weighted.names, r)) for r in rows], schema=weighted))
            q.process_available()
            got, expected = rows_of(q), duckdb_answer(sql, {"S": seen})
            assert compare(got, expected, positional=ordered).matches, (got, expected)
    finally:
        q.stop()


@pytest.mark.slow
def test_csv_and_json_sources_with_inferred_schemas(spark, tmp_path):
    tmp = str(tmp_path)
    csv_dir, json_dir = os.path.join(tmp, "C"), os.path.join(tmp, "J")
    os.makedirs(csv_dir)
    os.makedirs(json_dir)
    with open(os.path.join(csv_dir, "0.csv"), "w") as fh:
        fh.write("k,name\n1,one\n2,two\n")
    with open(os.path.join(json_dir, "0.json"), "w") as fh:
        fh.write('{"k": 1, "v": 2.5}\n{"k": 2, "v": 1.0}\n{"k": 1, "v": 0.5}\n')
    q = streamfold.start("SELECT C.name, sum(J.v) FROM J JOIN C ON J.k = C.k GROUP BY C.name",
                         {"C": csv_dir, "J": json_dir}, os.path.join(tmp, "out"), formats={"C": "csv", "J": "json"},
                         spark=spark, background=False, partitions=2)
    try:
        q.process_available()
        assert sorted(rows_of(q)) == [("one", 3.0), ("two", 1.0)]
        with open(os.path.join(json_dir, "1.json"), "w") as fh:
            fh.write('{"k": 2, "v": 4.0}\n')
        q.process_available()
        assert sorted(rows_of(q)) == [("one", 3.0), ("two", 5.0)]
    finally:
        q.stop()


@pytest.mark.slow
def test_nested_json_source_with_arrays_and_structs(spark, tmp_path):
    """JSON with nested values: the schema is inferred (ARRAY, STRUCT), LATERAL VIEW explodes the
    array, field access reads the struct, and the answer keeps up as files arrive."""
    tmp = str(tmp_path)
    src = os.path.join(tmp, "orders")
    os.makedirs(src)
    with open(os.path.join(src, "0.json"), "w") as fh:
        fh.write('{"id": 1, "customer": {"name": "ann", "city": "oslo"}, "items": [{"sku": "a", "qty": 2}, {"sku": "b", "qty": 1}]}\n'
                 '{"id": 2, "customer": {"name": "bob", "city": "rome"}, "items": []}\n')
    sql = ("SELECT o.customer.city AS city, item.sku AS sku, sum(item.qty) AS qty "
           "FROM orders o LATERAL VIEW explode(o.items) i AS item GROUP BY o.customer.city, item.sku")
    q = streamfold.start(sql, {"orders": src}, os.path.join(tmp, "out"), formats={"orders": "json"},
                         spark=spark, background=False, partitions=2)
    try:
        q.process_available()
        assert sorted(rows_of(q)) == [("oslo", "a", 2), ("oslo", "b", 1)]
        with open(os.path.join(src, "1.json"), "w") as fh:
            fh.write('{"id": 3, "customer": {"name": "cy", "city": "oslo"}, "items": [{"sku": "a", "qty": 5}]}\n'
                     '{"id": 4, "customer": {"name": "di", "city": "rome"}, "items": [{"sku": "c", "qty": 1}]}\n')
        q.process_available()
        assert sorted(rows_of(q)) == [("oslo", "a", 7), ("oslo", "b", 1), ("rome", "c", 1)]
    finally:
        q.stop()


@pytest.mark.slow
def test_a_bad_file_stops_the_run_nothing_is_committed_and_a_rerun_without_it_resumes(spark, tmp_path):
    tmp = str(tmp_path)
    src = os.path.join(tmp, "C")
    os.makedirs(src)
    with open(os.path.join(src, "0.csv"), "w") as fh:
        fh.write("k,v\n1,10\n")

    def start_query():
        return streamfold.start("SELECT k, sum(v) FROM C GROUP BY k", {"C": src}, os.path.join(tmp, "out"),
                                formats={"C": "csv"}, schemas={"C": "k INT, v BIGINT"}, spark=spark,
                                background=False, partitions=2)

    q = start_query()
    try:
        q.process_available()
        with open(os.path.join(src, "1.csv"), "w") as fh:
            fh.write("k,v\n2,20\n")
        with open(os.path.join(src, "2.csv"), "w") as fh:
            fh.write("k,v\n3,oops\n")
        with pytest.raises(BadInputError) as info:
            q.process_available()
        assert info.value.code == "UNPARSEABLE_VALUES"
        assert info.value.params["name"] == "2.csv"
        assert "--on-bad-file quarantine" in (info.value.hint or "")
        assert q.last_batch == 0
        assert not os.path.exists(os.path.join(tmp, "out", "commits", "000001.json"))
    finally:
        q.stop()
    # What the hint says: move the file away and run again. The failed batch's files are not kept
    # for a redo (that would read the file moved away); the rerun lists the directory again.
    os.rename(os.path.join(src, "2.csv"), os.path.join(tmp, "2.csv"))
    q = start_query()
    try:
        result = q.process_available()
        assert result is not None and result.batch == 1 and result.inputs == {"C": ["1.csv"]}
        assert sorted(rows_of(q)) == [(1, 10), (2, 20)]
    finally:
        q.stop()


def test_a_file_with_a_column_of_no_type_is_bad_input_named_and_a_rerun_without_it_resumes(spark, tmp_path):
    """An empty (or all-NULL) column pyarrow wrote as type `null` stopped the run with an error
    naming no file and left the batch naming it: after the file was moved away, as a user would,
    the next run failed again on the missing file."""
    tmp = str(tmp_path)
    src = os.path.join(tmp, "S")
    put(src, "0.parquet", [(1, 10)])
    q = start(spark, tmp, "SELECT k, sum(v) FROM S GROUP BY k")
    try:
        q.process_available()
        put(src, "1.parquet", [(2, 20)])
        pq.write_table(pa.table({"k": pa.array([], pa.int32()), "v": pa.array([])}), os.path.join(src, "2.parquet"))
        with pytest.raises(BadInputError) as info:
            q.process_available()
        assert (info.value.code, info.value.params["name"], info.value.params["column"]) == \
            ("UNSUPPORTED_COLUMN_TYPE", "2.parquet", "v")
        assert "--on-bad-file quarantine" in (info.value.hint or "")
    finally:
        q.stop()
    os.rename(os.path.join(src, "2.parquet"), os.path.join(tmp, "2.parquet"))
    q = start(spark, tmp, "SELECT k, sum(v) FROM S GROUP BY k")
    try:
        result = q.process_available()
        assert result is not None and result.inputs == {"S": ["1.parquet"]}
        assert sorted(rows_of(q)) == [(1, 10), (2, 20)]
    finally:
        q.stop()

@pytest.mark.slow
def test_quarantine_sets_the_bad_file_aside_and_goes_on(spark, tmp_path):
    tmp = str(tmp_path)
    src = os.path.join(tmp, "S")
    put(src, "0.parquet", [(1, 1)])
    q = start(spark, tmp, "SELECT k, sum(v) FROM S GROUP BY k", on_bad_file="quarantine")
    try:
        q.process_available()
        put(src, "1.parquet", [(1, 1)])
        bad_schema = pa.schema([pa.field("k", pa.int32()), pa.field("other", pa.string())])
        put(src, "2.parquet", [(5, "x")], schema=bad_schema)
        result = q.process_available()
        assert result is not None and result.inputs == {"S": ["1.parquet"]}
        assert sorted(rows_of(q)) == [(1, 2)]
        quarantined = os.path.join(tmp, "out", "quarantine", "S")
        assert sorted(os.listdir(quarantined)) == ["2.parquet", "2.parquet.error.txt"]
        assert "MISSING_COLUMN" in open(os.path.join(quarantined, "2.parquet.error.txt")).read()
        assert not os.path.exists(os.path.join(src, "2.parquet"))
    finally:
        q.stop()


@pytest.mark.slow
def test_file_schema_problems_are_named(spark, tmp_path):
    tmp = str(tmp_path)
    src = os.path.join(tmp, "S")
    put(src, "0.parquet", [(1, 1)])
    q = start(spark, tmp, "SELECT k, sum(v) FROM S GROUP BY k")
    try:
        q.process_available()
        put(src, "1.parquet", [(1, "x")], schema=pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.string())]))
        with pytest.raises(BadInputError) as info:
            q.process_available()
        assert info.value.code == "COLUMN_TYPE_MISMATCH" and info.value.params["column"] == "v"
        os.remove(os.path.join(src, "1.parquet"))
        weighted = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64()), pa.field("_weight", pa.int64())])
        put(src, "2.parquet", [(1, 1, -1)], schema=weighted)
        with pytest.raises(BadInputError) as info:
            q.process_available()
        assert info.value.code == "UNEXPECTED_WEIGHT"
    finally:
        q.stop()


def test_a_batch_reads_only_the_columns_the_plan_needs_and_checks_every_column_of_its_files(spark, tmp_path):
    """A query reading ``k`` of ``(k, v, note)`` decodes only ``k`` (and ``_weight``) of each file,
    yet a file whose unread ``note`` has the wrong type is still refused, as the contract says."""
    tmp = str(tmp_path)
    src = os.path.join(tmp, "S")
    wide = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64()), pa.field("note", pa.string())])
    put(src, "0.parquet", [(1, 1, "a"), (2, 5, "b")], schema=wide)
    q = start(spark, tmp, "SELECT k, count(*) AS n FROM S GROUP BY k")
    try:
        assert q.engine.plan.stream_columns() == {"S": ("k",)}
        frames, _, _ = q.engine.reader.read({"S": ["0.parquet"]}, cache=False)
        assert frames["S"].columns == ["k", "_weight", "__bad"]
        assert "note" not in frames["S"]._jdf.queryExecution().executedPlan().toString()
        q.process_available()
        assert sorted(rows_of(q)) == [(1, 1), (2, 1)]
        bad = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64()), pa.field("note", pa.int64())])
        put(src, "1.parquet", [(1, 1, 7)], schema=bad)
        with pytest.raises(BadInputError) as info:
            q.process_available()
        assert info.value.code == "COLUMN_TYPE_MISMATCH" and info.value.params["column"] == "note"
    finally:
        q.stop()


def test_a_checkpoint_of_another_query_is_refused(spark, tmp_path):
    tmp = str(tmp_path)
    put(os.path.join(tmp, "S"), "0.parquet", [(1, 1)])
    q = start(spark, tmp, "SELECT k, sum(v) FROM S GROUP BY k")
    q.process_available()
    q.stop()
    with pytest.raises(CheckpointError) as info:
        start(spark, tmp, "SELECT k, max(v) FROM S GROUP BY k")
    assert info.value.code == "CHECKPOINT_MISMATCH"


@pytest.mark.slow
def test_resume_after_stop_with_compaction(spark, tmp_path):
    tmp = str(tmp_path)
    src = os.path.join(tmp, "S")
    sql = "SELECT k, count(DISTINCT v) AS d, sum(v) AS t FROM S GROUP BY k"
    seen: list[pa.Table] = []
    os.makedirs(src)
    q = start(spark, tmp, sql, compact_every=2, schemas={"S": "k INT, v BIGINT"})
    for i in range(3):
        rows = [(i % 2, i), (2, i * 10)]
        put(src, f"{i}.parquet", rows)
        seen.append(pa.Table.from_pylist([dict(zip(["k", "v"], r)) for r in rows], schema=SCHEMA))
        q.process_available()
    q.stop()
    state_dir = os.path.join(tmp, "out", "_checkpoint", "state")
    assert sorted(os.listdir(state_dir)) == ["000002", "base-000001"]  # base after batch 1, delta of 2
    q = start(spark, tmp, sql, compact_every=2, schemas={"S": "k INT, v BIGINT"})
    try:
        assert q.last_batch == 2
        put(src, "3.parquet", [(1, 7)])
        seen.append(pa.Table.from_pylist([{"k": 1, "v": 7}], schema=SCHEMA))
        assert q.process_available().batch == 3
        assert compare(rows_of(q), duckdb_answer(sql, {"S": seen})).matches
    finally:
        q.stop()


def _sums_over_files(spark, tmp: str, files: int, **kw):
    """A sum per key over S with ``files`` one-row files, each its own batch: (the query, running)."""
    src = os.path.join(tmp, "S")
    os.makedirs(src)
    q = start(spark, tmp, "SELECT k, sum(v) FROM S GROUP BY k", schemas={"S": "k INT, v BIGINT"}, **kw)
    try:
        for i in range(files):
            put(src, f"{i}.parquet", [(i, i)])
            q.process_available()
    except BaseException:
        q.stop()
        raise
    return q


@pytest.mark.slow
def test_keep_snapshots_prunes_old_ones(spark, tmp_path):
    tmp = str(tmp_path)
    q = _sums_over_files(spark, tmp, 4, keep_snapshots=2)
    try:
        assert sorted(os.listdir(os.path.join(tmp, "out", "snapshots"))) == ["000002", "000003"]
        assert len(os.listdir(os.path.join(tmp, "out", "changes"))) == 4
    finally:
        q.stop()


def test_a_query_keeps_the_last_batches_results_in_memory_not_every_one(spark, tmp_path, monkeypatch):
    """A long run's handle does not grow by a result per batch (the commit records have them all)."""
    from streamfold.runtime.query import Query

    monkeypatch.setattr(Query, "RESULTS_KEPT", 2)
    q = _sums_over_files(spark, str(tmp_path), 3)
    try:
        assert [r.batch for r in q.results] == [1, 2]
    finally:
        q.stop()


def test_pruning_snapshots_costs_what_is_left_to_prune_not_the_batch_number(spark, tmp_path, monkeypatch):
    """After batch 100,000 of a long run, --keep-snapshots looks at the snapshots there are; it
    looked for every batch's since the first, after every batch (a cost growing with the run)."""
    tmp = str(tmp_path)
    q = _sums_over_files(spark, tmp, 3, keep_snapshots=2)
    try:
        looked: list[str] = []
        real = files.remove
        monkeypatch.setattr(files, "remove", lambda p: (looked.append(p), real(p)))
        compact(q.engine.ctx, q.engine.b, 100_000, False, False)  # as if batch 100,000 had just committed
        assert len(looked) <= 2 and os.listdir(os.path.join(tmp, "out", "snapshots")) == []
    finally:
        q.stop()


@pytest.mark.slow
def test_static_table_join_is_not_listed_in_inputs(spark, tmp_path):
    tmp = str(tmp_path)
    put(os.path.join(tmp, "S"), "0.parquet", [(1, 10), (2, 20), (1, 1)])
    table = os.path.join(tmp, "T.parquet")
    pq.write_table(pa.table({"k": pa.array([1, 2], pa.int32()), "name": ["one", "two"]}), table)
    q = start(spark, tmp, "SELECT T.name, sum(S.v) FROM S JOIN T ON S.k = T.k GROUP BY T.name", tables={"T": table})
    try:
        q.process_available()
        assert sorted(rows_of(q)) == [("one", 11), ("two", 20)]
        assert q.commit()["inputs"] == {"S": ["0.parquet"]}
    finally:
        q.stop()


@pytest.mark.slow
def test_background_api_waits_for_batches(spark, tmp_path):
    tmp = str(tmp_path)
    src = os.path.join(tmp, "S")
    put(src, "0.parquet", [(1, 1)])
    q = start(spark, tmp, "SELECT k, sum(v) AS s FROM S GROUP BY k", background=True, trigger=0.2)
    try:
        assert q.wait_for_batch(0, timeout=120) >= 0
        put(src, "1.parquet", [(1, 2)])
        q.wait_for_batch(1, timeout=120)
        assert q.snapshot().collect()[0]["s"] == 3
        assert q.changes(1).count() == 2
    finally:
        q.stop()


def test_missing_source_directory_is_a_clear_error(spark, tmp_path):
    with pytest.raises(SourceError) as info:
        start(spark, str(tmp_path), "SELECT k FROM S")
    assert info.value.code in ("SOURCE_NOT_FOUND", "SCHEMA_UNKNOWN")


@pytest.mark.slow
def test_nothing_cached_accumulates(spark, tmp_path):
    """States and deltas of past batches are released: cached blocks stay bounded."""
    tmp = str(tmp_path)
    src = os.path.join(tmp, "S")
    put(src, "0.parquet", [(1, 1)])
    # The Spark context is shared by the whole suite: count only the RDDs this query made (ids past a
    # marker taken now), and give Spark's asynchronous unpersist a moment to finish.
    first_own_id = spark.sparkContext._jsc.sc().newRddId()
    q = start(spark, tmp, "SELECT k, count(DISTINCT v), sum(v) FROM S GROUP BY k")

    def cached() -> int:
        infos = spark.sparkContext._jsc.sc().getRDDStorageInfo()
        return sum(1 for info in infos if info.id() > first_own_id)

    def settled(limit: int) -> int:
        deadline = time.monotonic() + 10
        while (n := cached()) > limit and time.monotonic() < deadline:
            time.sleep(0.1)
        return n

    try:
        q.process_available()
        after_first = cached()
        for i in range(1, 6):
            put(src, f"{i}.parquet", [(i % 3, i)])
            q.process_available()
        assert settled(after_first) <= after_first
    finally:
        q.stop()
    assert settled(0) == 0


def test_an_interrupted_batch_whose_file_was_removed_is_redone_without_it(spark, tmp_path, caplog):
    """A kill after a batch's offsets were written, then the user removes one of its files: the
    restart redoes the batch with the files still there (none of the removed one was committed)
    and says so, instead of failing on it at every restart; a batch whose files all went is
    forgotten, and a file that comes back later is taken as a new one."""
    tmp = str(tmp_path)
    src = os.path.join(tmp, "S")
    sql = "SELECT k, sum(v) AS s FROM S GROUP BY k"
    put(src, "0.parquet", [(1, 1)])
    q = start(spark, tmp, sql)
    q.process_available()
    q.stop()
    offsets = os.path.join(tmp, "out", "_checkpoint", "offsets")
    put(src, "1.parquet", [(1, 2)])
    put(src, "2.parquet", [(2, 5)])
    with open(os.path.join(offsets, "000001.json"), "w") as f:  # the kill: batch 1 planned, not committed
        json.dump({"batch": 1, "inputs": {"S": ["1.parquet", "2.parquet"]}}, f)
    os.rename(os.path.join(src, "2.parquet"), os.path.join(tmp, "2.parquet"))
    q = start(spark, tmp, sql)
    try:
        with caplog.at_level("WARNING", logger="streamfold"):
            q.process_available()
        assert "2.parquet of S are no longer in" in caplog.text
        assert rows_of(q) == [(1, 3)]
        with open(os.path.join(tmp, "out", "commits", "000001.json")) as f:
            assert json.load(f)["inputs"] == {"S": ["1.parquet"]}
    finally:
        q.stop()
    # Batch 2 planned with one file that is then removed: nothing is left of it to run.
    put(src, "3.parquet", [(3, 7)])
    with open(os.path.join(offsets, "000002.json"), "w") as f:
        json.dump({"batch": 2, "inputs": {"S": ["3.parquet"]}}, f)
    os.remove(os.path.join(src, "3.parquet"))
    os.rename(os.path.join(tmp, "2.parquet"), os.path.join(src, "2.parquet"))  # and the other comes back
    q = start(spark, tmp, sql)
    try:
        q.process_available()
        assert sorted(rows_of(q)) == [(1, 3), (2, 5)]
        with open(os.path.join(tmp, "out", "commits", "000002.json")) as f:
            assert json.load(f)["inputs"] == {"S": ["2.parquet"]}
    finally:
        q.stop()


def test_steps_run_side_by_side_carry_the_job_tag_and_print_no_warning(spark):
    """A batch's independent steps run in threads that keep the caller's job tag (a controller
    cancels a step by it), and without PySpark's "Spark session is not provided" warning, which
    printed once after every restart of a long run."""
    import warnings

    from streamfold.runtime.batch import parallel

    sc = spark.sparkContext
    sc.addJobTag("sf-parallel-test")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tags = parallel(spark, [sc.getJobTags, sc.getJobTags])
    finally:
        sc.removeJobTag("sf-parallel-test")
    assert all("sf-parallel-test" in t for t in tags)
    assert [str(w.message) for w in caught] == []


def test_a_restart_reads_the_files_consumed_from_one_fold_not_an_offsets_file_per_batch(tmp_path, monkeypatch):
    """Compaction folds the offsets of the batches up to it into one file: a restart's reads (and
    the checkpoint's files) stop growing with the number of batches the run has made."""
    from streamfold.runtime import checkpoint as checkpoint_module
    from streamfold.runtime.checkpoint import Checkpoint, OutputDir

    out = OutputDir(str(tmp_path / "out"))
    cp = Checkpoint(str(tmp_path / "out" / "_checkpoint"))
    for b in range(50):
        cp.write_offsets(b, {"S": [f"{b}.parquet"]})
        os.makedirs(cp.delta_dir(b))
        out.commit(b, {"batch": b, "inputs": {"S": [f"{b}.parquet"]}, "strategy": "incremental"})
    os.makedirs(cp.base_dir(39))
    cp.prune(39)  # compaction after batch 39
    assert sorted(os.listdir(cp.offsets)) == [f"{b:06d}.json" for b in range(40, 50)] + ["consumed-000039.json"]

    reads: list[str] = []
    real = checkpoint_module.files.read_json
    monkeypatch.setattr(checkpoint_module.files, "read_json", lambda p: (reads.append(p), real(p))[1])
    rec = cp.recover(out, ["S"])
    assert rec.consumed == {"S": {f"{b}.parquet" for b in range(50)}} and (rec.base, rec.deltas) == (39, list(range(40, 50)))
    assert len(reads) == 11  # the fold and the ten batches since

    # killed after writing a fold, before dropping what it replaces: the same files, and the next fold tidies up
    cp.write_offsets(50, {"S": ["50.parquet"]})
    os.makedirs(cp.delta_dir(50))
    out.commit(50, {"batch": 50, "inputs": {"S": ["50.parquet"]}, "strategy": "incremental"})
    checkpoint_module.files.write_json(cp.consumed_path(50), {"batch": 50, "inputs": {"S": sorted(f"{b}.parquet" for b in range(51))}})
    assert cp.recover(out, ["S"]).consumed == {"S": {f"{b}.parquet" for b in range(51)}}
    os.makedirs(cp.base_dir(50))
    cp.prune(50)
    assert os.listdir(cp.offsets) == ["consumed-000050.json"]


def test_an_ordered_snapshot_is_collected_in_one_task_and_the_other_outputs_in_a_few(spark):
    """A batch's outputs are one job (emit.stacked_frame). An ordered snapshot is read in one
    task, its sorted partitions in order, and the changes and changelogs beside it in the
    batch's few tasks — before, an ordered answer's outputs were not coalesced at all, a task per
    partition of every part (30 for TPC-H Q21)."""
    from streamfold.runtime.emit import stacked_frame

    parts = [("SELECT id AS a, 'x' AS s FROM range(0, 1000, 1, 4) ORDER BY a DESC", [("a", "bigint"), ("s", "string")]),
             ("SELECT id AS a FROM range(0, 100, 1, 8)", [("a", "bigint")]),
             ("SELECT id AS b, id AS c FROM range(0, 50, 1, 8)", [("b", "bigint"), ("c", "bigint")])]
    stacked = stacked_frame(spark, parts, tasks=2, ordered=True)
    assert stacked.rdd.getNumPartitions() == 3
    rows = [tuple(r) for r in stacked.collect()]
    assert [r[1] for r in rows if r[0] == 0] == list(range(999, -1, -1))
    assert sorted(r[1] for r in rows if r[0] == 1) == list(range(100))
    assert sorted((r[1], r[3]) for r in rows if r[0] == 2) == [(i, i) for i in range(50)]  # (__part, __s0, __s1, __s2)
    assert stacked_frame(spark, parts, tasks=2).rdd.getNumPartitions() == 2  # unordered: all in the few
    assert stacked_frame(spark, parts, tasks=1, ordered=True).rdd.getNumPartitions() == 1  # small: all in one


def test_the_partitions_default_is_set_by_its_variable_and_a_bad_value_is_refused_with_a_hint(tmp_path):
    from streamfold.runtime.config import QueryConfig
    from streamfold.settings import Settings, env_name

    variable = env_name("partitions")
    settings = Settings.from_environ({variable: "3"})
    assert QueryConfig("SELECT 1", [], str(tmp_path), settings=settings).partitions == 3
    assert QueryConfig("SELECT 1", [], str(tmp_path), partitions=5, settings=settings).partitions == 5  # given: it wins
    assert QueryConfig("SELECT 1", [], str(tmp_path), settings=Settings()).partitions is None  # one per core
    for bad in ("0", "two", "-1"):
        with pytest.raises(UsageError) as e:
            Settings.from_environ({variable: bad})
        assert e.value.code == "BAD_SETTING" and e.value.params == {"setting": "partitions", "value": bad}
        assert variable in (e.value.hint or "")
