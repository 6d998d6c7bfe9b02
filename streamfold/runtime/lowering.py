"""Every SQL statement the runtime hands to Spark, as text, in one place (no Spark needed).

The runtime turns DataFrames into temp view names (:mod:`.views`) and asks this module for the
text of each statement over those names: a program of the plan with its physical join hints
(:func:`program`), a state's merge ⊗ and the views of its result, the durable form of the
states, the answer's snapshot and changes, and the loops' statements. Nothing here imports
pyspark or looks at a DataFrame, so ``tests/fixtures/lowering/`` holds the text for each
query as golden files, and a change to any statement shows there.

The names used here (view names, FROM items) are given by the caller: ``relation`` arguments
are FROM items (a view name, or a parenthesised statement from :func:`subquery`).

Invariants the text keeps:

* a state's merge keeps the old state's hash partitioning: both sides of its UNION ALL rename
  the key (``__g0`` …), and a delta is conformed to the state's types and ``DISTRIBUTE BY`` its
  partition key, so only the batch's rows move;
* every view of a merge's result reads that one result (no second job over the state);
* answers carry Spark's own output names and types (the batch query's), changes a ``_weight``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ..ir.expr import Literal, conjuncts
from ..ir.printer import quote, sql
from ..ir.rel import WEIGHT, DeltaScan, Filter, Join, Limit, Once, Rel, Sort, StateScan
from ..ir.sqltext import rel_sql
from ..plan.changes import flatten_per_key
from ..plan.model import OLD, TOUCHED, Answer, ChangeMode, Monoid, State
from ..plan.terms import touched

Columns = Sequence[tuple[str, str]]  # (name, Spark type) pairs
Leaf = Callable[[Rel], str]  # a program's leaf → its FROM item


def subquery(text: str) -> str:
    """A statement as a FROM item."""
    return f"(\n{text}\n)"


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.split("\n"))


# -- programs --------------------------------------------------------------------------------------
# Whether a few rows met by many (the keys a batch touched, a delta met by a semi join) are
# broadcast. Not while a prepared plan is captured (prepared.py): a broadcast of a batch's rows
# is computed once and would be reused by every later job, so they are hashed instead.
_BROADCASTS: ContextVar[bool] = ContextVar("streamfold_broadcasts", default=True)
# Meanwhile the static states small enough to broadcast (Spark's threshold) are broadcast into
# the joins that read them: their rows never change, so a broadcast computed once stays true for
# every later job (Prepared.verify refuses broadcasts over slots only). Without it every join of
# a delta with a dimension table was a shuffle, a stage of its own (TPC-H Q02: 45 stages a batch).
_STATICS: ContextVar[frozenset[str]] = ContextVar("streamfold_static_broadcasts", default=frozenset())


@contextmanager
def without_broadcasts(statics: frozenset[str] = frozenset()) -> Iterator[None]:
    """The statements written meanwhile (in this thread, and the threads of :func:`.batch.parallel`)
    hash what they would broadcast: ``SHUFFLE_HASH`` for ``BROADCAST`` — except a side that reads
    only the static states ``statics``, which is broadcast."""
    token, held = _BROADCASTS.set(False), _STATICS.set(statics)
    try:
        yield
    finally:
        _BROADCASTS.reset(token)
        _STATICS.reset(held)


def _static_side(rel: Rel) -> bool:
    """Whether ``rel`` reads only static states that may be broadcast while a capture is planned."""
    statics = _STATICS.get()
    leaves = [n for n in rel.walk() if not n.inputs()]
    return bool(statics) and all(isinstance(n, StateScan) and n.state in statics for n in leaves)


def _small_side() -> str:
    """The hint for the small side of a join: broadcast it, or hash it (see ``_BROADCASTS``)."""
    return "BROADCAST" if _BROADCASTS.get() else "SHUFFLE_HASH"


def program(rel: Rel, leaf: Leaf) -> str:
    """The one Spark statement of a plan's program, its leaves named by ``leaf``."""
    return rel_sql(rel, leaf=leaf, join_hint=join_hint)


def is_delta_side(rel: Rel) -> bool:
    """Whether ``rel`` is computed from this batch's changes (small next to a state): a stream's
    rows, a state's delta, or the keys of a state's merge the batch touched."""
    return any(isinstance(n, (DeltaScan, Once)) or (isinstance(n, StateScan) and n.version == "delta")
               or _touched_keys(n) for n in rel.walk())


