"""Join order re-planned from each batch's statistics (seed 004 §3.4 (c)).

A join of three or more inputs changes, each batch, by one delta term per stream input
(``Σᵢ R₁'⋈…⋈ΔRᵢ⋈…⋈Rₙ``, :mod:`streamfold.plan.joins`), and each term joins the other inputs'
states in an order fixed at compile time. Which order builds the fewest rows depends on the data:
seed 004's Fig. 7 joins x with y and z on one key; while x's keys sit where y's do, ``Δx ⋈ y``
is large and ``Δx ⋈ z`` small, so x's delta should meet z first — and the other way round when
x's keys move.

The statistics are read "almost for free", as the seed wants: after a batch, the executed plan of
the merge that holds a join's delta terms gives each Spark join's rows in and out
(:func:`..stats.join_rows`, no job). A step's *selectivity* (fan-out) is its rows out over its
rows in; per term and per input joined, it is smoothed by an exponential moving average. The
cost of an order is the rows it builds per delta row, ``f₁ + f₁f₂ + …`` over its steps
(selectivities taken as independent of the step's place: what the data lets one measure without
running the orders not taken). :func:`decide` — pure, table-tested — moves a term to the
cheapest connected order (never a cross product) only when that order's cost is below the
current one's by the margin for ``join_order_batches`` consecutive batches (docs/strategy.md
says why). The first batch runs the compile-time order.

Each batch's commit record keeps, per term, the order it ran, the next batch's, the smoothed
selectivities, the streak, and when and why the order last changed (``"join_order"``): a
restarted run takes the next order and the averages from its last commit, so it decides exactly
as the killed one would have. A re-plan compiles the query again with the new orders (same
states, other programs) and the prepared plans are captured anew.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import permutations
from typing import Any

from ...plan.compilation import replanned
from ...plan.model import DeltaJoin, IncrementalPlan
from ...settings import Settings
from ..bundle import Bundle
from ..checkpoint import batch_name
from ..context import RunContext

LOOK_BACK = 100  # commits a restart looks back over for the last recorded join orders
MAX_INPUTS = 7  # a join of more inputs keeps its order (the orders of 6 others: 720 to weigh)


@dataclass(frozen=True)
class Tuning:
    margin: float = 0.25  # the cost below the current order's by this fraction …
    batches: int = 2  # … for this many consecutive batches
    smoothing: float = 0.6  # the last batch's weight in the moving average

    @staticmethod
    def of(settings: Settings) -> Tuning:
        return Tuning(settings.join_order_margin, settings.join_order_batches, min(1.0, settings.join_order_smoothing))


@dataclass
class Term:
    """What is known of one delta term (by its start state) after a batch."""

    order: tuple[str, ...]  # the order the next batch runs
    fanout: dict[str, float] = field(default_factory=dict)  # smoothed selectivity per input joined
    candidate: tuple[str, ...] | None = None  # the order that has been cheaper by the margin …
    streak: int = 0  # … for this many consecutive batches
    since: int | None = None  # the batch after which the order last changed
    why: str | None = None

    def record(self, ran: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {"order": list(ran), "next": list(self.order),
                               "fanout": {k: round(v, 6) for k, v in sorted(self.fanout.items())},
                               "streak": self.streak}
        if self.candidate is not None:
            out["candidate"] = list(self.candidate)
        if self.since is not None:
            out["changed_after"] = self.since
            out["why"] = self.why
        return out

    @staticmethod
    def from_record(e: dict[str, Any]) -> Term:
        return Term(tuple(e["next"]), {k: float(v) for k, v in e.get("fanout", {}).items()},
                    tuple(e["candidate"]) if "candidate" in e else None, int(e.get("streak", 0)),
                    e.get("changed_after"), e.get("why"))


def cost(order: tuple[str, ...], fanout: dict[str, float]) -> float:
    """Rows an order builds per delta row before its last step, ``f₁ + f₁f₂ + …`` without the
    full product: the last step's output is the term's, the same in every order, and left in it
    would dilute the margin with rows no order can save."""
    total, rows = 0.0, 1.0
    for name in order[:-1]:
        rows *= fanout[name]
        total += rows
    return total


def connected_orders(start: str, others: tuple[str, ...], edges: tuple[tuple[str, str], ...]) -> list[tuple[str, ...]]:
    """The orders of ``others`` in which each input has an equality with ``start`` or one before it."""
    linked = {frozenset(e) for e in edges}
    out = []
    for order in permutations(others):
        done = {start}
        ok = True
        for name in order:
            if not any(frozenset((name, d)) in linked for d in done):
                ok = False
                break
            done.add(name)
        if ok:
            out.append(order)
    return out


def smoothed(fanout: dict[str, float], measured: dict[str, float], alpha: float) -> dict[str, float]:
    """The moving averages after a batch's measured selectivities (an input first measured
    starts at its measure; one not measured this batch keeps its average)."""
    out = dict(fanout)
    for name, f in measured.items():
        out[name] = f if name not in fanout else alpha * f + (1 - alpha) * fanout[name]
    return out


def decide(term: Term, start: str, edges: tuple[tuple[str, str], ...], tuning: Tuning,
           batch: int) -> tuple[Term, str | None]:
    """The term after a batch whose averages are ``term.fanout``: the next order and the streak,
    and why the order changed (None: it did not). Until every input has a measured selectivity,
    nothing is decided. The cheapest connected order (the current one on a tie) that costs less
    than ``1 − margin`` times the current order's lengthens the streak if it is the same candidate
    as the batch before, else starts one; at ``tuning.batches`` the order changes."""
    order = term.order
    if len(order) + 1 > MAX_INPUTS or any(n not in term.fanout for n in order):
        return Term(order, term.fanout, None, 0, term.since, term.why), None
    current = cost(order, term.fanout)
    candidates = list(connected_orders(start, order, edges))
    if not candidates:  # no order without a cross product (a join with no equality): keep this one
        return Term(order, term.fanout, None, 0, term.since, term.why), None
    best = min(candidates, key=lambda o: (cost(o, term.fanout), o != order))
    better = cost(best, term.fanout)
    if best == order or not better < (1 - tuning.margin) * current:
        return Term(order, term.fanout, None, 0, term.since, term.why), None
    streak = term.streak + 1 if term.candidate == best else 1
    if streak < tuning.batches:
        return Term(order, term.fanout, best, streak, term.since, term.why), None
    shown = ", ".join(f"{n} {term.fanout[n]:.3g}" for n in order)
    why = (f"selectivities (rows out per row in, smoothed) {shown}: {' ⋈ '.join(best)} builds {better:.3g} rows per "
           f"delta row against {current:.3g}, below by more than {tuning.margin:.0%} for {streak} batches")
    return Term(best, term.fanout, None, 0, batch, why), why


def measured(d: DeltaJoin, joins: list[tuple[int, int]] | None) -> dict[str, dict[str, float]] | None:
    """Per term (start state), the selectivity of each step a batch ran, from its merge's joins
    (pre-order: the terms in turn, each from its last join to its first); a step whose input had
    no rows is not measured. None when the joins read are not the terms' (another shape)."""
    steps = len(d.inputs) - 1
    if joins is None or len(joins) != steps * len(d.terms):
        return None
    out: dict[str, dict[str, float]] = {}
    for k, (start, order) in enumerate(d.terms):
        ran = list(reversed(joins[k * steps:(k + 1) * steps]))
        if any(ran[j][0] != ran[j - 1][1] for j in range(1, steps)):
            return None  # a step's input is not its predecessor's output: not a chain of these joins
        out[start] = {name: rows_out / rows_in for name, (rows_in, rows_out) in zip(order, ran) if rows_in > 0}
    return out


