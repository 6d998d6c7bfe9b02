"""``covar_pop``, ``covar_samp`` and ``corr`` kept as counts and sums (``sql/bind_expr/covariance.py``):
after every batch, with deletions, NULLs on either side and groups whose one side is constant, the
snapshot equals DuckDB's answer on the prefix — grouped, global, with FILTER, in HAVING and over a
window. Spark answers NULL where a correlation divides by zero (one row, a constant side); DuckDB
says NaN there, so the oracle turns its NaN into NULL."""

from __future__ import annotations

import random

import pytest

import streamfold

from ..streams import Source, check_stream
from ..strategies import random_stream

R = Source("R", (("a", "INT"), ("b", "INT"), ("x", "BIGINT"), ("m", "DECIMAL(12,2)"), ("c", "DOUBLE")), weighted=True)


def _nan_null(text: str) -> str:
    return f"nullif({text}, 'NaN'::DOUBLE)"


QUERIES = [
    ("grouped-integers",
     "SELECT a, covar_pop(b, x) AS cp, covar_samp(x, b) AS cs, corr(b, x) AS r, count(*) AS n FROM R GROUP BY a",
     f"SELECT a, covar_pop(b, x) AS cp, covar_samp(x, b) AS cs, {_nan_null('corr(b, x)')} AS r, count(*) AS n "
     "FROM R GROUP BY a"),
    ("global-decimals-filter",
     "SELECT corr(m, b) AS r, covar_samp(m, x) FILTER (WHERE a > 1) AS cs, covar_pop(m, m) AS vp FROM R",
     f"SELECT {_nan_null('corr(m, b)')} AS r, covar_samp(m, x) FILTER (WHERE a > 1) AS cs, covar_pop(m, m) AS vp FROM R"),
    ("in-having", "SELECT a, count(*) AS n FROM R GROUP BY a HAVING corr(b, x) > 0 OR covar_pop(b, m) < 0",
     f"SELECT a, count(*) AS n FROM R GROUP BY a HAVING {_nan_null('corr(b, x)')} > 0 OR covar_pop(b, m) < 0"),
    ("over", "SELECT a, b, x, covar_pop(b, x) OVER (PARTITION BY a) AS cp, corr(x, b) OVER (PARTITION BY a) AS r FROM R",
     f"SELECT a, b, x, covar_pop(b, x) OVER (PARTITION BY a) AS cp, {_nan_null('corr(x, b) OVER (PARTITION BY a)')} AS r "
     "FROM R"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle", QUERIES, ids=[q[0] for q in QUERIES])
def test_covariances_equal_duckdb(spark, tmp_path, qid, sql, oracle):
    batches = random_stream(random.Random(qid), [R], batches=4, max_rows=10, min_rows=2)
    run = check_stream(spark, str(tmp_path), sql, [R], batches, oracle_sql=oracle)
    assert run.batches == 4


@pytest.mark.spark
def test_a_correlation_with_a_constant_side_or_one_row_is_null_as_spark_says(spark, tmp_path):
    """Spark's own answers, by hand: NULL for one pair and for a constant side, the covariances 0."""
    s = Source("S", (("g", "INT"), ("b", "INT"), ("x", "INT")))
    batches = [{"S": [(1, 5, 1), (1, 5, 2), (1, 5, 7), (2, 3, 4), (3, 1, 1), (3, 2, 3), (3, None, 9)]}]
    sql = "SELECT g, covar_pop(b, x), covar_samp(b, x), corr(b, x) FROM S GROUP BY g"
    oracle = f"SELECT g, covar_pop(b, x), covar_samp(b, x), {_nan_null('corr(b, x)')} FROM S GROUP BY g"
    run = check_stream(spark, str(tmp_path), sql, [s], batches, oracle_sql=oracle)
    assert sorted(run.snapshots[0]) == [(1, 0.0, 0.0, None), (2, 0.0, None, None), (3, 0.5, 1.0, 1.0)]
    assert spark.sql("SELECT g, covar_pop(b, x), covar_samp(b, x), corr(b, x) FROM VALUES "
                     "(1, 5, 1), (1, 5, 2), (1, 5, 7), (2, 3, 4), (3, 1, 1), (3, 2, 3), (3, NULL, 9) AS S(g, b, x) "
                     "GROUP BY g ORDER BY g").collect() == [tuple(r) for r in sorted(run.snapshots[0])]


def test_covariances_are_sums_and_refuse_what_would_round():
    plan = streamfold.compile("SELECT a, corr(b, x) AS r, covar_samp(m, b) AS c FROM R GROUP BY a",
                              {"R": R.schema_sql()})
    assert all(c.monoid.name == "SUM" for s in plan.states for c in s.columns)  # no multiset of values
    for sql, code in [("SELECT corr(c, b) FROM R", "UNSUPPORTED_AGGREGATE"),
                      ("SELECT covar_pop(CAST(m AS DECIMAL(20, 6)), b) FROM R", "UNSUPPORTED_AGGREGATE"),
                      ("SELECT corr(CAST(a AS STRING), b) FROM R", "TYPE_MISMATCH"),
                      ("SELECT a FROM R WHERE corr(a, b) > 0", "AGGREGATE_NOT_ALLOWED"),
                      ("SELECT sum(corr(a, b)) FROM R", "NESTED_AGGREGATE")]:
        with pytest.raises(streamfold.StreamfoldError) as e:
            streamfold.compile(sql, {"R": R.schema_sql()})
        assert e.value.code == code, sql
        assert e.value.hint, sql
    # the hint's spelling compiles
    streamfold.compile("SELECT corr(CAST(c AS DECIMAL(18, 3)), b) FROM R", {"R": R.schema_sql()})