def _touched_keys(rel: Rel) -> bool:
    """Whether ``rel`` reads a state's merge on the keys the batch touched only."""
    return (isinstance(rel, Filter) and isinstance(rel.input, StateScan) and rel.input.version == "merged"
            and touched() in conjuncts(rel.condition))


def join_hint(join: Join) -> tuple[str, str] | None:
    """The physical hint for a join of a program: (hint, "left" | "right"), or None.

    The side computed from the batch's changes is hashed (``SHUFFLE_HASH``) and the state it
    meets is streamed without being shuffled or sorted; the keys a batch touched, read by a semi
    or anti join, are few and broadcast, so the state is filtered where it lies.
    """
    if join.condition is None:
        return None
    if not _BROADCASTS.get():  # a capture: a small static side is still broadcast
        static_left, static_right = _static_side(join.left), _static_side(join.right)
        if static_right and not static_left and join.kind in ("inner", "left", "semi", "anti"):
            return "BROADCAST", "right"
        if static_left and not static_right and join.kind == "inner":
            return "BROADCAST", "left"
    left, right = is_delta_side(join.left), is_delta_side(join.right)
    if join.kind == "inner" and left and not right:
        return "SHUFFLE_HASH", "left"
    if join.kind in ("semi", "anti") and right and not left:
        return _small_side(), "right"
    if join.kind in ("inner", "left") and right and not left:
        return "SHUFFLE_HASH", "right"
    return None


def once(inner: str, columns: Sequence[str], keep: bool) -> str:
    """A static relation as a delta (``Once``): its rows with ``_weight`` 1, or none."""
    cols = ", ".join(quote(c) for c in columns)
    return f"SELECT {cols}, 1L AS {WEIGHT} FROM (\n{inner}\n) _once{'' if keep else ' WHERE false'}"


def select_all(relation: str) -> str:
    return f"SELECT * FROM {relation}"


# -- states ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StateTable:
    """A state as its SQL sees it: the plan's definition and its columns in Spark's types."""

    state: State
    columns: tuple[tuple[str, str], ...]

    @property
    def name(self) -> str:
        return self.state.name

    @property
    def keys(self) -> tuple[str, ...]:
        return self.state.key_names

    @property
    def values(self) -> tuple[tuple[str, str], ...]:
        keys = set(self.keys)
        return tuple((n, t) for n, t in self.columns if n not in keys)

    @property
    def names(self) -> list[str]:
        return [quote(n) for n, _ in self.columns]


def conform(t: StateTable, inner: str, single: bool = False) -> str:
    """``inner``'s rows with exactly the state's columns and types, distributed like the state:
    DISTRIBUTE BY is a hash repartition into the session's partitions; ``single`` (a small
    batch over small states, see :mod:`.state`) gathers them into one partition without a shuffle."""
    cols = ", ".join(f"CAST({quote(n)} AS {ty}) AS {quote(n)}" for n, ty in t.columns)
    hint = "/*+ COALESCE(1) */ " if single else ""
    text = f"SELECT {hint}{cols}\nFROM (\n{_indent(inner)}\n) _rows"
    keys = t.state.partition_names
    if keys and not single:
        text += "\nDISTRIBUTE BY " + ", ".join(quote(k) for k in keys)
    return text


def merge(t: StateTable, old: str, delta: str, single: bool = False, summed: bool = False) -> str:
    """The one statement of a state's merge: new and old columns per key, and ``__touched``.

    ``old`` is the FROM item of the state before the batch, ``delta`` the statement of its
    delta (``single``: gathered into one partition, see :func:`conform`). ``summed``: the old
    state may hold a key in more than one row (a base and a tail, :mod:`.runs`; sums only), so
    its old values are the sums of those rows. Both sides rename the
    key (``__g0`` …): Spark 4.3 keeps a union's hash partitioning
    through projections that alias the key, not through ones that pass it beside other
    computed columns, and the old state must not be shuffled.
    """
    monoids = {c.name: c.monoid for c in t.state.columns}

    def branch(source: str, src: int) -> str:
        cols = [f"{quote(k)} AS __g{i}" for i, k in enumerate(t.keys)] + [quote(n) for n, _ in t.values]
        return f"SELECT {', '.join(cols + [f'{src} AS __src'])} FROM {source}"

    items = [f"__g{i} AS {quote(k)}" for i, k in enumerate(t.keys)]
    for n, ty in t.values:
        items.append(f"CAST({monoids[n].merge_sql}({quote(n)}) AS {ty}) AS {quote(n)}")
    for n, ty in t.values:
        items.append(f"CAST({'sum' if summed else 'max'}(CASE WHEN __src = 0 THEN {quote(n)} END) AS {ty}) "
                     f"AS {quote(OLD + n)}")
    items.append(f"max(__src) AS {TOUCHED}")
    source = f"(\n{_indent(conform(t, delta, single))}\n) _delta"
    text = (f"SELECT {', '.join(items)}\nFROM (\n  {branch(old, 0)}\n  UNION ALL\n  "
            f"{_indent(branch(source, 1)).strip()}\n) _merge")
    if t.keys:
        text += "\nGROUP BY " + ", ".join(f"__g{i}" for i in range(len(t.keys)))
    return text


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


