"""The answer function a at run time: the snapshot after a batch, and the batch's changes.

Both are single SQL statements over the states. The snapshot is a over the new states, in
ORDER BY order, with Spark's output names and types. The changes depend on the plan:

* ``delta`` — the output state's own change: touched rows with new − old multiplicity;
* ``keyed`` — a over the touched keys' new rows minus a over their old rows (both come from
  the merge's result, so a never reads the whole state for them);
* ``global`` — a over all new states minus a over all old states (small answers only).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.printer import quote, sql
from ..ir.rel import WEIGHT, Limit, Rel, Sort, StateScan
from ..plan.changes import flatten_per_key
from ..plan.model import WEIGHT_COLUMN, IncrementalPlan
from .views import Resolve, Views, to_sql
from .state import OLD, StateStore

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

class AnswerSql:
    def __init__(self, plan: IncrementalPlan, output_schema: StructType, store: StateStore) -> None:
        self.plan = plan
        self.answer = plan.answer
        self.output_schema = output_schema
        self.store = store

    def final(self, inner: str, weight: bool = False) -> str:
        """The output columns with Spark's names and types (and ``_weight`` for changes)."""
        cols = [f"CAST({quote(i)} AS {f.dataType.simpleString()}) AS {quote(f.name)}"
                for i, f in zip(self.answer.output, self.output_schema.fields)]
        if weight:
            cols.append(f"CAST({WEIGHT} AS BIGINT) AS {WEIGHT}")
        return f"SELECT {', '.join(cols)}\nFROM (\n{_indent(inner)}\n) _answer"

    def columns(self, weight: bool = False) -> list[tuple[str, str]]:
        """(name, Spark type) of the snapshot's columns (and ``_weight`` for changes)."""
        cols = [(f.name, f.dataType.simpleString()) for f in self.output_schema.fields]
        return cols + [(WEIGHT, "bigint")] if weight else cols

    def ordered_rows(self) -> Rel:
        """The answer's rows in ORDER BY order, cut by OFFSET and LIMIT."""
        a = self.answer
        rel = a.per_key if a.per_key is not None else a.rows
        if a.order:
            rel = Sort(rel, a.order)
        if a.limit is not None or a.offset:
            rel = Limit(rel, a.limit, a.offset)
        return rel

    def snapshot(self, states: dict[str, DataFrame | str], views: Views) -> str:
        return self.final(to_sql(self.ordered_rows(), _over(states), views))

    def changes(self, first: bool, merged: dict[str, DataFrame], new: dict[str, DataFrame | str],
                old: dict[str, DataFrame | str], views: Views) -> str:
        """The batch's changes, from the merges' results and the new and old state versions."""
        a = self.answer
        if a.changes == "delta":
            name = a.change_states[0]
            view = views.relation(self.store.change_view(name, merged[name], views), f"changes_{name}")
            changed = self.final(f"SELECT * FROM {view} _d", weight=True)
            # rows of the output state are distinct already, unless hidden sort columns are dropped
            hidden = len(a.output) < len(self.store.defs[name].key)
            return _consolidate(changed, self.output_schema) if hidden else changed
        if a.changes == "keyed" and a.per_key is not None:
            return self._per_key_changes(first, merged[a.change_states[0]], views)
        if a.changes == "global":
            rows = self.ordered_rows()
            after = to_sql(rows, _over(new), views)
            before = to_sql(rows, _over(old), views)
        else:
            main = a.change_states[0]
            after_states = {**new, main: self.store.touched_new(main, merged[main], views)}
            before_states = {**old, main: self.store.touched_old(main, merged[main], views)}
            others = a.change_states[1:]
            if others:
                # The other states (multisets) hold the same groups; restrict them to the group
                # keys the main state's merge touched.
                keys = ", ".join(f"{quote(k)} AS __k{i}" for i, k in enumerate(a.touched_key))
                source = views.name(merged[main], "merged_" + main)
                touched = f"(SELECT DISTINCT {keys} FROM {source} WHERE __touched = 1)"
                for s in others:
                    after_states[s] = self._restrict(new[s], touched, views)
                    before_states[s] = self._restrict(old[s], touched, views)
            after = to_sql(a.rows, _over(after_states), views)
            before = to_sql(a.rows, _over(before_states), views)
        signed = f"SELECT *, 1 AS {WEIGHT} FROM (\n{_indent(after)}\n) _after"
        if not first:
            # Before batch 0 there is no snapshot at all (not even a global aggregate's empty
            # row), so replaying the changes from batch 0 rebuilds every snapshot.
            signed += f"\nUNION ALL\nSELECT *, -1 AS {WEIGHT} FROM (\n{_indent(before)}\n) _before"
        return _consolidate(self.final(signed, weight=True), self.output_schema)

    def _per_key_changes(self, first: bool, merged: DataFrame, views: Views) -> str:
        """Changes of a row-wise answer, from each touched key's new and old row of the merge:

        the new answer row enters (+1) unless the old one is the same, the old leaves (−1) unless
        the new one is the same. Map-only over the merge's result: no join, no shuffle.
        """
        scan, conds, outputs = flatten_per_key(self.answer.per_key)  # type: ignore[arg-type]
        name = scan.state
        state = self.store.defs[name]
        old = {v: OLD + v for v in (c.name for c in state.columns)}
        shown = [(n, e) for n, e in outputs if n in self.answer.output]

        def cond(over_old: bool) -> str:
            parts = [f"coalesce({sql(c.rename(old) if over_old else c, spark=True)}, false)" for c in conds]
            parts.insert(0, f"{quote(OLD + WEIGHT_COLUMN)} IS NOT NULL" if over_old else f"{quote(WEIGHT_COLUMN)} <> 0")
            return "(" + " AND ".join(parts) + ")"

        def select(over_old: bool) -> str:
            return ", ".join(f"{sql(e.rename(old) if over_old else e, spark=True)} AS {quote(n)}" for n, e in shown)

        same = " AND ".join(f"({sql(e, spark=True)} <=> {sql(e.rename(old), spark=True)})" for _, e in shown) or "TRUE"
        source = views.name(merged, "merged_" + name)
        sql_text = (f"SELECT {select(False)}, 1 AS {WEIGHT} FROM {source}\n"
                    f"WHERE __touched = 1 AND {cond(False)} AND NOT ({cond(True)} AND {same})")
        if not first:
            sql_text += (f"\nUNION ALL\nSELECT {select(True)}, -1 AS {WEIGHT} FROM {source}\n"
                         f"WHERE __touched = 1 AND {cond(True)} AND NOT ({cond(False)} AND {same})")
        return self.final(sql_text, weight=True)

    def _restrict(self, state: DataFrame | str, touched: str, views: Views) -> str:
        """The rows of a state whose key this batch touched (NULL keys match NULL keys); the
        touched keys are few, so they are broadcast and the state is filtered where it lies."""
        keys = self.answer.touched_key
        cond = " AND ".join(f"_s.{quote(k)} <=> _k.__k{i}" for i, k in enumerate(keys))
        return (f"SELECT /*+ BROADCAST(_k) */ _s.* FROM {views.relation(state, 'state')} _s "
                f"LEFT SEMI JOIN {touched} _k ON {cond}")


def _over(states: dict[str, DataFrame | str]) -> Resolve:
    """A resolver for a's leaves (states after the merge) over the given state versions."""

    def resolve(rel: Rel) -> DataFrame | str:
        assert isinstance(rel, StateScan), f"a reads states only, not {type(rel).__name__}"
        return states[rel.state]

    return resolve


def _consolidate(inner: str, schema: StructType) -> str:
    """Sum the weights of equal rows and drop the rows whose weight is zero."""
    cols = ", ".join(quote(f.name) for f in schema.fields)
    return (f"SELECT {cols}, CAST(sum({WEIGHT}) AS BIGINT) AS {WEIGHT}\nFROM (\n{_indent(inner)}\n) _c\n"
            f"GROUP BY {cols}\nHAVING sum({WEIGHT}) <> 0")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.split("\n"))
