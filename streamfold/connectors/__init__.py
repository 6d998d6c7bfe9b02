"""Where a query's rows come from and where its answer goes: one spec, two protocols.

Every source and sink is named on the command line (or in the API) by an *endpoint*:

- ``PATH`` or ``PATH:parquet|csv|json`` — a directory files arrive in (sources) or are written to;
- ``PATH:delta`` — a Delta Lake table, read through its transaction log or written as one;
- ``postgres://USER@HOST:PORT/DB?table=NAME`` — a PostgreSQL table (sinks).

A password is never part of an endpoint: one found in a URL is refused before anything runs,
and :meth:`Endpoint.shown` (what logs and commit records print) has none to leak. PostgreSQL's
own ``PGPASSWORD`` and ``~/.pgpass`` supply it.

A source connector turns "what is new since the position recorded in the last commit" into a
batch of rows with ``_weight``; a sink connector applies a committed batch atomically and
remembers the last batch it holds, so a replayed batch is recognised and skipped (``docs/sinks.md``). Both keep the
hot path in Spark (or in Arrow batches moved whole), never a Python loop over rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from ..errors import UsageError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .committed import CommittedBatch

FILE_FORMATS = ("parquet", "csv", "json")
TABLE_FORMATS = ("delta",)
URL_SCHEMES = {"postgres": "postgres", "postgresql": "postgres"}
SECRET_HINT = "give the password in PGPASSWORD or ~/.pgpass, never in the URL: URLs reach logs and process lists"


@dataclass(frozen=True)
class Endpoint:
    """A parsed source or sink: its kind, where it is, and its options (no secret ever)."""

    kind: str  # "files", "delta" or "postgres"
    location: str  # a path, or a URL without a password
    format: str | None = None  # for "files": parquet, csv or json
    options: tuple[tuple[str, str], ...] = ()

    def option(self, key: str, default: str | None = None) -> str | None:
        return dict(self.options).get(key, default)

    def shown(self) -> str:
        """How logs, progress lines and commit records name it."""
        if self.kind == "files":
            return f"{self.location}:{self.format}" if self.format else self.location
        if self.kind == "delta":
            return f"{self.location}:delta"
        return self.location


def parse_endpoint(text: str, role: str = "source") -> Endpoint:
    """``text`` as an :class:`Endpoint`; ``role`` ("source" or "sink") only words the errors."""
    text = text.strip()
    scheme = text.split("://", 1)[0].lower() if "://" in text else ""
    if scheme in URL_SCHEMES:
        return _url_endpoint(text, URL_SCHEMES[scheme], role)
    if scheme and scheme not in ("file",):
        raise UsageError(f"unknown {role} kind {scheme}://", code="BAD_ENDPOINT", params={"spec": _no_secret(text)},
                         hint="a path (PATH, PATH:FORMAT, PATH:delta) or postgres://USER@HOST:PORT/DB?table=NAME")
    if scheme == "file":
        text = text.split("://", 1)[1]
    head, sep, tail = text.rpartition(":")
    kind, fmt, path = "files", None, text
    if sep and tail.lower() in FILE_FORMATS:
        fmt, path = tail.lower(), head
    elif sep and tail.lower() in TABLE_FORMATS:
        kind, path = tail.lower(), head
    if not path:
        raise UsageError(f"the {role} {text!r} names no path", code="BAD_ENDPOINT", params={"spec": text},
                         hint="write PATH, PATH:FORMAT or PATH:delta")
    return Endpoint(kind, path, fmt)


def _url_endpoint(text: str, kind: str, role: str) -> Endpoint:
    parts = urlsplit(text)
    if parts.password is not None:
        raise UsageError(f"the {role} URL carries a password", code="SECRET_ON_COMMAND_LINE",
                         params={"spec": _no_secret(text)}, hint=SECRET_HINT)
    options = tuple(sorted(parse_qsl(parts.query, keep_blank_values=True)))
    return Endpoint(kind, parts._replace(query="").geturl(), None, options)


def _no_secret(text: str) -> str:
    """``text`` with any ``user:password@`` reduced to ``user@`` (for error messages)."""
    if "://" not in text or "@" not in text:
        return text
    scheme, rest = text.split("://", 1)
    auth, at, host = rest.partition("@")
    return f"{scheme}://{auth.split(':', 1)[0]}{at}{host}"


class SourceConnector(Protocol):
    """A stream the engine polls: each batch takes what arrived after the last committed position.

    Positions are JSON values recorded in ``offsets/<batch>.json`` *before* the batch reads them,
    so a restart re-reads exactly the same rows; ``read`` must return the same rows for the same
    ``(start, end)``.
    """

    name: str

    def poll(self, spark: SparkSession, start: Any) -> Any | None:
        """The position after what is available now, or None when nothing is new since ``start``."""
        ...

    def read(self, spark: SparkSession, start: Any, end: Any) -> DataFrame:
        """The rows between two positions, with ``_weight`` (BIGINT: +n inserts, −n deletes)."""
        ...


class SinkConnector(Protocol):
    """Where each committed batch's answer is delivered, exactly once (:mod:`.sinks` opens one).

    A sink is told the answer's shape when it is opened (:class:`.committed.AnswerShape`: the
    columns, the key, the query's identity) and then receives committed batches in order, each
    read back from streamfold's own output (:class:`.committed.CommittedBatch`), so a sink that
    was down catches up from the same files a reader sees.
    """

    name: str  # how progress lines and warnings name it (never with a secret)

    def applied(self) -> int:
        """The last batch this sink holds (−1 when none): a batch at or below it is skipped."""
        ...

    def write(self, batch: CommittedBatch) -> None:
        """Apply one batch atomically: afterwards the sink equals its snapshot and holds ``batch``."""
        ...

    def close(self) -> None: ...
