"""The answer as a Delta Lake table, and its changes as a second one, one Delta commit per batch.

``PATH:delta`` writes two tables with the ``deltalake`` package (delta-rs: no JVM, no jars):

* ``PATH`` — the answer, equal to the batch's snapshot after each batch: each commit removes the
  table's files and adds the batch's snapshot (an overwrite), so a reader sees one whole answer
  or the next;
* ``PATH_changes`` — append-only: each batch's changes with ``_weight`` and ``_batch``.

Each commit carries Delta's application transaction (``txn``) action: app id = the query's
identity, version = the batch. A batch at or below a table's ``transaction_version`` is already
there and is skipped. A crash between the two tables' commits leaves the answer a batch ahead of
the changes; the sink's ``applied()`` is the lower of the two, and the replay writes only the
table that lacks the batch. Any Delta reader (DuckDB's ``delta_scan``, Spark with Delta's
connector, delta-rs) reads both.

Two phases, as the PostgreSQL sink: :meth:`DeltaSink.prepare` writes the batch's Parquet files
into both tables' directories before streamfold's commit (no reader sees a file the log does not
name), and the ``Prepared`` it returns commits them to each table's log (``add`` actions and the
``txn``) once streamfold's commit is on disk, or deletes them. A kill in between leaves unnamed
files, which Delta's ``VACUUM`` removes; the restart writes the batch again.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from typing import TYPE_CHECKING

from ..errors import SinkError, StreamfoldError
from . import Endpoint
from .committed import AnswerShape, CommittedBatch, Prepared

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from deltalake.transaction import AddAction, RemoveAction

BATCH = "_batch"
Staged = tuple[str, str, "pa.Schema", list["AddAction"]]  # a table, its mode, schema, files


def changes_path(path: str) -> str:
    """Where the changes table of the answer table at ``path`` is."""
    return path.rstrip("/") + "_changes"


class DeltaSink:
    """The answer table and the changes table of one ``PATH:delta`` sink."""

    def __init__(self, endpoint: Endpoint, shape: AnswerShape) -> None:
        self.name = endpoint.shown()
        self.path = os.path.abspath(endpoint.location)
        self.changes = changes_path(self.path)
        self.app_id = f"streamfold:{shape.query_id}"
        self._tables: dict[str, DeltaTable] = {}  # open, at the version this sink last committed
        self._held: dict[str, int] = {}  # the last batch each table holds, while known for sure

    def _version(self, path: str) -> int:
        """The last batch the table at ``path`` holds: as this sink committed it, else read."""
        if path not in self._held:
            from deltalake import DeltaTable

            if os.path.exists(path) and not os.path.isdir(path):
                raise NotADirectoryError(f"{path} is not a directory")
            if not DeltaTable.is_deltatable(path):  # none yet (or only files of a batch never committed)
                return -1
            table = DeltaTable(path)
            version = table.transaction_version(self.app_id)
            self._tables[path], self._held[path] = table, -1 if version is None else int(version)
        return self._held[path]

    def _forget(self) -> None:
        """What this sink knows of its tables, dropped: read again from their logs (a failure)."""
        self._tables.clear()
        self._held.clear()

    def applied(self) -> int:
        self._forget()
        try:
            return min(self._version(self.path), self._version(self.changes))
        except Exception as e:  # noqa: BLE001 - delta-rs raises its own classes for a log it cannot read
            raise self._failed(e, "reading its transaction log") from e

    def write(self, committed: CommittedBatch) -> None:
        self.prepare(committed).commit()

    def prepare(self, committed: CommittedBatch) -> Prepared:
        """The batch's files written into each table that lacks it, not yet named by its log."""
        import pyarrow as pa

        batch = committed.batch
        staged: list[Staged] = []
        try:
            if self._version(self.path) < batch:
                snapshot = committed.snapshot()
                staged.append((self.path, "overwrite", snapshot.schema, [self._file(self.path, snapshot, batch)]))
            if self._version(self.changes) < batch:
                changes = committed.changes()
                changes = changes.append_column(BATCH, pa.repeat(pa.scalar(batch, pa.int64()), changes.num_rows))
                staged.append((self.changes, "append", changes.schema, [self._file(self.changes, changes, batch)]))
        except Exception as e:  # noqa: BLE001
            self._discard(staged)
            self._forget()
            if isinstance(e, StreamfoldError):
                raise
            raise self._failed(e, f"writing batch {batch}") from e
        return Prepared(lambda: self._commit(batch, staged), lambda: self._discard(staged))

    @staticmethod
    def _file(path: str, rows: pa.Table, batch: int) -> AddAction:
        """``rows`` as a new Parquet file in the table at ``path``; the ``add`` action naming it.
        Its statistics are exact: the row count, and for ``_batch`` its one value."""
        import pyarrow.parquet as pq
        from deltalake.transaction import AddAction

        os.makedirs(path, exist_ok=True)
        name = f"part-{batch:06d}-{uuid.uuid4().hex}.parquet"
        pq.write_table(rows, os.path.join(path, name))
        stats: dict[str, object] = {"numRecords": rows.num_rows}
        if BATCH in rows.column_names and rows.num_rows:
            stats.update(minValues={BATCH: batch}, maxValues={BATCH: batch}, nullCount={BATCH: 0})
        size = os.path.getsize(os.path.join(path, name))
        return AddAction(name, size, {}, int(time.time() * 1000), True, json.dumps(stats))

    def _commit(self, batch: int, staged: list[Staged]) -> None:
        """Each staged table's files committed to its log with the batch's transaction id."""
        from deltalake import CommitProperties, DeltaTable, Schema, Transaction
        from deltalake.transaction import create_table_with_add_actions

        props = CommitProperties(app_transactions=[Transaction(self.app_id, batch)])
        try:
            for path, mode, schema, actions in staged:
                table = self._tables.get(path)
                if table is None:  # the table's first commit
                    create_table_with_add_actions(path, Schema.from_arrow(schema), actions, mode="append",
                                                  commit_properties=props)
                    self._tables[path] = DeltaTable(path)
                else:
                    named: list[AddAction | RemoveAction] = [*actions]
                    table.create_write_transaction(named, mode, schema, commit_properties=props)
                    table.update_incremental()  # the handle at the version just committed
                self._held[path] = batch
        except Exception as e:  # noqa: BLE001 - its files stay: the commit may have landed (a replay skips it)
            self._forget()
            raise self._failed(e, f"committing batch {batch}") from e

    @staticmethod
    def _discard(staged: list[Staged]) -> None:
        """The files of a batch that is not committed, deleted (no log names them)."""
        for path, _, _, actions in staged:
            for action in actions:
                try:
                    os.remove(os.path.join(path, action.path))
                except FileNotFoundError:
                    pass

    def _failed(self, e: Exception, doing: str) -> SinkError:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        code = "SINK_SCHEMA" if "schema" in text.lower() else "SINK_UNAVAILABLE"
        return SinkError(f"Delta sink {self.name}: {doing} failed: {text}", code=code,
                               params={"sink": self.name},
                               hint="check the path is writable and holds this query's tables; the batch stays "
                                    "committed and is delivered when the sink can take it")

    def close(self) -> None:
        pass

