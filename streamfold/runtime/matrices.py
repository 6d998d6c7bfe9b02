"""The driver's side of join matrices: Algorithm 2 at batch boundaries (seed 001 §2.2).

Squall's controller samples the inputs and migrates joiners while tuples keep flowing (Alg. 4).
Here the driver owns the batch boundary and knows exact sizes: after a batch's merges it counts
the rows of each matrix input (one small job), and an input keeps each of its rows in m (left)
or n (right) cells, so |R| = rows(left)/m and |S| = rows(right)/n exactly. Then, per matrix::

    if |R| − |R₀| ≥ ε·|R₀| or |S| − |S₀| ≥ ε·|S₀|:      (R₀, S₀: the sizes at the last decision)
        (n, m) ← the mapping of n·m = J cells with the least ILF |R|/n + |S|/m
        (R₀, S₀) ← (|R|, |S|)

and when the mapping changes, the batch *migrates* before it commits: both states after its
merges are replicated again under the new mapping (:func:`.lowering.migrate`) and become the
states the batch leaves, the plan is compiled again with it for the next batch, and the batch
writes every state whole with its commit — so a kill before the commit restores the old states
and the old mapping (both recorded by the last commit), and the rerun decides the same migration
from the same sizes. Deciding after the merges keeps the committed mapping within the thesis's
bound of the optimum for the committed sizes, however much one batch adds. Each commit records, per matrix, the
mapping, the sizes, the ILF against the optimum's, and the sizes of the last decision.

The migration is a re-replication of both states (one shuffle), not Lemma 4.4.5's pairwise
exchange: Spark places cells on partitions by a hash of the cell, so no cell keeps its rows in
place when the mapping changes.

A hybrid equi-join (§4.4.4) keeps its light keys' rows once, in the cell their key hashes to,
and lays its heavy keys over the matrix. Its sizes are counted every batch (one copy of each
row: :func:`.lowering.canonical`), and whenever Algorithm 2 decides for it the driver also
counts the rows per key (the keys above a joiner's fair share only) and picks the heavy keys
again (:func:`..plan.matrix.heavy_keys`); a change of the heavy keys migrates both states the
same way, within the batch's commit, which records them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ..plan.matrix import EPSILON, Mapping, best_mapping, decide
from ..plan.model import IncrementalPlan


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
        return mappings, heavy

    def begin(self) -> None:
        """A batch starts: no sizes counted, no migration yet."""
        self.sizes.clear()
        self.migrated = {}
        self.triggered = set()
        self.heavy_from = {}

    def may_trigger(self, plan: IncrementalPlan, before: dict[str, int | None],
                    added: dict[str, int | None]) -> bool:
        """Whether some matrix's inputs may have grown enough for a decision this batch, from
        their rows before it and at most how many it added (None: unknown). When not, the batch
        needs no count of its inputs (the merges' own counts give its sizes afterwards)."""
        if any(mx.hybrid is not None for mx in plan.matrices):
            return True  # its sizes are counted every batch (light keys are kept once)
        if self.epsilon is None:
            return False
        for mx in plan.matrices:
            rows_l, rows_r = before.get(mx.left), before.get(mx.right)
            add_l, add_r = added.get(mx.left), added.get(mx.right)
            if rows_l is None or rows_r is None or add_l is None or add_r is None:
                return True
            r, s = rows_l // mx.m + add_l, rows_r // mx.n + add_r
            last = self.last.get(mx.left, (0, 0))
            if r - last[0] >= self.epsilon * last[0] or s - last[1] >= self.epsilon * last[1]:
                return True
        return False

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
            out[mx.left] = entry
        return out


def ratio(entry: dict[str, Any]) -> Fraction:
    """ILF/ILF* of a commit's matrix entry, exactly (for tests and the bench)."""
    n, m = entry["mapping"]
    r, s = entry["sizes"]
    mp = Mapping(n, m)
    best = best_mapping(r, s, mp.cells).ilf(r, s)
    return mp.ilf(r, s) / best if best else Fraction(1)