def unchanged(t: StateTable, current: str) -> str:
    """What :func:`merge` gives over an empty delta, as a projection of the state ``current``
    (a FROM item): every key's old row is its new row, and no key is touched."""
    cols = [quote(k) for k in t.keys] + [quote(n) for n, _ in t.values]
    cols += [f"{quote(n)} AS {quote(OLD + n)}" for n, _ in t.values]
    return f"SELECT {', '.join(cols)}, 0 AS {TOUCHED} FROM {current}"


# Views of a merge's result (``merged`` is its view name): read by later statements of the batch.
def _of_merge(merged: str, select: list[str], where: str | None) -> str:
    text = f"SELECT {', '.join(select)} FROM {merged}"
    return text + f" WHERE {where}" if where else text


def new_rows(t: StateTable, merged: str) -> str:
    """The state after the merge: every key whose row count is not zero."""
    return _of_merge(merged, t.names, None if t.state.keep_empty else f"{WEIGHT} <> 0")


def tail_rows(t: StateTable, merged: str) -> str:
    """The tail of a state kept as a base and a tail (:mod:`.runs`): the new rows of its last
    tail merge ``merged`` that are not all zero."""
    return _of_merge(merged, t.names, _not_all_zero(t))


def _not_all_zero(t: StateTable) -> str:
    return "NOT (" + " AND ".join(f"coalesce({quote(n)}, 0) = 0" for n, _ in t.values) + ")"


def runs(t: StateTable, base: str, merged: str) -> str:
    """A state kept as a base and a tail: the base's rows, then the tail's (a key may have a
    row in each), hash-partitioned on the state's partition key as both runs are.

    Each run's columns are renamed (``__r0`` …) inside the union and named back above it. Spark
    4.3 passes its children's partitioning through a ``UNION ALL`` only when the partitioning's
    columns are the children's output columns, and a column read from a view carries the view's
    name (its qualifier) where the partitioning of the rows under it does not: without the
    renaming the union reports no partitioning, and a delta joining the state shuffled the whole
    base every batch (TPC-H SF 1 Q05: 5.5M rows; docs/benchmarks.md, "Stop 38")."""
    cols = [n for n, _ in t.columns]
    inner = [f"{quote(n)} AS {quote(f'__r{i}')}" for i, n in enumerate(cols)]
    outer = ", ".join(f"{quote(f'__r{i}')} AS {quote(n)}" for i, n in enumerate(cols))
    return (f"SELECT {outer} FROM (\n{_of_merge(base, inner, None)}\nUNION ALL\n"
            f"{_of_merge(merged, inner, _not_all_zero(t))}\n) _r")


def summed(t: StateTable, relation: str) -> str:
    """The rows of ``relation`` (a state's runs, or its logged deltas) added up per key: the
    state's rows, without the keys whose row count is zero."""
    keys = [quote(k) for k in t.keys]
    items = keys + [f"CAST(sum({quote(n)}) AS {ty}) AS {quote(n)}" for n, ty in t.values]
    return (f"SELECT {', '.join(items)} FROM {relation} _s GROUP BY {', '.join(keys)} "
            f"HAVING sum({WEIGHT}) <> 0")


def runs_touched(t: StateTable, base: str, merged: str) -> str:
    """The new rows of the keys a tail merge ``merged`` touched, added up with the base's."""
    keys = [quote(k) for k in t.keys]
    on = " AND ".join(f"_b.{k} <=> _k.{k}" for k in keys)
    touched = _of_merge(merged, keys, f"{TOUCHED} = 1")
    rows = (f"SELECT _b.* FROM {base} _b LEFT SEMI JOIN ({touched}) _k ON {on}\nUNION ALL\n"
            f"{_of_merge(merged, t.names, f'{TOUCHED} = 1')}")
    return summed(t, subquery(rows))


