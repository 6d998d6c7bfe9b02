"""``streamfold linalg run``: a matrix program maintained over directories of update files.

Batches work as in ``streamfold run`` (DESIGN §5): each poll takes the files that appeared in
every source since the last batch, in name order; files present at the start form batch 0,
which loads the inputs (starting from the semiring's zero) and evaluates every view. A later
batch's change to each input is factored (:mod:`.updates`) and applied by the trigger program,
or by re-evaluation when the machine model says it is cheaper; drift is checked and views
re-anchored (:mod:`.maintain`).

Durability is the SQL runtime's protocol, reusing its checkpoint (:mod:`..runtime.checkpoint`):
the files of a batch are recorded in ``offsets/<batch>.json`` before they are read; the batch's
factors (each view's ``U``, ``V``) go to ``state/<batch>/``, or all views to
``state/base-<batch>/`` (batch 0, a re-evaluation, a re-anchoring, or when the factors written
since the last base outweigh it); then the snapshot and changes; ``commits/<batch>.json`` last.
A restart loads the last base, re-applies the factors after it, and redoes the batch after the
last commit with the files its offsets name — no input lost or applied twice. Re-applied
factors reproduce the views up to floating-point rounding (exactly, for the Boolean semiring).

Output, under ``--output DIR``: ``snapshots/<batch>/<output>.npy`` — each result matrix after
the batch; ``changes/<batch>/<output>.u.npy`` and ``<output>.v.npy`` with
``snapshot(t) = snapshot(t−1) ⊕ u·v`` (``<output>.u.npy`` alone: a dense change); and the
commit, which records the strategy, the ranks, both strategies' costs, and drift.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import BatchError, LinalgError, StreamfoldError, UsageError
from ..runtime import files
from ..runtime.checkpoint import Checkpoint, OutputDir, batch_name
from ..runtime.sources import list_inputs, still_present
from .api import Program
from .compiler import Compiled, compile_program
from .lazy import MIN_ENTRIES
from .maintain import DRIFT_EVERY, DRIFT_TOLERANCE, Report, Views
from .printer import show
from .program_file import load_program
from .store import load_factors, load_values, save_factors, save_values, write_dir
from .updates import batch_changes

LOCAL_LIMIT = 50_000_000  # entries: a program with a larger matrix runs on Spark (backend auto)


@dataclass
class LinalgConfig:
    program: str  # path to PROGRAM.py
    sources: dict[str, str]  # input → directory
    output: str
    params: dict[str, str] = field(default_factory=dict)
    checkpoint: str | None = None
    backend: str = "auto"  # numpy | spark | auto
    strategy: str = "auto"  # auto | incremental | reevaluate
    drift_tolerance: float = DRIFT_TOLERANCE
    drift_every: int = DRIFT_EVERY
    keep_snapshots: int | None = None
    compact_every: int | None = None  # None: when the factors since the base outweigh it
    master: str | None = None
    local_limit: int = LOCAL_LIMIT
    lazy_entries: int | None = None  # views this large defer low-rank updates (default: lazy.MIN_ENTRIES)
    spark_local_entries: int | None = None  # Spark: matrices smaller than this stay on the driver
    spark_block_rows: int | None = None  # Spark: rows per block (default: 32 MB blocks)
    spark_thin: int | None = None  # Spark: matrices this thin stay on the driver (default 256)

    @property
    def checkpoint_dir(self) -> str:
        return self.checkpoint or os.path.join(self.output, "_checkpoint")


@dataclass
class BatchResult:
    batch: int
    inputs: dict[str, list[str]]
    strategy: str
    ranks: dict[str, int]
    duration_s: float
    reanchored: list[str]

    def line(self) -> str:
        files_ = "  ".join(f"{n} +{len(f)}" for n, f in self.inputs.items() if f)
        ranks = " ".join(f"Δ{n} rank {k}" for n, k in self.ranks.items())
        anchor = f" │ re-anchored {', '.join(self.reanchored)}" if self.reanchored else ""
        return f"batch {batch_name(self.batch)}  {files_}  │ {self.strategy} {ranks}{anchor} │ {self.duration_s:.3f} s"


def choose_backend(prog: Program, compiled: Compiled, config: LinalgConfig) -> str:
    if config.backend not in ("auto", "numpy", "spark"):
        raise UsageError(f"unknown backend {config.backend!r}", code="BAD_BACKEND", params={"backend": config.backend},
                         hint="use numpy, spark or auto")
    if config.backend != "auto":
        return config.backend
    largest = max(m.entries for m in compiled.anf.metas.values())
    return "spark" if largest > config.local_limit else "numpy"


def make_backend(kind: str, prog: Program, config: LinalgConfig, spark: Any = None) -> Any:
    if kind == "numpy":
        from .numpy_backend import NumpyBackend

        return NumpyBackend(prog.semiring)
    from ..runtime.session import get_spark
    from .spark_backend import SparkBackend

    sized = {k: v for k, v in (("local_entries", config.spark_local_entries),
                               ("block_rows", config.spark_block_rows), ("thin", config.spark_thin))
             if v is not None}
    return SparkBackend(prog.semiring, spark or get_spark(config.master), **sized)


class LinalgRun:
    """A program bound to its sources, output and checkpoint."""

    def __init__(self, config: LinalgConfig, progress: Callable[[str], None] | None = None,
                 spark: Any = None) -> None:
        self.config = config
        self.progress = progress or (lambda msg: None)
        self.program = load_program(config.program, config.params)
        self.compiled = compile_program(self.program)
        names = list(self.program.input_names)
        missing = [n for n in names if n not in config.sources]
        extra = [n for n in config.sources if n not in names]
        if missing or extra:
            raise UsageError(f"{'input ' + missing[0] + ' has no --source' if missing else extra[0] + ' is not an input'}",
                             code="SOURCE_MISMATCH", params={"missing": missing, "unknown": extra},
                             hint=f"give --source NAME=DIR for each input of the program: {', '.join(names)}")
        for n in names:
            list_inputs(config.sources[n])  # SOURCE_NOT_FOUND now rather than at the first poll
        self.backend_name = choose_backend(self.program, self.compiled, config)
        self.backend = make_backend(self.backend_name, self.program, config, spark)
        self.views = Views(self.compiled, self.backend, strategy=config.strategy,
                           drift_tolerance=config.drift_tolerance, drift_every=config.drift_every,
                           lazy_entries=MIN_ENTRIES if config.lazy_entries is None else config.lazy_entries)
        self.output = OutputDir(config.output)
        self.checkpoint = Checkpoint(config.checkpoint_dir)
        self.checkpoint.claim(self._identity())
        self.recovery = self.checkpoint.recover(self.output, names)
        self.consumed = self.recovery.consumed
        self.next_batch = self.recovery.last_committed + 1
        self._since_base = 0  # bytes of factors written since the last base
        self._base_bytes = 1
        self._restore()

    def _identity(self) -> dict[str, Any]:
        a = self.compiled.anf
        return {
            "program": [f"{s.name} := {show(s.expr)}" for s in a.statements],
            "outputs": dict(a.outputs),
            "inputs": {d.name: [d.rows, d.cols] for d in self.program.inputs},
            "semiring": self.program.semiring.name,
            "backend": self.backend_name,
        }

    @property
    def names(self) -> list[str]:
        """Every value the state holds: the inputs, then the views."""
        return list(self.program.input_names) + list(self.compiled.anf.views)

    def _restore(self) -> None:
        rec = self.recovery
        if rec.last_committed < 0:
            return
        self.progress(f"resuming after batch {batch_name(rec.last_committed)}: loading state")
        assert rec.base is not None
        self.views.restore(load_values(self.checkpoint.base_dir(rec.base), self.names, self.backend))
        for b in rec.deltas:
            for view, u, v in load_factors(self.checkpoint.delta_dir(b)):
                self.views.values[view] = self.views.backend.update(self.views.values[view], u, v)
        self.views.batches = rec.last_committed

    # -- polling -----------------------------------------------------------------------------------
    def poll(self) -> dict[str, list[str]] | None:
        if self.recovery.pending is not None:
            pending, self.recovery.pending = self.recovery.pending, None
            kept = still_present(pending, lambda name: self.config.sources[name], logging.getLogger("streamfold").warning)
            if any(kept.values()):
                return kept
        found = {}
        for name in self.program.input_names:
            seen = self.consumed.setdefault(name, set())
            found[name] = [n for n in list_inputs(self.config.sources[name]) if n not in seen]
        return found if any(found.values()) else None

    # -- one batch ---------------------------------------------------------------------------------
    def run_batch(self, inputs: dict[str, list[str]]) -> BatchResult:
        batch = self.next_batch
        start = time.monotonic()
        self.checkpoint.write_offsets(batch, inputs)
        shapes = {d.name: (d.rows, d.cols) for d in self.program.inputs}
        paths = {n: [os.path.join(self.config.sources[n], f) for f in fs] for n, fs in inputs.items()}
        try:
            self.progress(f"batch {batch_name(batch)}: reading")
            symmetric = frozenset(d.name for d in self.program.inputs if d.symmetric)
            changes, _ = batch_changes(paths, shapes, self.program.semiring, symmetric)
            if batch == 0:
                report = self._load(changes)
            else:
                self.progress(f"batch {batch_name(batch)}: applying")
                report = self.views.apply(changes)
        except StreamfoldError as e:
            # Refused, not interrupted: forget the batch's files so that a restart, once the
            # offending file is fixed or removed, polls again (a kill leaves the offsets in place).
            files.remove(self.checkpoint.offsets_path(batch))
            if isinstance(e, BatchError):
                e.params.setdefault("batch", batch)
                e.message = f"batch {batch}: {e.message}"
            raise
        except Exception as e:  # noqa: BLE001 - chained into a coded error naming the batch
            raise BatchError(f"batch {batch} failed: {type(e).__name__}: {e}", code="BATCH_FAILED",
                             params={"batch": batch}) from e
        self.progress(f"batch {batch_name(batch)}: writing")
        base = batch == 0 or report.strategy == "reevaluate" or bool(report.reanchored)
        self._write_state(batch, report, base)
        self._write_outputs(batch, report)
        self.views.done(report)
        duration = time.monotonic() - start
        self.output.commit(batch, self._record(batch, inputs, report, duration))
        for name, names in inputs.items():
            self.consumed.setdefault(name, set()).update(names)
        self.next_batch = batch + 1
        self._after_commit(batch, base)
        return BatchResult(batch, inputs, report.strategy, report.ranks, duration, sorted(report.reanchored))

    def _load(self, changes: list[Any]) -> Report:
        """Batch 0: the inputs from the semiring's zero, then every view evaluated."""
        values = {}
        for d in self.program.inputs:
            values[d.name] = self.backend.zeros(d.rows, d.cols)
        for c in changes:
            values[c.input] = self.backend.update(values[c.input], c.u, c.v)
        self.views.load(values)
        return Report("reevaluate", {c.input: c.rank for c in changes}, self.compiled.reeval_cost, 0,
                      self.compiled.reeval_cost, {})

    def _write_state(self, batch: int, report: Report, base: bool) -> None:
        if base:
            values = {n: self.views.value(n) for n in self.names}
            self._base_bytes = max(1, write_dir(self.checkpoint.base_dir(batch),
                                                lambda d: save_values(d, values, self.backend)))
            self._since_base = 0
        else:
            deltas = [(view, u, v) for view, (u, v) in report.deltas.items()]
            self._since_base += write_dir(self.checkpoint.delta_dir(batch), lambda d: save_factors(d, deltas))

    def _write_outputs(self, batch: int, report: Report) -> None:
        outputs = dict(self.compiled.anf.outputs)
        values = {out: self.views.value(view) for out, view in outputs.items()}
        write_dir(self.output.snapshot_path(batch), lambda d: save_values(d, values, self.backend))

        def changes(d: str) -> None:
            if batch == 0:
                return
            backend = self.views.backend  # view values may be pending (lazy) ones
            for out, view in outputs.items():
                if view in report.replaced:
                    old, new = report.replaced[view]
                    backend.save(backend.change(old, new), os.path.join(d, out + ".u"))
                    backend.release(old)
                elif view in report.deltas:
                    save_change(d, out, *report.deltas[view], backend)

        write_dir(self.output.changes_path(batch), changes)

    def _record(self, batch: int, inputs: dict[str, list[str]], report: Report, duration: float) -> dict[str, Any]:
        return {
            "batch": batch, "inputs": inputs, "duration_s": round(duration, 4),
            "strategy": "load" if batch == 0 else report.strategy, "ranks": report.ranks,
            "cost": {"incremental": report.incremental_cost, "reevaluate": report.reeval_cost},
            "estimate_s": {k: round(v, 6) for k, v in report.estimate_s.items()},
            "drift": report.drift, "reanchored": report.reanchored, "backend": self.backend_name,
            "outputs": {o: list(self.compiled.anf.metas[v].shape) for o, v in self.compiled.anf.outputs},
            "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }

    def _after_commit(self, batch: int, base: bool) -> None:
        every = self.config.compact_every
        due = (every is not None and every > 0 and (batch + 1) % every == 0) or \
            (every is None and self._since_base >= self._base_bytes)
        if not base and due:
            values = {n: self.views.value(n) for n in self.names}
            self._base_bytes = max(1, write_dir(self.checkpoint.base_dir(batch),
                                                lambda d: save_values(d, values, self.backend)))
            self._since_base = 0
            base = True
        if base:
            self.checkpoint.prune(batch)
        keep = self.config.keep_snapshots
        if keep:
            for b in range(0, batch - keep + 1):
                files.remove(self.output.snapshot_path(b))

    # -- the loop ----------------------------------------------------------------------------------
    def run(self, trigger: float = 1.0, until_idle: float | None = None,
            on_batch: Callable[[BatchResult], None] | None = None) -> None:
        idle_since = time.monotonic()
        while True:
            inputs = self.poll()
            if inputs is not None:
                result = self.run_batch(inputs)
                if on_batch:
                    on_batch(result)
                idle_since = time.monotonic()
                continue
            if until_idle is not None and time.monotonic() - idle_since >= until_idle:
                return
            time.sleep(trigger)


def save_change(directory: str, name: str, u: Any, v: Any, backend: Any) -> None:
    """An output's change: ``name.u.npy`` and ``name.v.npy`` (thin factors, a selector written
    out in full), or ``name.u`` alone for a dense change (row blocks if it is distributed)."""
    import numpy as np

    if v is None:
        backend.save(u, os.path.join(directory, name + ".u"))
        return
    np.save(os.path.join(directory, name + ".u.npy"), backend.to_numpy(u))
    np.save(os.path.join(directory, name + ".v.npy"), backend.to_numpy(v))


def main_run(config: LinalgConfig, trigger: float, until_idle: float | None, quiet: bool) -> int:
    run = LinalgRun(config, progress=lambda m: print(f"… {m}", file=sys.stderr) if not quiet else None)
    if run.next_batch > 0:
        print(f"resuming after batch {batch_name(run.next_batch - 1)}", file=sys.stderr)
    run.run(trigger, until_idle, on_batch=None if quiet else lambda r: print(r.line(), flush=True))
    return 0


__all__ = ["BatchResult", "LinalgConfig", "LinalgError", "LinalgRun", "main_run"]
