"""Decimal answers carry Spark's digits (issue 59, item 4).

The states keep a decimal sum wider than Spark's ``sum`` type (so many batches merge without
overflow); the answer casts each aggregate back to the type Spark gives it before any
arithmetic over it, so a ratio of two sums — ``decimal(17,2) / decimal(17,2)``, which Spark types
``decimal(37,20)`` — keeps its 20 digits instead of the 6 that precision-loss leaves to
``decimal(38,2) / decimal(38,2)``. Checked after every batch, with deletions, by exact string
equality with Spark's own batch query over the prefix, and against DuckDB (whose decimal division
is a DOUBLE: equal within the comparator's tolerance).
"""

from __future__ import annotations

import decimal
import os
import random

import pytest

from streamfold.verify import recompute

from ..streams import Source, check_stream

pytestmark = [pytest.mark.spark]

COLS = (("k", "INT"), ("g", "INT"), ("b", "BOOLEAN"), ("p", "DECIMAL(7,2)"), ("q", "DECIMAL(15,4)"),
        ("r", "DECIMAL(30,8)"))
R = Source("R", COLS, weighted=True)
# values with every digit used, so a rounding anywhere shows
_P = [None, "0.01", "12345.67", "-99.99", "3.33", "7.00"]
_Q = [None, "0.0001", "12345678901.2345", "-1.0001", "2.5000"]
_R = [None, "0.00000001", "1234567890123456789012.12345678", "-3.14159265", "1.00000000"]

QUERIES = [
    # TPC-DS Q59's shape: ratios of sums of CASEs, over an aggregate joined with itself
    ("ratio-of-sums",
     "SELECT k, sum(CASE WHEN b THEN p ELSE NULL END) / sum(p) AS rp, sum(q) / sum(p) AS rq, sum(r) / sum(q) AS rr, "
     "sum(p) AS sp, sum(q) AS sq, sum(r) AS sr, avg(p) AS ap, avg(q) AS aq, avg(r) AS ar, avg(p) / sum(q) AS mix "
     "FROM R GROUP BY k"),
    # grouping sets: the coarser sets' sums and averages rolled up from the finest partials
    ("rollup", "SELECT k, g, grouping(g) AS gg, sum(p) AS sp, avg(q) AS aq, avg(r) AS ar, sum(p) / sum(q) AS rpq "
     "FROM R GROUP BY ROLLUP(k, g)"),
    ("global-ratio", "SELECT sum(p) / sum(q), avg(r) / avg(p), sum(p) * sum(q), sum(DISTINCT p) / count(*) FROM R"),
    ("nested-ratio",
     "WITH w AS (SELECT k, g, sum(CASE WHEN b THEN p ELSE NULL END) AS sun, sum(p) AS tot, avg(q) AS aq FROM R GROUP BY k, g) "
     "SELECT x.k, x.g, x.aq, y.tot, x.sun / y.sun AS r1, x.tot / y.tot AS r2, x.aq / y.tot AS r3 FROM w x JOIN w y "
     "ON x.k = y.k AND x.g = y.g - 1"),
]


def _rows(rng: random.Random, n: int) -> list[tuple]:
    def d(pool):
        v = rng.choice(pool)
        return None if v is None else decimal.Decimal(v)
    return [(rng.choice([None, 0, 1, 2]), rng.choice([0, 1, 2]), rng.choice([None, True, False]),
             d(_P), d(_Q), d(_R)) for _ in range(n)]


def _batches(rng: random.Random) -> list[dict[str, list[tuple]]]:
    live: list[tuple] = []
    batches = []
    for i in range(2):
        new = [r + (1,) for r in _rows(rng, 12 if i == 0 else 6)]
        gone = [r[:-1] + (-1,) for r in rng.sample(live, len(live) // 3)] if i == 1 else []
        for r in gone:
            live.remove(r[:-1] + (1,))
        live += new
        batches.append({"R": new + gone})
    return batches


def _text(row: tuple) -> tuple:
    """A row's values as text (pandas reads an INT column with a NULL as floats: back to int)."""
    return tuple(None if v is None else str(int(v)) if isinstance(v, float) else str(v) for v in row)


@pytest.mark.parametrize("qid,sql", QUERIES, ids=[q[0] for q in QUERIES])
def test_decimal_digits_equal_spark_batch(spark, tmp_path, qid, sql):
    batches = _batches(random.Random(qid))
    files: list[str] = []

    def check(batch: int, snapshot: list[tuple], prefix: dict) -> None:
        files.extend(sorted(os.path.join(tmp_path, "in", "R", f) for f in os.listdir(os.path.join(tmp_path, "in", "R"))
                            if f.endswith(".parquet") and os.path.join(tmp_path, "in", "R", f) not in files))
        expected = recompute(spark, sql, {"R": list(files)}).rows
        assert expected is not None
        assert sorted(map(_text, snapshot), key=repr) == sorted(map(_text, expected), key=repr), \
            f"batch {batch}: digits differ from Spark's batch query"

    run = check_stream(spark, str(tmp_path), sql, [R], batches, check=check)
    assert run.batches == 2