def runs_merged(t: StateTable, base: str, merged: str, nulls: bool = True) -> str:
    """The merge of a state kept as a base and a tail as a program reads it (``plan/runs.py``:
    filtered on the touched keys): each key the batch touched once, with its new and old values
    added up over its base row and its tail merge row, and ``__touched`` 1.

    The base is read for the touched keys only — a semi join on the key, the few touched keys
    broadcast (hashed while prepared plans are captured: :func:`without_broadcasts`), so the base
    is scanned where it lies, neither shuffled nor sorted. A key with a NULL, which ``=`` does not
    match, is looked up null-safely apart among the base's rows with one — a second scan of the
    base, so only when ``nulls`` (the base holds such a key: ``StateStore.base_nulls``). A key
    existed before the batch when its old row count adds up to other than zero: otherwise its old
    values are NULL, as a whole merge gives for a key it did not hold."""
    keys = [quote(k) for k in t.keys]
    nullable = [quote(f.name) for f in t.state.key if f.nullable] if nulls else []
    keys_touched = _of_merge(merged, keys, f"{TOUCHED} = 1")
    values = [quote(n) for n, _ in t.values]
    base_cols = ", ".join([f"_b.{k}" for k in keys] + [f"_b.{v}" for v in values] + [f"_b.{v} AS {quote(OLD + n)}"
                                                                                     for v, (n, _) in zip(values, t.values)])
    hint = f"/*+ {_small_side()}(_k) */ "
    base_rows = (f"SELECT {hint}{base_cols} FROM {base} _b LEFT SEMI JOIN ({keys_touched}) _k ON "
                 + " AND ".join(f"_b.{k} = _k.{k}" for k in keys))
    if nullable:
        any_null = " OR ".join(f"_b.{k} IS NULL" for k in nullable)
        base_rows += (f"\nUNION ALL\nSELECT {hint}{base_cols} FROM (SELECT * FROM {base} WHERE "
                      + any_null.replace("_b.", "") + f") _b LEFT SEMI JOIN ({keys_touched}) _k ON "
                      + " AND ".join(f"_b.{k} <=> _k.{k}" for k in keys))
    tail_rows = _of_merge(merged, keys + values + [quote(OLD + n) for n, _ in t.values], f"{TOUCHED} = 1")
    existed = f"coalesce(sum({quote(OLD + WEIGHT)}), 0) <> 0"
    items = keys + [f"CAST(sum({v}) AS {ty}) AS {v}" for v, (_, ty) in zip(values, t.values)]
    items += [f"CASE WHEN {existed} THEN CAST(sum({quote(OLD + n)}) AS {ty}) END AS {quote(OLD + n)}"
              for n, ty in t.values]
    items.append(f"1 AS {TOUCHED}")
    return (f"SELECT {', '.join(items)} FROM (\n{base_rows}\nUNION ALL\n{tail_rows}\n) _s "
            f"GROUP BY {', '.join(keys)}")


def delta_rows(t: StateTable, merged: str) -> str:
    """What the batch changed, per touched key: new − old for sums, the new value for min/max
    (idempotent: merging it again changes nothing already merged)."""
    monoids = {c.name: c.monoid for c in t.state.columns}
    cols = [quote(k) for k in t.keys]
    for n, ty in t.values:
        if monoids[n] == Monoid.SUM:
            cols.append(f"CAST({quote(n)} - coalesce({quote(OLD + n)}, 0) AS {ty}) AS {quote(n)}")
        else:
            cols.append(quote(n))
    return _of_merge(merged, cols, f"{TOUCHED} = 1")


def touched_new(t: StateTable, merged: str) -> str:
    """The new rows of the keys the batch touched."""
    return _of_merge(merged, t.names, f"{TOUCHED} = 1" + ("" if t.state.keep_empty else f" AND {WEIGHT} <> 0"))


def touched_old(t: StateTable, merged: str) -> str:
    """The old rows of the keys the batch touched (those that existed before it)."""
    cols = [quote(k) for k in t.keys] + [f"{quote(OLD + n)} AS {quote(n)}" for n, _ in t.values]
    return _of_merge(merged, cols, f"{TOUCHED} = 1 AND {quote(OLD + WEIGHT)} IS NOT NULL")


def multiplicity_change(t: StateTable, merged: str) -> str:
    """Touched keys with their multiplicity change ``_weight`` = new − old ``_weight``."""
    diff = f"{WEIGHT} - coalesce({quote(OLD + WEIGHT)}, 0)"
    return _of_merge(merged, [quote(k) for k in t.keys] + [f"{diff} AS {WEIGHT}"], f"{TOUCHED} = 1 AND {diff} <> 0")


