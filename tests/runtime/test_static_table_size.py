"""A static table is planned at its rows' true size, not its Parquet files' (issue 59: TPC-DS Q10
and Q35 died with "Not enough memory to build and broadcast the table": ``customer_demographics``
is an 8 MB file of 1.9 million rows, under Spark's 10 MB broadcast threshold by its file size).

A compressible table's estimate is raised to its true size so a join of two static tables does not
broadcast it; a query of Q10's shape (two dimensions joined, EXISTS over a stream with deletions)
equals DuckDB after every batch with such a table."""

from __future__ import annotations

import os
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamfold.runtime.table_size import FACTOR, at_least_true_size, estimated_bytes, true_bytes

from ..streams import Source, check_stream
from ..strategies import random_stream

pytestmark = [pytest.mark.spark]

ROWS = 400_000  # about 16 MB by Spark's row width, well under 1 MB as Parquet


def _compressible(path: str, rows: int, label: str) -> None:
    keys = pa.array(range(rows), pa.int64())
    pq.write_table(pa.table({"dk": keys, "g": pa.array([i % 3 for i in range(rows)], pa.int32()),
                             label: pa.array(["same"] * rows)}), path)


def _broadcast_sides(plan: str) -> list[str]:
    """The subtree under each BroadcastExchange of a physical plan's text."""
    lines, sides = plan.splitlines(), []
    for i, line in enumerate(lines):
        if "BroadcastExchange" in line:
            depth = line.index("BroadcastExchange")
            below = []
            for nxt in lines[i + 1:]:
                if len(nxt) - len(nxt.lstrip(" :|+-")) <= depth:
                    break
                below.append(nxt)
            sides.append("\n".join(below))
    return sides


def test_a_compressible_table_is_estimated_at_its_true_size_and_not_broadcast(spark, tmp_path):
    big, small = str(tmp_path / "big.parquet"), str(tmp_path / "small.parquet")
    _compressible(big, ROWS, "d_label")
    _compressible(small, 2_000, "c_label")
    assert os.path.getsize(big) < 2 * 1024 * 1024
    session = spark.newSession()
    session.conf.set("spark.sql.adaptive.enabled", "false")
    session.conf.set("spark.sql.autoBroadcastJoinThreshold", str(10 * 1024 * 1024))
    d, c = session.read.parquet(big), session.read.parquet(small)
    assert estimated_bytes(d) < true_bytes(d, ROWS) and true_bytes(d, ROWS) > 10 * 1024 * 1024

    def broadcasts_d() -> bool:
        # two joins of static tables: the estimates multiply, so D is the side Spark would build
        joined = c.alias("c1").join(c.alias("c2"), "dk").join(d.alias("d"), "dk")
        return any("d_label" in side for side in _broadcast_sides(joined._jdf.queryExecution().executedPlan().toString()))

    assert broadcasts_d(), "the regression this guards against: D broadcast by its file size"
    factor = at_least_true_size(d, ROWS)
    d = session.read.parquet(big)  # a fresh plan: statistics are cached per plan
    assert factor > 1 and estimated_bytes(d) >= true_bytes(d, ROWS)
    assert not broadcasts_d()
    assert at_least_true_size(session.read.parquet(small), 2_000) == factor  # the factor never falls
    assert float(session.conf.get(FACTOR)) == factor


S = Source("S", (("cust", "INT"), ("v", "INT")), weighted=True)
C = Source("C", (("ck", "INT"), ("demo", "INT")), static=True)
D = Source("D", (("dk", "INT"), ("g", "INT"), ("label", "STRING")), static=True)


def test_q10_shape_with_a_compressible_dimension_equals_duckdb(spark, tmp_path):
    """Q10's shape: customers joined with their demographics, kept while they bought (EXISTS)."""
    rng = random.Random(10)
    c_rows = [(k, rng.randrange(0, 60_000)) for k in range(1, 9)] + [(9, None)]
    d_rows = [(k, k % 3, "same") for k in range(60_000)]
    sql = ("SELECT g, label, count(*) AS n FROM C, D WHERE C.demo = D.dk "
           "AND EXISTS (SELECT * FROM S WHERE S.cust = C.ck AND S.v > 0) GROUP BY g, label")
    batches = random_stream(rng, [S], batches=3, max_rows=8, min_rows=3)
    run = check_stream(spark, str(tmp_path), sql, [S, C, D], batches, tables={"C": c_rows, "D": d_rows})
    assert run.batches == 3
