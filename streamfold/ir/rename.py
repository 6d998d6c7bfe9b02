"""Fresh names for a copy of a relation (alpha-renaming), so copies can live in one plan.

The planner relies on every field name being unique across a query (the binder makes them so).
Unrolling an iteration puts ``n`` copies of the step into one tree; :func:`freshen` gives each
copy its own names by appending a suffix to every name the copy defines or reads — fields,
table aliases and the expressions over them — leaving its shape and types unchanged.
"""

from __future__ import annotations

from collections.abc import Callable

from .expr import Agg, Column, Expr
from .window import Window, WindowCall
from .rel import (
    Aggregate, Distinct, Expand, Explode, Field, Filter, Iterate, Join, Limit, LoopRef, Once, Project, Recursive, Rel,
    Scan, SetOp, Sort, SortKey, Union,
)


def freshen(rel: Rel, suffix: str) -> Rel:
    """``rel`` with every name it defines or reads followed by ``suffix``."""
    return _Renamer(lambda name: name + suffix).rel(rel)


def canonical(rel: Rel) -> Rel:
    """``rel`` with its names replaced by ``$0``, ``$1``, … in the order they are met: two
    relations that differ only in their names (copies of one CTE, or the unchanging parts of an
    iteration's steps) have the same canonical form, so the planner can give them one set of
    states."""
    numbers: dict[str, str] = {}

    def number(name: str) -> str:
        return numbers.setdefault(name, f"${len(numbers)}")

    return _Renamer(number).rel(rel)


class _Renamer:
    def __init__(self, rename: Callable[[str], str]) -> None:
        self.n = rename
        # a relation read in several places is renamed once (a plan is a DAG; as a tree it can
        # be exponentially larger)
        self.done: dict[int, tuple[Rel, Rel]] = {}

    def e(self, e: Expr) -> Expr:
        return e.transform(lambda x: Column(self.n(x.name), x.type) if isinstance(x, Column) else None)

    def f(self, fields: tuple[Field, ...]) -> tuple[Field, ...]:
        return tuple(Field(self.n(x.name), x.type, x.nullable) for x in fields)

    def named(self, items: tuple[tuple[str, Expr], ...]) -> tuple[tuple[str, Expr], ...]:
        return tuple((self.n(name), self.e(x)) for name, x in items)

    def rel(self, rel: Rel) -> Rel:
        seen = self.done.get(id(rel))
        if seen is not None and seen[0] is rel:
            return seen[1]
        out = self._rel(rel)
        self.done[id(rel)] = (rel, out)
        return out

    def _rel(self, rel: Rel) -> Rel:  # noqa: C901 - one case per node kind
        if isinstance(rel, Scan):
            return Scan(rel.table, self.n(rel.alias), self.f(rel.fields), rel.columns, rel.static, rel.weighted)
        if isinstance(rel, LoopRef):
            return LoopRef(rel.name, self.f(rel.fields))
        if isinstance(rel, Filter):
            return Filter(self.rel(rel.input), self.e(rel.condition))
        if isinstance(rel, Project):
            return Project(self.rel(rel.input), self.named(rel.exprs))
        if isinstance(rel, Join):
            cond = self.e(rel.condition) if rel.condition is not None else None
            return Join(self.rel(rel.left), self.rel(rel.right), rel.kind, cond)
        if isinstance(rel, Aggregate):
            aggs = []
            for name, a in rel.aggs:
                renamed = self.e(a)
                assert isinstance(renamed, Agg)
                aggs.append((self.n(name), renamed))
            return Aggregate(self.rel(rel.input), self.named(rel.keys), tuple(aggs))
        if isinstance(rel, Sort):
            keys = tuple(SortKey(self.e(k.expr), k.descending, k.nulls_first) for k in rel.keys)
            return Sort(self.rel(rel.input), keys)
        if isinstance(rel, Limit):
            return Limit(self.rel(rel.input), rel.limit, rel.offset)
        if isinstance(rel, Distinct):
            return Distinct(self.rel(rel.input))
        if isinstance(rel, Union):
            return Union(tuple(self.rel(i) for i in rel.items))
        if isinstance(rel, SetOp):
            return SetOp(rel.kind, self.rel(rel.left), self.rel(rel.right))
        if isinstance(rel, Expand):
            return Expand(self.rel(rel.input), self.n(rel.weight))
        if isinstance(rel, Once):
            return Once(self.rel(rel.input), rel.later)
        if isinstance(rel, Explode):
            position = self.n(rel.position) if rel.position is not None else None
            return Explode(self.rel(rel.input), self.e(rel.expr), self.n(rel.element), position, rel.outer)
        if isinstance(rel, Iterate):
            return Iterate(self.n(rel.name), self.rel(rel.init),
                           self.rel(rel.step).transform(
                               lambda x: LoopRef(self.n(rel.name), x.fields)
                               if isinstance(x, LoopRef) and x.name == rel.name else None),
                           rel.times, rel.mode, tuple(self.n(k) for k in rel.key))
        if isinstance(rel, Recursive):
            return Recursive(self.n(rel.name), self.rel(rel.base),
                             self.rel(rel.step).transform(
                                 lambda x: LoopRef(self.n(rel.name), x.fields)
                                 if isinstance(x, LoopRef) and x.name == rel.name else None))
        if isinstance(rel, Window):
            calls = []
            for name, c in rel.calls:
                renamed = self.e(c)
                assert isinstance(renamed, WindowCall)
                calls.append((self.n(name), renamed))
            return Window(self.rel(rel.input), tuple(calls))
        raise TypeError(f"cannot rename inside {type(rel).__name__}")


def unroll(it: Iterate) -> Rel:
    """The iteration as one ordinary relation: ``times`` copies of the step, copy ``i`` with
    names suffixed ``@i`` and reading copy ``i − 1`` (copy 0 is ``init``) where it read the
    previous value; the result keeps the iteration's field names."""
    current = it.init
    for i in range(1, it.times + 1):
        previous = current
        copy = freshen(it.step, f"@{i}")

        def feed(node: Rel, previous: Rel = previous) -> Rel | None:
            if isinstance(node, LoopRef) and node.name == it.name:
                return Project(previous, tuple((f.name, g.ref()) for f, g in zip(node.fields, previous.schema)))
            return None

        current = copy.transform(feed)
    return Project(current, tuple((f.name, g.ref()) for f, g in zip(it.schema, current.schema)))