def changelog(t: StateTable, merged: str) -> str:
    """The changelog rows of the batch: the touched keys' new rows (``_weight`` 0: the key left)."""
    return _of_merge(merged, t.names, f"{TOUCHED} = 1")


# -- a reconfiguration's states (Engine.install) ------------------------------------------------------
def carried_over(t: StateTable, have: Sequence[str], relation: str) -> str:
    """State ``t``'s rows from another plan's state with the same key (``relation``, whose columns
    are ``have``), as "from now on" carries a state over: a column it has as it is, one it lacks at
    its monoid's identity (0 for sums, NULL for min and max). A projection: no row moves."""
    monoids = {c.name: c.monoid for c in t.state.columns}
    cols = []
    for n, ty in t.columns:
        value = quote(n) if n in have else "0" if monoids.get(n) == Monoid.SUM else "NULL"
        cols.append(f"CAST({value} AS {ty}) AS {quote(n)}")
    return f"SELECT {', '.join(cols)} FROM {relation}"


def whole_merge(t: StateTable, relation: str) -> str:
    """All of a state's rows (``relation``) as the result of a merge that brought each of them into
    an empty state — every key touched, no old values: a state kept by a rebuild entering it whole."""
    cols = [quote(k) for k in t.keys] + [quote(n) for n, _ in t.values]
    cols += [f"CAST(NULL AS {ty}) AS {quote(OLD + n)}" for n, ty in t.values]
    return f"SELECT {', '.join(cols)}, 1 AS {TOUCHED} FROM {relation}"


# -- the durable form of states ----------------------------------------------------------------------
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


def latest(t: StateTable, logs: str) -> str:
    """A state rebuilt from the packed changelogs ``logs`` (a view): each key's latest row, and
    no key whose latest row has ``_weight`` 0 (it left) — unless the state keeps empty keys."""
    keys = [quote(t.name + "::" + k) for k in t.keys]
    cols = ", ".join(f"{quote(t.name + '::' + n)} AS {quote(n)}" for n, _ in t.columns)
    order = "PARTITION BY " + ", ".join(keys) + " " if keys else ""
    text = (f"SELECT {cols} FROM (SELECT *, row_number() OVER ({order}ORDER BY __batch DESC) AS __n "
            f"FROM {logs} WHERE __state = '{t.name}') _l WHERE __n = 1")
    if not t.state.keep_empty:
        text += f" AND {quote(t.name + '::' + WEIGHT)} <> 0"
    return conform(t, text)


def summed_logs(t: StateTable, logs: str) -> str:
    """A state rebuilt from packed changelogs that hold its deltas (a candidate for runs,
    :mod:`.runs`): every logged row added up per key."""
    cols = ", ".join(f"{quote(t.name + '::' + n)} AS {quote(n)}" for n, _ in t.columns)
    return conform(t, summed(t, subquery(f"SELECT {cols} FROM {logs} WHERE __state = '{t.name}'")))


