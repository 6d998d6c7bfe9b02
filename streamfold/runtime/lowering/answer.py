"""The answer function a: the snapshot after a batch and the batch's changes (``runtime/answer.py``)."""

from __future__ import annotations

from collections.abc import Callable

from ...ir.printer import quote, sql
from ...ir.rel import WEIGHT, Limit, Rel, Sort, StateScan
from ...plan.changes import flatten_per_key
from ...plan.model import OLD, TOUCHED, Answer, ChangeMode
from .programs import program, small_side
from .states import StateTable, multiplicity_change, touched_new, touched_old
from .text import Columns, Leaf, indent, select_all, subquery


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
        return f"SELECT {', '.join(cols)}\nFROM (\n{indent(inner)}\n) _answer"

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
            change = subquery(multiplicity_change(self.table(name), merged(name)))
            if a.change_rows is not None:  # the state's delta through the answer's projections and filters
                def delta(leaf: Rel) -> str:
                    assert isinstance(leaf, StateScan) and leaf.state == name, f"a's changes read {name} only"
                    return change
                return self._consolidate(self.final(program(a.change_rows, delta), weight=True))
            changed = self.final(select_all(f"{change} _d"), weight=True)
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
        signed = f"SELECT *, 1 AS {WEIGHT} FROM (\n{indent(after)}\n) _after"
        if not first:
            # Before batch 0 there is no snapshot at all (not even a global aggregate's empty
            # row), so replaying the changes from batch 0 rebuilds every snapshot.
            signed += f"\nUNION ALL\nSELECT *, -1 AS {WEIGHT} FROM (\n{indent(before)}\n) _before"
        return self._consolidate(self.final(signed, weight=True))

    def changes_between(self, snapshot: str, before: str | None) -> str:
        """The changes from the answer ``before`` (a FROM item with the output columns) to the one
        the statement ``snapshot`` gives, by comparing the two whole: the first batch of a newly
        installed plan (a reconfiguration), whose answer before it the old plan gave. Without
        ``before``, every row enters."""
        signed = f"SELECT *, 1 AS {WEIGHT} FROM (\n{indent(snapshot)}\n) _after"
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
            parts.insert(0, f"coalesce({quote(OLD + WEIGHT)} <> 0, false)" if over_old else f"{WEIGHT} <> 0")
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
        hint = f"/*+ {small_side()}(_k) */ "
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
        return (f"SELECT {cols}, CAST(sum({WEIGHT}) AS BIGINT) AS {WEIGHT}\nFROM (\n{indent(inner)}\n) _c\n"
                f"GROUP BY {cols}\nHAVING sum({WEIGHT}) <> 0")


def _state_of(leaf: Rel) -> str:
    assert isinstance(leaf, StateScan), f"a reads states only, not {type(leaf).__name__}"
    return leaf.state

