"""Relational programs as one SQL statement: readable for ``explain``, exact for Spark.

``rel_sql(rel)`` prints for people: ``SELECT x.A, sum(_weight) AS _weight FROM ΔS1 x GROUP BY x.A``.
``rel_sql(rel, leaf=…)`` prints what the runtime hands to ``spark.sql``: names quoted, every
FROM item aliased, NULL ordering explicit, leaves replaced by the temp views ``leaf`` names, and
on each join the hint ``join_hint`` chooses (a physical decision: the runtime's lowering makes it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from .expr import Column, Expr
from .printer import ExprPrinter, display_name, quote
from .rel import (
    Aggregate, DeltaScan, Distinct, Expand, Explode, Filter, Iterate, Join, Limit, LoopRef, Once, Recursive, Project, Rel, Scan, SetOp, Sort, SortKey,
    StateScan, Union, written_name,
)
from .window import Window

Leaf = Callable[[Rel], str]
# A join's physical hints: (hint name, the side it names: "left" or "right", or None for a hint
# on the join's output, as ``COALESCE(1)``).
JoinHint = Callable[[Join], "Sequence[tuple[str, str | None]]"]

_JOIN = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL JOIN",
         "semi": "LEFT SEMI JOIN", "anti": "LEFT ANTI JOIN", "cross": "CROSS JOIN"}


def rel_sql(rel: Rel, leaf: Leaf | None = None, join_hint: JoinHint | None = None) -> str:
    """One SELECT statement computing ``rel``; with ``leaf`` it is exact Spark SQL (and each join
    with a condition carries the hint ``join_hint`` gives it)."""
    return _Writer(leaf, join_hint).block(rel).text()


@dataclass
class _Block:
    """One SELECT being assembled."""

    source: str
    select: list[str] | None = None  # None: SELECT *
    where: list[str] = field(default_factory=list)
    group: list[str] | None = None
    order: list[str] = field(default_factory=list)
    limit: str | None = None
    distinct: bool = False
    union: bool = False
    join: bool = False  # the source is a join expression, not a single relation
    hints: list[str] = field(default_factory=list)

    @property
    def closed(self) -> bool:
        return self.limit is not None or self.union

    @property
    def bare(self) -> bool:
        """A plain source: nothing selected, filtered, grouped or cut."""
        return (self.select is None and not self.where and self.group is None and not self.order
                and not self.closed and not self.distinct)

    def text(self) -> str:
        if self.union:
            return self.source
        hint = f"/*+ {', '.join(self.hints)} */ " if self.hints else ""
        head = "SELECT " + hint + ("DISTINCT " if self.distinct else "")
        lines = [head + (", ".join(self.select) if self.select else "*"), "FROM " + self.source]
        if self.where:
            lines.append("WHERE " + " AND ".join(self.where))
        if self.group:
            lines.append("GROUP BY " + ", ".join(self.group))
        if self.order:
            lines.append("ORDER BY " + ", ".join(self.order))
        if self.limit is not None:
            lines.append(self.limit)
        return "\n".join(lines)


class _Writer:
    def __init__(self, leaf: Leaf | None, join_hint: JoinHint | None = None) -> None:
        self.leaf = leaf
        self.join_hint = join_hint if leaf is not None else None
        self.spark = leaf is not None
        self.p = ExprPrinter(spark=self.spark, relation=None if self.spark else rel_sql)
        self._aliases = 0

    # -- helpers ---------------------------------------------------------------------------------
    def e(self, e: Expr) -> str:
        return self.p.expr(e, top=True)

    def name(self, n: str) -> str:
        return quote(n) if self.spark else display_name(n)

    def alias(self) -> str:
        self._aliases += 1
        return f"_t{self._aliases}"

    def item(self, name: str, e: Expr) -> str:
        text = self.e(e)
        if isinstance(e, Column) and e.name == name:
            return text
        return f"{text} AS {self.name(name)}"

    def sort(self, k: SortKey) -> str:
        text = self.e(k.expr) + (" DESC" if k.descending else "")
        if self.spark:
            return text + (" NULLS FIRST" if k.effective_nulls_first else " NULLS LAST")
        if k.nulls_first is not None and k.nulls_first != (not k.descending):
            text += " NULLS FIRST" if k.nulls_first else " NULLS LAST"
        return text

    def from_item(self, rel: Rel) -> tuple[str, str]:
        """``rel`` as a FROM item, and the alias it goes by (Spark mode aliases everything)."""
        inner = self.block(rel)
        if inner.bare and not (self.spark and (inner.join or inner.hints)):
            if self.spark:
                a = self.alias()
                return f"{inner.source} {a}", a
            return inner.source, ""
        body = "\n".join("  " + line for line in inner.text().split("\n"))
        if self.spark:
            a = self.alias()
            return f"(\n{body}\n) {a}", a
        return f"(\n{body}\n)", ""

    # -- nodes -----------------------------------------------------------------------------------
    def block(self, rel: Rel) -> _Block:  # noqa: C901 - one case per node kind
        if isinstance(rel, (Scan, DeltaScan, StateScan, Once, LoopRef)):
            return self.leaf_block(rel)
        if isinstance(rel, Filter):
            b = self.block(rel.input)
            cond = self.e(rel.condition)
            if b.closed or b.distinct or b.group is not None or b.select is not None or b.order:
                return _Block(self.from_item(rel.input)[0], where=[cond])
            b.where.append(cond)
            return b
        if isinstance(rel, Project):
            b = self.block(rel.input)
            items = [self.item(n, e) for n, e in rel.exprs]
            if b.select is not None or b.closed or b.distinct or b.order or b.group is not None:
                return _Block(self.from_item(rel.input)[0], select=items)
            b.select = items
            return b
        if isinstance(rel, Aggregate):
            b = self.block(rel.input)
            if b.select is not None or b.closed or b.group is not None or b.distinct or b.order:
                b = _Block(self.from_item(rel.input)[0])
            b.group = [self.e(e) for _, e in rel.keys]
            b.select = [self.item(n, e) for n, e in rel.keys] + [self.item(n, a) for n, a in rel.aggs]
            if not b.select:
                b.select = ["1 AS _one"]
            return b
        if isinstance(rel, Join) and rel.kind == "null_aware_anti":
            return self._not_in(rel)
        if isinstance(rel, Join):
            left, left_alias = self.from_item(rel.left)
            right, right_alias = self.from_item(rel.right)
            on = f" ON {self.e(rel.condition)}" if rel.condition is not None else ""
            b = _Block(f"{left}\n{_JOIN[rel.kind]} {right}{on}", join=True)
            hints = self.join_hint(rel) if self.join_hint is not None and rel.condition is not None else ()
            for name, side in hints:
                b.hints.append(name if side is None else f"{name}({left_alias if side == 'left' else right_alias})")
            return b
        if isinstance(rel, Sort):
            b = self.block(rel.input)
            if b.closed or b.order:
                b = _Block(self.from_item(rel.input)[0])
            b.order = [self.sort(k) for k in rel.keys]
            return b
        if isinstance(rel, Limit):
            b = self.block(rel.input)
            if b.closed:
                b = _Block(self.from_item(rel.input)[0])
            parts = []
            if rel.limit is not None:
                parts.append(f"LIMIT {rel.limit}")
            if rel.offset:
                parts.append(f"OFFSET {rel.offset}")
            b.limit = " ".join(parts)
            return b
        if isinstance(rel, Distinct):
            b = self.block(rel.input)
            if b.closed or b.distinct or b.order:
                b = _Block(self.from_item(rel.input)[0])
            return replace(b, distinct=True)
        if isinstance(rel, Union):
            parts = []
            for item in rel.items:
                ib = self.block(item)
                parts.append(ib.text() if not ib.closed or ib.union else f"SELECT * FROM {self.from_item(item)[0]}")
            return _Block("\nUNION ALL\n".join(parts), union=True)
        if isinstance(rel, SetOp):
            word = {"intersect": "INTERSECT", "except": "EXCEPT", "intersect_all": "INTERSECT ALL",
                    "except_all": "EXCEPT ALL"}[rel.kind]
            parts = [f"SELECT * FROM {self.from_item(side)[0]}" for side in (rel.left, rel.right)]
            return _Block(f"\n{word}\n".join(parts), union=True)
        if isinstance(rel, Expand):
            src, _ = self.from_item(rel.input)
            copies = self.alias() if self.spark else "copies"
            w = self.name(rel.weight)
            cols = [self.name(f.name) for f in rel.schema]
            return _Block(f"{src}\nLATERAL VIEW explode(array_repeat(0, CAST({w} AS INT))) {copies} AS _copy",
                          select=cols or ["1 AS _one"])
        if isinstance(rel, Window):
            src, _ = self.from_item(rel.input)
            cols = [self.name(f.name) for f in rel.input.schema]
            return _Block(src, select=cols + [self.item(n, c) for n, c in rel.calls])
        if isinstance(rel, Explode):
            src, _ = self.from_item(rel.input)
            fn = "posexplode" if rel.position is not None else "explode"
            made = ([rel.position] if rel.position is not None else []) + [rel.element]
            view, names = self.alias(), [self.name(n) for n in made]
            if not self.spark:  # the binder names them ``view.column``: print them as written
                view = rel.element.rsplit(".", 1)[0] if "." in rel.element else "g"
                names = [display_name(n[len(view) + 1:] if n.startswith(view + ".") else n) for n in made]
            outer = " OUTER" if rel.outer else ""
            cols = [self.name(f.name) for f in rel.schema]
            return _Block(f"{src}\nLATERAL VIEW{outer} {fn}({self.e(rel.expr)}) {view} AS {', '.join(names)}",
                          select=cols)
        if isinstance(rel, (Iterate, Recursive)) and not self.spark:  # explain only: the runtime unrolls them
            name = written_name(rel.name)
            if isinstance(rel, Iterate):
                parts = [self.block(rel.init).text(), "STEP", self.block(rel.step).text(),
                         f"TIMES {rel.times} MODE {rel.mode.upper()}"]
                word = "ITERATIVE"
            else:
                parts = [self.block(rel.base).text(), "UNION", self.block(rel.step).text()]
                word = "RECURSIVE"
            body = "\n".join("  " + line for line in "\n".join(parts).split("\n"))
            return _Block(f"{word} {name} AS (\n{body}\n) {display_name(rel.name)}")
        raise TypeError(f"cannot print {type(rel).__name__}")

    def _not_in(self, rel: Join) -> _Block:
        """A null-aware anti join is SQL's ``x NOT IN (SELECT y …)``."""
        from .expr import Call

        cond = rel.condition
        assert isinstance(cond, Call) and cond.op == "=", "a null-aware anti join has one equality"
        left_names = set(rel.left.names)
        x, y = cond.args if cond.args[0].columns() <= left_names else (cond.args[1], cond.args[0])
        source, _ = self.from_item(rel.left)
        inner = self.block(Project(rel.right, (("_not_in", y),)))
        body = "\n".join("  " + line for line in inner.text().split("\n"))
        return _Block(source, where=[f"{self.e(x)} NOT IN (\n{body}\n)"])

    def leaf_block(self, rel: Rel) -> _Block:
        if not self.spark:
            if isinstance(rel, LoopRef):  # inside an iteration's step: the previous step's value
                return _Block(f"{written_name(rel.name)} AS {display_name(rel.name)}")
            if isinstance(rel, Scan):
                return _Block(rel.table if rel.alias == rel.table else f"{rel.table} {rel.alias}")
            if isinstance(rel, DeltaScan):
                if "#" in rel.table:  # a diffusion loop's change this round
                    return _Block(f"ΔX AS {written_name(rel.table)}")
                return _Block(f"Δ{rel.table} {rel.alias}")
            if isinstance(rel, Once):
                when = "after the first batch" if rel.later else "first batch only"
                return _Block(f"ONCE ({when}) {self.from_item(rel.input)[0]}")
            assert isinstance(rel, StateScan)
            return _Block({"old": rel.state, "new": rel.state + "'", "delta": "Δ" + rel.state,
                           "merged": f"{rel.state} ⊗ Δ{rel.state}"}[rel.version])
        assert self.leaf is not None
        view = self.leaf(rel)
        if isinstance(rel, Once):
            return _Block(view)
        if isinstance(rel, (Scan, DeltaScan)):
            items = [f"{quote(c)} AS {quote(f.name)}" for c, f in zip(rel.columns, rel.fields)]
            if isinstance(rel, DeltaScan):
                items.append(quote("_weight"))
            return _Block(view, select=items)
        return _Block(view)
