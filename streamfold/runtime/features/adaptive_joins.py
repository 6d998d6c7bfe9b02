"""Adaptive joins: join matrices re-mapped at batch boundaries, hashed joins switched to hybrids.

The decisions are :mod:`..matrices`' (Algorithm 2 of seed 001 §2.2, and the watch of a hashed
equi-join under ``matrix_equi="auto"``); this module does the Spark work they need — counting
sizes and key frequencies, re-replicating states under a new mapping — and returns the plan
compiled for the new layout. The batch that migrates writes every state whole, so the migration
commits with it (killed before, the rerun decides the same from the same committed sizes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import CheckpointError, StreamfoldError
from ...plan.matrix import best_mapping, heavy_keys
from ...plan.model import IncrementalPlan, JoinMatrix, SkewWatch
from ...plan.compilation import replanned
from .. import lowering
from ..batch import BatchReads
from ..bundle import Bundle
from ..checkpoint import batch_name
from ..context import RunContext
from ..emit import emit
from ..failures import batch_failure
from ..lowering import HybridLayout
from ..matrices import MatrixDriver
from ..state import materialize, release
from ..views import Views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

# A hybrid equi-join's heavy keys, at most (each is a literal in its plan).
MAX_HEAVY_KEYS = 64


@dataclass
class Migration:
    """What a batch's join matrices did: the states laid out anew (by name, as a merge's rows)
    and their rows, and the bundle whose plan is compiled for the new layout (None: no change)."""

    states: dict[str, DataFrame] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    bundle: Bundle | None = None


class AdaptiveJoins:
    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        self.driver = MatrixDriver(epsilon=ctx.config.matrix_epsilon)

    # -- a restart -------------------------------------------------------------------------------
    def switched_plan(self, plan: IncrementalPlan, last: dict[str, Any] | None) -> IncrementalPlan:
        """``plan`` with the hashed equi-joins that became hybrids (``matrix_equi="auto"``) by the
        last committed batch (``last``: its record) planned as those hybrids, as its states were
        committed. A plan without a join matrix the last commit has (a run resumed with another
        ``matrix_equi``) could not read the committed states: refused."""
        if last is None:
            return plan
        entries = last.get("matrix") or {}
        if any(w.left in entries for w in plan.watched):
            plan = with_mappings(plan, {n: (int(e["mapping"][0]), int(e["mapping"][1])) for n, e in entries.items()},
                                 {n: tuple(e["heavy"]) for n, e in entries.items() if "heavy" in e})
        missing = sorted(set(entries) - {m.left for m in plan.matrices})
        if missing:
            root = self.ctx.checkpoint.root
            raise CheckpointError(
                f"checkpoint {root} keeps join {', '.join(missing)} over a join matrix, which this "
                f"run's equi-join partitioning ({plan.policy.equi}) does not plan", code="CHECKPOINT_MISMATCH",
                params={"path": root, "differences": [f"join matrix {n}" for n in missing]},
                hint="resume with the --equi-joins (matrix_equi) the run was started with")
        return plan

    def resumed(self, b: Bundle, last: dict[str, Any]) -> Bundle | None:
        """The bundle for the mappings in effect after the last committed batch, if they are not
        the plan's (None: they are)."""
        if not (b.plan.matrices or b.plan.watched):
            return None
        mappings, heavy = self.driver.resume(last)
        plan = b.plan
        if mappings and (mappings != {m.left: (m.n, m.m) for m in plan.matrices}
                         or heavy != {m.left: m.heavy for m in plan.matrices if m.hybrid is not None}):
            return replanned_bundle(b, mappings, heavy)
        return None

    # -- a batch ---------------------------------------------------------------------------------
    @staticmethod
    def counts_before_outputs(plan: IncrementalPlan) -> bool:
        """Whether the plan's join matrices are decided on before the batch's outputs, from
        counted sizes (a hybrid's: :meth:`adapt`), not after them from the merges' counts."""
        return any(mx.hybrid is not None for mx in plan.matrices)

    def record(self, b: Bundle) -> dict[str, Any]:
        """The commit's ``matrix`` and ``partitioning`` entries."""
        extra: dict[str, Any] = {}
        if b.plan.matrices:
            extra["matrix"] = self.driver.record(b.plan, b.store.rows)
        if b.plan.watched:
            extra["partitioning"] = self.driver.record_watched(b.plan)
        return extra

    def watch(self, b: Bundle, batch: int, views: Views, build: Callable[[IncrementalPlan], Bundle]) -> Bundle | None:
        """``matrix_equi="auto"`` before the batch's h (:mod:`..matrices`): each watched hash join
        whose inputs grew by ε since its last check has its rows per key counted over the
        committed states; one with a key above a joiner's fair share becomes a hybrid — the plan
        compiled again with its heavy keys and the mapping of least ILF (a new bundle, returned),
        its two states laid out anew — and the batch writes every state whole. None: nothing
        switched. On failure nothing is switched and the old bundle stays in effect."""
        ctx = self.ctx
        due = self.driver.due(b.plan, b.store.rows)
        if not due:
            return None
        switch: dict[str, tuple[SkewWatch, tuple[int, int], dict[Any, tuple[int, int]]]] = {}
        for w in due:
            sizes = self._watched_sizes(b, w, views)
            frequencies = self._hashed_frequencies(b, w, views)
            top = max(frequencies.items(), key=lambda kv: kv[1][0] + kv[1][1], default=None)
            heavy = heavy_keys(frequencies, sizes[0], sizes[1], w.cells)
            self.driver.checked(w, sizes, (top[0], top[1][0] + top[1][1]) if top is not None else None, heavy)
            if heavy:
                switch[w.left] = (w, sizes, frequencies)
        if not switch:
            return None
        mappings = {m.left: (m.n, m.m) for m in b.plan.matrices}
        heavy_of = {m.left: m.heavy for m in b.plan.matrices if m.hybrid is not None}
        for left, (w, (r, s), _) in switch.items():
            best = best_mapping(r, s, w.cells)
            mappings[left] = (best.n, best.m)
            heavy_of[left] = tuple(self.driver.checks[left]["heavy"])
        plan = with_mappings(b.plan, mappings, heavy_of)
        ctx.progress(f"batch {batch_name(batch)}: " + ", ".join(
            f"{left} ⋈ {w.right} skewed (heavy keys {list(heavy_of[left])}): hash join → hybrid {mappings[left]}"
            for left, (w, _, _) in switch.items()))
        new: Bundle | None = None
        laid: set[str] = set()
        try:
            new = build(plan)
            for mx in plan.matrices:
                if mx.left not in switch or mx.hybrid is None:
                    continue
                w, (r, s), frequencies = switch[mx.left]
                for side, name in ((0, mx.left), (1, mx.right)):
                    layout = HybridLayout(mx.hybrid[side], mx.heavy, mx.cells)
                    source = views.relation(b.store.current[name], f"switch_{name}") + " _hashed"
                    sql = lowering.migrate(new.store.table(name), source, side, None, (mx.n, mx.m), (layout, layout))
                    laid_out = materialize(ctx.spark.sql(sql))
                    copies = mx.m if side == 0 else mx.n
                    rows = (r if side == 0 else s) + sum(frequencies[k][side] for k in mx.heavy) * (copies - 1)
                    new.store.adopt(name, laid_out, laid_out, rows)
                    laid.add(name)
                self.driver.switched(w, batch, (r, s))
            for name in new.store.durable():
                if name not in laid:
                    assert new.store.schemas[name] == b.store.schemas[name], name
                    new.store.adopt(name, b.store.current[name], b.store.backing(name), b.store.rows.get(name))
        except BaseException as e:
            if new is not None:
                new.store.release_except(b.store.backings())
            self.driver.unswitch()
            if isinstance(e, StreamfoldError) or not isinstance(e, Exception):
                raise
            raise batch_failure(batch, "migrate", "making a skewed hash join a hybrid", e, ctx.local, ctx.config.settings) from e
        return new

    def undo_switch(self, new: Bundle, old: Bundle) -> None:
        """The batch a switch was made for failed: the new layout's states are dropped."""
        new.store.release_except(old.store.backings())
        self.driver.unswitch()

    def adapt(self, b: Bundle, batch: int, reads: BatchReads, views: Views) -> Migration:
        """Algorithm 2 after the batch's merges, for a plan with a hybrid equi-join, before its
        outputs: each join matrix whose inputs grew enough moves to its best mapping for their
        sizes now — and a hybrid to the heavy keys of their frequencies now — its states
        replicated anew, the plan compiled for it. The batch then writes every state whole, so
        the migration commits with it (killed before, it is decided again). A hybrid keeps its
        light keys' rows once, so its sizes are counted (one job): plans without one decide after
        the outputs instead, from the merges' own counts (:meth:`adapt_after`)."""
        sizes = self._matrix_sizes(b, reads, views)
        moves = self.driver.plan(b.plan, sizes)
        heavy: dict[str, tuple[Any, ...]] = {}
        frequencies: dict[str, dict[Any, tuple[int, int]]] = {}
        for mx in b.plan.matrices:
            if mx.hybrid is not None and mx.left in self.driver.triggered:
                r, s = sizes[mx.left]
                frequencies[mx.left] = self._key_frequencies(b, mx, reads, views, (r + s) / mx.cells)
                chosen = heavy_keys(frequencies[mx.left], r, s, mx.cells)
                if chosen != mx.heavy:
                    heavy[mx.left] = chosen
                    self.driver.heavy_from[mx.left] = mx.heavy
        return self._migrate(b, batch, reads, views, moves, heavy, frequencies)

    def adapt_after(self, b: Bundle, batch: int, reads: BatchReads, views: Views,
                    kept: Callable[[str, int | None], DataFrame | None] | None) -> Migration:
        """Algorithm 2 after the batch's outputs, for a plan whose join matrices keep every row
        as often (no hybrid): |R| and |S| are the merges' own row counts over the copies each row
        has (a left row in m cells, a right row in n), so no job counts them. Each matrix that
        moves has its states replicated anew and the plan is compiled for it; every state is
        then written whole into the batch's base (``base-<batch>``, which a restore takes over
        the changelog the outputs wrote beside it), so the migration commits with the batch:
        killed before the commit, the rerun restores the old mapping's states and decides the
        same migration from the same sizes. ``kept``: after a batch of prepared plans, a state
        as the job kept it (None for a state the plans do not hold)."""
        ctx, store = self.ctx, b.store
        rows = store.rows
        if all(rows.get(mx.left) is not None and rows.get(mx.right) is not None for mx in b.plan.matrices):
            sizes = {mx.left: (int(rows[mx.left] or 0) // mx.m, int(rows[mx.right] or 0) // mx.n)
                     for mx in b.plan.matrices}
        else:  # a merge whose count Spark did not report: count the states
            sizes = self._matrix_sizes(b, reads, views)
        moves = self.driver.plan(b.plan, sizes)
        if not moves:
            return Migration()
        for n in store.durable():  # each state after the batch, as the next one would read it
            if n in reads.new:
                continue
            frame = kept(n, rows.get(n)) if kept is not None else None
            if frame is not None:
                reads.new[n] = frame
            elif n in reads.merged:
                reads.new[n] = store.next_version(n, reads.merged[n], views)
        migration = self._migrate(b, batch, reads, views, moves, {}, {})
        states: dict[str, DataFrame | str] = {**store.current, **reads.new}
        durable = store.durable()
        try:
            with ctx.clock.part("states written whole"):
                emit(ctx.spark.sql(store.pack_sql({n: states[n] for n in durable}, views)),
                     ctx.checkpoint.base_dir(batch), False)
        except Exception as e:  # noqa: BLE001 - Spark failures are chained into a BatchError
            raise batch_failure(batch, "migrate", "writing a join matrix's migrated states", e, ctx.local, ctx.config.settings) from e
        return migration

    def _migrate(self, b: Bundle, batch: int, reads: BatchReads, views: Views, moves: dict[str, tuple[int, int]],
                 heavy: dict[str, tuple[Any, ...]], frequencies: dict[str, dict[Any, tuple[int, int]]]) -> Migration:
        """The states of each join matrix that moves (``moves``: its new mapping) or takes other
        heavy keys (``heavy``) replicated anew from their rows after the batch's merges (their new
        rows put in ``reads.new``), and the plan compiled for the new layouts."""
        if not moves and not heavy:
            return Migration()
        ctx, store = self.ctx, b.store
        ctx.progress(f"batch {batch_name(batch)}: join matrix " + ", ".join(
            [f"{name} {old} → {new}" for name, (old, new) in self.driver.migrated.items()]
            + [f"{name} heavy keys {list(keys)}" for name, keys in heavy.items()]))
        migration = Migration()
        try:
            for mx in b.plan.matrices:
                if mx.left not in moves and mx.left not in heavy:
                    continue
                r, s = self.driver.sizes[mx.left]
                n, m = moves.get(mx.left, (mx.n, mx.m))
                for side, name in ((0, mx.left), (1, mx.right)):
                    layouts = None
                    copies = m if side == 0 else n
                    rows = (r if side == 0 else s) * copies
                    if mx.hybrid is not None:
                        new_heavy = heavy.get(mx.left, mx.heavy)
                        layouts = (HybridLayout(mx.hybrid[side], mx.heavy, mx.cells),
                                   HybridLayout(mx.hybrid[side], new_heavy, mx.cells))
                        rows_of_heavy = sum(frequencies[mx.left][k][side] for k in new_heavy)
                        rows = (r if side == 0 else s) + rows_of_heavy * (copies - 1)
                    source = views.relation(reads.new[name], f"migrate_{name}") + " _new"
                    sql = lowering.migrate(store.table(name), source, side, (mx.n, mx.m), (n, m), layouts)
                    # kept as the rows of a merge that touched nothing, as a merge's result is
                    # kept: the next batch can capture prepared plans over it
                    moved = materialize(ctx.spark.sql(lowering.unchanged(store.table(name), f"(\n{sql}\n) _moved")))
                    migration.states[name] = moved
                    reads.new[name] = store.as_frame(store.new_view(name, moved, views))  # its state's columns
                    migration.rows[name] = rows
        except Exception as e:  # noqa: BLE001 - Spark failures are chained into a BatchError
            for df in migration.states.values():
                release(df)
            raise batch_failure(batch, "migrate", "migrating a join matrix", e, ctx.local, ctx.config.settings) from e
        migration.bundle = replanned_bundle(b, {**{m.left: (m.n, m.m) for m in b.plan.matrices}, **moves},
                                     {**{m.left: m.heavy for m in b.plan.matrices if m.hybrid is not None}, **heavy})
        return migration

    # -- sizes and frequencies -------------------------------------------------------------------
    def _watched_sizes(self, b: Bundle, w: SkewWatch, views: Views) -> tuple[int, int]:
        """A watched join's |R| and |S| as committed: its states' rows (counted if unknown)."""
        r, s = b.store.rows.get(w.left), b.store.rows.get(w.right)
        if r is not None and s is not None:
            return r, s
        left, right = (views.relation(b.store.current[n], f"size_{n}") for n in (w.left, w.right))
        row = self.ctx.spark.sql(lowering.state_sizes(left, right)).collect()[0]
        return int(row[0]), int(row[1])

    def _hashed_frequencies(self, b: Bundle, w: SkewWatch, views: Views) -> dict[Any, tuple[int, int]]:
        """A watched join's rows per key on each side (each row kept once), for its keys with the
        most rows: all of those above a joiner's fair share (fewer than J), in one job."""
        sides = [(w.keys[side], views.relation(b.store.current[name], f"keys_{name}"), None)
                 for side, name in ((0, w.left), (1, w.right))]
        sql = lowering.key_frequencies(sides, min(MAX_HEAVY_KEYS, w.cells))
        return {row[0]: (int(row[1]), int(row[2])) for row in self.ctx.spark.sql(sql).collect()}

    def _matrix_sizes(self, b: Bundle, reads: BatchReads, views: Views) -> dict[str, tuple[int, int]]:
        """Per join matrix (by its left state), |R| and |S| after the batch's merges — one copy of
        each row (a left row is kept m times, a right row n times; a hybrid's light key's row
        once) — in one job."""
        sides: list[tuple[str, int | None, str | None]] = []
        for mx in b.plan.matrices:
            for side, name in ((0, mx.left), (1, mx.right)):
                relation = views.relation(reads.new.get(name, b.store.current[name]), f"count_{name}")
                if mx.hybrid is None:  # every row kept as often: count them all
                    sides.append((relation, mx.m if side == 0 else mx.n, None))
                    continue
                layout = HybridLayout(mx.hybrid[side], mx.heavy, mx.cells)
                sides.append((relation, None, lowering.canonical(b.store.table(name), side, mx.m, layout)))
        row = self.ctx.spark.sql(lowering.matrix_sizes(sides)).collect()[0]
        return {mx.left: (int(row[2 * i]), int(row[2 * i + 1])) for i, mx in enumerate(b.plan.matrices)}

    def _key_frequencies(self, b: Bundle, mx: JoinMatrix, reads: BatchReads, views: Views,
                         above: float) -> dict[Any, tuple[int, int]]:
        """A hybrid equi-join's rows per key on each side (one copy of each row), for the keys
        with more than ``above`` rows in all (the candidates for heavy keys)."""
        assert mx.hybrid is not None
        sides = []
        for side, name in ((0, mx.left), (1, mx.right)):
            relation = views.relation(reads.new.get(name, b.store.current[name]), f"keys_{name}")
            layout = HybridLayout(mx.hybrid[side], mx.heavy, mx.cells)
            sides.append((mx.hybrid[side], relation, lowering.canonical(b.store.table(name), side, mx.m, layout)))
        sql = lowering.key_frequencies(sides, MAX_HEAVY_KEYS, above)
        return {row[0]: (int(row[1]), int(row[2])) for row in self.ctx.spark.sql(sql).collect()}


def replanned_bundle(b: Bundle, mappings: dict[str, tuple[int, int]],
              heavy: dict[str, tuple[Any, ...]] | None = None) -> Bundle:
    """The bundle with its plan compiled again for these join matrix mappings (and hybrids'
    heavy keys, else the current ones): the same states, other programs."""
    if heavy is None:
        heavy = {m.left: m.heavy for m in b.plan.matrices if m.hybrid is not None}
    return b.with_plan(with_mappings(b.plan, mappings, heavy))


def with_mappings(plan: IncrementalPlan, mappings: dict[str, tuple[int, int]],
                  heavy: dict[str, tuple[Any, ...]] | None = None) -> IncrementalPlan:
    """``plan`` compiled again with these join matrix mappings and hybrids' heavy keys (by left
    state; others ignored), from its compilation's normalized query (nothing parsed or bound again)."""
    return replanned(plan, mappings, heavy)
