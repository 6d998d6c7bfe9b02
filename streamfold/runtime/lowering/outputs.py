"""A batch's outputs computed by one job: several statements stacked into one relation."""

from __future__ import annotations

from collections.abc import Sequence

from ...ir.printer import quote
from .text import Columns, union_all


def stack(parts: Sequence[tuple[str, Columns]]) -> str:
    """Several statements' results as one relation, so one job computes them all: ``__part``
    says which statement a row belongs to. The parts share the relation's columns by type: a
    part's i-th column of type t is the i-th column of type t of the relation (:func:`stacked`),
    NULL in the rows of parts with fewer of that type — fewer columns to compute, move and convert
    to Arrow than one column per part's column (a groupBy batch's outputs: 6 instead of 11)."""
    return union_all(stack_parts(parts))


def stack_parts(parts: Sequence[tuple[str, Columns]]) -> list[str]:
    """Each part of :func:`stack`'s relation as a statement of its own (the same columns)."""
    names = stacked([cols for _, cols in parts])
    slots = list(dict.fromkeys((n, t) for cols, part in zip(names, parts) for n, (_, t) in zip(cols, part[1])))
    selects = []
    for k, (text, cols) in enumerate(parts):
        mine = {n: c for n, (c, _) in zip(names[k], cols)}
        items = [f"{k} AS __part"] + [f"{quote(mine[n])} AS {quote(n)}" if n in mine else f"CAST(NULL AS {t}) AS {quote(n)}"
                                      for n, t in slots]
        selects.append(f"SELECT {', '.join(items)} FROM (\n{text}\n) _part{k}")
    return selects


def stacked(parts: Sequence[Columns]) -> list[list[str]]:
    """Each part's columns' names in :func:`stack`'s relation: its i-th column of a type is that
    type's ``__s<j>``, the same for every part."""
    slots: dict[tuple[str, int], str] = {}
    out = []
    for cols in parts:
        seen: dict[str, int] = {}
        names = []
        for _, t in cols:
            i = seen[t] = seen.get(t, -1) + 1
            names.append(slots.setdefault((t, i), f"__s{len(slots)}"))
        out.append(names)
    return out


# Bytes a value of each type takes in an Arrow column (strings, binaries and nested values: a guess).
ARROW_BYTES = {"boolean": 1, "tinyint": 1, "smallint": 2, "int": 4, "date": 4, "float": 4, "bigint": 8, "double": 8,
               "timestamp": 8, "timestamp_ntz": 8}
OTHER_BYTES = 32


def stacked_width(parts: Sequence[Columns]) -> int:
    """The bytes of one row of :func:`stack`'s relation as Arrow: every slot of every type, as
    each row carries all of them (NULL where its part has none), plus the part's tag."""
    slots = {(n, t) for names, cols in zip(stacked(parts), parts) for n, (_, t) in zip(names, cols)}
    return 4 + sum(16 if t.startswith("decimal") else ARROW_BYTES.get(t, OTHER_BYTES) for _, t in slots)


def snapshot_of(relation: str) -> str:
    """A computed answer (a recompute's, held as ``relation``) as the snapshot's statement."""
    return f"SELECT * FROM {relation}"
