"""Incremental or recompute, per batch: a cost model calibrated from the batches measured so far.

A batch can be applied three ways (seed 002 Ch. 4, Tempura; Databricks Enzyme's choice per
refresh between incremental and full):

* ``incremental`` — h over the batch's rows merged into the states, the answer from them;
* ``recompute`` — the batch query over every file so far, as Spark would run it from scratch;
  the states are not maintained (they become *stale*) and nothing is written for them;
* ``rebuild`` — the states, stale, are built again from every file before the batch (as batch 0
  builds them), then the batch is applied incrementally and the states are written whole.

The model predicts each from measured batches, never from constants: an incremental batch costs
a fixed part plus a per-row part (the per-row rate taken from the last build: batch 0 or a
rebuild, which applied h to every row they read), fitted to the last incremental batches; a
recompute costs, per row of the history, what the last recomputes cost per row; a rebuild what
the last build cost per row. Before any recompute was measured, a recompute is predicted at the
last build's cost (an upper bound: a build computes what a recompute does and writes the states).

Under ``auto``, a recompute is measured before it is ever chosen: the first incremental batch
after a build is followed, once committed, by a *probe* — what a recompute batch computes, timed:
the batch query over every file so far, and its snapshot and changes written to a scratch
directory (the batch's latency does not include it, the next batch starts after it). The probe's
time counts, besides, what the probed batch spent reading its file list and committing (a
recompute batch does those too); the first recompute batch measured replaces the probes. A probe is repeated
when the history has doubled since the last recompute measured and incremental batches are
within half of it. Where the engine prepared batch 1's plans after the build, it *calibrates* the
model there instead (``features/strategies.py``, ``calibrate``): a probe, and the *floor* — the prepared plans run over no
rows, what an incremental batch costs at least — which stands for the incremental batch until one
is measured, so batch 1 can already be a recompute; that probe, the query's first run in the JVM,
is measured again after batch 1 when the choice is within 2× of it, and replaced; the engine does
not report batch 1, the plans' first replay, as warm (it pays their rows' JIT compilation).

Big plans on small data (``first``): under ``auto`` a history of at most a task's rows, for a
plan of more states than prepared plans are tried for, is recomputed at batch 0, and every batch
while the history stays that small — each state costs a batch at least a Spark job whatever its
rows (``states_floor``, measured on this machine), the recompute a few jobs; past it, the usual
rules below, with the floor standing for the increment and (with the recompute) the build.

The choice: with the states current, recompute when the predicted incremental cost exceeds the
predicted recompute; an incremental batch after a build is always measured first. With the
states stale, rebuild at once when the rebuild and an incremental batch together cost less than
a recompute; otherwise recompute, adding each time what recomputing cost above the predicted
incremental batch to a *regret*, and rebuild once the regret reaches the rebuild's cost (the
rent-or-buy rule: never more than twice the cost of the best choice in hindsight).
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field
from typing import Any

STRATEGIES = ("incremental", "recompute", "rebuild")
MODES = ("incremental", "recompute", "auto")
WINDOW = 8  # observations kept per kind
# Incremental batches measured before a recompute is, when the plan can run prepared plans: the
# first batches after a build lay the states out and capture the plans (each several times a
# warm batch: docs/journal.md, "Stop 33"), so a warm batch is waited for — at most this many.
WARM_UP = 3


@dataclass(frozen=True)
class Choice:
    strategy: str  # one of STRATEGIES
    reason: str
    estimates: dict[str, float] = field(default_factory=dict)  # seconds, per strategy predicted
    probe: bool = False  # measure a recompute after the batch's commit

    def record(self) -> dict[str, Any]:
        """What the batch's commit records under ``"cost"``."""
        return {"reason": self.reason, **{f"{k}_s": round(v, 4) for k, v in sorted(self.estimates.items())}}


@dataclass(frozen=True)
class Observation:
    batch_rows: int
    history_rows: int  # every row so far, the batch's included
    seconds: float
    warm: bool = False  # an incremental batch that ran plans prepared before it (runtime/prepared.py)
    netted: bool = False  # a recompute over a history holding a deletion (runtime/netting.py)


