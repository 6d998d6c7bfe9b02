"""``max_by(x, y)`` and ``min_by(x, y)`` kept as the extreme of the pair ``(y, x)``
(``sql/bind_expr/extremes.py``), and structs built in a query (``struct``, ``named_struct``) with
Spark's idiom ``max(struct(y, x)).x``: after every batch, with deletions, NULLs on either side, FILTER,
a join underneath and many ties (the test domains hold five values a column), the snapshot equals
DuckDB's answer on the prefix — the ``x`` of the row with the largest (smallest) non-NULL ``y``,
ties to the largest ``x`` (``min_by``: the smallest, NULL first)."""

from __future__ import annotations

import pytest

import streamfold

from ..streams import Source, assert_refused, check_seeded

R = Source("R", (("a", "INT"), ("b", "INT"), ("s", "STRING"), ("d", "DATE")), weighted=True)
T = Source("T", (("a", "INT"), ("c", "DOUBLE")), weighted=True)


def _by(x: str, y: str, largest: bool, where: str = "TRUE", rows: str = "R r2 WHERE r2.a IS NOT DISTINCT FROM g.a") -> str:
    """DuckDB's ``x`` of the row with the largest (``largest``) or smallest non-NULL ``y`` of the
    group, ties broken as the module docstring says."""
    order = f"{y} DESC, {x} DESC NULLS LAST" if largest else f"{y} ASC, {x} ASC NULLS FIRST"
    return f"(SELECT {x} FROM {rows} AND {y} IS NOT NULL AND ({where}) ORDER BY {order} LIMIT 1)"


QUERIES = [
    ("grouped", "SELECT a, max_by(s, b) AS ms, min_by(s, b) AS ns, max_by(b, d) AS md, count(*) AS n "
     "FROM R GROUP BY a",
     f"SELECT a, {_by('s', 'b', True)}, {_by('s', 'b', False)}, {_by('b', 'd', True)}, count(*) FROM R g GROUP BY a"),
    ("filtered", "SELECT a, min_by(d, s) FILTER (WHERE b > 1) AS nd FROM R GROUP BY a",
     f"SELECT a, {_by('d', 's', False, where='b > 1')} FROM R g GROUP BY a"),
    ("ungrouped", "SELECT max_by(s, d) AS latest, min_by(b + 1, s) AS first FROM R",
     f"SELECT {_by('s', 'd', True, rows='R r2 WHERE TRUE')}, {_by('b + 1', 's', False, rows='R r2 WHERE TRUE')} "
     "FROM (SELECT 1) g"),
    ("struct idiom", "SELECT a, max(struct(b, s)).s AS ms, min(named_struct('d', d, 'b', b)) AS nd FROM R GROUP BY a",
     "SELECT a, (SELECT s FROM R r2 WHERE r2.a IS NOT DISTINCT FROM g.a ORDER BY b DESC NULLS LAST, s DESC NULLS LAST "
     "LIMIT 1), (SELECT {'d': d, 'b': b} FROM R r2 WHERE r2.a IS NOT DISTINCT FROM g.a "
     "ORDER BY d ASC NULLS FIRST, b ASC NULLS FIRST LIMIT 1) FROM R g GROUP BY a"),
    ("struct column", "SELECT a, struct(b, s) AS p, named_struct('x', d, 'y', b + 1).y AS y FROM R WHERE b > 0",
     "SELECT a, {'b': b, 's': s}, b + 1 FROM R WHERE b > 0"),
    ("joined", "SELECT R.a, max_by(T.c, R.b) AS mc FROM R JOIN T ON R.a = T.a GROUP BY R.a",
     "WITH j AS (SELECT R.a, R.b, T.c FROM R JOIN T ON R.a = T.a) "
     f"SELECT a, {_by('c', 'b', True, rows='j r2 WHERE r2.a = g.a')} FROM j g GROUP BY a"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle", QUERIES, ids=[q[0] for q in QUERIES])
def test_extremes_equal_duckdb(spark, tmp_path, qid, sql, oracle):
    sources = [R, T] if " T " in sql + " " else [R]
    run = check_seeded(spark, str(tmp_path), f"by-{qid}", sql, sources, oracle, batches=5)
    assert any(any(v is not None for row in snap for v in row[1:]) for snap in run.snapshots), \
        "no extreme ever answered: the test would prove nothing"


@pytest.mark.spark
def test_an_extreme_recomputed_breaks_its_ties_the_same_way(spark, tmp_path):
    _, sql, oracle = QUERIES[0]
    check_seeded(spark, str(tmp_path), "by-recomputed", sql, [R], oracle, strategy="recompute")


def test_an_extreme_is_kept_as_a_partial_or_the_multiset_of_pairs():
    schemas = {"R": R.schema_sql()}
    grown = streamfold.compile("SELECT a, max_by(s, b) AS m FROM R GROUP BY a",
                               {"R": "a INT, b INT, s STRING"})
    assert not [s for s in grown.states if s.role.name == "MULTISET"], "an input that only grows needs no multiset"
    deleted = streamfold.compile("SELECT a, max_by(s, b) AS m FROM R GROUP BY a", schemas)
    assert len([s for s in deleted.states if s.role.name == "MULTISET"]) == 1
    text = streamfold.explain("SELECT a, max_by(s, b) AS m FROM R GROUP BY a", schemas)
    assert "max(struct(R.b, R.s)) is max_by(R.s, R.b): ties go to the largest value" in text, text
    assert_refused([("SELECT max_by(s, b, 2) FROM R", "WRONG_ARGUMENTS"),
                    ("SELECT max_by(DISTINCT s, b) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT a FROM R WHERE min_by(s, b) > 'a'", "AGGREGATE_NOT_ALLOWED"),
                    ("SELECT max_by(max(s), b) FROM R", "NESTED_AGGREGATE"),
                    ("SELECT a, max_by(s, b) OVER (PARTITION BY a) FROM R", "UNSUPPORTED_WINDOW")], schemas)
