"""Outer joins whose NULL-padded rows a condition above drops become inner (or one-sided) joins.

Before::

    Filter[sr.reason = r.reason](Join cross (Join left ON ss.k = sr.k (Scan ss, Scan sr), Scan r))

After::

    Filter[sr.reason = r.reason](Join cross (Join inner ON ss.k = sr.k (Scan ss, Scan sr), Scan r))

A row a LEFT JOIN pads has every column of its right side NULL. When a condition that holds
above the join — a filter's conjunct, or a conjunct of an inner join's ON — is NULL or false on
such a row, no padded row reaches the answer, and the rows that do are exactly the inner join's
(Spark's ``EliminateOuterJoin`` does the same). The same for the left side of a RIGHT JOIN, and
either side of a FULL JOIN (which becomes LEFT, RIGHT or inner). The incremental plan of an
inner join keeps no count of each row's matches and no padded rows (``rules_joins``), and the
filters then move into its inputs (``push_filters``, which runs next): TPC-DS Q93 (a LEFT JOIN
of store sales with their returns, the returns' reason filtered in WHERE) keeps only the
returns of that reason instead of every sale, every return and their matches.

A condition *rejects* a side's NULLs when it is NULL or false whenever that side's columns are
all NULL, which is decided from its shape alone: a comparison, ``LIKE``, ``IN`` or arithmetic
on a path from one of those columns (each NULL when an argument is), ``IS NOT NULL`` of such
a path, an AND with one such conjunct, an OR of two. Anything else (``coalesce``, ``CASE``,
``<=>``, a function) is taken not to, so a condition is never read as rejecting when it does not.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.expr import ARITHMETIC, COMPARISONS, Call, Cast, Column, Expr, conjuncts
from ..ir.rel import Filter, Join, JoinKind, Project, Rel
from ..ir.types import DataType

# operators whose value is NULL when any argument is (only the first of IN's)
_STRICT = ARITHMETIC | COMPARISONS | {"LIKE", "NOT LIKE", "NOT"}
_FIRST_STRICT = frozenset({"IN", "NOT IN"})
_ELSEWHERE = "\x00above:"  # no column of a query is named so


def run(rel: Rel) -> Rel:
    return _reduce(rel, ())


def _reduce(rel: Rel, above: Sequence[Expr]) -> Rel:
    """``rel`` with its outer joins reduced by the conditions ``above`` that hold over its rows
    (and by those within it), its schema unchanged but for nullability."""
    if isinstance(rel, Filter):
        return Filter(_reduce(rel.input, (*above, *conjuncts(rel.condition))), rel.condition)
    if isinstance(rel, Project):
        # a condition over the projection holds over its input, rewritten through it; a column
        # it reads from elsewhere (another side of a join above) is renamed so that it cannot be
        # taken for a column of the input of the same name
        outputs = dict(rel.exprs)
        inner = tuple(p.substitute({c: outputs.get(c, Column(_ELSEWHERE + c, t)) for c, t in _typed(p).items()})
                      for p in above if p.columns() & outputs.keys())
        return Project(_reduce(rel.input, inner), rel.exprs)
    if isinstance(rel, Join):
        return _join(rel, above)
    return rel.with_inputs(tuple(_reduce(i, ()) for i in rel.inputs())) if rel.inputs() else rel


def _join(rel: Join, above: Sequence[Expr]) -> Rel:
    kind = rel.kind
    left, right = frozenset(rel.left.names), frozenset(rel.right.names)
    if kind in (JoinKind.LEFT, JoinKind.FULL) and any(rejects(p, right) for p in above):
        kind = JoinKind.INNER if kind == JoinKind.LEFT else JoinKind.RIGHT
    if kind in (JoinKind.RIGHT, JoinKind.FULL) and any(rejects(p, left) for p in above):
        kind = JoinKind.INNER if kind == JoinKind.RIGHT else JoinKind.LEFT
    own = tuple(conjuncts(rel.condition)) if rel.condition is not None else ()
    if kind in (JoinKind.INNER, JoinKind.CROSS):
        # both sides' rows are the join's rows: what holds above and the ON hold over each side
        held = (*above, *own)
        return Join(_reduce(rel.left, _over(held, left)), _reduce(rel.right, _over(held, right)), kind, rel.condition)
    # A preserved side's rows are the join's rows, NULL-padded or not: what holds above holds
    # over them, and the ON does not filter them. The other side's rows appear only where the ON
    # matched them, so the ON holds over them (and what is above, on padded rows too, does not).
    into_left = _over(above, left) if kind == JoinKind.LEFT else _over(own, left) if kind == JoinKind.RIGHT else ()
    into_right = _over(above, right) if kind == JoinKind.RIGHT else _over(own, right) if kind == JoinKind.LEFT else ()
    return Join(_reduce(rel.left, into_left), _reduce(rel.right, into_right), kind, rel.condition)


def _typed(p: Expr) -> dict[str, DataType]:
    return {e.name: e.type for e in p.walk() if isinstance(e, Column)}


def _over(preds: Sequence[Expr], names: frozenset[str]) -> tuple[Expr, ...]:
    """The conditions that read any of the columns ``names``: what is passed to the side that has
    them, where an outer join among them may be reduced by them."""
    return tuple(p for p in preds if p.columns() & names)


def rejects(p: Expr, names: frozenset[str]) -> bool:
    """Whether ``p`` is NULL or false on every row whose columns ``names`` are all NULL."""
    if isinstance(p, Call):
        if p.op == "AND":
            return any(rejects(a, names) for a in p.args)
        if p.op == "OR":
            return all(rejects(a, names) for a in p.args)
        if p.op == "IS NOT NULL":
            return _null(p.args[0], names)
    return _null(p, names)


def _null(e: Expr, names: frozenset[str]) -> bool:
    """Whether ``e`` is NULL whenever the columns ``names`` are."""
    if isinstance(e, Column):
        return e.name in names
    if isinstance(e, Cast):
        return _null(e.expr, names)
    if isinstance(e, Call) and e.template is None:
        if e.op in _STRICT:
            return any(_null(a, names) for a in e.args)
        if e.op in _FIRST_STRICT:
            return _null(e.args[0], names)
    return False


__all__ = ["rejects", "run"]
