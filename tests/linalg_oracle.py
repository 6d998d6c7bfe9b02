"""The oracle of the linear-algebra tests: a program re-evaluated from scratch by a NumPy
interpreter of its own, written apart from the compiler (no simplification, no ANF, no
factoring), over the inputs as the updates so far made them; and the one comparison all the
linalg tests use."""

from __future__ import annotations

import numpy as np

from streamfold.linalg import ir
from streamfold.linalg.api import Program

RELATIVE = 1e-9  # arithmetic: relative Frobenius distance; Boolean and min-plus: equal


def _zero(ring: str) -> float:
    return np.inf if ring == "tropical" else 0.0


def _one(ring: str) -> float:
    return 0.0 if ring == "tropical" else 1.0


def _mul(a: np.ndarray, b: np.ndarray, ring: str) -> np.ndarray:
    if ring == "boolean":
        return (a.astype(int) @ b.astype(int)) > 0
    if ring == "tropical":
        return np.min(a[:, :, None] + b[None, :, :], axis=1)
    return a @ b


def _add(a: np.ndarray, b: np.ndarray, ring: str) -> np.ndarray:
    return a | b if ring == "boolean" else np.minimum(a, b) if ring == "tropical" else a + b


def evaluate(e: ir.Expr, env: dict[str, np.ndarray], ring: str) -> np.ndarray:
    ev = lambda x: evaluate(x, env, ring)  # noqa: E731
    if isinstance(e, ir.Var):
        return env[e.name]
    if isinstance(e, ir.Let):
        return evaluate(e.body, {**env, e.name: ev(e.value)}, ring)
    if isinstance(e, ir.Iterate):
        acc = ev(e.init)
        for _ in range(e.times):
            acc = evaluate(e.body, {**env, e.var: acc}, ring)
        return acc
    if isinstance(e, ir.Zeros):
        return np.full((e.rows, e.cols), _zero(ring)).astype(bool if ring == "boolean" else float)
    if isinstance(e, (ir.Identity, ir.Diag)):
        value = _one(ring) if isinstance(e, ir.Identity) else e.value
        out = np.full((e.n, e.n), _zero(ring))
        np.fill_diagonal(out, value)
        return out.astype(bool) if ring == "boolean" else out
    if isinstance(e, ir.Fill):
        return np.full((e.rows, e.cols), e.value).astype(bool if ring == "boolean" else float)
    if isinstance(e, ir.Add):
        return _add(ev(e.left), ev(e.right), ring)
    if isinstance(e, ir.Mul):
        return _mul(ev(e.left), ev(e.right), ring)
    if isinstance(e, ir.Scale):
        return e.coef * ev(e.arg)
    if isinstance(e, ir.Transpose):
        return ev(e.arg).T
    if isinstance(e, ir.Inv):
        return np.linalg.inv(ev(e.arg))
    if isinstance(e, ir.HStack):
        return np.hstack([ev(e.left), ev(e.right)])
    if isinstance(e, ir.VStack):
        return np.vstack([ev(e.left), ev(e.right)])
    raise TypeError(type(e).__name__)


def reevaluate(prog: Program, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: evaluate(e, dict(inputs), prog.semiring.name) for name, e in prog.outputs}


def distance(got: np.ndarray, expected: np.ndarray, ring: str) -> float:
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"shape {got.shape}, expected {expected.shape}"
    if ring == "boolean":
        return float(np.count_nonzero(got != expected))
    if ring == "tropical":
        finite = np.isfinite(expected)
        if not np.array_equal(np.isfinite(got), finite):
            return float("inf")
        return float(np.max(np.abs(got[finite] - expected[finite]), initial=0.0))
    scale = float(np.linalg.norm(expected))
    return float(np.linalg.norm(got - expected)) / (scale if scale > 0 else 1.0)


def assert_matches(got: dict[str, np.ndarray], expected: dict[str, np.ndarray], ring: str, where: str = "") -> None:
    """Every output equal to re-evaluation: exactly (Boolean, min-plus on integers), or within
    RELATIVE (arithmetic, which rounds differently from re-evaluation)."""
    for name, exp in expected.items():
        d = distance(got[name], exp, ring)
        limit = RELATIVE if ring == "arithmetic" else 1e-9
        assert d <= limit, f"{where}{name}: distance {d:.3g} from re-evaluation (limit {limit:g})"
