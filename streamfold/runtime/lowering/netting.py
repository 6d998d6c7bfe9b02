"""A stream's rows made a bag again for a query from scratch (``runtime/netting.py``): rows
grouped whole, each kept as many times as its net weight; or only the rows that can meet a
deletion netted, the others taken as they are."""

from __future__ import annotations

from collections.abc import Sequence

from ...ir.printer import quote
from ...ir.rel import WEIGHT
from .text import names


def netted(columns: Sequence[str], rows: str) -> str:
    """The rows of ``rows`` (a view or a parenthesized query with ``columns`` and ``_weight``)
    netted: grouped whole, each kept as many times as its net weight."""
    cols = names(columns)
    return (f"SELECT {cols} FROM (SELECT {cols}, sum({WEIGHT}) AS __w FROM {rows} AS __rows GROUP BY {cols}) "
            f"AS __net LATERAL VIEW explode(sequence(1, __w)) AS __copy WHERE __w > 0")


def _probe_keys(probe: Sequence[str], weighted: str) -> str:
    return f"(SELECT DISTINCT {names(probe)} FROM {weighted}) AS __k"


def _probe_on(probe: Sequence[str]) -> str:
    return " AND ".join(f"__p.{quote(c)} <=> __k.{quote(c)}" for c in probe)


def met_rows(columns: Sequence[str], weighted: str, plain: str, probe: Sequence[str]) -> str:
    """The rows that may meet a deletion, netted: the weighted rows, and the rows of ``plain``
    (every weight 1) whose ``probe`` values some weighted row has (a semi join, its keys broadcast)."""
    picked = ", ".join(f"__p.{quote(c)}" for c in columns)
    return netted(columns, (
        f"(SELECT /*+ BROADCAST(__k) */ {picked}, __p.{WEIGHT} FROM {plain} AS __p LEFT SEMI JOIN "
        f"{_probe_keys(probe, weighted)} ON {_probe_on(probe)} UNION ALL SELECT {names(columns)}, {WEIGHT} "
        f"FROM {weighted})"))


def with_met(columns: Sequence[str], weighted: str, plain: str, probe: Sequence[str], met: str) -> str:
    """The stream's bag: the rows of ``plain`` no deletion can meet, as they are, and ``met``
    (:func:`met_rows`, computed)."""
    picked = ", ".join(f"__p.{quote(c)}" for c in columns)
    return (f"SELECT /*+ BROADCAST(__k) */ {picked} FROM {plain} AS __p LEFT ANTI JOIN "
            f"{_probe_keys(probe, weighted)} ON {_probe_on(probe)} UNION ALL SELECT * FROM {met}")


def projected(relation: str, columns: Sequence[str]) -> str:
    """``relation``'s ``columns`` (a stream's rows without their weights)."""
    return f"SELECT {names(columns)} FROM {relation}"
