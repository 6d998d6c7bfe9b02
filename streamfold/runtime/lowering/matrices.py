"""Join matrices: one copy of each row, a migration to another mapping, and the counts Algorithm 2
decides from (``runtime/matrices.py``, ``features/adaptive_joins.py``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...ir.expr import Literal
from ...ir.printer import quote, sql
from .states import StateTable


@dataclass(frozen=True)
class HybridLayout:
    """A hybrid equi-join's state layout (:class:`..plan.matrix.Matrix`, kind ``hybrid``): its key
    column, the keys laid over the matrix, and the cells J the others are hashed over."""

    key: str
    heavy: tuple[Any, ...]
    cells: int

    def is_heavy(self, t: StateTable) -> str:
        if not self.heavy:
            return "false"
        key = next(f for f in t.state.key if f.name == self.key)
        return f"{quote(self.key)} IN ({', '.join(sql(Literal(v, key.type)) for v in self.heavy)})"

    def hashed(self, t: StateTable) -> str:
        key = next(f for f in t.state.key if f.name == self.key)
        target = "BIGINT" if key.type.is_integral else "STRING"
        return f"pmod(xxhash64(CAST({quote(self.key)} AS {target})), {self.cells}L)"


def canonical(t: StateTable, side: int, m: int, hybrid: HybridLayout | None = None) -> str:
    """The predicate that keeps one copy of each row of a join matrix input: its replica in
    column 0 of its row group (left, ``side`` 0: ``cell mod m = 0``), in row 0 of its column
    group (right: ``cell < m``); a hybrid's light key's row has one copy only."""
    cell = next(k for k in t.keys if k.endswith("._cell"))
    first = f"pmod({quote(cell)}, {m}L) = 0" if side == 0 else f"{quote(cell)} < {m}L"
    if hybrid is None:
        return first
    return f"(CASE WHEN {hybrid.is_heavy(t)} THEN {first} ELSE true END)"


def migrate(t: StateTable, current: str, side: int, old: tuple[int, int] | None, new: tuple[int, int],
            hybrid: tuple[HybridLayout, HybridLayout] | None = None) -> str:
    """A join matrix input's rows moved from mapping ``old`` to ``new`` (each (n, m)): one copy
    of each row (:func:`canonical`) replicated into the cells of its group under the new
    mapping. Groups hash the lineage exactly as the plan's delta program does (the columns
    cast back to the plan's types), so the batches after the migration find every row. A hybrid
    equi-join (``hybrid``: its old and new layout) may also change its heavy keys: a heavy
    key's rows are replicated as above, a light key's row goes to the one cell its key hashes to.
    With ``old`` None, ``current`` is the state of a hashed equi-join (no cell: each row once)
    becoming the hybrid ``t`` (:mod:`.matrices`, ``matrix_equi="auto"``)."""
    cell = next(k for k in t.keys if k.endswith("._cell"))
    lineage = [f for f in t.state.key if not f.name.endswith(("._cell", "._bucket"))]
    n_new, m_new = new
    hashed = ", ".join(["'R'" if side == 0 else "'S'"] + [f"CAST({quote(f.name)} AS {f.type.sql()})" for f in lineage])
    group = f"pmod(xxhash64({hashed}), {n_new if side == 0 else m_new}L)"
    replicas = f"{(m_new if side == 0 else n_new) - 1}L"
    new_cell = f"({group} * {m_new}L) + __replica" if side == 0 else f"(__replica * {m_new}L) + {group}"
    if hybrid is not None:
        before, after = hybrid
        heavy = after.is_heavy(t)
        replicas = f"CASE WHEN {heavy} THEN {replicas} ELSE 0L END"
        new_cell = f"CASE WHEN {heavy} THEN {new_cell} ELSE {after.hashed(t)} END"
    keep = "true" if old is None else canonical(t, side, old[1], hybrid[0] if hybrid is not None else None)
    cols = [f"{new_cell} AS {quote(n)}" if n == cell else quote(n) for n, _ in t.columns]
    # Distributed without conform's casts (the columns keep their types; the new cell is a
    # BIGINT): through a cast of a column to its own type, Spark 4 records the checkpoint's hash
    # partitioning on an attribute the checkpoint does not output, and shuffles the state again.
    return (f"SELECT {', '.join(cols)}\nFROM {current}\n"
            f"LATERAL VIEW explode(sequence(0L, {replicas})) _migrate AS __replica\nWHERE {keep}\n"
            "DISTRIBUTE BY " + ", ".join(quote(k) for k in t.state.partition_names))


def state_sizes(left: str, right: str) -> str:
    """The rows of two states (FROM items) as one row ``(r, s)``."""
    return f"SELECT (SELECT count(*) FROM {left}) AS r, (SELECT count(*) FROM {right}) AS s"


def matrix_sizes(sides: Sequence[tuple[str, int | None, str | None]]) -> str:
    """One row of counts, one column per side: each ``(relation, copies, keep)`` counts the rows
    of ``relation`` (a FROM item), divided by ``copies`` (every row kept that many times) or
    filtered by ``keep`` (the predicate that keeps one copy of each row: :func:`canonical`)."""
    items = []
    for k, (relation, copies, keep) in enumerate(sides):
        count = f"count(*) DIV {copies}" if copies is not None else "count(*)"
        where = f" WHERE {keep}" if keep is not None else ""
        items.append(f"(SELECT {count} FROM {relation} _c{k}{where}) AS c{k}")
    return "SELECT " + ", ".join(items)


def key_frequencies(sides: Sequence[tuple[str, str, str | None]], limit: int, above: float | None = None) -> str:
    """A join's rows per key on its two sides, ``(k, r, s)``, most rows first, at most ``limit``
    keys (with more than ``above`` rows in all, if given): each side is ``(key column, relation,
    keep)`` — a FROM item and the predicate that keeps one copy of each row, if rows are copied."""
    parts = []
    for side, (key, relation, keep) in enumerate(sides):
        counts = "count(*) AS ra, 0L AS sb" if side == 0 else "0L AS ra, count(*) AS sb"
        where = f" WHERE {keep}" if keep is not None else ""
        parts.append(f"SELECT {quote(key)} AS k, {counts} FROM {relation} _k{side}{where} GROUP BY 1")
    having = f"HAVING sum(ra) + sum(sb) > {float(above)!r} " if above is not None else ""
    return (f"SELECT k, sum(ra) AS r, sum(sb) AS s FROM ({' UNION ALL '.join(parts)}) _keys GROUP BY k "
            f"{having}ORDER BY sum(ra) + sum(sb) DESC LIMIT {limit}")