# -- the answer ---------------------------------------------------------------------------------------
class AnswerLowering:
    """The snapshot and the changes of a batch as statements over the states (see :class:`Answer`).

    ``columns`` are Spark's output names and types of the batch query, ``table`` gives a state's
    columns. Leaves are named by the caller: ``new(state)`` and ``old(state)`` give FROM items of
    a state after and before the batch, ``merged(state)`` the view of its merge's result.
    """

    def __init__(self, answer: Answer, columns: Columns, table: Callable[[str], StateTable]) -> None:
        self.answer = answer
        self.columns = list(columns)
        self.table = table

    def final(self, inner: str, weight: bool = False) -> str:
        """The output columns with Spark's names and types (and ``_weight`` for changes)."""
        cols = [f"CAST({quote(i)} AS {ty}) AS {quote(n)}" for i, (n, ty) in zip(self.answer.output, self.columns)]
        if weight:
            cols.append(f"CAST({WEIGHT} AS BIGINT) AS {WEIGHT}")
        return f"SELECT {', '.join(cols)}\nFROM (\n{_indent(inner)}\n) _answer"

    def output_columns(self, weight: bool = False) -> list[tuple[str, str]]:
        """(name, Spark type) of the snapshot's columns (and ``_weight`` for changes)."""
        return self.columns + [(WEIGHT, "bigint")] if weight else list(self.columns)

    def ordered_rows(self) -> Rel:
        """The answer's rows in ORDER BY order, cut by OFFSET and LIMIT."""
        a = self.answer
        rel = a.per_key if a.per_key is not None else a.rows
        if a.order:
            rel = Sort(rel, a.order)
        if a.limit is not None or a.offset:
            rel = Limit(rel, a.limit, a.offset)
        return rel

    def snapshot(self, new: Leaf) -> str:
        """The answer after the batch; ``new`` names the leaves (states after the merge)."""
        return self.final(program(self.ordered_rows(), new))

    def changes(self, first: bool, merged: Callable[[str], str], new: Callable[[str], str],
                old: Callable[[str], str]) -> str:
        """The batch's changes, from the merges' results and the new and old state versions."""
        a = self.answer
        if a.changes == ChangeMode.DELTA:
            name = a.change_states[0]
            changed = self.final(select_all(f"{subquery(multiplicity_change(self.table(name), merged(name)))} _d"),
                                 weight=True)
            # rows of the output state are distinct already, unless hidden sort columns are dropped
            hidden = len(a.output) < len(self.table(name).keys)
            return self._consolidate(changed) if hidden else changed
        if a.changes == ChangeMode.KEYED and a.per_key is not None:
            return self._per_key_changes(first, merged(a.change_states[0]))
        if a.changes == ChangeMode.GLOBAL:
            rows = self.ordered_rows()
            after = program(rows, lambda leaf: new(_state_of(leaf)))
            before = program(rows, lambda leaf: old(_state_of(leaf)))
        else:
            main = a.change_states[0]
            table = self.table(main)
            after_of = {main: subquery(touched_new(table, merged(main)))}
            before_of = {main: subquery(touched_old(table, merged(main)))}
            if a.change_states[1:]:
                # The other states (multisets) hold the same groups; restrict them to the group
                # keys the main state's merge touched.
                keys = ", ".join(f"{quote(k)} AS __k{i}" for i, k in enumerate(a.touched_key))
                touched = f"(SELECT DISTINCT {keys} FROM {merged(main)} WHERE {TOUCHED} = 1)"
                for s in a.change_states[1:]:
                    after_of[s] = subquery(self._restrict(s, new(s), touched))
                    before_of[s] = subquery(self._restrict(s, old(s), touched))
            after = program(a.rows, lambda leaf: after_of.get(_state_of(leaf)) or new(_state_of(leaf)))
            before = program(a.rows, lambda leaf: before_of.get(_state_of(leaf)) or old(_state_of(leaf)))
        signed = f"SELECT *, 1 AS {WEIGHT} FROM (\n{_indent(after)}\n) _after"
        if not first:
            # Before batch 0 there is no snapshot at all (not even a global aggregate's empty
            # row), so replaying the changes from batch 0 rebuilds every snapshot.
            signed += f"\nUNION ALL\nSELECT *, -1 AS {WEIGHT} FROM (\n{_indent(before)}\n) _before"
        return self._consolidate(self.final(signed, weight=True))

    def changes_between(self, snapshot: str, before: str | None) -> str:
        """The changes from the answer ``before`` (a FROM item with the output columns) to the one
        the statement ``snapshot`` gives, by comparing the two whole: the first batch of a newly
        installed plan (a reconfiguration), whose answer before it the old plan gave. Without
        ``before``, every row enters."""
        signed = f"SELECT *, 1 AS {WEIGHT} FROM (\n{_indent(snapshot)}\n) _after"
        if before is not None:
            signed += f"\nUNION ALL\nSELECT *, -1 AS {WEIGHT} FROM {before}"
        return self._consolidate(signed)

    def _per_key_changes(self, first: bool, merged: str) -> str:
        """Changes of a row-wise answer, from each touched key's new and old row of the merge:

        the new answer row enters (+1) unless the old one is the same, the old leaves (−1) unless
        the new one is the same. Map-only over the merge's result: no join, no shuffle.
        """
        assert self.answer.per_key is not None
        scan, conds, outputs = flatten_per_key(self.answer.per_key)
        old = {v: OLD + v for v in (c.name for c in self.table(scan.state).state.columns)}
        shown = [(n, e) for n, e in outputs if n in self.answer.output]

        def cond(over_old: bool) -> str:
            parts = [f"coalesce({sql(c.rename(old) if over_old else c, spark=True)}, false)" for c in conds]
            parts.insert(0, f"{quote(OLD + WEIGHT)} IS NOT NULL" if over_old else f"{WEIGHT} <> 0")
            return "(" + " AND ".join(parts) + ")"

        def select(over_old: bool) -> str:
            return ", ".join(f"{sql(e.rename(old) if over_old else e, spark=True)} AS {quote(n)}" for n, e in shown)

        same = " AND ".join(f"({sql(e, spark=True)} <=> {sql(e.rename(old), spark=True)})" for _, e in shown) or "TRUE"
        text = (f"SELECT {select(False)}, 1 AS {WEIGHT} FROM {merged}\n"
                f"WHERE {TOUCHED} = 1 AND {cond(False)} AND NOT ({cond(True)} AND {same})")
        if not first:
            text += (f"\nUNION ALL\nSELECT {select(True)}, -1 AS {WEIGHT} FROM {merged}\n"
                     f"WHERE {TOUCHED} = 1 AND {cond(True)} AND NOT ({cond(False)} AND {same})")
        return self.final(text, weight=True)

    def _restrict(self, state: str, relation: str, touched: str) -> str:
        """The rows of ``state`` (``relation``) whose key this batch touched (NULL keys match NULL
        keys); the touched keys are few, so they are broadcast (hashed while prepared plans are
        captured) and the state is filtered where it lies, partitioned on that key. Its rows are
        met by ``=``, and those with a NULL in a nullable key column apart, null-safely: one join
        on ``<=>`` is planned on coalesced keys and shuffled the whole state every batch (TPC-H
        Q16's distinct suppliers per group, as ``changes.keyed_delta`` found for nested ones)."""
        keys = [quote(k) for k in self.answer.touched_key]
        hint = f"/*+ {_small_side()}(_k) */ "
        text = (f"SELECT {hint}_s.* FROM {relation} _s LEFT SEMI JOIN {touched} _k ON "
                + " AND ".join(f"_s.{k} = _k.__k{i}" for i, k in enumerate(keys)))
        fields = {f.name: f for f in self.table(state).state.key}
        nullable = [quote(k) for k in self.answer.touched_key if fields[k].nullable]
        if nullable:
            any_null = " OR ".join(f"{k} IS NULL" for k in nullable)
            text += (f"\nUNION ALL\nSELECT {hint}_s.* FROM (SELECT * FROM {relation} WHERE {any_null}) _s "
                     f"LEFT SEMI JOIN {touched} _k ON " + " AND ".join(f"_s.{k} <=> _k.__k{i}" for i, k in enumerate(keys)))
        return text

    def _consolidate(self, inner: str) -> str:
        """Sum the weights of equal rows and drop the rows whose weight is zero."""
        cols = ", ".join(quote(n) for n, _ in self.columns)
        return (f"SELECT {cols}, CAST(sum({WEIGHT}) AS BIGINT) AS {WEIGHT}\nFROM (\n{_indent(inner)}\n) _c\n"
                f"GROUP BY {cols}\nHAVING sum({WEIGHT}) <> 0")