class JoinOrder:
    """The delta terms' orders of the plan in effect, their averages, and the re-plans."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.enabled = ctx.config.settings.join_order
        self.tuning = Tuning.of(ctx.config.settings)
        self.terms: dict[str, Term] = {}  # as of the last commit
        self._next: dict[str, Term] | None = None  # as of the running batch, until it commits

    def begin(self, b: Bundle) -> None:
        """Before a batch's h: the merges whose joins the store reads after it."""
        b.store.watch_joins = {d.step for d in b.plan.delta_joins if d.step is not None} if self.enabled else set()

    def resumed(self, b: Bundle, last: dict[str, Any] | None) -> Bundle | None:
        """After a restart: the averages and next orders of the last commit, and the bundle for
        those orders if they are not the plan's (None: they are)."""
        if not self.enabled or not b.plan.delta_joins:
            return None
        self.terms = {s: Term.from_record(e) for s, e in _last_entries(self.ctx, last).items()}
        if not self.terms:
            return None
        orders = {s: t.order for s, t in self.terms.items()}
        if orders == {s: o for d in b.plan.delta_joins for s, o in d.terms if s in orders}:
            return None
        return b.with_plan(_with_orders(b.plan, orders))

    def observe(self, b: Bundle, batch: int) -> dict[str, Any]:
        """After a batch's merges: its measured selectivities smoothed in, the next orders
        decided; the commit record's ``join_order`` entry (empty: no delta join measured)."""
        if not self.enabled or not b.plan.delta_joins:
            return {}
        record: dict[str, Any] = {}
        terms = dict(self.terms)
        for d in b.plan.delta_joins:
            got = measured(d, b.store.joins.get(d.step)) if d.step is not None else None
            for start, order in d.terms:
                term = terms.get(start)
                if term is None or term.order != order:  # a plan compiled afresh: its own order
                    term = Term(order, term.fanout if term is not None else {})
                if got is not None:
                    term = Term(term.order, smoothed(term.fanout, got[start], self.tuning.smoothing),
                                term.candidate, term.streak, term.since, term.why)
                term, why = decide(term, start, d.edges, self.tuning, batch)
                if why is not None:
                    self.ctx.progress(f"batch {batch_name(batch)}: Δ{start} joins {' ⋈ '.join(order)} → "
                                      f"{' ⋈ '.join(term.order)} from the next batch ({why})")
                terms[start] = term
                record[start] = term.record(order)
        self._next = terms
        return {"join_order": record} if record else {}

    def committed(self, b: Bundle) -> Bundle | None:
        """After the commit of an observed batch: its averages kept, and the bundle that runs the
        orders it changed (the same states, other programs), else None. (A batch that fails is
        observed again when it reruns, from the last commit's averages.)"""
        terms, self._next = self._next, None
        if terms is None:
            return None
        self.terms = terms
        orders = {s: t.order for s, t in terms.items()}
        if orders == {s: o for d in b.plan.delta_joins for s, o in d.terms if s in orders}:
            return None
        return b.with_plan(_with_orders(b.plan, orders))


def _last_entries(ctx: RunContext, last: dict[str, Any] | None) -> dict[str, Any]:
    """The ``join_order`` entries of the last commit that has them: a recompute batch (or one
    that only answered) measures nothing and records none, and the run before the restart kept
    the entries of the incremental batch before it (looked back over at most LOOK_BACK commits)."""
    record = last
    for _ in range(LOOK_BACK):
        if record is None:
            return {}
        if record.get("join_order"):
            return dict(record["join_order"])
        batch = int(record.get("batch", 0)) - 1
        try:
            record = ctx.output.read_commit(batch) if batch >= 0 else None
        except (OSError, ValueError):  # compacted away, or never written: start afresh
            return {}
    return {}


def _with_orders(plan: IncrementalPlan, orders: dict[str, tuple[str, ...]]) -> IncrementalPlan:
    mappings = {m.left: (m.n, m.m) for m in plan.matrices}
    heavy = {m.left: m.heavy for m in plan.matrices if m.hybrid is not None}
    return replanned(plan, mappings, heavy, orders)

