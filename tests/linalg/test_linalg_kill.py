"""Durability of ``streamfold linalg run``: SIGKILL it at random instants, rerun, repeat.

Afterwards the commits are numbered without gaps, every update file is listed by exactly one
commit, and every snapshot equals NumPy re-evaluation over the files committed up to it.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from streamfold.linalg.program_file import load_program

from ..linalg_files import oracle_by_commit, snapshot, write_entries, write_matrix, write_rows
from ..linalg_oracle import assert_matches

pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).parent.parent.parent / "examples"
PARAMS = {"n": "12", "m": "3", "responses": "1"}
FILES = 30


def _writer(x: Path, y: Path, seed: int) -> None:
    rng = np.random.default_rng(seed)
    for b in range(1, FILES + 1):
        if b % 3:
            write_entries(x, f"{b:04d}.parquet", [int(rng.integers(12))], [int(rng.integers(3))],
                          [float(rng.normal(0, 0.3))], weight=[int(rng.choice([1, -1]))])
        else:
            write_rows(y, f"{b:04d}.parquet", [int(rng.integers(12))], [[float(rng.normal())]])
        time.sleep(float(rng.uniform(0.05, 0.25)))


def test_sigkill_at_random_points_loses_nothing_and_applies_nothing_twice(tmp_path: Path) -> None:
    x, y, out = tmp_path / "X", tmp_path / "Y", tmp_path / "out"
    rng = np.random.default_rng(7)
    write_matrix(x, "0000.npy", rng.standard_normal((12, 3)))
    write_matrix(y, "0000.npy", rng.standard_normal((12, 1)))
    command = [sys.executable, "-m", "streamfold", "linalg", "run", str(EXAMPLES / "ols.py"),
               *sum((["--param", f"{k}={v}"] for k, v in PARAMS.items()), []),
               "--source", f"X={x}", "--source", f"Y={y}", "--output", str(out), "--trigger", "0.02",
               "--until-idle", "2", "--compact-every", "4", "--drift-every", "3", "--strategy", "incremental",
               "--quiet"]
    writer = threading.Thread(target=_writer, args=(x, y, 8))
    writer.start()
    pick = random.Random(9)
    kills = 0
    while True:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        # Killed at a random instant a few times; then, once every file is written, left to finish.
        limit = pick.uniform(1.0, 3.0) if kills < 5 else None
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            continue
        assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
        if not writer.is_alive():
            break
    writer.join()
    assert kills >= 2, "the run was killed while working"
    commits = sorted((out / "commits").glob("*.json"))
    assert [int(c.stem) for c in commits] == list(range(len(commits)))
    listed = [f for c in commits for names in json.loads(c.read_text())["inputs"].values() for f in names]
    expected = sorted(p.name for d in (x, y) for p in d.iterdir() if not p.name.startswith("."))
    assert sorted(listed) == expected, "every file applied exactly once"
    prog = load_program(str(EXAMPLES / "ols.py"), PARAMS)
    for batch, wanted in oracle_by_commit(prog, out, {"X": x, "Y": y}):
        assert_matches(snapshot(out, batch), wanted, "arithmetic", f"batch {batch}: ")
