"""The Spark back-end: row-block matrices give what NumPy gives, and survive a restart.

Small matrices split into blocks of a few rows (every view distributed), on the suite's one
local Spark session.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from streamfold.linalg import compile_program
from streamfold.linalg.maintain import Views
from streamfold.linalg.numpy_backend import Selector
from streamfold.linalg.program_file import load_program
from streamfold.linalg.runner import LinalgConfig, LinalgRun
from streamfold.linalg.maintain import InputChange
from streamfold.linalg.spark_backend import DistMatrix, SparkBackend

from ..linalg_files import oracle_by_commit, snapshot, write_entries, write_matrix
from ..linalg_oracle import assert_matches, reevaluate

pytestmark = pytest.mark.spark
EXAMPLES = Path(__file__).parent.parent.parent / "examples"


def test_distributed_views_equal_reevaluation_after_every_batch(spark) -> None:  # noqa: ANN001
    rng = np.random.default_rng(0)
    for example, params in [("matrix_power.py", {"n": "12", "squarings": "1"}),
                            ("ols.py", {"n": "24", "m": "4", "responses": "2"})]:
        prog = load_program(str(EXAMPLES / example), params)
        ring = prog.semiring
        backend = SparkBackend(ring, spark, local_entries=40, block_rows=5, thin=3)
        views = Views(compile_program(prog), backend, strategy="incremental", drift_every=2,
                      lazy_entries=0, lazy_rank=3, fuse=(4, 4))
        inputs = {d.name: rng.standard_normal((d.rows, d.cols)) * 0.3 for d in prog.inputs}
        views.load({n: backend.from_numpy(m) for n, m in inputs.items()})
        assert any(isinstance(v, DistMatrix) for v in views.values.values()), "the views are distributed"
        for b in range(2):
            changes = []
            for d in prog.inputs:
                rows = np.sort(rng.choice(d.rows, 2, replace=False))
                v = rng.standard_normal((2, d.cols)) * 0.1
                changes.append(InputChange(d.name, Selector(rows, d.rows), v, 2, "selector"))
                inputs[d.name][rows] += v
            views.apply(changes)
            got = {o: backend.to_numpy(v) for o, v in views.outputs().items()}
            assert_matches(got, reevaluate(prog, inputs), "arithmetic", f"{example} batch {b}: ")


def test_a_run_on_spark_writes_row_blocks_and_resumes_from_them(spark, tmp_path: Path) -> None:  # noqa: ANN001
    g = tmp_path / "G"
    rng = np.random.default_rng(1)
    write_matrix(g, "0000.npy", rng.random((16, 16)) < 0.1)
    params = {"n": "16", "hops": "3"}

    def config() -> LinalgConfig:
        return LinalgConfig(program=str(EXAMPLES / "reachability.py"), sources={"G": str(g)},
                            output=str(tmp_path / "out"), params=params, backend="spark", strategy="incremental",
                            spark_local_entries=100, spark_block_rows=6, spark_thin=3, lazy_entries=0)

    run = LinalgRun(config(), spark=spark)
    run.run_batch(run.poll())
    write_entries(g, "0001.parquet", [0, 5], [9, 2], [1.0, 1.0])
    run.run_batch(run.poll())
    assert (tmp_path / "out" / "snapshots" / "000001" / "reach").is_dir(), "a distributed output, as row blocks"
    again = LinalgRun(config(), spark=spark)
    assert again.next_batch == 2
    write_entries(g, "0002.parquet", [11], [3], [1.0])
    again.run_batch(again.poll())
    prog = load_program(str(EXAMPLES / "reachability.py"), params)
    for batch, expected in oracle_by_commit(prog, tmp_path / "out", {"G": g}):
        assert_matches(snapshot(tmp_path / "out", batch), expected, "boolean", f"batch {batch}: ")
