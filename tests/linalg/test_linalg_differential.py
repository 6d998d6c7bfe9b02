"""Every example program, maintained batch by batch, equals NumPy re-evaluation after every batch.

Random inputs, random update events (entry and row updates; negative changes where the
semiring allows them, including changes that undo earlier ones), split into random batches;
each batch goes through the update files' factoring (:mod:`streamfold.linalg.updates`) and the
maintained views, and every output is compared with the oracle's re-evaluation of the program
over the inputs so far. Modes: the trigger program alone; with views kept lazily (pending
low-rank updates, flushed often); with a drift check re-anchoring every batch; and the runtime's
own choice between trigger and re-evaluation. The lazy and re-anchoring modes also fuse the
products that read one view (:mod:`streamfold.linalg.fusion`), with thresholds small enough for
these matrices.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamfold.linalg import compile_program, hstack, let, matrix, program, vstack
from streamfold.linalg.maintain import Views
from streamfold.linalg.numpy_backend import NumpyBackend
from streamfold.linalg.program_file import load_program
from streamfold.linalg.updates import Accumulated

from ..linalg_oracle import assert_matches, reevaluate

EXAMPLES = Path(__file__).parent.parent.parent / "examples"


def _stacks():
    A, B = matrix("A", 6, 4), matrix("B", 6, 3)
    C = hstack(A, B)
    return program({"gram": let(C, lambda c: c.T @ c + 2 * (vstack(A.T, B.T) @ C)),
                    "side": (A.T @ B) - A.T @ B @ (0.5 * B.T @ B)})


PROGRAMS = {
    "ols": lambda: load_program(str(EXAMPLES / "ols.py"), {"n": "30", "m": "10", "responses": "2"}),
    "power": lambda: load_program(str(EXAMPLES / "matrix_power.py"), {"n": "8", "squarings": "3"}),
    "gradient_descent": lambda: load_program(str(EXAMPLES / "gradient_descent.py"),
                                             {"n": "10", "m": "5", "p": "3", "steps": "4", "rate": "0.01"}),
    "reachability": lambda: load_program(str(EXAMPLES / "reachability.py"), {"n": "10", "hops": "3"}),
    "shortest_paths": lambda: load_program(str(EXAMPLES / "shortest_paths.py"), {"n": "10", "hops": "4"}),
    "stacks": _stacks,
}
MODES = {
    "trigger": {"strategy": "incremental", "drift_every": 0, "lazy_entries": 10**12},
    "lazy": {"strategy": "incremental", "drift_every": 0, "lazy_entries": 0, "lazy_rank": 3, "fuse": (4, 4)},
    "reanchor": {"strategy": "incremental", "drift_every": 1, "drift_tolerance": 0.0, "lazy_entries": 0,
                 "lazy_rank": 3, "fuse": (4, 4)},
    "auto": {},
}


def _initial(rng: np.random.Generator, ring: str, rows: int, cols: int, name: str) -> np.ndarray:
    if ring == "boolean":
        return rng.random((rows, cols)) < 0.15
    if ring == "tropical":
        return np.where(rng.random((rows, cols)) < 0.3, rng.integers(1, 20, (rows, cols)).astype(float), np.inf)
    scale = 0.3 if name == "A" else 1.0  # A is raised to a power: keep it from blowing up
    return rng.standard_normal((rows, cols)) * scale


def _events(rng: np.random.Generator, ring: str, shapes: dict[str, tuple[int, int]], count: int) -> list[tuple]:
    """(input, "entry", i, j, v) and (input, "row", i, row) events; some undo an earlier one."""
    out: list[tuple] = []
    names = sorted(shapes)
    for _ in range(count):
        name = names[rng.integers(len(names))]
        rows, cols = shapes[name]
        kind = "row" if rng.random() < 0.3 else "entry"
        if ring == "arithmetic" and out and rng.random() < 0.2:  # a deletion: undo an earlier event
            past = out[rng.integers(len(out))]
            out.append(past[:-1] + (-past[-1],))
            continue
        if kind == "entry":
            i, j = int(rng.integers(rows)), int(rng.integers(cols))
            v = 1.0 if ring == "boolean" else float(rng.integers(1, 10)) if ring == "tropical" else rng.normal(0, 0.2)
            out.append((name, "entry", i, j, v))
        else:
            i = int(rng.integers(rows))
            if ring == "boolean":
                row = (rng.random(cols) < 0.2).astype(float)
            elif ring == "tropical":
                row = np.where(rng.random(cols) < 0.3, rng.integers(1, 10, cols).astype(float), np.inf)
            else:
                row = rng.normal(0, 0.2, cols)
            out.append((name, "row", i, row))
    return out


def _apply_event(m: np.ndarray, ev: tuple, ring: str) -> None:
    """The oracle's inputs: each event applied directly, with the semiring's ⊕."""
    plus = (lambda a, b: a | (b != 0)) if ring == "boolean" else np.minimum if ring == "tropical" else np.add
    if ev[1] == "entry":
        _, _, i, j, v = ev
        m[i, j] = plus(m[i, j], v)
    else:
        _, _, i, row = ev
        m[i] = plus(m[i], row)


def _batch(events: list[tuple], shapes: dict[str, tuple[int, int]], ring) -> list:  # noqa: ANN001
    accs = {n: Accumulated.empty(r, c, ring) for n, (r, c) in shapes.items()}
    for ev in events:
        acc = accs[ev[0]]
        if ev[1] == "entry":
            acc.add_entries(np.array([ev[2]]), np.array([ev[3]]), np.array([ev[4]]))
        else:
            acc.add_rows(np.array([ev[2]]), np.array([ev[3]], dtype=ring.dtype))
    return [c for n, acc in sorted(accs.items()) if (c := acc.change(n)) is not None]


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**31), cuts=st.lists(st.integers(1, 5), min_size=3, max_size=7))
def test_every_batch_equals_reevaluation(name: str, mode: str, seed: int, cuts: list[int]) -> None:
    prog = PROGRAMS[name]()
    ring = prog.semiring
    rng = np.random.default_rng(seed)
    shapes = {d.name: (d.rows, d.cols) for d in prog.inputs}
    inputs = {n: _initial(rng, ring.name, r, c, n) for n, (r, c) in shapes.items()}
    views = Views(compile_program(prog), NumpyBackend(ring), **MODES[mode])
    views.load({n: np.array(m, dtype=ring.dtype) for n, m in inputs.items()})
    assert_matches(views.outputs(), reevaluate(prog, inputs), ring.name, "after loading: ")
    events = _events(rng, ring.name, shapes, sum(cuts))
    reanchored = 0
    for b, cut in enumerate(cuts, start=1):
        batch, events = events[:cut], events[cut:]
        report = views.apply(_batch(batch, shapes, ring))
        reanchored += bool(report.reanchored)
        for ev in batch:
            _apply_event(inputs[ev[0]], ev, ring.name)
        assert_matches(views.outputs(), reevaluate(prog, inputs), ring.name, f"batch {b} ({report.strategy}): ")
    if mode == "reanchor" and ring.name == "arithmetic":
        assert reanchored, "a zero drift tolerance re-anchors at every check"


def test_the_modes_cover_woodbury_reinversion_and_fused_products() -> None:
    """The OLS program above takes Woodbury's formula at ranks 1–2 and re-inverts beyond, and its
    three products with the inverse are fused into one pass (so the tests exercise all three)."""
    from streamfold.linalg import fusion
    from streamfold.linalg.trigger import Change

    compiled = compile_program(PROGRAMS["ols"]())
    ranks = {k: compiled.trigger((Change("X", k),)).of("x1").rules for k in (1, 2, 3)}
    assert ranks == {1: ("WOODBURY",), 2: ("WOODBURY",), 3: ()}
    groups = fusion.plan(compiled.trigger((Change("X", 1),)), compiled.anf.metas, *MODES["lazy"]["fuse"])
    assert [(g.view, len(g.members)) for g in groups] == [("x1", 3)]
