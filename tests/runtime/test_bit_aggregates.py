"""``bit_and``, ``bit_or`` and ``bit_xor`` of integers, kept over the values' multiset
(``plan/aggregates.py``): after every batch, with deletions — a value deleted an even number of
times cancels out of ``bit_xor`` — negative values and NULLs, the snapshot equals DuckDB's."""

from __future__ import annotations

import pytest

from ..streams import Source, assert_refused, check_seeded

R = Source("R", (("k", "INT"), ("a", "INT"), ("b", "BIGINT"), ("s", "STRING")), weighted=True)

CASES = [
    ("grouped",
     "SELECT k, bit_and(a) AS ba, bit_or(b) AS bo, bit_xor(b) AS bx, bit_xor(a) AS ax FROM R GROUP BY k",
     "SELECT k, bit_and(a), bit_or(b), bit_xor(b), bit_xor(a) FROM R GROUP BY k"),
    ("filtered and global",
     "SELECT bit_xor(b) FILTER (WHERE k > 1) AS bx, bit_or(a) FILTER (WHERE s = 'a') AS ao, count(*) AS n FROM R",
     "SELECT bit_xor(b) FILTER (WHERE k > 1), bit_or(a) FILTER (WHERE s = 'a'), count(*) FROM R"),
    ("rolled up",
     "SELECT k, s, bit_and(b) AS ba, bit_xor(a) AS ax FROM R GROUP BY ROLLUP (k, s)",
     "SELECT k, s, bit_and(b), bit_xor(a) FROM R GROUP BY ROLLUP (k, s)"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle", CASES, ids=[c[0] for c in CASES])
def test_bit_aggregates_equal_duckdb(spark, tmp_path, qid, sql, oracle):
    run = check_seeded(spark, str(tmp_path), f"bits-{qid}", sql, [R], oracle, batches=5)
    assert any(run.snapshots), "no row ever answered: the test would prove nothing"


def test_bit_aggregates_take_integers():
    assert_refused([("SELECT bit_and(s) FROM R", "TYPE_MISMATCH")], {"R": R.schema_sql()})
