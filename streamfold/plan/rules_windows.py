"""Window functions (OVER) in the answer a: the touched partitions recomputed, their rows replaced.

A window's value for a row depends on every row of its partition, so no monoid merges it: a
row inserted at the top of a partition shifts every rank below it. The plan keeps the window's
input as a state and leaves the window to the answer a:

* over a block's rows (FROM … WHERE): the rows as a bag state keyed by all their columns,
  counting copies, hash-partitioned on the PARTITION BY columns;
* over a GROUP BY (``rank() OVER (ORDER BY sum(amt) DESC)``): the aggregate's own states
  (:func:`.rules_aggregates.aggregate_states`), the window computed over its answer.

The snapshot is the window over the new state, as Spark's batch query computes it. A batch's
changes come from the partitions it touched only (``ChangeMode.PARTITION``): the window over
those partitions' rows after the merge, minus the same before it — Spark's own window operator
over the rows of the touched partitions, found by a semi join on the partition key; rows whose
value did not change cancel out. This is Materialize's approach; Feldera and RisingWave maintain
a window by the change's position inside a partition (a running sum shifts the rows after it,
top-k keeps k rows and a reserve), which is left for later. Without a PARTITION BY shared by all
calls (or with a LIMIT) the whole answer before and after is compared (``GLOBAL``).

Ties: where ORDER BY does not order a partition's rows totally, Spark numbers tying rows in the
order it happens to read them. Functions whose value depends on that order (row_number, ntile,
lag/lead, first/last/nth_value, an aggregate over a ROWS frame) are refused
(``WINDOW_ORDER_NOT_TOTAL``) unless PARTITION BY and ORDER BY name every column of the window's
input — then rows that tie are equal, and so is the answer's bag whatever their order.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import UnsupportedError
from ..ir.expr import Column
from ..ir.printer import display_name
from ..ir.rel import WEIGHT, Aggregate, Expand, Filter, Project, Rel, SortKey, StateScan, StateVersion
from ..ir.window import Window, ties_free
from .context import PlanContext
from .model import Answer, ChangeMode
from .rules_aggregates import aggregate_states


def window_answer(ctx: PlanContext, window: Window, above: Sequence[Rel], order: tuple[SortKey, ...], output: tuple[str, ...],
                  limit: int | None, offset: int) -> Answer:
    """The answer of a query whose rows are ``above`` (filters and projections, outermost first)
    over ``window``."""
    below: list[Rel] = []  # filters and projections between the window and an aggregate
    node = window.input
    while isinstance(node, (Project, Filter)):
        below.append(node)
        node = node.input
    aggregate = node if isinstance(node, Aggregate) else None
    _refuse_ties(window, aggregate, below)
    part = partition_columns(window)
    if aggregate is not None:
        info = aggregate_states(ctx, aggregate, below)
        rows: Rel = info.rows
        states = info.states
        part = tuple(p for p in part if p in info.key_names and _passed_through(p, below)) if part else ()
        if len(part) < len(partition_columns(window)):
            part = ()
        what = "the aggregate's groups"
    else:
        state, fields = ctx.bag_state(window.input, "win", partition=part or None)
        rows = Expand(StateScan(state, StateVersion.NEW, fields), WEIGHT)
        states = (state,)
        what = "the rows"
    rows = Window(rows, window.calls)
    for node in reversed(above):
        rows = node.with_inputs((rows,))
    cut = limit is not None or offset > 0
    if part and not cut:
        ctx.plan.note(f"OVER: {what} kept in {states[0]}; each batch recomputes the window over the partitions "
                      f"({', '.join(display_name(p) for p in part)}) it touched, and their rows replace the old ones")
        changes = ChangeMode.PARTITION
    else:
        ctx.plan.note(f"OVER: {what} kept in {states[0]}; without a PARTITION BY every call shares, the window is "
                      "one partition: each batch recomputes it whole and compares the answer before and after")
        changes = ChangeMode.GLOBAL
    return Answer(rows=rows, output=output, output_names=ctx.bound.output_names, order=order,
                  limit=limit, offset=offset, changes=changes, change_states=states, touched_key=part)


def partition_columns(window: Window) -> tuple[str, ...]:
    """The columns every call partitions by (plain columns only), in the first call's order."""
    first = [p.name for p in window.calls[0][1].partition if isinstance(p, Column)]
    shared = set(first)
    for _, call in window.calls[1:]:
        shared &= {p.name for p in call.partition if isinstance(p, Column)}
    return tuple(dict.fromkeys(p for p in first if p in shared))


def _passed_through(name: str, below: Sequence[Rel]) -> bool:
    """Whether every projection between the aggregate and the window keeps column ``name`` as is."""
    return all(not isinstance(n, Project) or (name, Column(name, n.field(name).type)) in n.exprs
               for n in below if name in n.names)


def _refuse_ties(window: Window, aggregate: Aggregate | None, below: Sequence[Rel]) -> None:
    """Refuse a call whose value depends on the order among rows tying on its ORDER BY."""
    columns = window.input.names
    if aggregate is not None and not any(isinstance(n, Project) for n in below):
        columns = tuple(n for n, _ in aggregate.keys)  # an aggregate's rows differ in their group key
    for name, call in window.calls:
        if call.order_sensitive and not ties_free(call, columns):
            keyed = {e.name for e in call.partition if isinstance(e, Column)}
            keyed |= {k.expr.name for k in call.order if isinstance(k.expr, Column)}
            missing = [display_name(c).split(".", 1)[-1] for c in columns if c not in keyed]
            raise UnsupportedError(
                f"{call.fn} over an ORDER BY that leaves ties: its value depends on the order Spark happens to "
                "read tying rows in", code="WINDOW_ORDER_NOT_TOTAL",
                params={"function": call.fn, "columns": missing},
                hint=f"add a tie-breaker to the OVER clause's ORDER BY (e.g. {', '.join(missing)}) so that rows tie "
                     "only when they are equal; rank, dense_rank, percent_rank, cume_dist and RANGE frames need none")
