"""Spark's exact percentiles — ``percentile(x, p)``, ``median(x)``, ``percentile_cont(p) WITHIN GROUP
(ORDER BY x)`` — kept as the group's multiset of values (``sql/bind_expr/percentiles.py``): after
every batch, with deletions, NULLs and ties, the snapshot equals DuckDB's ``quantile_cont`` on the
prefix (grouped, global, with FILTER, beside min over the same multiset, in HAVING, over a join,
under ROLLUP, an array of fractions), and Spark's own batch answer to the last bit."""

from __future__ import annotations

import random

import pytest

import streamfold

from ..streams import Source, assert_refused, check_seeded, check_stream
from ..strategies import random_stream

R = Source("R", (("a", "INT"), ("b", "INT"), ("m", "DECIMAL(12,2)"), ("c", "DOUBLE")), weighted=True)
S = Source("S", (("k", "INT"), ("v", "INT")), weighted=True)

QUERIES = [
    ("grouped",
     "SELECT a, median(c) AS md, percentile(b, 0.25) AS p25, percentile_cont(0.9) WITHIN GROUP (ORDER BY m) AS p90 "
     "FROM R GROUP BY a",
     "SELECT a, median(c), quantile_cont(b, 0.25), quantile_cont(CAST(m AS DOUBLE), 0.9) FROM R GROUP BY a", "R"),
    ("global-filter-min",
     "SELECT percentile(b, 0.5) FILTER (WHERE c > 0) AS p, min(b) AS mn, percentile(b, 0) AS p0, "
     "percentile(b, 1.0) AS p1, count(*) AS n FROM R",
     "SELECT quantile_cont(b, 0.5) FILTER (WHERE c > 0), min(b), quantile_cont(b, 0), quantile_cont(b, 1.0), count(*) "
     "FROM R", "R"),
    ("join-having",
     "SELECT s.v, median(r.b) AS md, count(*) AS n FROM R r JOIN S s ON r.a = s.k GROUP BY s.v HAVING median(r.b) >= 1",
     "SELECT s.v, median(CAST(r.b AS DOUBLE)), count(*) FROM R r JOIN S s ON r.a = s.k GROUP BY s.v "
     "HAVING median(CAST(r.b AS DOUBLE)) >= 1", "RS"),
    ("discrete",  # percentile_disc: a value of the group's, ascending and descending (DuckDB: negated)
     "SELECT a, percentile_disc(0.5) WITHIN GROUP (ORDER BY b) AS d50, percentile_disc(0.3) WITHIN GROUP "
     "(ORDER BY m DESC) AS d30, percentile_disc(0.9) WITHIN GROUP (ORDER BY c) FILTER (WHERE b > 0) AS d90 "
     "FROM R GROUP BY a",
     "SELECT a, quantile_disc(b, 0.5), -quantile_disc(-m, 0.3), quantile_disc(c, 0.9) FILTER (WHERE b > 0) "
     "FROM R GROUP BY a", "R"),
    ("array-of-fractions",  # Spark's ARRAY<DOUBLE>, NULL (not an array of NULLs) for a group without a value
     "SELECT a, percentile(b, array(0.25, 0.5, 0.75)) AS qs, percentile(m, array(0.1)) FILTER (WHERE c > 0) AS one "
     "FROM R GROUP BY a",
     "SELECT a, CASE WHEN count(b) > 0 THEN [quantile_cont(b, 0.25), quantile_cont(b, 0.5), quantile_cont(b, 0.75)] "
     "END, CASE WHEN count(m) FILTER (WHERE c > 0) > 0 THEN [quantile_cont(CAST(m AS DOUBLE), 0.1) "
     "FILTER (WHERE c > 0)] END FROM R GROUP BY a", "R"),
    ("rollup",
     "SELECT a, b, median(c) AS md, percentile(m, 0.75) AS p FROM R GROUP BY ROLLUP(a, b)",
     "SELECT a, b, median(c), quantile_cont(CAST(m AS DOUBLE), 0.75) FROM R GROUP BY ROLLUP(a, b)", "R"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle,uses", QUERIES, ids=[q[0] for q in QUERIES])
def test_percentiles_equal_duckdb(spark, tmp_path, qid, sql, oracle, uses):
    sources = [s for s in (R, S) if s.name in uses]
    check_seeded(spark, str(tmp_path), qid, sql, sources, oracle)


@pytest.mark.spark
@pytest.mark.parametrize("weighted,strategy", [(False, "incremental"), (True, "recompute")],
                         ids=["inserts-only", "recomputed"])
def test_percentiles_of_inserts_only_and_recomputed_equal_duckdb(spark, tmp_path, weighted, strategy):
    """Inserts alone (min and max keep one value then, a percentile still its multiset), and the
    batch text Spark recomputes (percentile_cont … WITHIN GROUP as written)."""
    qid, sql, oracle, _ = QUERIES[0]
    src = Source("R", R.columns, weighted=weighted)
    batches = random_stream(random.Random(strategy), [src], batches=3, max_rows=10, min_rows=2)
    run = check_stream(spark, str(tmp_path), sql, [src], batches, oracle_sql=oracle, strategy=strategy)
    assert run.batches == 3


@pytest.mark.spark
def test_a_discrete_percentile_recomputed_is_sparks_exact_one(spark, tmp_path):
    """The batch text keeps percentile_disc … WITHIN GROUP (ORDER BY x DESC): sqlglot's Spark
    writer would make it percentile_approx(x, p), dropping the DESC."""
    _, sql, oracle, _ = next(q for q in QUERIES if q[0] == "discrete")
    check_seeded(spark, str(tmp_path), "discrete-recomputed", sql, [R], oracle, strategy="recompute")


@pytest.mark.spark
def test_the_answer_is_spark_batch_percentile_to_the_last_bit(spark, tmp_path):
    """Values chosen so that interpolation rounds (thirds, tenths): after deletions the maintained
    doubles equal Spark's batch query's exactly, not within a tolerance."""
    src = Source("T", (("g", "INT"), ("x", "DOUBLE")), weighted=True)
    rows = [(g, x / 3 + g / 10, 1) for g in range(3) for x in range(7)] + [(1, None, 1), (2, 0.1, 2)]
    gone = [(0, 2 / 3, -1), (2, 0.1, -1), (1, 1 / 3 + 0.1, -1)]
    sql = "SELECT g, median(x) AS md, percentile(x, 0.3) AS p3, percentile(x, 0.85) AS p85 FROM T GROUP BY g"
    oracle = "SELECT g, median(x), quantile_cont(x, 0.3), quantile_cont(x, 0.85) FROM T GROUP BY g"
    run = check_stream(spark, str(tmp_path), sql, [src], [{"T": rows}, {"T": gone}], oracle_sql=oracle)
    live: list[tuple] = []
    for g, x, w in rows + gone:
        if w > 0:
            live += [(g, x)] * w
        else:
            live.remove((g, x))
    values = ", ".join(f"({g}, {'NULL' if x is None else repr(x) + 'D'})" for g, x in live)
    batch = spark.sql(sql.replace("FROM T", f"FROM VALUES {values} AS T(g, x)")).collect()
    assert sorted(run.snapshots[-1]) == sorted(tuple(r) for r in batch)


@pytest.mark.spark
def test_a_discrete_percentile_is_sparks_batch_answer_at_every_boundary(spark, tmp_path):
    """Groups of 1 to 30 rows with ties and fractions whose p·n falls on or just off a whole
    number (0.1 of 30, a third, 0.6 of 5): after deletions each maintained value equals Spark's
    own batch percentile_disc, both orders."""
    src = Source("T", (("g", "INT"), ("x", "INT")), weighted=True)
    rows = [(g, (g * 7 + i * 3) % 11, 1) for g in range(1, 31) for i in range(g)] + [(4, None, 1)]
    gone = [(g, (g * 7) % 11, -1) for g in range(3, 31, 4)]
    fractions = (0.0, 0.1, 1 / 3, 0.6, 0.75, 1.0)
    calls = ", ".join(f"percentile_disc({p!r}) WITHIN GROUP (ORDER BY x{o}) AS p{i}{'d' if o else ''}"
                      for i, p in enumerate(fractions) for o in ("", " DESC"))
    sql = f"SELECT g, {calls} FROM T GROUP BY g"
    oracle = "SELECT g, " + ", ".join(f"quantile_disc(x, {p!r}), -quantile_disc(-x, {p!r})" for p in fractions) + \
        " FROM T GROUP BY g"
    run = check_stream(spark, str(tmp_path), sql, [src], [{"T": rows}, {"T": gone}], oracle_sql=oracle)
    live: list[tuple] = []
    for g, x, w in rows + gone:
        if w > 0:
            live.append((g, x))
        else:
            live.remove((g, x))
    values = ", ".join(f"({g}, {'NULL' if x is None else x})" for g, x in live)
    batch = spark.sql(sql.replace("FROM T", f"FROM VALUES {values} AS T(g, x)")).collect()
    assert sorted(run.snapshots[-1]) == sorted(tuple(r) for r in batch)


def test_percentiles_are_one_multiset_and_refuse_what_spark_would_answer_otherwise():
    plan = streamfold.compile("SELECT a, median(b) AS md, percentile(b, 0.9) AS p, min(b) AS mn FROM R GROUP BY a",
                              {"R": R.schema_sql()})
    multisets = [s for s in plan.states if s.role.name == "MULTISET"]
    assert len(multisets) == 1  # median, the 90th percentile and min read the same values
    text = streamfold.explain("SELECT a, median(b) AS md FROM R GROUP BY a", {"R": R.schema_sql()})
    assert "percentile(" in text and "frequency" in text
    # the text a recompute runs: sqlglot's Spark dialect would write percentile_approx (approximate)
    from streamfold.sql.parse import parse_query

    batch = parse_query("SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY m) FROM R").batch_sql()
    assert "PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY m)" in batch and "APPROX" not in batch
    batch = parse_query("SELECT percentile_disc(0.9) WITHIN GROUP (ORDER BY m DESC) FROM R").batch_sql()
    assert "PERCENTILE_DISC(0.9) WITHIN GROUP (ORDER BY m DESC)" in batch and "APPROX" not in batch
    for fraction in ("0.5D", "1", "0", "5e-1"):  # Spark's spellings of a constant fraction
        streamfold.compile(f"SELECT percentile(b, {fraction}) FROM R", {"R": R.schema_sql()})
    assert_refused([("SELECT percentile(b, 1.5) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT percentile(b, a) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT percentile(b, array()) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT percentile(b, array(0.25, 1.5)) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT percentile(b, 0.5, a) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT percentile(DISTINCT b, 0.5) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY b DESC) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT percentile_disc(array(0.5, 0.6)) WITHIN GROUP (ORDER BY b) FROM R",
                     "UNSUPPORTED_AGGREGATE"),
                    ("SELECT percentile_approx(b, 0.5) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT median(CAST(a AS STRING)) FROM R", "TYPE_MISMATCH"),
                    ("SELECT a FROM R WHERE median(b) > 0", "AGGREGATE_NOT_ALLOWED"),
                    ("SELECT sum(median(b)) FROM R", "NESTED_AGGREGATE")],
                   {"R": R.schema_sql()}, unhinted=("NESTED_AGGREGATE",))
