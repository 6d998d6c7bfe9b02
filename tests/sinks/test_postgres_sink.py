"""The PostgreSQL sink: after every batch the table equals DuckDB's answer on the prefix.

Random data from small domains (NULL keys, duplicate rows), random batch splits, deletions; a
real server (``conftest.postgres``). Keyed answers are one row per key; multisets rows with
``_count``."""

from __future__ import annotations

import datetime as dt
import random
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest

from streamfold.errors import UsageError
from streamfold.verify import compare, duckdb_answer

from ..streams import Source, check_stream
from ..strategies import random_stream
from .oracle import plain, postgres_rows

pytestmark = [pytest.mark.spark]

R = Source("R", (("a", "INT"), ("b", "INT"), ("c", "DOUBLE"), ("s", "STRING"), ("d", "DATE")), weighted=True)
S = Source("S", (("k", "INT"), ("v", "INT"), ("w", "DOUBLE")), weighted=True)

# (id, query, sources, multiset: kept with _count)
QUERIES = [
    ("grouped-null-keys", "SELECT a, s, count(*) AS n, sum(c) AS t, min(d) AS first FROM R GROUP BY a, s", [R], False),
    ("join-grouped", "SELECT R.a, count(*) AS n, sum(S.w) AS t FROM R JOIN S ON R.a = S.k GROUP BY R.a", [R, S], False),
    ("top-k", "SELECT a, count(*) AS n FROM R GROUP BY a ORDER BY n DESC, a LIMIT 3", [R], False),
    ("multiset-duplicates", "SELECT a, s, d FROM R WHERE b > 0 OR b IS NULL", [R], True),
    ("join-multiset", "SELECT R.s, S.v FROM R JOIN S ON R.a = S.k", [R, S], True),
    ("global", "SELECT count(*) AS n, sum(b) AS t, max(s) AS m FROM R", [R], False),
]


@pytest.mark.parametrize("qid,sql,sources,multiset", QUERIES, ids=[q[0] for q in QUERIES])
def test_table_equals_duckdb_after_every_batch(spark, tmp_path, postgres, qid, sql, sources, multiset):
    rng = random.Random(qid)
    batches = random_stream(rng, sources, batches=4, max_rows=10, min_rows=2)
    table = f"t_{uuid.uuid4().hex[:8]}"
    conn = postgres.connect()
    held = []

    def check(batch, snapshot, prefix):
        columns = [c for c, _ in query_columns(conn, table)]
        names = [c for c in columns if c != "_count"]
        rows = postgres_rows(conn, table, names, multiset)
        expected = [tuple(plain(v) for v in r) for r in duckdb_answer(sql, prefix)]
        result = compare(rows, expected)
        assert result.matches, f"batch {batch}: the PostgreSQL table differs from DuckDB: {result.detail}"
        # The changes table, netted over the batches so far, is the answer too; each batch's rows once.
        netted = changes_netted(conn, table + "_changes", names)
        assert compare(netted, expected).matches, f"batch {batch}: the changes table does not net to the answer"
        held.append(progress(conn, table))

    url = postgres.url(table) + f"&changes={table}_changes"
    check_stream(spark, str(tmp_path), sql, sources, batches, check=check, sinks=[url])
    assert held == list(range(len(held))) and len(held) == 4  # one progress row, moved batch by batch
    columns = [c for c, _ in query_columns(conn, table)]
    assert ("_count" in columns) == multiset
    conn.close()


@pytest.mark.parametrize("handed", [True, False], ids=["answer-handed-over", "answer-read-back"])
def test_both_sinks_start_on_the_answer_handed_over_or_read_back(spark, tmp_path, postgres, monkeypatch, handed):
    """A small batch's answer reaches the two-phase sinks as the engine collected it, before its
    files are written; a large one (here every output counts as large) once Spark wrote it, read
    back. Either way, after every batch both tables equal DuckDB's answer."""
    from streamfold.runtime import shape
    from streamfold.runtime.features.sinks import Sinks

    from .oracle import delta_rows

    if not handed:
        monkeypatch.setattr(shape, "SMALL_ROWS", 0)
    started: list[bool] = []
    prepare = Sinks.prepare

    def spied(self, batch, answer=None):
        if self._prepared is None or self._prepared[0] != batch:
            started.append(answer is not None)
        return prepare(self, batch, answer)

    monkeypatch.setattr(Sinks, "prepare", spied)
    sql = QUERIES[0][1]
    batches = random_stream(random.Random("handed"), [R], batches=4, max_rows=10, min_rows=2)
    table, delta = f"t_{uuid.uuid4().hex[:8]}", str(tmp_path / "lake" / "answer")
    conn = postgres.connect()

    def check(batch, snapshot, prefix):
        expected = [tuple(plain(v) for v in r) for r in duckdb_answer(sql, prefix)]
        result = compare(postgres_rows(conn, table, ["a", "s", "n", "t", "first"], False), expected)
        assert result.matches, f"batch {batch}: the PostgreSQL table differs from DuckDB: {result.detail}"
        result = compare(delta_rows(delta), expected)
        assert result.matches, f"batch {batch}: the Delta table differs from DuckDB: {result.detail}"

    check_stream(spark, str(tmp_path), sql, [R], batches, check=check, sinks=[postgres.url(table), f"{delta}:delta"])
    assert len(started) == 4 and set(started) == {handed}
    conn.close()


