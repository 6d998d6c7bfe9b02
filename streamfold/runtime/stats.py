"""Statistics of a batch (seed 004 §3–4): what it read, and how big each state is and how much of it the batch touched.

Collected "almost for free" while the batch runs — seed 004's point — so they add no Spark job:

* a source's rows in the batch: the reader's count (file footers, or the check it runs anyway);
* a state's rows after the batch, and before it: the merge's output rows, read from its plan's
  metrics (:meth:`.state.StateStore.count_rows`). A state is keyed (by its join or group keys, or
  by every column for a bag), so its rows are the distinct values of its key — exact, with one
  caveat: the merge's rows include the keys the batch removed (they leave the state after the
  merge), so after a batch that deletes, ``rows`` counts them once more;
* the keys a batch touched in a state: the rows its delta brought into the merge, read from the
  same plan's metrics (the delta side of the merge's ``UNION ALL``; merged into an empty state,
  all of the state's keys). A delta program aggregates
  by the state's key, so its rows are the distinct keys of the batch's change — the exact
  distinct count of the join or group keys of what the batch brought, for the state that keeps
  them.

A count the metrics do not give (a state the batch did not merge, a plan Spark rewrote) is
absent, never guessed. The statistics ride in the batch's commit record (``"stats"``), written by
the commit protocol like the rest of the record: a batch's statistics exist exactly when it does.
``streamfold explain --analyze OUTPUT`` prints the last batch's beside its plan.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .jvm import helper_class

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from ..plan.model import IncrementalPlan


class DeltaRows:
    """The rows the delta side of each executed merge fed it (the inputs of its ``UNION ALL``
    after the first, the old state's), read from the plan's metrics; None when the plan does not
    show them. Where the delta is not shuffled (an appended state's, ``lowering.appended``) and is
    a union itself (the rows under a time bound over a ``UNION ALL``), Spark flattens it into the
    merge's union, so every input after the first counts.

    Finding them walks the plan once per state (a few dozen py4j calls); afterwards the union's
    and the delta nodes' positions in the plan (pre-order, :meth:`TreeNode.apply`) are
    remembered, and a batch checks and reads them in about seven calls per state and input — a
    merge's plan has the same shape from batch to batch. A plan of another shape (batch 0's, where
    Spark drops the union with the empty state) is walked again.
    """

    def __init__(self) -> None:
        self._at: dict[str, tuple[int, tuple[tuple[int, str], ...]]] = {}  # state → union's number, delta nodes'

    def __call__(self, name: str, df: DataFrame) -> int | None:
        try:
            plan = df._jdf.queryExecution().executedPlan()
            known = self._at.get(name)
            if known is not None:
                union, at = known
                u = plan.apply(union)
                nodes = [plan.apply(k) for k, _ in at]
                if (u is not None and u.nodeName() == "Union"
                        and all(n is not None and n.nodeName() == node_name for n, (_, node_name) in zip(nodes, at))):
                    return sum(int(n.metrics().apply("numOutputRows").value()) for n in nodes)
            found = _walk(plan)
            if found is None:
                return None
            u, delta = found
            numbers = _numbers(plan, (u, *delta))
            if numbers is not None:
                self._at[name] = (numbers[0], tuple((k, n.nodeName()) for k, n in zip(numbers[1:], delta)))
            return sum(int(n.metrics().apply("numOutputRows").value()) for n in delta)
        except Exception:  # noqa: BLE001 - statistics are advisory: missing is acceptable
            return None


def _walk(plan: Any) -> tuple[Any, list[Any]] | None:
    """The plan's union and, for each input after its first, the first node with a row count,
    following first inputs down (no job)."""
    node = plan
    for _ in range(32):
        kids = node.children()
        if node.nodeName() == "Union":
            if kids.size() < 2:
                return None
            counted = [_counted(kids.apply(i)) for i in range(1, kids.size())]
            return None if any(c is None for c in counted) else (node, counted)
        if kids.size() != 1:
            return None
        node = kids.apply(0)
    return None


def _counted(node: Any) -> Any:
    """The first node with a row count at or below ``node``, following first inputs down."""
    for _ in range(32):
        if node.metrics().contains("numOutputRows"):
            return node
        below = node.children()
        if below.size() == 0:
            return None
        node = below.apply(0)
    return None


def _numbers(plan: Any, nodes: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The pre-order numbers of ``nodes`` in ``plan`` (as :meth:`TreeNode.apply` counts), which
    come in that order."""
    found: list[int] = []
    for k in range(256):
        node = plan.apply(k)
        if node is None:
            return None
        if node.equals(nodes[len(found)]):
            found.append(k)
            if len(found) == len(nodes):
                return tuple(found)
    return None


# Spark's physical join operators (each reports the rows it output as ``numOutputRows``).
JOIN_NODES = frozenset({"SortMergeJoin", "BroadcastHashJoin", "ShuffledHashJoin", "BroadcastNestedLoopJoin",
                        "CartesianProduct"})
_JOIN_NAMES = ",".join(sorted(JOIN_NODES))  # (as PlanRows.joins takes them)


def join_rows(df: DataFrame) -> list[tuple[int, int]] | None:
    """The executed joins of ``df``'s plan in pre-order, each as (rows into its left side, rows
    out), read from the metrics of the batch that ran it (no job): what a delta join's steps did,
    for :mod:`.features.join_order`. The rows into a join are those of the first node with a row
    count down its left input. None when the plan does not show them. One call to the JVM's
    helpers (``PlanRows.joins``) where they are loaded, else a walk of the plan from here."""
    try:
        helper = helper_class(df.sparkSession, "PlanRows")
        if helper is not None:
            found = helper.joins(df._jdf.queryExecution().executedPlan(), _JOIN_NAMES)
            if found is None:
                return None
            numbers = [int(n) for n in found.split()]
            return list(zip(numbers[::2], numbers[1::2]))
        out: list[tuple[int, int]] = []
        todo = [df._jdf.queryExecution().executedPlan()]
        while todo:
            node = todo.pop()
            kids = node.children()
            if node.nodeName() in JOIN_NODES:
                rows_in = _rows_down(kids.apply(0))
                if rows_in is None:
                    return None
                out.append((rows_in, int(node.metrics().apply("numOutputRows").value())))
            todo.extend(kids.apply(i) for i in reversed(range(kids.size())))
        return out
    except Exception:  # noqa: BLE001 - statistics are advisory: missing is acceptable
        return None


def _rows_down(node: Any) -> int | None:
    for _ in range(32):
        if node.metrics().contains("numOutputRows"):
            return int(node.metrics().apply("numOutputRows").value())
        kids = node.children()
        if kids.size() == 0:
            return None
        node = kids.apply(0)
    return None


def batch_stats(plan: IncrementalPlan, rows: Mapping[str, int], before: Mapping[str, int | None],
                after: Mapping[str, int | None], touched: Mapping[str, int | None]) -> dict[str, Any]:
    """The statistics of a batch as its commit record keeps them (JSON)."""
    states: dict[str, Any] = {}
    for s in plan.states:
        if s.static:
            continue
        entry: dict[str, Any] = {"rows": after.get(s.name)}
        if before.get(s.name) is not None:
            entry["rows_before"] = before[s.name]
        keys = touched.get(s.name)
        if keys is None and before.get(s.name) == 0 and s.name in touched:
            keys = after.get(s.name)  # merged into an empty state (Spark drops the union): every key is the batch's
        if keys is not None:
            entry["touched_keys"] = keys
        states[s.name] = entry
    return {"sources": {n: {"rows": r} for n, r in rows.items()}, "states": states}


def stats_text(stats: Mapping[str, Any], batch: int, plan: IncrementalPlan | None = None) -> str:
    """The statistics section ``explain --analyze`` prints after the plan (each state's key from
    ``plan``: the commit record does not repeat it)."""
    keys = {s.name: list(s.key_names) for s in plan.states} if plan is not None else {}
    lines = [f"Statistics of batch {batch} (from its commit record; exact, read from Spark's metrics)", "  sources"]
    for name, s in stats.get("sources", {}).items():
        lines.append(f"    {name:<14} {s.get('rows', '?'):>12} rows in the batch")
    lines.append("  states (rows = distinct keys, counting those the batch removed; touched = distinct keys of "
                 "the batch's change)")
    for name, s in stats.get("states", {}).items():
        before = s.get("rows_before")
        touched = s.get("touched_keys")
        rows = s.get("rows")
        share = f"  ({touched / rows:.1%} of the state)" if touched is not None and rows else ""
        key = keys.get(name, [])
        shown = ", ".join(key[:3]) + (f", … ({len(key)} columns)" if len(key) > 3 else "")
        lines.append(f"    {name:<14} rows {_n(before)} → {_n(rows)}, touched {_n(touched)}{share}"
                     + (f"   key ({shown})" if key else ""))
    return "\n".join(lines) + "\n"


def _n(v: int | None) -> str:
    return "?" if v is None else f"{v:,}"
