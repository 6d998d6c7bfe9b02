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


def _logged(t: StateTable, logs: str, extra: str = "", distributed: bool = False) -> str:
    """State ``t``'s rows in the packed changelogs ``logs`` (with ``extra`` columns), its own
    columns under their names; ``distributed``: hash-partitioned on the state's partition columns,
    so that grouping or ranking them per key needs no second shuffle (the partition columns are
    among the key's) and what comes out is already laid out as the state is."""
    cols = ", ".join(f"{quote(t.name + '::' + n)} AS {quote(n)}" for n, _ in t.columns)
    text = f"SELECT {cols}{extra} FROM {logs} WHERE __state = '{t.name}'"
    keys = t.state.partition_names
    if distributed and keys:
        text += " DISTRIBUTE BY " + ", ".join(quote(k) for k in keys)
    return text


def latest(t: StateTable, logs: str, single: bool = False) -> str:
    """A state rebuilt from the packed changelogs ``logs`` (a view): each key's latest row, and
    no key whose latest row the state does not keep (it left: ``StateTable.kept``).

    A batch's changelog (or a whole copy) holds each key of a state once, so with ``single`` —
    one changelog, as after a compaction — its rows are the latest ones already: no ranking (a
    sort of every row) is needed. Otherwise the rows are ranked per key within the state's own
    partitions (one shuffle)."""
    where = []
    if single:
        text = f"SELECT * FROM {subquery(_logged(t, logs))} _l"
    else:
        order = "PARTITION BY " + ", ".join(quote(k) for k in t.keys) + " " if t.keys else ""
        ranked = (f"SELECT *, row_number() OVER ({order}ORDER BY __batch DESC) AS __n "
                  f"FROM {subquery(_logged(t, logs, ', __batch', distributed=True))} _d")
        text = f"SELECT {', '.join(quote(n) for n, _ in t.columns)} FROM {subquery(ranked)} _l"
        where.append("__n = 1")
    kept = t.kept(quote)
    if kept:
        where.append(f"({kept})")
    if where:
        text += " WHERE " + " AND ".join(where)
    return conform(t, text)


def summed_logs(t: StateTable, logs: str, kept: str | None = None, one_delta: bool = False) -> str:
    """A state rebuilt from packed changelogs that hold its deltas (a candidate for runs,
    :mod:`.runs`): every logged row added up per key, within the state's own partitions (one
    shuffle). ``kept``: an appended state's condition (Spark SQL, at the last committed batch's
    time), whose logs hold the rows that entered it and not their expiry: the rows it no longer
    holds for are left out. ``one_delta``: the logs are one batch's changelog of a state that is
    not appended, which holds each key once (the key's new − old): its rows are the sums already,
    so they are not grouped — only the keys the state does not keep are left out."""
    if one_delta:
        keep = t.kept(quote)
        rows = f"SELECT * FROM {subquery(_logged(t, logs))} _l" + (f" WHERE ({keep})" if keep else "")
    else:
        rows = summed(t, subquery(_logged(t, logs, distributed=True)))
    if kept is not None:
        rows = f"SELECT * FROM {subquery(rows)} _logged WHERE {kept}"
    return conform(t, rows)
