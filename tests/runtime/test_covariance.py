"""``covar_pop``, ``covar_samp``, ``corr`` and ``regr_*`` kept as counts and sums (``sql/bind_expr/covariance.py``):
after every batch, with deletions, NULLs on either side and groups whose one side is constant, the
snapshot equals DuckDB's answer on the prefix — grouped, global, with FILTER, in HAVING, under
ROLLUP and over a window. Spark answers NULL where a correlation or a slope divides by zero (one
row, a constant side); DuckDB says NaN there, so the oracle turns its NaN into NULL."""

from __future__ import annotations

import pytest

import streamfold

from streamfold.verify import compare

from ..streams import Source, assert_refused, check_seeded, check_stream

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
    ("regressions",
     "SELECT a, regr_count(b, x) AS n, regr_avgx(b, m) AS ax, regr_avgy(c, b) AS ay, regr_sxx(b, x) AS sxx, "
     "regr_syy(m, b) AS syy, regr_sxy(x, m) AS sxy, regr_slope(b, x) AS sl, regr_intercept(x, m) AS ic, "
     "regr_r2(b, x) AS r2 FROM R GROUP BY a",
     f"SELECT a, regr_count(b, x) AS n, regr_avgx(b, m) AS ax, regr_avgy(c, b) AS ay, regr_sxx(b, x) AS sxx, "
     f"regr_syy(m, b) AS syy, regr_sxy(x, m) AS sxy, {_nan_null('regr_slope(b, x)')} AS sl, "
     f"{_nan_null('regr_intercept(x, m)')} AS ic, {_nan_null('regr_r2(b, x)')} AS r2 FROM R GROUP BY a"),
    ("rollup", "SELECT a, b, corr(x, m) AS r, regr_slope(m, b) AS sl, count(*) AS n FROM R GROUP BY ROLLUP(a, b)",
     f"SELECT a, b, {_nan_null('corr(x, m)')} AS r, {_nan_null('regr_slope(m, b)')} AS sl, count(*) AS n FROM R "
     "GROUP BY ROLLUP(a, b)"),
    ("over", "SELECT a, b, x, covar_pop(b, x) OVER (PARTITION BY a) AS cp, corr(x, b) OVER (PARTITION BY a) AS r, "
             "regr_avgx(b, m) OVER (PARTITION BY a) AS ax FROM R",
     f"SELECT a, b, x, covar_pop(b, x) OVER (PARTITION BY a) AS cp, {_nan_null('corr(x, b) OVER (PARTITION BY a)')} AS r, "
     "regr_avgx(b, m) OVER (PARTITION BY a) AS ax FROM R"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle", QUERIES, ids=[q[0] for q in QUERIES])
def test_covariances_equal_duckdb(spark, tmp_path, qid, sql, oracle):
    check_seeded(spark, str(tmp_path), qid, sql, [R], oracle)


ALL = ("covar_pop(b, x), covar_samp(b, x), corr(b, x), regr_count(b, x), regr_avgx(b, x), regr_avgy(b, x), "
       "regr_sxx(b, x), regr_syy(b, x), regr_sxy(b, x), regr_slope(b, x), regr_intercept(b, x), regr_r2(b, x)")


@pytest.mark.spark
def test_one_row_and_a_constant_side_answer_what_spark_answers(spark, tmp_path):
    """Spark's own batch answer is the reference where DuckDB's differs (NaN for Spark's NULL):
    one pair, a constant x, a constant y, a NULL on one side, none at all."""
    s = Source("S", (("g", "INT"), ("b", "INT"), ("x", "INT")))
    rows = [(1, 5, 1), (1, 6, 1), (1, 9, 1), (2, 3, 4), (3, 1, 1), (3, 2, 3), (3, None, 9), (4, 7, 1), (4, 7, 2),
            (5, None, 1), (6, 2, 1), (6, 3, 2), (6, 7, 4)]
    sql = f"SELECT g, {ALL} FROM S GROUP BY g"
    run = check_stream(spark, str(tmp_path), sql, [s], [{"S": rows}],
                       oracle_sql=f"SELECT g, covar_pop(b, x), covar_samp(b, x), {_nan_null('corr(b, x)')}, "
                                  "regr_count(b, x), regr_avgx(b, x), regr_avgy(b, x), regr_sxx(b, x), regr_syy(b, x), "
                                  f"regr_sxy(b, x), {_nan_null('regr_slope(b, x)')}, regr_intercept(b, x), "
                                  "regr_r2(b, x) FROM S GROUP BY g")
    values = ", ".join(str(r).replace("None", "NULL") for r in rows)
    spark_answer = spark.sql(f"SELECT g, {ALL} FROM VALUES {values} AS S(g, b, x) GROUP BY g ORDER BY g").collect()
    assert compare(sorted(run.snapshots[0]), [tuple(r) for r in spark_answer], positional=True).matches
    by_group = {r[0]: r for r in run.snapshots[0]}
    assert by_group[1][1:4] == (0.0, 0.0, None) and by_group[1][10:] == (None, None, None)  # x constant
    assert by_group[2][1:4] == (0.0, None, None)  # one pair
    assert by_group[4][10:] == (0.0, 7.0, 1.0)  # y constant: a flat line that fits exactly


def test_covariances_are_sums_and_refuse_what_would_round():
    plan = streamfold.compile("SELECT a, corr(b, x) AS r, covar_samp(m, b) AS c FROM R GROUP BY a",
                              {"R": R.schema_sql()})
    assert all(c.monoid.name == "SUM" for s in plan.states for c in s.columns)  # no multiset of values
    assert_refused([("SELECT corr(c, b) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT covar_pop(CAST(m AS DECIMAL(20, 6)), b) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT corr(CAST(a AS STRING), b) FROM R", "TYPE_MISMATCH"),
                    ("SELECT a FROM R WHERE corr(a, b) > 0", "AGGREGATE_NOT_ALLOWED"),
                    ("SELECT sum(corr(a, b)) FROM R", "NESTED_AGGREGATE"),
                    ("SELECT regr_slope(b) FROM R", "WRONG_ARGUMENTS"),
                    ("SELECT regr_r2(b) OVER (PARTITION BY a) FROM R", "WRONG_ARGUMENTS"),
                    ("SELECT regr_sxx(c, b) FROM R", "UNSUPPORTED_AGGREGATE")],
                   {"R": R.schema_sql()})
    # the hint's spelling compiles; a count or an average of a DOUBLE side needs no hint
    streamfold.compile("SELECT corr(CAST(c AS DECIMAL(18, 3)), b), regr_count(c, b), regr_avgy(c, b) FROM R",
                       {"R": R.schema_sql()})