def _state_of(leaf: Rel) -> str:
    assert isinstance(leaf, StateScan), f"a reads states only, not {type(leaf).__name__}"
    return leaf.state


# -- outputs -----------------------------------------------------------------------------------------
def stack(parts: Sequence[tuple[str, Columns]]) -> str:
    """Several statements' results as one relation, so one job computes them all: ``__part``
    says which statement a row belongs to. The parts share the relation's columns by type: a
    part's i-th column of type t is the i-th column of type t of the relation (:func:`stacked`),
    NULL in the rows of parts with fewer of that type — fewer columns to compute, move and convert
    to Arrow than one column per part's column (a groupBy batch's outputs: 6 instead of 11)."""
    return union_all(stack_parts(parts))


def union_all(statements: Sequence[str]) -> str:
    """Statements of the same columns as one relation, their rows in order."""
    return "\nUNION ALL\n".join(statements)


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


# -- breakpoints (streamfold.control) -----------------------------------------------------------------
def breakpoint_rows(relation: str, columns: Sequence[str], condition: str, limit: int, files: bool = False) -> str:
    """The rows of ``relation`` that meet a breakpoint's condition — a Spark SQL boolean expression
    the user wrote, parsed by streamfold.control as one expression without subqueries — at most
    ``limit`` of them; with ``files``, the file each came from (``_file``: a source's rows)."""
    cols = _names(columns) + (", input_file_name() AS _file" if files else "")
    return f"SELECT {cols} FROM {relation} WHERE ({condition}) LIMIT {limit}"


# -- loops --------------------------------------------------------------------------------------------
def weighted(sign: int) -> str:
    """The weight column of a loop's change rows: every row counted ``sign`` times."""
    return f"{sign}L AS {WEIGHT}"


