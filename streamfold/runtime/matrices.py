"""The driver's side of join matrices: Algorithm 2 at batch boundaries (seed 001 §2.2).

Squall's controller samples the inputs and migrates joiners while tuples keep flowing (Alg. 4).
Here the driver owns the batch boundary and knows exact sizes: an input keeps each of its rows
in m (left) or n (right) cells, so after a batch's outputs the merges' own row counts give
|R| = rows(left)/m and |S| = rows(right)/n exactly, with no job of their own
(``Engine._adapt_after``; a hybrid's are counted: below). Then, per matrix::

    if |R| − |R₀| ≥ ε·|R₀| or |S| − |S₀| ≥ ε·|S₀|:      (R₀, S₀: the sizes at the last decision)
        (n, m) ← the mapping of n·m = J cells with the least ILF |R|/n + |S|/m
        (R₀, S₀) ← (|R|, |S|)

and when the mapping changes, the batch *migrates* before it commits: both states after its
merges are replicated again under the new mapping (:func:`.lowering.migrate`) and become the
states the batch leaves, the plan is compiled again with it for the next batch (prepared plans,
which a matrix's batches run between migrations, are prepared afresh), and the batch writes
every state whole into its base beside the changelog its outputs wrote — so a kill before the
commit restores the old states and the old mapping (both recorded by the last commit), and the
rerun decides the same migration from the same sizes. Deciding after the merges keeps the
committed mapping within the thesis's bound of the optimum for the committed sizes, however
much one batch adds. Each commit records, per matrix, the mapping, the sizes, the ILF against
the optimum's, and the sizes of the last decision.

The migration is a re-replication of both states (one shuffle), not Lemma 4.4.5's pairwise
exchange: Spark places cells on partitions by a hash of the cell, so no cell keeps its rows in
place when the mapping changes.

A hybrid equi-join (§4.4.4) keeps its light keys' rows once, in the cell their key hashes to,
and lays its heavy keys over the matrix. Its sizes are counted every batch, before the outputs
(one copy of each row: :func:`.lowering.canonical`; ``Engine._adapt``, after which the batch
writes its states whole when it migrates), and whenever Algorithm 2 decides for it the driver also
counts the rows per key (the keys above a joiner's fair share only) and picks the heavy keys
again (:func:`..plan.matrix.heavy_keys`); a change of the heavy keys migrates both states the
same way, within the batch's commit, which records them.

Under ``matrix_equi="auto"`` an equi-join that a hybrid could lay out starts hashed (the plan's
:class:`..plan.model.SkewWatch`), and the driver watches it at no cost while nothing grows:
its inputs' sizes are the states' row counts, which the merges report anyway (each row is kept
once). At the start of a batch, once |R| or |S| has grown by ε since the last check (the same
trigger as Algorithm 2's), it counts the rows per key of the two states as committed (one
small job: the largest keys only) and, when a key holds more than a joiner's fair share
(|R| + |S|) / J, the join becomes a hybrid before the batch's h runs: the plan is compiled again
with those heavy keys and the mapping of least ILF, both states are laid out anew (a heavy key's
rows replicated over its groups, a light key's row in the cell its key hashes to:
:func:`.lowering.migrate` from a hashed state), and the batch writes every state whole with its
commit, which records the switch (``"switched_at"`` in its matrix entry). Killed before that
commit, the rerun finds the committed states and sizes and decides the same; a restart plans
with the committed heavy keys. Each commit records, per watched join, the sizes of its last
check and what a check of this batch found (``"partitioning"``). A hybrid stays a hybrid (with
no heavy keys it is a hash join over J cells that still counts its sizes every batch).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..plan.matrix import EPSILON, Mapping, best_mapping, decide
from ..plan.model import IncrementalPlan, SkewWatch


@dataclass
class MatrixDriver:
    """Per join matrix of the plan (named by its left state): the sizes after the last batch and
    at the last decision, and the migration the last batch made."""

    epsilon: float | None = EPSILON  # None: never re-map (a static mapping)
    sizes: dict[str, tuple[int, int]] = field(default_factory=dict)
    last: dict[str, tuple[int, int]] = field(default_factory=dict)
    migrated: dict[str, tuple[Mapping, Mapping]] = field(default_factory=dict)  # this batch: old, new
    triggered: set[str] = field(default_factory=set)  # the matrices Algorithm 2 decided for this batch
    heavy_from: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # this batch: a hybrid's old heavy keys
    # matrix_equi="auto": per watched (hashed) join, its sizes at the last check of its key
    # frequencies; what this batch's check found; the batch each join became a hybrid in
    checked_at: dict[str, tuple[int, int]] = field(default_factory=dict)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    switched_at: dict[str, int] = field(default_factory=dict)
    _before: dict[str, tuple[int, int] | None] = field(default_factory=dict)  # this batch: checked_at before

    def resume(self, record: dict[str, Any]) -> tuple[dict[str, tuple[int, int]], dict[str, tuple[Any, ...]]]:
        """The mappings (and hybrids' heavy keys) in effect after a committed batch (from its
        record), and the sizes of each matrix's last decision; a record without matrices leaves
        the square ones."""
        mappings: dict[str, tuple[int, int]] = {}
        heavy: dict[str, tuple[Any, ...]] = {}
        for name, entry in (record.get("matrix") or {}).items():
            mappings[name] = (int(entry["mapping"][0]), int(entry["mapping"][1]))
            self.last[name] = (int(entry["decided_at"][0]), int(entry["decided_at"][1]))
            if "heavy" in entry:
                heavy[name] = tuple(entry["heavy"])
            if "switched_at" in entry:
                self.switched_at[name] = int(entry["switched_at"])
        for name, entry in (record.get("partitioning") or {}).items():
            self.checked_at[name] = (int(entry["checked_at"][0]), int(entry["checked_at"][1]))
        return mappings, heavy

    def begin(self) -> None:
        """A batch starts: no sizes counted, no migration yet."""
        self.sizes.clear()
        self.migrated = {}
        self.triggered = set()
        self.heavy_from = {}
        self.checks = {}
        self._before = {}

    def due(self, plan: IncrementalPlan, rows: dict[str, int | None]) -> list[SkewWatch]:
        """The watched joins whose key frequencies are to be checked before this batch: an input
        grew by ε since the last check (a join whose sizes are unknown is checked too). The
        sizes are the states' rows as committed — one per row, in a hash join."""
        epsilon = self.epsilon if self.epsilon is not None else EPSILON
        out = []
        for w in plan.watched:
            r, s = rows.get(w.left), rows.get(w.right)
            if r is None or s is None:
                out.append(w)
                continue
            r0, s0 = self.checked_at.get(w.left, (0, 0))
            if (r > r0 and r - r0 >= epsilon * r0) or (s > s0 and s - s0 >= epsilon * s0):
                out.append(w)
        return out

    def checked(self, watch: SkewWatch, sizes: tuple[int, int], largest: tuple[Any, int] | None,
                heavy: tuple[Any, ...]) -> None:
        """A watched join's key frequencies were checked at ``sizes``: ``largest`` is its key with
        the most rows (both sides) and their number, ``heavy`` the keys above the fair share."""
        self._before.setdefault(watch.left, self.checked_at.get(watch.left))
        self.checked_at[watch.left] = sizes
        check: dict[str, Any] = {"sizes": list(sizes), "share": (sizes[0] + sizes[1]) / watch.cells,
                                 "largest": [largest[0], largest[1]] if largest is not None else None}
        if heavy:
            check["heavy"] = list(heavy)
        self.checks[watch.left] = check

    def switched(self, watch: SkewWatch, batch: int, sizes: tuple[int, int]) -> None:
        """A watched join becomes a hybrid this batch (its first decision: at ``sizes``)."""
        self.switched_at[watch.left] = batch
        self.last[watch.left] = sizes
        self.heavy_from[watch.left] = ()

    def unswitch(self) -> None:
        """The batch failed before its commit: its checks and switches are forgotten (a rerun
        decides them again)."""
        for name, before in self._before.items():
            if before is None:
                self.checked_at.pop(name, None)
            else:
                self.checked_at[name] = before
            if name in self.checks and "heavy" in self.checks[name]:
                self.switched_at.pop(name, None)
                self.last.pop(name, None)
                self.heavy_from.pop(name, None)
        self._before = {}
        self.checks = {}

    def record_watched(self, plan: IncrementalPlan) -> dict[str, Any]:
        """What a commit records per watched (still hashed) join: the sizes of its last check, and
        what a check of this batch found."""
        out: dict[str, Any] = {}
        for w in plan.watched:
            entry: dict[str, Any] = {"right": w.right, "partitioning": "hash",
                                     "checked_at": list(self.checked_at.get(w.left, (0, 0)))}
            if w.left in self.checks:
                entry["checked"] = self.checks[w.left]
            out[w.left] = entry
        return out

    def plan(self, plan: IncrementalPlan, sizes: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        """Algorithm 2 after a batch, from each matrix's sizes (|R|, |S|: one copy of each row):
        the new mapping of each matrix that moves (else {})."""
        self.migrated = {}
        moves: dict[str, tuple[int, int]] = {}
        for mx in plan.matrices:
            now = sizes[mx.left]
            self.sizes[mx.left] = now
            current = Mapping(mx.n, mx.m)
            last = self.last.get(mx.left, (0, 0))
            if self.epsilon is None or not (now[0] - last[0] >= self.epsilon * last[0]
                                            or now[1] - last[1] >= self.epsilon * last[1]):
                continue
            self.last[mx.left] = now
            self.triggered.add(mx.left)
            choice = decide(current, last, now, self.epsilon)
            if choice is not None:
                moves[mx.left] = (choice.n, choice.m)
                self.migrated[mx.left] = (current, choice)
        return moves

    def record(self, plan: IncrementalPlan, rows: dict[str, int | None]) -> dict[str, Any]:
        """What a commit records per matrix: mapping, sizes, ILF and the optimum's, migration.
        Sizes are the ones counted for a decision, else the states' rows after the batch."""
        out: dict[str, Any] = {}
        for mx in plan.matrices:
            left, right = rows.get(mx.left), rows.get(mx.right)
            counted = (left // mx.m, right // mx.n) if left is not None and right is not None else (0, 0)
            now = self.sizes.get(mx.left, counted)
            mp = Mapping(mx.n, mx.m)
            ilf = mp.ilf(*now)
            best = best_mapping(now[0], now[1], mp.cells).ilf(*now)
            entry: dict[str, Any] = {
                "right": mx.right, "mapping": [mx.n, mx.m], "sizes": list(now),
                "ilf": float(ilf), "ilf_opt": float(best), "ilf_ratio": round(float(ilf / best), 4) if best else 1.0,
                "decided_at": list(self.last.get(mx.left, (0, 0))),
            }
            if mx.left in self.migrated:
                old, _ = self.migrated[mx.left]
                entry["migrated_from"] = [old.n, old.m]
            if mx.hybrid is not None:
                entry["heavy"] = list(mx.heavy)
                if mx.left in self.heavy_from:
                    entry["heavy_from"] = list(self.heavy_from[mx.left])
            if mx.left in self.switched_at:  # matrix_equi="auto": hashed until then
                entry["switched_at"] = self.switched_at[mx.left]
                if mx.left in self.checks:
                    entry["checked"] = self.checks[mx.left]
            out[mx.left] = entry
        return out


def ratio(entry: dict[str, Any]) -> Fraction:
    """ILF/ILF* of a commit's matrix entry, exactly (for tests and the bench)."""
    n, m = entry["mapping"]
    r, s = entry["sizes"]
    mp = Mapping(n, m)
    best = best_mapping(r, s, mp.cells).ilf(r, s)
    return mp.ilf(r, s) / best if best else Fraction(1)
