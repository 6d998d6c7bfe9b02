"""The durable form of states: every state's changelog (or whole rows) packed into one table,
and read back — the latest row per key, or the logged deltas added up."""

from __future__ import annotations

from collections.abc import Sequence

from ...ir.printer import quote
from .states import StateTable, conform, summed
from .text import subquery


def pack(tables: Sequence[StateTable], relations: dict[str, str]) -> str:
    """Several states' rows as one relation, so they are written in a single job.

    Column ``__state`` names the state; state ``s``'s column ``c`` is ``s::c``, NULL in the
    rows of other states. ``relations`` gives each state's FROM item.
    """
    parts = []
    for t in tables:
        cols = [f"'{t.name}' AS __state"]
        for other in tables:
            for n, ty in other.columns:
                value = quote(n) if other is t else f"CAST(NULL AS {ty})"
                cols.append(f"{value} AS {quote(other.name + '::' + n)}")
        parts.append(f"SELECT {', '.join(cols)} FROM {relations[t.name]} _p")
    return "\nUNION ALL\n".join(parts)


def pack_columns(tables: Sequence[StateTable]) -> list[tuple[str, str]]:
    """(name, Spark type) of the columns :func:`pack` gives."""
    cols = [("__state", "string")]
    for t in tables:
        cols += [(f"{t.name}::{n}", ty) for n, ty in t.columns]
    return cols


def changelogs(logs: Sequence[tuple[int, str]]) -> str:
    """Packed changelogs (batch, Parquet directory) as one relation with ``__batch``."""
    return "\nUNION ALL\n".join(f"SELECT *, {batch} AS __batch FROM parquet.`{path}`" for batch, path in logs)


def latest(t: StateTable, logs: str, single: bool = False) -> str:
    """A state rebuilt from the packed changelogs ``logs`` (a view): each key's latest row, and
    no key whose latest row the state does not keep (it left: ``StateTable.kept``).

    A batch's changelog (or a whole copy) holds each key of a state once, so with ``single`` —
    one changelog, as after a compaction — its rows are the latest ones already: no ranking (a
    sort of every row) is needed."""
    keys = [quote(t.name + "::" + k) for k in t.keys]
    cols = ", ".join(f"{quote(t.name + '::' + n)} AS {quote(n)}" for n, _ in t.columns)
    order = "PARTITION BY " + ", ".join(keys) + " " if keys else ""
    if single:
        text = f"SELECT {cols} FROM {logs} WHERE __state = '{t.name}'"
    else:
        text = (f"SELECT {cols} FROM (SELECT *, row_number() OVER ({order}ORDER BY __batch DESC) AS __n "
                f"FROM {logs} WHERE __state = '{t.name}') _l WHERE __n = 1")
    kept = t.kept(lambda n: quote(t.name + "::" + n))
    if kept:
        text += f" AND {kept}"
    return conform(t, text)


def summed_logs(t: StateTable, logs: str, kept: str | None = None) -> str:
    """A state rebuilt from packed changelogs that hold its deltas (a candidate for runs,
    :mod:`.runs`): every logged row added up per key. ``kept``: an appended state's condition
    (Spark SQL, at the last committed batch's time), whose logs hold the rows that entered it and
    not their expiry: the rows it no longer holds for are left out."""
    cols = ", ".join(f"{quote(t.name + '::' + n)} AS {quote(n)}" for n, _ in t.columns)
    rows = summed(t, subquery(f"SELECT {cols} FROM {logs} WHERE __state = '{t.name}'"))
    if kept is not None:
        rows = f"SELECT * FROM {subquery(rows)} _logged WHERE {kept}"
    return conform(t, rows)