def fixpoint_rows(columns: Sequence[str], inner: str) -> str:
    """A fixpoint's rows as a set (a round's rows, the base's)."""
    return f"SELECT DISTINCT {_names(columns)} FROM (\n{inner}\n) _r"


def fixpoint_old(columns: Sequence[str], relation: str) -> str:
    """The fixpoint kept from the batch before, without its count."""
    return f"SELECT {_names(columns)} FROM {relation} _o"


def fixpoint_found(columns: Sequence[str], relation: str) -> str:
    """The rows an incremental fixpoint found in a batch, each +1."""
    return f"SELECT {_names(columns)}, {weighted(1)} FROM {relation} _d"


def exact_change(columns: Sequence[str], value: str, old: str) -> str:
    """An exact iteration's change: its value after the batch (each row +1) minus the value kept
    (each row −``_weight``), summed per row, rows whose sum is 0 left out."""
    cols = _names(columns)
    return (f"SELECT {cols}, sum(_c) AS {WEIGHT} FROM (\n"
            f"SELECT {cols}, 1L AS _c FROM {value}\nUNION ALL\n"
            f"SELECT {cols}, -{WEIGHT} AS _c FROM {old} _o\n) _v "
            f"GROUP BY {cols} HAVING sum(_c) <> 0")


DIFFUSION_KEY = "DIFFUSION_KEY"  # the marker of the error a diffusion loop raises in Spark


@dataclass(frozen=True)
class DiffusionLowering:
    """The statements of a diffusion loop (see :class:`~streamfold.plan.model.Diffusion`) over the
    iteration's value before the batch, ``old`` (a FROM item).

    Its change rows ``ΔX`` have columns ``c0, c1, …`` (the fields renamed) and ``_weight``; each
    new row's weight checks that the KEY names one row (Spark raises ``DIFFUSION_KEY`` if not).
    """

    loop: str
    fields: tuple[str, ...]
    columns: tuple[str, ...]
    key: tuple[str, ...]
    old: str

    def _check(self) -> str:
        key = ", ".join(quote(k) for k in self.key)
        return (f"CASE WHEN __w = 1 AND count(*) OVER (PARTITION BY {key}) = 1 THEN 1L "
                f"ELSE raise_error('{DIFFUSION_KEY}: two rows of {self.loop} have the same KEY') END")

    def _consolidated(self, rows: str) -> str:
        """A change's rows, each with its net count."""
        fields = _names(self.fields)
        return (f"SELECT {fields}, sum({WEIGHT}) AS __w FROM (\n{rows}\n) _d "
                f"GROUP BY {fields} HAVING sum({WEIGHT}) <> 0")

    def start(self, rows: str) -> str:
        """ΔX₀: the start's rows for keys the iteration does not have."""
        fields = [quote(f) for f in self.fields]
        on = " AND ".join(f"_o.{quote(k)} <=> _n.{quote(k)}" for k in self.key)
        return (f"SELECT {', '.join(f'_n.{f} AS {quote(c)}' for f, c in zip(fields, self.columns))}, "
                f"{self._check()} AS {WEIGHT} "
                f"FROM ({self._consolidated(rows)}) _n LEFT ANTI JOIN {self.old} _o ON {on} WHERE _n.__w > 0")

    def change(self, rows: str) -> str:
        """ΔX: the new rows of the keys ΔY touches, replacing their old rows."""
        fields = [quote(f) for f in self.fields]
        key = [quote(k) for k in self.key]
        on = " AND ".join(f"_o.{k} <=> _k.{k}" for k in key)
        return (f"WITH _c AS ({self._consolidated(rows)})\n"
                f"SELECT {', '.join(f'{f} AS {quote(c)}' for f, c in zip(fields, self.columns))}, "
                f"{self._check()} AS {WEIGHT} FROM _c WHERE __w > 0\nUNION ALL\n"
                f"SELECT {', '.join(f'_o.{f} AS {quote(c)}' for f, c in zip(fields, self.columns))}, "
                f"-1L AS {WEIGHT} FROM {self.old} _o LEFT SEMI JOIN (SELECT DISTINCT {', '.join(key)} FROM _c) _k "
                f"ON {on}")

    def merged(self, delta: str) -> str:
        """The last ΔX as the iteration state's delta (its fields, ``_weight``)."""
        return (f"SELECT {', '.join(f'{quote(c)} AS {quote(f)}' for c, f in zip(self.columns, self.fields))}, "
                f"{WEIGHT} AS {WEIGHT} FROM {delta}")


def _names(columns: Sequence[str]) -> str:
    return ", ".join(quote(c) for c in columns)