def changes_netted(conn, changes: str, names: list[str]) -> list[tuple]:
    """The rows of a changes table summed by ``_weight`` over its batches, each row repeated as
    often as its net weight (a negative net is a row deleted more often than inserted: kept,
    so the comparison fails)."""
    cols = ", ".join(f'"{c}"' for c in names)
    distinct = conn.execute(f'SELECT count(*) = count(DISTINCT (_batch, {cols}, _weight)) FROM "{changes}"').fetchone()
    assert distinct[0], "a batch's change appears twice in the changes table"
    netted = conn.execute(f'SELECT {cols}, sum(_weight) AS w FROM "{changes}" GROUP BY {cols}').fetchall()
    out = []
    for *row, w in netted:
        out.extend([tuple(plain(v) for v in row)] * int(w) if w > 0 else ([("NEGATIVE", *row)] if w < 0 else []))
    return out


def query_columns(conn, table: str) -> list[tuple[str, str]]:
    return conn.execute("SELECT column_name, data_type FROM information_schema.columns WHERE table_name = %s "
                        "ORDER BY ordinal_position", (table,)).fetchall()


def progress(conn, table: str) -> int:
    rows = conn.execute("SELECT batch FROM streamfold_sink_progress WHERE target = %s", (table,)).fetchall()
    assert len(rows) == 1
    return rows[0][0]


X = Source("X", (("k", "STRING"), ("amount", "DECIMAL(10,2)"), ("day", "DATE"), ("at", "TIMESTAMP"),
                 ("flag", "BOOLEAN"), ("x", "DOUBLE")))
T0 = dt.datetime(2024, 3, 1, 12, 30, 15, 123456, tzinfo=dt.timezone.utc)
X_ROWS = [
    [("a,b", Decimal("10.25"), dt.date(2024, 1, 1), T0, True, 0.1),
     ('quote "q"', Decimal("-3.10"), None, None, None, None),
     ("", Decimal("0.01"), dt.date(2024, 2, 29), T0 + dt.timedelta(days=1), False, 1e300),
     (None, None, dt.date(1970, 1, 1), T0, True, -0.0)],
    [("line\nbreak", Decimal("99999999.99"), dt.date(2024, 1, 1), T0 - dt.timedelta(microseconds=1), True, 2.5e-10),
     ("a,b", Decimal("1.00"), dt.date(2024, 1, 1), T0, None, 3.0),
     (None, Decimal("2.50"), None, None, False, None)],
]


def test_types_and_nulls_round_trip(spark, tmp_path, postgres):
    """Decimals, dates, timestamps, booleans, doubles and strings with CSV's special characters;
    NULL kept apart from the empty string; columns typed from Spark's."""
    pa_types = {"TIMESTAMP": pa.timestamp("us", tz="UTC")}
    from .. import streams

    streams.ARROW.update(pa_types)
    grouped, plain_rows = f"g_{uuid.uuid4().hex[:8]}", f"p_{uuid.uuid4().hex[:8]}"
    sql_grouped = ("SELECT k, day, sum(amount) AS total, max(at) AS last, count(*) AS n, min(x) AS low, "
                   "max(flag) AS any_flag FROM X GROUP BY k, day")
    conn = postgres.connect()

    def check(batch, snapshot, prefix):
        expected = [tuple(plain(v) for v in r) for r in duckdb_answer(sql_grouped, prefix)]
        rows = postgres_rows(conn, grouped, ["k", "day", "total", "last", "n", "low", "any_flag"], False)
        result = compare(rows, expected)
        assert result.matches, f"batch {batch}: {result.detail}"
        assert exact(rows) == exact(expected)  # no tolerance

    check_stream(spark, str(tmp_path / "g"), sql_grouped, [X], [{"X": r} for r in X_ROWS], check=check,
                 sinks=[postgres.url(grouped)])
    types = dict(query_columns(conn, grouped))
    assert types == {"k": "text", "day": "date", "total": "numeric", "last": "timestamp with time zone",
                     "n": "bigint", "low": "double precision", "any_flag": "boolean"}
    sql_plain = "SELECT k, amount, at, x FROM X"

    def check_plain(batch, snapshot, prefix):
        expected = [tuple(plain(v) for v in r) for r in duckdb_answer(sql_plain, prefix)]
        rows = postgres_rows(conn, plain_rows, ["k", "amount", "at", "x"], True)
        assert exact(rows) == exact(expected)

    check_stream(spark, str(tmp_path / "p"), sql_plain, [X], [{"X": r} for r in X_ROWS], check=check_plain,
                 sinks=[postgres.url(plain_rows)])
    conn.close()


def exact(rows: list[tuple]) -> list[str]:
    """Rows compared exactly, as text; a zero's sign aside (Spark's grouping normalises −0.0)."""
    return sorted(repr(tuple(v + 0.0 if isinstance(v, float) else v for v in r)) for r in rows)


