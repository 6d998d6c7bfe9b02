"""A state's merge ⊗ and the views of its result; a state kept as a base and a tail; a state
carried over to a reconfigured plan.

A merge keeps the old state's hash partitioning: both sides of its UNION ALL rename the key
(``__g0`` …), and a delta is conformed to the state's types and ``DISTRIBUTE BY`` its partition
key, so only the batch's rows move. Every view of a merge's result reads that one result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ...ir.printer import quote
from ...ir.rel import WEIGHT
from ...plan.model import OLD, TOUCHED, Monoid, State
from .programs import small_side
from .text import indent, subquery

# The column that tells a tail's row from a base's in :func:`runs_merged`'s look-up of keys with a NULL.
RUN_TAIL = "__tail"


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

    def kept(self, column: Callable[[str], str] = quote) -> str | None:
        """The condition for the state to keep a row (``column`` names a column), None for every
        row: not all of ``State.leaves_when_zero`` are zero."""
        zero = self.state.leaves_when_zero
        if not zero:
            return None
        if zero == (WEIGHT,):
            return f"{column(WEIGHT)} <> 0"

        def is_zero(n: str) -> str:
            within = self.state.zero_within(n)
            return f"abs(coalesce({column(n)}, 0)) <= {within}" if within else f"coalesce({column(n)}, 0) = 0"

        return "NOT (" + " AND ".join(is_zero(n) for n in zero) + ")"


def conform(t: StateTable, inner: str, single: bool = False) -> str:
    """``inner``'s rows with exactly the state's columns and types, distributed like the state:
    DISTRIBUTE BY is a hash repartition into the session's partitions; ``single`` (a small
    batch over small states, see :mod:`.state`) gathers them into one partition without a shuffle."""
    cols = ", ".join(f"CAST({quote(n)} AS {ty}) AS {quote(n)}" for n, ty in t.columns)
    hint = "/*+ COALESCE(1) */ " if single else ""
    text = f"SELECT {hint}{cols}\nFROM (\n{indent(inner)}\n) _rows"
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
    source = f"(\n{indent(conform(t, delta, single))}\n) _delta"
    text = (f"SELECT {', '.join(items)}\nFROM (\n  {branch(old, 0)}\n  UNION ALL\n  "
            f"{indent(branch(source, 1)).strip()}\n) _merge")
    if t.keys:
        text += "\nGROUP BY " + ", ".join(f"__g{i}" for i in range(len(t.keys)))
    return text


def appended(t: StateTable, old: str, delta: str, kept: str, partitions: int) -> str:
    """The merge of an appended state (``State.kept_while``: a time bound's live rows), in the
    columns of :func:`merge`'s result so that every view of it reads it alike, without grouping.
    ``kept`` is the condition (Spark SQL over the state's columns, at the batch's time) a row
    stays under; ``delta`` the rows that arrive. Each row of ``old`` and ``delta`` is one row of
    the result, whose new ``_weight`` is its weight where ``kept`` holds for it, else 0:

    * an old row ``kept`` holds for stays, untouched;
    * an old row it no longer holds for is touched, old ``_weight`` its weight: it leaves, and
      the state's delta (new − old) is its deletion;
    * a delta row is touched, old ``_weight`` 0 where ``kept`` holds for it (a row arriving, or a
      deletion of a live one), else minus its weight (so new − old is the delta row either way).

    So the expiry and the append are one pass over the old state. A state may hold a row more
    than once (see ``plan/rules_expiry.py``). Neither side is shuffled: the union of the old
    state's partitions and the delta's is coalesced into ``partitions`` (the session's shuffle
    partitions; 1 for a small batch over small states)."""
    w, old_w = quote(WEIGHT), quote(OLD + WEIGHT)
    ty = dict(t.values)[WEIGHT]
    zero = f"CAST(0 AS {ty})"
    items = [quote(k) for k in t.keys] + [
        f"CASE WHEN __kept THEN {w} ELSE {zero} END AS {w}",
        f"CASE WHEN __src = 0 THEN {w} WHEN __kept THEN {zero} ELSE - {w} END AS {old_w}",
        f"CASE WHEN __src = 1 OR NOT __kept THEN 1 ELSE 0 END AS {TOUCHED}"]
    cast = ", ".join(f"CAST({quote(n)} AS {ty_}) AS {quote(n)}" for n, ty_ in t.columns)
    rows = (f"SELECT {', '.join(t.names)}, 0 AS __src FROM {old}\nUNION ALL\n"
            f"SELECT {cast}, 1 AS __src FROM (\n{indent(delta)}\n) _delta")
    return (f"SELECT /*+ COALESCE({partitions}) */ {', '.join(items)}\nFROM (\n"
            f"  SELECT *, coalesce({kept}, false) AS __kept FROM (\n{indent(indent(rows))}\n  ) _rows\n"
            f") _append")


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
    """The state after the merge: every key it keeps (:meth:`StateTable.kept`)."""
    return _of_merge(merged, t.names, t.kept())


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
    base every batch (docs/journal.md, "Stop 38")."""
    cols = [n for n, _ in t.columns]
    inner = [f"{quote(n)} AS {quote(f'__r{i}')}" for i, n in enumerate(cols)]
    outer = ", ".join(f"{quote(f'__r{i}')} AS {quote(n)}" for i, n in enumerate(cols))
    return (f"SELECT {outer} FROM (\n{_of_merge(base, inner, None)}\nUNION ALL\n"
            f"{_of_merge(merged, inner, _not_all_zero(t))}\n) _r")


def summed(t: StateTable, relation: str) -> str:
    """The rows of ``relation`` (a state's runs, or its logged deltas) added up per key: the
    state's rows, the keys it keeps (:meth:`StateTable.kept`)."""
    keys = [quote(k) for k in t.keys]
    items = keys + [f"CAST(sum({quote(n)}) AS {ty}) AS {quote(n)}" for n, ty in t.values]
    text = f"SELECT {', '.join(items)} FROM {relation} _s GROUP BY {', '.join(keys)}"
    kept = t.kept(lambda n: f"sum({quote(n)})")
    return text + f" HAVING {kept}" if kept else text


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
    match, is taken apart, only when ``nulls`` (the base holds such a key:
    ``StateStore.base_nulls``): every base row with a NULL in a key column is added up with the
    rest — a second scan of the base, filtered where it lies — and a key is kept only if the
    tail's merge touched it (``__tail``). A null-safe semi join instead is planned on coalesced
    keys, and shuffles both its sides into stages of their own every batch (TPC-DS Q87: three
    such look-ups, docs/journal.md "Stop 91"). A key existed before the batch when the state
    kept its old rows added up: otherwise its old values are NULL, as a whole merge gives for a
    key it did not hold (kept: :meth:`StateTable.kept`)."""
    keys = [quote(k) for k in t.keys]
    nullable = [quote(f.name) for f in t.state.key if f.nullable] if nulls else []
    keys_touched = _of_merge(merged, keys, f"{TOUCHED} = 1")
    values = [quote(n) for n, _ in t.values]
    olds = [quote(OLD + n) for n, _ in t.values]
    # every branch names its columns by position (``__r0`` …), so that the union reports the
    # partitioning its branches share, the key's, and the sums need no shuffle (see :func:`runs`)
    r = {c: quote(f"__r{i}") for i, c in enumerate(keys + values + olds)}
    base_cols = ", ".join([f"_b.{c} AS {r[c]}" for c in keys + values] + [f"_b.{v} AS {r[o]}" for v, o in zip(values, olds)])
    tail_cols = [f"{c} AS {r[c]}" for c in keys + values + olds]
    hint = f"/*+ {small_side()}(_k) */ "
    semi = f"FROM {base} _b LEFT SEMI JOIN ({keys_touched}) _k ON " + " AND ".join(f"_b.{k} = _k.{k}" for k in keys)
    base_rows = f"SELECT {hint}{base_cols} {semi}"
    having = ""
    if nullable:
        any_null = " OR ".join(f"{k} IS NULL" for k in nullable)
        base_rows = (f"SELECT {hint}{base_cols}, 0 AS {RUN_TAIL} {semi}\nUNION ALL\n"
                     f"SELECT {base_cols}, 0 AS {RUN_TAIL} FROM {base} _b WHERE {any_null}")
        tail_cols.append(f"1 AS {RUN_TAIL}")
        having = f"\nHAVING max({RUN_TAIL}) = 1"
    tail_rows = _of_merge(merged, tail_cols, f"{TOUCHED} = 1")
    existed = t.kept(lambda n: f"sum({r[quote(OLD + n)]})") or "TRUE"
    items = [f"{r[k]} AS {k}" for k in keys] + [f"CAST(sum({r[v]}) AS {ty}) AS {v}" for v, (_, ty) in zip(values, t.values)]
    items += [f"CASE WHEN {existed} THEN CAST(sum({r[o]}) AS {ty}) END AS {o}" for o, (_, ty) in zip(olds, t.values)]
    items.append(f"1 AS {TOUCHED}")
    return (f"SELECT {', '.join(items)} FROM (\n{base_rows}\nUNION ALL\n{tail_rows}\n) _s "
            f"GROUP BY {', '.join(r[k] for k in keys)}{having}")


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
    """The old rows of the keys the batch touched (those that existed before it: held, and with a
    row count other than zero unless the state keeps empty keys)."""
    cols = [quote(k) for k in t.keys] + [f"{quote(OLD + n)} AS {quote(n)}" for n, _ in t.values]
    existed = "IS NOT NULL" if t.state.keep_empty else "<> 0"
    return _of_merge(merged, cols, f"{TOUCHED} = 1 AND {quote(OLD + WEIGHT)} {existed}")


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


def null_columns(relation: str, columns: Sequence[str]) -> str:
    """One row: for each of ``columns`` (in their order), whether some row of ``relation`` has a NULL there."""
    return "SELECT " + ", ".join(f"bool_or({quote(c)} IS NULL) AS _n{i}" for i, c in enumerate(columns)) + f" FROM {relation}"


def no_rows(relation: str) -> str:
    """``relation`` (a FROM item) with none of its rows, as a FROM item: its columns and layout."""
    return f"(SELECT * FROM {relation} WHERE false)"
