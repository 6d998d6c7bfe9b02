"""Golden fixtures for the linear-algebra compiler: program in, ``explain`` out; the rules one by one.

``tests/fixtures/linalg/NAME.cmd`` holds the arguments of ``streamfold linalg explain``; the
expected output (with the exit code, and the error for a refused program) is ``NAME.txt``. The
rule fixtures show each equivalence rule (Fig. A.2), simplification (Fig. A.1) and delta rule
(Fig. 5.8) on small expressions. ``pytest --update-golden`` rewrites them after a deliberate change.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from streamfold.cli import main
from streamfold.linalg import compile_program, hstack, identity, inv, matrix, program, vstack
from streamfold.linalg.anf import to_anf
from streamfold.linalg.derive import derive
from streamfold.linalg.meta import Inferrer, Meta
from streamfold.linalg.printer import show
from streamfold.linalg.rules import RULES
from streamfold.linalg.semiring import ARITHMETIC
from streamfold.linalg.simplify import simplify, to_statements

from ..golden import FIXTURES, check

ROOT = Path(__file__).parent.parent.parent
CASES = sorted((FIXTURES / "linalg").glob("*.cmd"))


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_explain_matches_golden(path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    code = main(["linalg", "explain", *shlex.split(path.read_text())])
    out = capsys.readouterr()
    check(request, path, out.out + out.err + f"exit {code}\n")


def _rule_lines() -> list[str]:
    X, Y, Z = matrix("X", 6, 4), matrix("Y", 4, 5), matrix("Z", 5, 3)
    A, B, C = matrix("A", 6, 6), matrix("B", 6, 6), matrix("C", 6, 6)
    u, v = matrix("u", 6, 1), matrix("v", 1, 6)
    samples = [
        (X @ Y) @ Z, X @ (Y @ Z), A @ (B + C), (A + B) @ C, A @ B + A @ C, A @ C + B @ C, (A + B) + C,
        (A + B).T, A.T + B.T, (X @ Y).T, Y.T @ X.T, hstack(A, B).T, A @ B + C @ A, hstack(A, u) @ vstack(B, v),
        inv(A + u @ v), inv(A.T), inv(A) @ A, A @ inv(A), inv(A @ B), inv(X.T @ X),
    ]
    env = {n: Meta(*s) for n, s in {"X": (6, 4), "Y": (4, 5), "Z": (5, 3), "A": (6, 6), "B": (6, 6), "C": (6, 6),
                                    "u": (6, 1), "v": (1, 6)}.items()}
    infer = Inferrer(env)
    lines = []
    for rule in RULES:
        lines.append(f"{rule.name}{'' if rule.stable else ' (unstable: never chosen)'}")
        for m in samples:
            for out in rule.apply(m.expr, infer):
                lines.append(f"  {show(m.expr)}  ⇒  {show(out)}")
    return lines


def _simplification_lines() -> list[str]:
    A, S = matrix("A", 4, 4), matrix("S", 4, 4, symmetric=True)
    from streamfold.linalg import diag, fill, zeros

    samples = [A.T.T, S.T, A @ zeros(4, 4), zeros(4, 4) + A, A @ identity(4), identity(4) @ A, (2 * A) @ (3 * A),
               1 * A, 0 * A, inv(inv(A)), inv(identity(4)), fill(4, 2, 1).T, diag(4, 3).T, (A - A.T).T]
    infer = Inferrer({"A": Meta(4, 4), "S": Meta(4, 4, symmetric=True)})
    return [f"  {show(m.expr)}  →  {show(simplify(m.expr, infer, ARITHMETIC))}" for m in samples]


def _delta_lines() -> list[str]:
    X, Y = matrix("X", 6, 4), matrix("Y", 6, 2)
    A = matrix("A", 6, 6)
    lines = []
    for name, prog in [("sum, product, scale", program({"r": X.T @ Y + 3 * (X.T @ X @ (X.T @ Y))})),
                       ("inverse", program({"r": inv(X.T @ X)})),
                       ("transpose, stacks", program({"r": hstack(A.T, A) @ vstack(A, A), "t": A.T}))]:
        anf = to_anf(to_statements(prog))
        lines.append(name)
        for view, delta in derive(anf, prog.input_names).deltas:
            lines.append(f"  {view} := {show(anf.statement(view).expr)}    δ{view} = "
                         f"{'0' if delta is None else show(delta)}")
    return lines


def test_rules_match_golden(request: pytest.FixtureRequest) -> None:
    text = "\n".join(["# Equivalence rules (Fig. A.2): each rewrite of each sample", *_rule_lines(), "",
                      "# Simplification (Fig. A.1)", *_simplification_lines(), "",
                      "# Delta derivation (Fig. 5.8), every input changing", *_delta_lines()]) + "\n"
    check(request, FIXTURES / "linalg" / "rules.cmd", text)


def test_every_ir_node_is_handled_by_each_phase() -> None:
    """Every node class prints, has a meta-information rule and evaluates; a node no phase knows
    fails loudly by name."""
    import numpy as np

    from streamfold.errors import LinalgError
    from streamfold.linalg import ir
    from streamfold.linalg.evaluate import evaluate
    from streamfold.linalg.numpy_backend import NumpyBackend

    from streamfold.linalg import diag, fill, iterate, let, zeros
    from streamfold.linalg.maintain import Views

    from ..linalg_oracle import assert_matches, reevaluate

    A = matrix("A", 3, 3)
    prog = program({"r": let(inv(A @ A.T + identity(3)), lambda b: b @ hstack(A, 2 * A) @ vstack(A, -A)),
                    "s": iterate(2, A, lambda acc: acc @ acc + diag(3, 2) + fill(3, 3, 1) + zeros(3, 3))})
    used = {type(n) for _, e in prog.outputs for n in e.walk()}
    assert used == set(ir.NODES), f"not exercised: {set(ir.NODES) - used}"
    views = Views(compile_program(prog), NumpyBackend(ARITHMETIC))
    inputs = {"A": np.arange(9.0).reshape(3, 3) / 10}
    views.load({"A": inputs["A"].copy()})
    assert_matches(views.outputs(), reevaluate(prog, inputs), "arithmetic")
    backend = NumpyBackend(ARITHMETIC)
    for node in (ir.Zeros(2, 2), ir.Identity(2), ir.Fill(2, 3, 1.5), ir.Diag(2, 4.0)):
        assert evaluate(node, {}, backend).shape == Inferrer({})(node).shape
        assert show(node)

    @dataclass(frozen=True, slots=True)
    class Unknown(ir.Expr):
        arg: ir.Expr

    with pytest.raises(LinalgError) as e:
        Inferrer({"A": Meta(3, 3)})(Unknown(ir.Var("A")))
    assert e.value.code == "INTERNAL" and "Unknown" in str(e.value)
    with pytest.raises(LinalgError):
        evaluate(Unknown(ir.Var("A")), {"A": np.eye(3)}, backend)