def test_a_password_in_the_url_or_a_file_endpoint_is_refused():
    from streamfold.connectors.sinks import check_sink

    with pytest.raises(UsageError) as e:
        check_sink("postgres://u:secret@127.0.0.1:5432/db?table=t")
    assert e.value.code == "SECRET_ON_COMMAND_LINE" and "secret" not in str(e.value)
    with pytest.raises(UsageError) as e:
        check_sink("/tmp/out:parquet")
    assert e.value.code == "BAD_ENDPOINT"
    with pytest.raises(UsageError) as e:
        check_sink("postgres://u@127.0.0.1:5432/db")
    assert e.value.code == "BAD_ENDPOINT"
    for spec in ("postgres://u@127.0.0.1:5432/db?table=t&changes=t", "postgres://u@127.0.0.1:5432/db?table=t&changes="):
        with pytest.raises(UsageError) as e:
            check_sink(spec)
        assert e.value.code == "BAD_ENDPOINT" and "changes=" in e.value.hint
    assert check_sink("postgres://u@127.0.0.1:5432/db?table=t&changes=t_changes").option("changes") == "t_changes"


def test_keyed_tables_upsert_only_on_their_unique_key_index(postgres):
    """A table streamfold creates has the key's unique index (NULLs not distinct), so batches
    update rows in place; a table a user made without it is kept by deleting and inserting."""
    from streamfold.connectors import parse_endpoint
    from streamfold.connectors.committed import AnswerShape
    from streamfold.connectors.postgres_sink import PostgresSink

    keyed = AnswerShape((("k", "int"), ("s", "string"), ("n", "bigint")), ("k", "s"), "q-upsert")
    made = PostgresSink(parse_endpoint(postgres.url(f"u_{uuid.uuid4().hex[:8]}"), role="sink"), keyed)
    assert made.upsert
    made.close()
    conn = postgres.connect()
    table = f"u_{uuid.uuid4().hex[:8]}"
    conn.execute(f'CREATE TABLE "{table}" (k integer, s text, n bigint)')
    users = PostgresSink(parse_endpoint(postgres.url(table), role="sink"), keyed)
    assert not users.upsert
    users.close()
    global_ = AnswerShape((("n", "bigint"),), (), "q-upsert")
    one_row = PostgresSink(parse_endpoint(postgres.url(f"u_{uuid.uuid4().hex[:8]}"), role="sink"), global_)
    assert not one_row.upsert
    one_row.close()
    conn.close()


def test_a_prepared_batch_is_invisible_until_committed_and_gone_when_aborted(postgres, tmp_path):
    """The two phases the engine runs beside its commit: ``prepare`` applies a batch in an open
    transaction (readers see the batch before), ``commit`` shows it whole, ``abort`` leaves the
    table and the progress row as they were — the batch is then delivered again, once. The
    batches update a key in place, delete a NULL key's row and a key's, and add one."""
    import os

    import pyarrow.parquet as pq

    from streamfold.connectors import parse_endpoint
    from streamfold.connectors.committed import AnswerShape, CommittedBatch
    from streamfold.connectors.postgres_sink import PostgresSink

    shape = AnswerShape((("k", "int"), ("n", "bigint")), ("k",), "q-prepare")
    table = f"p_{uuid.uuid4().hex[:8]}"
    schema = pa.schema([("k", pa.int32()), ("n", pa.int64()), ("_weight", pa.int64())])

    def batch(i: int, rows: list[tuple]) -> CommittedBatch:
        changes = tmp_path / "changes" / f"{i:06d}"
        os.makedirs(changes)
        pq.write_table(pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema),
                       changes / "part-0.parquet")
        return CommittedBatch(i, str(tmp_path / "snapshots" / f"{i:06d}"), str(changes), shape)

    sink = PostgresSink(parse_endpoint(postgres.url(table) + f"&changes={table}_c", role="sink"), shape)
    reader = postgres.connect()

    def seen() -> tuple[list[tuple], int | None]:
        held = reader.execute("SELECT batch FROM streamfold_sink_progress WHERE target = %s", (table,)).fetchall()
        return sorted(reader.execute(f'SELECT k, n FROM "{table}"').fetchall(), key=repr), max(held or [(None,)])[0]

    try:
        assert sink.upsert
        first = sink.prepare(batch(0, [(1, 1, 1), (None, 2, 1), (3, 1, 1)]))
        assert seen() == ([], None)
        first.commit()
        assert seen() == ([(1, 1), (3, 1), (None, 2)], 0)
        second = batch(1, [(1, 1, -1), (1, 5, 1), (None, 2, -1), (3, 1, -1), (4, 7, 1)])
        sink.prepare(second).abort()
        assert seen() == ([(1, 1), (3, 1), (None, 2)], 0) and sink.applied() == 0
        sink.write(second)
        sink.write(second)  # a replay: held already, skipped
        assert seen() == ([(1, 5), (4, 7)], 1)
        assert compare(changes_netted(reader, f"{table}_c", ["k", "n"]), [(1, 5), (4, 7)]).matches
    finally:
        sink.close()
        reader.close()
