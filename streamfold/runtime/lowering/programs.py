"""A plan's programs as Spark statements, with the physical join hints that keep states in place.

The side of a join computed from the batch's changes is hashed (``SHUFFLE_HASH``) and the state it
meets is streamed without being shuffled or sorted; the keys a batch touched, read by a semi or anti
join, are few and broadcast. While prepared plans are captured nothing of a batch is broadcast
(:func:`without_broadcasts`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from ...ir.expr import conjuncts
from ...ir.printer import quote
from ...ir.rel import WEIGHT, DeltaScan, Filter, Join, Once, Rel, StateScan
from ...ir.sqltext import rel_sql
from ...plan.terms import touched
from .text import Leaf

# Whether a few rows met by many (the keys a batch touched, a delta met by a semi join) are
# broadcast. Not while a prepared plan is captured (prepared.py): a broadcast of a batch's rows
# is computed once and would be reused by every later job, so they are hashed instead.
_BROADCASTS: ContextVar[bool] = ContextVar("streamfold_broadcasts", default=True)
# Meanwhile the static states small enough to broadcast (Spark's threshold) are broadcast into
# the joins that read them: their rows never change, so a broadcast computed once stays true for
# every later job (Prepared.verify refuses broadcasts over slots only). Without it every join of
# a delta with a dimension table was a shuffle, a stage of its own (TPC-H Q02: 45 stages a batch).
_STATICS: ContextVar[frozenset[str]] = ContextVar("streamfold_static_broadcasts", default=frozenset())
# And when the capture is over one partition (its states and rows in one each), each join's output
# is declared one partition (``COALESCE(1)``, no shuffle): Spark reports an inner join of two
# one-partition inputs as either side's partitioning, not as one partition, so the next join of a
# chain shuffled both its inputs into two partitions (TPC-DS Q31's six aggregates joined).
_SINGLE: ContextVar[bool] = ContextVar("streamfold_single_partition", default=False)


@contextmanager
def without_broadcasts(statics: frozenset[str] = frozenset(), single: bool = False) -> Iterator[None]:
    """The statements written meanwhile (in this thread, and the threads of :func:`.batch.parallel`)
    hash what they would broadcast: ``SHUFFLE_HASH`` for ``BROADCAST`` — except a side that reads
    only the static states ``statics``, which is broadcast; with ``single`` (a capture over one
    partition) each join's output stays one partition."""
    token, held, one = _BROADCASTS.set(False), _STATICS.set(statics), _SINGLE.set(single)
    try:
        yield
    finally:
        _BROADCASTS.reset(token)
        _STATICS.reset(held)
        _SINGLE.reset(one)


def _static_side(rel: Rel) -> bool:
    """Whether ``rel`` reads only static states that may be broadcast while a capture is planned."""
    statics = _STATICS.get()
    leaves = [n for n in rel.walk() if not n.inputs()]
    return bool(statics) and all(isinstance(n, StateScan) and n.state in statics for n in leaves)


def small_side() -> str:
    """The hint for the small side of a join: broadcast it, or hash it (see ``_BROADCASTS``)."""
    return "BROADCAST" if _BROADCASTS.get() else "SHUFFLE_HASH"


def program(rel: Rel, leaf: Leaf) -> str:
    """The one Spark statement of a plan's program, its leaves named by ``leaf``."""
    return rel_sql(rel, leaf=leaf, join_hint=join_hints)


def join_hints(join: Join) -> list[tuple[str, str | None]]:
    """The hints of a join of a program: :func:`join_hint`'s, and ``COALESCE(1)`` on its output
    while a capture over one partition is planned (see ``_SINGLE``)."""
    hint = join_hint(join)
    return ([hint] if hint is not None else []) + ([("COALESCE(1)", None)] if _SINGLE.get() else [])


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
        return small_side(), "right"
    if join.kind in ("inner", "left") and right and not left:
        return "SHUFFLE_HASH", "right"
    return None


def once(inner: str, columns: Sequence[str], keep: bool) -> str:
    """A static relation as a delta (``Once``): its rows with ``_weight`` 1, or none."""
    cols = ", ".join(quote(c) for c in columns)
    return f"SELECT {cols}, 1L AS {WEIGHT} FROM (\n{inner}\n) _once{'' if keep else ' WHERE false'}"

