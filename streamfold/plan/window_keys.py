"""The partition key of a window's state: its PARTITION BY columns, made NULL-free where they can be.

Shared by the window rules (:mod:`.rules_windows`, :mod:`.rules_window_suffix`, :mod:`.rules_topk`,
:mod:`.rules_topk_reserve`) and by the shape checks a join body makes before compiling
(:mod:`.topk_shape`), so it depends on the IR only.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ..ir.expr import Call, Column, Expr, Literal, and_all
from ..ir.rel import Field, Project, Rel
from ..ir.types import BOOLEAN
from ..ir.window import Window

_NULL, _VALUE = "#null", "#value"
# types whose NULL a partition key replaces by (IS NULL, coalesce(value, a constant of the type))
_SURROGATE_ZERO = {"TINYINT": 0, "SMALLINT": 0, "INT": 0, "BIGINT": 0, "STRING": "", "BOOLEAN": False}


def keyed(base: Rel, part: tuple[str, ...]) -> tuple[Rel, tuple[str, ...], tuple[str, ...]]:
    """``base`` with a NULL-free partition key, the key, and the key columns that stay nullable.

    A NULL partition is a partition, which ``=`` does not match, and ``<=>`` would make Spark
    shuffle the whole state on coalesce(key), isnull(key). So a nullable partition column of an
    integer, string or boolean type is kept as two columns that are never NULL — whether it is
    NULL, and its value with NULL replaced by a constant — on which ``=`` matches exactly what
    ``<=>`` matches on the column, and the state is hash-partitioned on them: one look-up by
    ``=``, with no second pass for the NULL partition (a batch without NULL keys paid that pass's
    stages all the same). Other nullable columns are looked up null-safely apart."""
    extra = surrogates(base, part)
    keys = [k for p in part for k in ((p + _NULL, p + _VALUE) if p + _NULL in dict(extra) else (p,))]
    nullable = tuple(p for p in part if base.field(p).nullable and p + _NULL not in dict(extra))
    return with_surrogates(base, extra), tuple(keys), nullable


def surrogates(base: Rel, part: tuple[str, ...]) -> tuple[tuple[str, Expr], ...]:
    """The two NULL-free columns of each nullable partition column :func:`keyed` replaces."""
    extra: list[tuple[str, Expr]] = []
    for p in part:
        f = base.field(p)
        if f.nullable and f.type.name in _SURROGATE_ZERO and not f.type.params:
            col = Column(p, f.type)
            extra += [(p + _NULL, Call("IS NULL", (col,), BOOLEAN)),
                      (p + _VALUE, Call("coalesce", (col, Literal(_SURROGATE_ZERO[f.type.name], f.type)), f.type,
                                        "coalesce({0}, {1})"))]
    return tuple(extra)


def with_surrogates(rows: Rel, extra: tuple[tuple[str, Expr], ...]) -> Rel:
    """``rows`` with the columns ``extra`` computes (itself when there are none)."""
    if not extra:
        return rows
    return Project(rows, tuple((f.name, f.ref()) for f in rows.schema) + extra)


def partition_columns(window: Window) -> tuple[str, ...]:
    """The columns every call partitions by (plain columns only), in the first call's order."""
    first = [p.name for p in window.calls[0][1].partition if isinstance(p, Column)]
    shared = set(first)
    for _, call in window.calls[1:]:
        shared &= {p.name for p in call.partition if isinstance(p, Column)}
    return tuple(dict.fromkeys(p for p in first if p in shared))


def key_matches(key: Sequence[Field], tag: str, null_safe: Collection[str] = ()) -> Expr | None:
    """Each column of ``key`` equal to its copy renamed ``<name>#<tag>`` (the partitions a batch
    touched, their bounds or carries, joined back by key): ``=``, or ``<=>`` for the columns in
    ``null_safe``; None for no column."""
    return and_all([Call("<=>" if f.name in null_safe else "=", (Column(f.name, f.type), Column(f"{f.name}#{tag}", f.type)),
                         BOOLEAN) for f in key])
