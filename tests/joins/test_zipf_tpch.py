"""The Zipf-skewed TPC-H-like generator of ``bench theta --skew`` (no Spark): deterministic,
skewed as asked, split into a history and increments; and the bench's queries planned as the
thesis's operators (a hash join, or a matrix with a band)."""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

import streamfold
from streamfold.bench import zipf_tpch
from streamfold.bench.theta_tpch import QUERIES, SCHEMAS, combine, options


def test_generation_is_deterministic_and_has_tpch_cardinalities():
    a, b = zipf_tpch.generate(0.002, 0.5), zipf_tpch.generate(0.002, 0.5)
    assert all(a[t].equals(b[t]) for t in a)
    assert a["SN"].num_rows == 20 and 3_000 * 1 <= a["LINEITEM"].num_rows <= 3_000 * 7
    assert pc.min(a["LINEITEM"]["l_suppkey"]).as_py() >= 1 and pc.max(a["LINEITEM"]["l_suppkey"]).as_py() <= 20


def test_zipf_makes_the_first_key_the_heaviest_by_its_share():
    rng = np.random.default_rng(1)
    keys = zipf_tpch.zipf(rng, 500, 200_000, 1.0)
    share = np.mean(keys == 1)
    assert abs(share - zipf_tpch.top_share(500, 1.0)) < 0.01 and 0.14 < share < 0.16
    uniform = zipf_tpch.zipf(rng, 500, 200_000, 0.0)
    assert np.bincount(uniform).max() / len(uniform) < 0.004


def test_split_is_a_history_then_equal_increments_of_every_row_once():
    table = zipf_tpch.generate(0.002, 1.0)["LINEITEM"]
    parts = zipf_tpch.split(table, 0.5, 3, np.random.default_rng(0))
    sizes = [p.num_rows for p in parts]
    assert len(parts) == 4 and sum(sizes) == table.num_rows and abs(sizes[0] - table.num_rows / 2) <= 1
    assert max(sizes[1:]) - min(sizes[1:]) <= 1
    keys = sorted((k, n) for p in parts for k, n in zip(p["l_orderkey"].to_pylist(), p["l_linenumber"].to_pylist()))
    assert keys == sorted(zip(table["l_orderkey"].to_pylist(), table["l_linenumber"].to_pylist()))


def test_the_bench_queries_are_planned_as_the_thesis_operators():
    for name, (sql, _) in QUERIES.items():
        text = streamfold.explain(sql, SCHEMAS)
        if name.startswith("eq"):
            assert "join matrix" not in text  # SHJ: hashed on the supplier key
        else:
            assert "theta join over a join matrix" in text and "band " in text
    assert options("STATICOPT", 16, (1, 16))["matrix_start"] == (1, 16)
    assert options("SHJ", 16, None)["matrix_equi"] == "hash"
    # the J cells over the engine's state partitions by default, or over --partitions P
    assert "partitions" not in options("DYNAMIC", 64, None) and options("DYNAMIC", 64, None)["matrix_cells"] == 64
    assert options("DYNAMIC", 64, None, 4)["partitions"] == 4 and options("DYNAMIC", 64, None, 4)["matrix_cells"] == 64


def test_rounds_combine_as_each_batchs_least_time_and_exact_only_if_every_round_was():
    def rounds_of(seconds: list[float], exact: bool = True) -> dict:
        batches = [{"batch": b, "seconds": t, "sizes": [1, 2], "exact": exact} for b, t in enumerate(seconds)]
        return {"batches": batches, "exact": exact, "median_increment_s": sorted(seconds[1:])[len(seconds[1:]) // 2],
                "start": None}

    one = combine([rounds_of([5.0, 2.0, 1.0, 3.0]), rounds_of([4.0, 1.5, 2.5, 2.0], exact=False)])
    assert [b["seconds"] for b in one["batches"]] == [4.0, 1.5, 1.0, 2.0]
    assert one["batches"][1]["seconds_by_round"] == [2.0, 1.5]
    assert one["median_increment_s"] == 1.5 and one["median_increment_s_by_round"] == [2.0, 2.0]
    assert not one["exact"] and not one["batches"][0]["exact"]
    assert combine([rounds_of([3.0, 1.0])])["median_increment_s"] == 1.0
