"""The answer as a PostgreSQL table, kept equal to the snapshot after every batch, exactly once.

``postgres://USER@HOST:PORT/DB?table=NAME[&changes=CHANGES]`` (either name may be
``SCHEMA.TABLE``). The password comes from ``PGPASSWORD`` or ``~/.pgpass`` (libpq reads both),
never from the URL. With ``changes=``, an append-only table ``CHANGES`` gets each batch's
changes too: the answer's columns, ``_weight`` and ``_batch``, in the batch's transaction.

The table holds the answer's columns, typed from Spark's (:data:`PG_TYPES`). Where the answer
has a key (its GROUP BY key, :func:`streamfold.plan.answer_key.answer_key`) the table has a unique
index on it and one row per key; a multiset answer is kept as its distinct rows and a ``_count``
column (the multiplicity), unique on every other column. Beside it, ``streamfold_sink_progress``
holds one row per (query, table): the last batch the table holds.

One batch is one transaction:

1. the progress row is locked and read: a batch it already holds is skipped (a replay);
2. keyed, on a table with the key's unique index: the batch's changes (Arrow, from the output
   directory or as the batch handed them over) are split on their columns — the new rows
   (``_weight`` > 0) and the keys left without a row (their weights sum to −1) — and only those
   are streamed with ``COPY`` (CSV written by Arrow, whole columns) into a temporary table, the
   gone keys flagged; one ``MERGE`` on the key updates a new row's key in place, inserts it,
   or deletes a gone key's row;
3. otherwise the changes are staged whole, each row numbered: keyed, every staged key's row is
   deleted and the rows with ``_weight`` > 0 inserted; multiset, the staged rows' rows are deleted
   returning their counts, and inserted back with count + ``_weight`` where that is not 0;
4. with a changes table: the changes are appended to it with ``COPY``, with the batch's number;
5. the progress row is set to the batch; commit.

Readers never see half a batch, and a crash anywhere leaves the table at one batch or the next.
Key columns are compared with ``=`` (an index or a hash join) for the staged rows without a
NULL in the key, and as text with a NULL flag (still a hash join, no nested loop over the table)
for the few with one, so NULL keys match as GROUP BY groups them.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from ..errors import SinkError, UsageError
from . import Endpoint
from .committed import WEIGHT, AnswerShape, CommittedBatch, Prepared

if TYPE_CHECKING:
    import psycopg
    import pyarrow as pa

log = logging.getLogger("streamfold")

PROGRESS = "streamfold_sink_progress"
COUNT = "_count"
ROW = "_row"
BATCH = "_batch"
GONE = "_gone"  # a staged key whose row the batch deletes (a keyed MERGE)
KEYED_FILLFACTOR = 75  # % of each page a keyed table fills, the rest kept for updates in place
COPY_CHUNK_ROWS = 65536  # rows per CSV chunk handed to COPY (bounds the driver's memory)
PG_TYPES = {"tinyint": "smallint", "smallint": "smallint", "int": "integer", "bigint": "bigint",
            "float": "real", "double": "double precision", "string": "text", "boolean": "boolean",
            "date": "date", "timestamp": "timestamp with time zone", "timestamp_ntz": "timestamp without time zone"}
UNAVAILABLE_HINT = ("check that the server runs and HOST:PORT reach it; the batch stays committed and is "
                    "delivered when it is back")


def pg_type(spark_type: str) -> str:
    t = spark_type.lower()
    if t in PG_TYPES:
        return PG_TYPES[t]
    if t.startswith("decimal("):
        return "numeric" + t[len("decimal"):]
    if t.startswith(("varchar(", "char(")):
        return "text"
    raise UsageError(f"the PostgreSQL sink cannot hold a column of type {spark_type}", code="SINK_TYPE",
                     params={"type": spark_type}, hint="cast the column to a string or a number in the query")


def ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


class PostgresSink:
    """One PostgreSQL table a query's answer is delivered to (see the module's docstring)."""

    def __init__(self, endpoint: Endpoint, shape: AnswerShape) -> None:
        self.endpoint, self.shape = endpoint, shape
        self.name = endpoint.shown()
        table = endpoint.option("table")
        if not table:
            raise UsageError(f"the sink {self.name} names no table", code="BAD_ENDPOINT", params={"spec": self.name},
                             hint="add ?table=NAME to the URL")
        self.table, self.target = qualified(table), table
        changes = endpoint.option("changes")
        self.changes = qualified(changes) if changes else None
        if {COUNT, ROW, WEIGHT, BATCH, GONE} & set(shape.names):
            raise UsageError(f"the answer has a column named {COUNT}, {ROW}, {WEIGHT}, {BATCH} or {GONE}",
                             code="SINK_COLUMN", params={"sink": self.name}, hint="alias the column to another name")
        self.types = [(c, pg_type(t)) for c, t in shape.columns]
        self.upsert = False  # set by _prepare: the table has the unique index ON CONFLICT needs
        self.conn = self._connect()
        try:
            self._prepare()
        except BaseException:
            self.conn.close()
            raise

    # -- connecting and the table ------------------------------------------------------------
    def _connect(self) -> psycopg.Connection:
        import psycopg

        parts = urlsplit(self.endpoint.location)
        try:
            return psycopg.connect(host=parts.hostname or "127.0.0.1", port=parts.port or 5432,
                                   user=unquote(parts.username) if parts.username else None,
                                   dbname=unquote(parts.path.lstrip("/")) or None, connect_timeout=10,
                                   application_name="streamfold")
        except psycopg.OperationalError as e:
            raise self._refused(e, "connecting") from e

    def _refused(self, e: Exception, doing: str) -> SinkError:
        """A coded error for a failure of the server (or of reaching it) while ``doing``."""
        state = getattr(e, "sqlstate", None) or ""
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if state.startswith("28") or "password" in text or "authentication" in text:
            return SinkError(f"PostgreSQL sink {self.name}: authentication failed: {text}", code="SINK_AUTH",
                                   params={"sink": self.name},
                                   hint="give the password in PGPASSWORD or ~/.pgpass (never in the URL)")
        if state in ("53100", "53200"):
            return SinkError(f"PostgreSQL sink {self.name}: the server is out of space: {text}",
                                   code="SINK_FULL", params={"sink": self.name},
                                   hint="free space on the server; the batch stays committed and is delivered then")
        return SinkError(f"PostgreSQL sink {self.name}: {doing} failed: {text}", code="SINK_UNAVAILABLE",
                               params={"sink": self.name, "sqlstate": state}, hint=UNAVAILABLE_HINT)

    def _prepare(self) -> None:
        """The progress table, the answer's table and the changes table, created if missing; a
        table that exists with other columns is refused (never altered)."""
        columns = [(c, t) for c, t in self.types] + ([(COUNT, "bigint")] if self.shape.key is None else [])
        with self.conn.transaction():
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS {PROGRESS} (query_id text NOT NULL, target text NOT NULL, "
                              "batch bigint NOT NULL, PRIMARY KEY (query_id, target))")
            found = self._columns(self.table)
            if self.changes is not None:
                self._prepare_changes()
            if not found:
                # Room on each page for a row's next version: an update in place then stays on
                # its page and leaves the key's index alone (a HOT update).
                room = f" WITH (fillfactor = {KEYED_FILLFACTOR})" if self.shape.key else ""
                self.conn.execute(f"CREATE TABLE {self.table} ("
                                  + ", ".join(f"{ident(c)} {t}" for c, t in columns) + ")" + room)
                key = list(self.shape.key) if self.shape.key is not None else self.shape.names
                if key:
                    nulls = " NULLS NOT DISTINCT" if self.conn.info.server_version >= 150000 else ""
                    self.conn.execute(f"CREATE UNIQUE INDEX ON {self.table} ("
                                      + ", ".join(ident(c) for c in key) + f"){nulls}")
            elif found != columns:
                raise self._other_columns(self.target, found, columns, "table")
            self.upsert = self._has_key_index()
            if self._progress() is None:
                for name, table in ((self.target, self.table), (self.endpoint.option("changes"), self.changes)):
                    if table is not None and self.conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone():
                        raise SinkError(f"PostgreSQL sink {self.name}: table {name} has rows no batch of this "
                                        "query wrote", code="SINK_NOT_EMPTY", params={"sink": self.name},
                                        hint="empty or drop the table, or name another in the URL")

    def _has_key_index(self) -> bool:
        """Whether the table has a unique index on exactly the answer's key with NULLs not
        distinct (the one streamfold creates on PostgreSQL 15 and later): then a batch updates a
        key's row in place (``INSERT … ON CONFLICT``); without it (a table a user made, an older
        server) it deletes and inserts."""
        key = sorted(self.shape.key or ())
        if not key or self.conn.info.server_version < 150000:
            return False
        row = self.conn.execute(
            "SELECT 1 FROM pg_index i WHERE i.indrelid = to_regclass(%s) AND i.indisunique AND i.indnullsnotdistinct "
            "AND i.indpred IS NULL AND i.indexprs IS NULL AND (SELECT array_agg(a.attname::text ORDER BY a.attname) "
            "FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)) = %s", (self.table, key),
        ).fetchone()
        return row is not None

    def _columns(self, table: str) -> list[tuple[str, str]]:
        """The columns of ``table`` (name, PostgreSQL type), none when it does not exist."""
        found = self.conn.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
            "WHERE a.attrelid = to_regclass(%s) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            (table,)).fetchall()
        return [(c, t) for c, t in found]

    def _other_columns(self, name: str, found: list[tuple[str, str]], expected: list[tuple[str, str]],
                       option: str) -> SinkError:
        return SinkError(f"PostgreSQL sink {self.name}: table {name} exists with other columns", code="SINK_SCHEMA",
                         params={"sink": self.name, "found": [f"{c} {t}" for c, t in found],
                                 "expected": [f"{c} {t}" for c, t in expected]},
                         hint=f"drop the table (streamfold creates it) or name another with ?{option}=")

    def _prepare_changes(self) -> None:
        """The append-only changes table: created when missing; one with other columns refused.
        Rows of batches past the progress row (a crash's leftovers cannot exist: they were in the
        rolled-back transaction) need no cleaning."""
        assert self.changes is not None
        columns = [*self.types, (WEIGHT, "bigint"), (BATCH, "bigint")]
        found = self._columns(self.changes)
        if not found:
            self.conn.execute(f"CREATE TABLE {self.changes} (" + ", ".join(f"{ident(c)} {t}" for c, t in columns)
                              + ")")
            self.conn.execute(f"CREATE INDEX ON {self.changes} ({ident(BATCH)})")
        elif found != columns:
            raise self._other_columns(self.endpoint.option("changes") or "", found, columns, "changes")

    def _progress(self, lock: bool = False) -> int | None:
        row = self.conn.execute(f"SELECT batch FROM {PROGRESS} WHERE query_id = %s AND target = %s"
                                + (" FOR UPDATE" if lock else ""), (self.shape.query_id, self.target)).fetchone()
        return None if row is None else int(row[0])

    # -- the protocol -----------------------------------------------------------------------
    def _reconnect(self) -> None:
        """A new connection in place of one the server or the network broke (the next batch's
        delivery after an outage)."""
        if self.conn.closed or self.conn.broken:
            self.conn = self._connect()

    def applied(self) -> int:
        import psycopg

        try:
            self._reconnect()
            with self.conn.transaction():
                row = self._progress()
        except psycopg.Error as e:
            raise self._refused(e, "reading its progress") from e
        return -1 if row is None else row

    def write(self, committed: CommittedBatch) -> None:
        self.prepare(committed).commit()

    def prepare(self, committed: CommittedBatch) -> Prepared:
        """Apply the batch in a transaction left open: visible once :meth:`Prepared.commit`
        commits it (after streamfold's own commit), gone if :meth:`Prepared.abort` rolls it back
        or the process dies (the server drops the connection's transaction)."""
        import psycopg

        changes = committed.changes()
        try:
            self._reconnect()
            self._rollback()  # nothing of an earlier batch is left open
            self.conn.execute("SET LOCAL TIME ZONE 'UTC'")
            # Taken first and held to the commit: two runs of the query cannot interleave.
            self.conn.execute(f"INSERT INTO {PROGRESS} VALUES (%s, %s, -1) ON CONFLICT DO NOTHING",
                              (self.shape.query_id, self.target))
            held = self._progress(lock=True)
            if held is None or held < committed.batch:
                if changes.num_rows and self.shape.key is not None and self.upsert:
                    self._upsert(changes)
                elif changes.num_rows:
                    self._stage(changes)
                    self._apply(self._has_null_key(changes))
                if changes.num_rows and self.changes is not None:
                    import pyarrow as pa

                    rows = changes.append_column(BATCH, pa.repeat(pa.scalar(committed.batch, pa.int64()),
                                                                  changes.num_rows))
                    self._copy(self.changes, [*self.shape.names, WEIGHT, BATCH], rows)
                self.conn.execute(f"UPDATE {PROGRESS} SET batch = %s WHERE query_id = %s AND target = %s",
                                  (committed.batch, self.shape.query_id, self.target))
        except psycopg.Error as e:
            self._rollback()
            raise self._refused(e, f"applying batch {committed.batch}") from e
        except BaseException:
            self._rollback()
            raise
        return Prepared(lambda: self._commit(committed.batch), self._rollback)

    def _commit(self, batch: int) -> None:
        import psycopg

        try:
            self.conn.commit()
        except psycopg.Error as e:
            self._rollback()
            raise self._refused(e, f"committing batch {batch}") from e

    def _rollback(self) -> None:
        """End an open transaction without keeping it (quietly: a broken connection has none)."""
        import psycopg

        try:
            if not self.conn.closed and self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                self.conn.rollback()
        except psycopg.Error as e:
            log.debug("rolling back on sink %s: %s", self.name, e)

    def close(self) -> None:
        self.conn.close()

    # -- one batch ----------------------------------------------------------------------------
    def _copy(self, table: str, names: list[str], rows: pa.Table) -> None:
        """``rows`` (columns ``names``, in that order) appended to ``table`` with ``COPY``."""
        cols = ", ".join(ident(c) for c in names)
        with self.conn.cursor().copy(f"COPY {table} ({cols}) FROM STDIN (FORMAT csv)") as copy:
            for chunk in csv_chunks(rows.select(names)):
                copy.write(chunk)

    def _stage(self, changes: pa.Table) -> None:
        cols = ", ".join(f"{ident(c)} {t}" for c, t in self.types)
        self.conn.execute(f"CREATE TEMPORARY TABLE _stage ({cols}, {WEIGHT} bigint, "
                          f"{ROW} bigint GENERATED ALWAYS AS IDENTITY) ON COMMIT DROP")
        self._copy("_stage", [*self.shape.names, WEIGHT], changes)

    def _upsert(self, changes: pa.Table) -> None:
        """A keyed batch on a table with the key's unique index, as one ``MERGE``: the batch's new
        rows (``_weight`` > 0, at most one per key) update their key's row or are inserted, and
        the keys it leaves without a row are deleted. Which keys those are is worked out on the
        Arrow columns (a key's weights sum to −1: its old row went, no new one came), so only the
        new rows and the gone keys (flagged ``_gone``, their other columns NULL) cross to the
        server, in one ``COPY``. ``MERGE`` joins them to the table by the key (an index probe
        each for a few rows, a hash join for many); an ``INSERT … ON CONFLICT`` took about twice
        the server's time for the same rows (docs/benchmarks.md, "Sinks")."""
        import pyarrow as pa
        import pyarrow.compute as pc

        assert self.shape.key is not None
        key, names = list(self.shape.key), self.shape.names
        weight = changes.column(WEIGHT)
        new = changes.filter(pc.greater(weight, 0)).select(names)
        net = changes.select([*key, WEIGHT]).group_by(key).aggregate([(WEIGHT, "sum")])
        keys = net.filter(pc.less(net.column(f"{WEIGHT}_sum"), 0))
        gone = pa.table([keys.column(c) if c in key else pa.nulls(keys.num_rows, new.schema.field(c).type)
                         for c in names], schema=new.schema)
        staged = pa.concat_tables([new.append_column(GONE, pa.repeat(pa.scalar(False), new.num_rows)),
                                   gone.append_column(GONE, pa.repeat(pa.scalar(True), gone.num_rows))])
        cols = ", ".join(f"{ident(c)} {t}" for c, t in self.types)
        self.conn.execute(f"CREATE TEMPORARY TABLE _stage ({cols}, {GONE} boolean) ON COMMIT DROP")
        self._copy("_stage", [*names, GONE], staged)
        self._merge(self._has_null_key(staged))

    def _merge(self, null_keys: bool) -> None:
        """The staged rows of a keyed batch (``_stage``: the answer's columns and ``_gone``)
        merged into the table on the key."""
        assert self.shape.key is not None
        key, names = list(self.shape.key), self.shape.names
        others = [c for c in names if c not in key]
        update = ("WHEN MATCHED THEN UPDATE SET " + ", ".join(f"{ident(c)} = s.{ident(c)}" for c in others) + " "
                  if others else "")
        listed = ", ".join(ident(c) for c in names)
        for rows, on in self._key_passes(key, null_keys):
            self.conn.execute(f"MERGE INTO {self.table} t USING (SELECT * FROM _stage WHERE {rows}) s ON {on} "
                              f"WHEN MATCHED AND s.{GONE} THEN DELETE {update}"
                              f"WHEN NOT MATCHED AND NOT s.{GONE} THEN INSERT ({listed}) "
                              f"VALUES ({', '.join(f's.{ident(c)}' for c in names)})")

    @staticmethod
    def _key_passes(key: list[str], null_keys: bool, staged: str = "") -> list[tuple[str, str]]:
        """How a table row ``t`` is paired with a staged row ``s`` of the same key, as (which
        staged rows, their columns prefixed with ``staged``; the pairing condition): by ``=`` for
        staged keys without a NULL (an index or hash join), and, when some have one, as text with
        a NULL flag (still a hash join, no nested loop over the table), so NULL keys match as
        GROUP BY groups them."""
        equal = " AND ".join(f"t.{ident(c)} = s.{ident(c)}" for c in key) or "TRUE"
        no_null = " AND ".join(f"{staged}{ident(c)} IS NOT NULL" for c in key) or "TRUE"
        some_null = " OR ".join(f"{staged}{ident(c)} IS NULL" for c in key) or "FALSE"
        same = " AND ".join(f"(t.{ident(c)} IS NULL) = (s.{ident(c)} IS NULL) AND "
                            f"coalesce(t.{ident(c)}::text, '') = coalesce(s.{ident(c)}::text, '')" for c in key)
        return [(no_null, equal)] + ([(some_null, same)] if null_keys else [])

    @classmethod
    def _key_matches(cls, key: list[str], null_keys: bool) -> list[str]:
        """:meth:`_key_passes` as one condition on ``t`` and ``s`` each (a ``DELETE … USING``)."""
        return [f"({rows}) AND {on}" for rows, on in cls._key_passes(key, null_keys, "s.")]

    def _has_null_key(self, rows: pa.Table) -> bool:
        import pyarrow.compute as pc

        key = self.shape.key if self.shape.key is not None else self.shape.names
        return any(pc.any(pc.is_null(rows.column(c))).as_py() for c in key)

    def _apply(self, null_keys: bool) -> None:
        t, names = self.table, self.shape.names
        key = list(self.shape.key) if self.shape.key is not None else names
        passes = self._key_matches(key, null_keys)
        cols = ", ".join(ident(c) for c in names)
        if self.shape.key is not None:
            for where in passes:
                self.conn.execute(f"DELETE FROM {t} t USING _stage s WHERE {where}")
            self.conn.execute(f"INSERT INTO {t} ({cols}) SELECT {cols} FROM _stage WHERE {WEIGHT} > 0")
            return
        self.conn.execute(f"CREATE TEMPORARY TABLE _old ({ROW} bigint, {COUNT} bigint) ON COMMIT DROP")
        for where in passes:
            self.conn.execute(f"WITH gone AS (DELETE FROM {t} t USING _stage s WHERE {where} "
                              f"RETURNING s.{ROW}, t.{COUNT}) INSERT INTO _old SELECT * FROM gone")
        scols = ", ".join(f"s.{ident(c)}" for c in names)
        self.conn.execute(f"INSERT INTO {t} ({cols}, {COUNT}) SELECT {scols}, coalesce(o.{COUNT}, 0) + s.{WEIGHT} "
                          f"FROM _stage s LEFT JOIN _old o ON o.{ROW} = s.{ROW} "
                          f"WHERE coalesce(o.{COUNT}, 0) + s.{WEIGHT} <> 0")


def qualified(table: str) -> str:
    """``NAME`` or ``SCHEMA.NAME`` as a quoted SQL name."""
    schema, _, name = table.rpartition(".")
    return (ident(schema) + "." if schema else "") + ident(name)


def csv_chunks(table: pa.Table) -> Iterator[bytes]:
    """``table`` as CSV for ``COPY … (FORMAT csv)``, a chunk at a time: every present value
    quoted, NULL as an unquoted empty field (so an empty string and NULL stay apart)."""
    import pyarrow.csv as pcsv

    options = pcsv.WriteOptions(include_header=False, quoting_style="all_valid")
    for start in range(0, table.num_rows, COPY_CHUNK_ROWS):
        buf = io.BytesIO()
        pcsv.write_csv(table.slice(start, COPY_CHUNK_ROWS), buf, options)
        yield buf.getvalue()

