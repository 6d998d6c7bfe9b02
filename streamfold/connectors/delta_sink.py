"""The answer as a Delta Lake table, and its changes as a second one, one Delta commit per batch.

``PATH:delta`` writes two tables with the ``deltalake`` package (delta-rs: no JVM, no jars):

* ``PATH`` — the answer, equal to the batch's snapshot after each batch: the snapshot is written
  over the table's previous version (``mode="overwrite"``, one commit that removes the old files
  and adds the new ones, so a reader sees one whole answer or the next);
* ``PATH_changes`` — append-only: each batch's changes with ``_weight`` and ``_batch``.

Each commit carries Delta's application transaction (``txn``) action: app id = the query's
identity, version = the batch. Before writing a batch to a table its ``transaction_version``
is read; a batch at or below it is already there and is skipped. A crash between the two tables'
commits leaves the answer a batch ahead of the changes; the sink's ``applied()`` is the lower of
the two, and the replay writes only the table that lacks the batch. Any Delta reader (DuckDB's
``delta_scan``, Spark with Delta's connector, delta-rs) reads both.
"""

from __future__ import annotations

import os


from ..errors import SinkError, StreamfoldError
from . import Endpoint
from .committed import AnswerShape, CommittedBatch

BATCH = "_batch"


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

    def _version(self, path: str) -> int:
        from deltalake import DeltaTable

        if not DeltaTable.is_deltatable(path):
            return -1
        version = DeltaTable(path).transaction_version(self.app_id)
        return -1 if version is None else int(version)

    def applied(self) -> int:
        try:
            return min(self._version(self.path), self._version(self.changes))
        except Exception as e:  # noqa: BLE001 - delta-rs raises its own classes for a log it cannot read
            raise self._failed(e, "reading its transaction log") from e

    def write(self, committed: CommittedBatch) -> None:
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake

        batch = committed.batch
        try:
            props = CommitProperties(app_transactions=[Transaction(self.app_id, batch)])
            if self._version(self.path) < batch:
                write_deltalake(self.path, committed.snapshot(), mode="overwrite", schema_mode="overwrite",
                                commit_properties=props)
            if self._version(self.changes) < batch:
                changes = committed.changes()
                changes = changes.append_column(BATCH, pa.repeat(pa.scalar(batch, pa.int64()), changes.num_rows))
                write_deltalake(self.changes, changes, mode="append", commit_properties=props)
        except StreamfoldError:
            raise
        except Exception as e:  # noqa: BLE001
            raise self._failed(e, f"writing batch {batch}") from e

    def _failed(self, e: Exception, doing: str) -> SinkError:
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        code = "SINK_SCHEMA" if "schema" in text.lower() else "SINK_UNAVAILABLE"
        return SinkError(f"Delta sink {self.name}: {doing} failed: {text}", code=code,
                               params={"sink": self.name},
                               hint="check the path is writable and holds this query's tables; the batch stays "
                                    "committed and is delivered when the sink can take it")

    def close(self) -> None:
        pass