class CostModel:
    """The per-batch choice of strategy, under ``mode`` (``auto`` chooses; the others force)."""

    def __init__(self, mode: str = "incremental") -> None:
        if mode not in MODES:
            raise ValueError(mode)
        self.mode = mode
        self.builds: deque[Observation] = deque(maxlen=WINDOW)  # batch 0 and rebuilds
        self.incrementals: deque[Observation] = deque(maxlen=WINDOW)
        self.recomputes: deque[Observation] = deque(maxlen=WINDOW)
        self.regret = 0.0  # seconds recomputing cost above incremental since the states went stale
        self.probed_at = 0  # history rows at the last recompute measured (by a probe or a recompute)
        self._probes: list[Observation] = []  # probes among the recomputes, until a real one is measured
        self.floor: float | None = None  # seconds of the prepared plans over no rows, since the last build
        # seconds the plan's states cost a batch at least, whatever their rows: one Spark job per
        # merged state, each timed as a job over one row on this machine (``observe_states``)
        self.states_floor: float | None = None
        self.small: int | None = None  # batch 0 recomputed a history of fewer rows: recomputed while it stays so

    # -- observations -------------------------------------------------------------------------
    def observe(self, strategy: str, first: bool, batch_rows: int, history_rows: int, seconds: float,
                warm: bool = False, netted: bool = False) -> None:
        """A batch measured: ``first`` for batch 0 (a build, whatever it is called); ``warm`` for
        an incremental batch that ran prepared plans; ``netted`` for a recompute (or probe) over a
        history that holds a deletion."""
        seen = Observation(batch_rows, history_rows, seconds, warm and strategy == "incremental" and not first,
                           netted and strategy in ("recompute", "probe"))
        if (first and strategy != "recompute") or strategy == "rebuild":
            self.builds.append(seen)
            self.incrementals.clear()  # the states changed size at once: measure them again
            self.floor = None
            self.regret = 0.0
        elif strategy == "incremental":
            self.incrementals.append(seen)
        elif strategy in ("recompute", "probe"):
            if first:  # batch 0 recomputed: the query's first run in the JVM, replaced as a probe is
                self.recomputes.append(seen)
                self._probes.append(seen)
                self.probed_at = history_rows
                return
            if strategy == "recompute" and self._probes:  # a measured recompute batch replaces the probes
                self.recomputes = deque((o for o in self.recomputes if o not in self._probes), maxlen=WINDOW)
                self._probes.clear()
            if strategy == "probe" and self._calibrated():  # measured again: the first measure paid code generation
                self.recomputes.clear()
                self._probes.clear()
            self.recomputes.append(seen)
            self.probed_at = history_rows
            if strategy == "probe":
                self._probes.append(seen)
                return
            incremental = self._incremental(batch_rows)
            if incremental is not None and not self._still_small(history_rows):
                self.regret += max(0.0, seconds - incremental)

    def observe_floor(self, seconds: float) -> None:
        """What an incremental batch costs at least, measured after a build: the prepared plans
        run over no rows (the states read and merged, the answer computed). It stands for the
        fixed part until an incremental batch is measured."""
        self.floor = seconds

    def observe_states(self, states: int, job_seconds: float) -> None:
        """The plan's ``states`` merged per batch, each at least a Spark job of ``job_seconds``
        (a job over one row, measured on this machine): a lower bound on an incremental batch,
        and on a build, while none was measured."""
        self.states_floor = states * job_seconds

    def first(self, history_rows: int, states: int, small_rows: int, many_states: int) -> Choice:
        """Batch 0 (the history, ``history_rows``): built incrementally, or, under ``auto``, a
        recompute when the history is small (at most ``small_rows``: a task's worth, whose
        recompute costs a few jobs) and the plan merges more than ``many_states`` states (each a
        job of its own in every batch, as prepared plans are not tried for such a plan). The
        recompute is measured; batch 1, on stale states, then rebuilds them only when a build and
        an increment, at least a job per state each, cost less than recomputing."""
        if self.mode == "auto" and history_rows <= small_rows and states > many_states:
            self.small = small_rows
            return Choice("recompute", f"a history of {history_rows} rows and {states} states: a build costs at "
                                       f"least a job per state, a recompute a few")
        return Choice("incremental", "batch 0 builds the states")

    def resume(self, records: list[dict[str, Any]]) -> None:
        """Calibrate again from committed batches' records (oldest first), after a restart."""
        for r in records:
            if "history_rows" in r:
                self.observe(r.get("strategy", "incremental"), r["batch"] == 0, sum(r.get("rows", {}).values()),
                             int(r["history_rows"]), float(r.get("duration_s", 0.0)), r.get("prepared") == "replay",
                             bool(r.get("history_deletes")))

    def _still_small(self, history_rows: int) -> bool:
        """Whether batch 0 recomputed a small history, no build was measured since, and the
        history is still that small: a recompute's cost is then its fixed part, an increment's at
        least a job per state (a lower bound, ``states_floor``, which would charge recomputing a
        regret it did not cost); the rent-or-buy rule starts once the history outgrows it."""
        return self.small is not None and not self.builds and history_rows <= self.small

    def _calibrated(self) -> bool:
        """Whether the only recompute measured is the probe right after the last build (the
        engine's calibration): the query's first run in the JVM, which paid its code generation
        and costs a multiple of a later recompute."""
        return (len(self._probes) == 1 and len(self.recomputes) == 1 and bool(self.builds)
                and self._probes[0].history_rows == self.builds[-1].history_rows)

    # -- predictions --------------------------------------------------------------------------
    def _per_row(self, seen: deque[Observation]) -> float | None:
        rates = [o.seconds / o.history_rows for o in seen if o.history_rows > 0]
        return statistics.median(rates) if rates else None

    def _incremental(self, batch_rows: int) -> float | None:
        rate = self._per_row(self.builds) or 0.0  # seconds per row when h runs over many
        if not self.incrementals:
            floor = self.floor if self.floor is not None else self.states_floor
            return None if floor is None else floor + rate * batch_rows
        # Warm batches are what the next incremental batch costs once the plans are prepared; the
        # ones that laid the states out and captured the plans cost more and are not repeated.
        seen = [o for o in self.incrementals if o.warm] or list(self.incrementals)
        fixed = statistics.median(max(0.0, o.seconds - rate * o.batch_rows) for o in seen)
        return fixed + rate * batch_rows

    def _measured(self, netted: bool) -> deque[Observation]:
        """The recomputes measured over a history like the next one's: with a deletion in it
        (``netted``: the streams that may delete are netted first, 2–3× the cost of reading them as
        they are on TPC-DS) or without."""
        return deque(o for o in self.recomputes if o.netted == netted)

    def _recompute(self, history_rows: int, netted: bool = False) -> float | None:
        # Before the first netted recompute is measured, the last build's cost (an upper bound, as
        # before any recompute) — not the recomputes of a history without deletions, which
        # predicted the first netted one at a third of its cost.
        rate = (self._per_row(self._measured(netted)) or self._per_row(self.builds)
                or self._per_row(self.recomputes))
        return None if rate is None else rate * history_rows

    def _rebuild(self, history_rows: int) -> float | None:
        rate = self._per_row(self.builds)
        if rate is not None:
            return rate * history_rows
        # never built (batch 0 recomputed): a build computes what a recompute does, and its states
        recompute = self._recompute(history_rows, False)
        return None if recompute is None or self.states_floor is None else recompute + self.states_floor

    def predicted(self, strategy: str, batch_rows: int, history_rows: int, netted: bool = False) -> float | None:
        """The model's seconds for ``strategy`` on a batch of ``batch_rows`` after ``history_rows``
        (``netted``: the history holds a deletion)."""
        if strategy == "incremental":
            return self._incremental(batch_rows)
        if strategy == "recompute":
            return self._recompute(history_rows + batch_rows, netted)
        return self._rebuild(history_rows)

    # -- the choice ---------------------------------------------------------------------------
    def choose(self, stale: bool, batch_rows: int, history_rows: int, preparable: bool = False,
               netted: bool = False) -> Choice:
        """The strategy for a batch of ``batch_rows`` after ``history_rows`` rows (before it);
        ``preparable``: incremental batches of this plan can run prepared plans; ``netted``: the
        history, this batch's files included, holds a deletion (a recompute nets it)."""
        after = history_rows + batch_rows
        est = {k: v for k, v in (("incremental", self._incremental(batch_rows)),
                                 ("recompute", self._recompute(after, netted)),
                                 ("rebuild", self._rebuild(history_rows))) if v is not None}
        if self.mode == "recompute":
            return Choice("recompute", "--strategy recompute", est)
        if self.mode == "incremental":
            return Choice("rebuild" if stale else "incremental", "--strategy incremental", est)
        inc, rec, reb = est.get("incremental"), est.get("recompute"), est.get("rebuild")
        if not stale:
            # A recompute is measured after the first batch that leaves none measured, without
            # waiting for the incremental batches to be measured: they are measured anyway, and
            # the decision can then come as soon as they are (a probe after the first warm
            # batch decided one batch later, and at TPC-H SF 1 a batch is seconds).
            unprobed = not self._measured(netted)  # (the first deletion: a netted recompute is measured)
            if inc is None or rec is None:
                return Choice("incremental", "no incremental batch measured since the states were built"
                              + ("; a recompute is measured after the commit" if unprobed else ""), est, probe=unprobed)
            if not self.incrementals:  # ``inc`` stands on the floor: the prepared plans over no rows
                if inc > rec:
                    return Choice("recompute", f"an increment costs at least {inc:.3f} s (the prepared plans over "
                                               f"no rows) > recompute {rec:.3f} s", est)
                again = self._calibrated() and 2 * inc >= rec
                return Choice("incremental", "no incremental batch measured since the states were built; at least "
                                             f"{inc:.3f} s ≤ recompute {rec:.3f} s"
                              + (", measured again after the commit" if again else ""), est, probe=unprobed or again)
            if preparable and not any(o.warm for o in self.incrementals) and len(self.incrementals) < WARM_UP:
                return Choice("incremental", "the plans are being prepared: a warm incremental batch is measured "
                                             "before a recompute is chosen", est, probe=unprobed)
            if unprobed:
                return Choice("incremental", "no recompute measured yet: one is measured after the commit", est,
                              probe=True)
            if inc > rec:
                return Choice("recompute", f"incremental {inc:.3f} s > recompute {rec:.3f} s", est)
            if after >= 2 * self.probed_at and 2 * inc >= rec:
                return Choice("incremental", f"incremental {inc:.3f} s ≤ recompute {rec:.3f} s, measured again after "
                                             "the commit (the history doubled since)", est, probe=True)
            if self._calibrated() and 2 * inc >= rec:
                return Choice("incremental", f"incremental {inc:.3f} s ≤ recompute {rec:.3f} s, measured again after "
                                             "the commit (the first measure paid code generation)", est, probe=True)
            return Choice("incremental", f"incremental {inc:.3f} s ≤ recompute {rec:.3f} s", est)
        if self._still_small(after):
            return Choice("recompute", f"a history of {after} rows, still small: recomputed (batch 0 was)", est)
        if inc is None or rec is None or reb is None:
            return Choice("rebuild", "nothing measured to keep recomputing on", est)
        if reb + inc <= rec:
            return Choice("rebuild", f"rebuild {reb:.3f} s + incremental {inc:.3f} s ≤ recompute {rec:.3f} s", est)
        if self.regret >= reb and inc < rec:
            return Choice("rebuild", f"recomputing cost {self.regret:.3f} s more than incremental batches would "
                                     f"have: the rebuild ({reb:.3f} s) has paid for itself", est)
        return Choice("recompute", f"recompute {rec:.3f} s < rebuild {reb:.3f} s + incremental {inc:.3f} s "
                                   f"(regret {self.regret:.3f} s)", est)
