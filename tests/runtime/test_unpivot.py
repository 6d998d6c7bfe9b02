"""``UNPIVOT`` as the exploded rows Spark's analyzer makes of it (``sql/bind/unpivot.py``): after
every batch, with deletions and NULLs, the snapshot equals DuckDB's UNION ALL of one SELECT per
column on the prefix — rows whose values are all NULL dropped unless INCLUDE NULLS, each value
column widened to its columns' common type — and a recompute, Spark's own UNPIVOT, gives the same;
output columns are named and ordered as Spark names them."""

from __future__ import annotations

import pytest

import streamfold

from ..streams import Source, assert_refused, check_seeded

R = Source("R", (("a", "INT"), ("b", "INT"), ("s", "STRING"), ("c", "DOUBLE")), weighted=True)


def _branches(ids: str, pairs: list[tuple[str, str]], keep: str, cast: str = "") -> str:
    """DuckDB's rows of an unpivot: one SELECT per (name, columns) pair, joined with UNION ALL."""
    selects = []
    for name, columns in pairs:
        values = ", ".join(f"{f'CAST({c} AS {cast})' if cast else c} AS {v}" for c, v in zip(columns.split(","), "vw"))
        where = f" WHERE {keep.format(*columns.split(','))}" if keep else ""
        selects.append(f"SELECT {ids}'{name}' AS k, {values} FROM R{where}")
    return " UNION ALL ".join(selects)


QUERIES = [
    ("one value column",
     "SELECT * FROM R UNPIVOT (v FOR k IN (a, b AS bee))",
     _branches("s, c, ", [("a", "a"), ("bee", "b")], "{0} IS NOT NULL"),
     ("s", "c", "k", "v")),
    ("widened, nulls kept, aggregated",
     "SELECT u.k, count(*) AS n, sum(u.v) AS total, count(u.v) AS present "
     "FROM R UNPIVOT INCLUDE NULLS (v FOR k IN (a, c)) AS u GROUP BY u.k",
     "SELECT k, count(*), sum(v), count(v) FROM ("
     + _branches("", [("a", "a"), ("c", "c")], "", "DOUBLE") + ") GROUP BY k",
     ("k", "n", "total", "present")),
    ("two value columns over a derived table",
     "SELECT * FROM (SELECT a, b, c, s FROM R WHERE s <> 'x') t "
     "UNPIVOT ((v, w) FOR k IN ((a, c) AS first, (b, c))) WHERE v IS NULL OR v > 1",
     "SELECT * FROM (" + _branches("s, ", [("first", "a,CAST(c AS DOUBLE)"), ("b_c", "b,CAST(c AS DOUBLE)")],
                                   "({0} IS NOT NULL OR {1} IS NOT NULL) AND s <> 'x'")
     + ") WHERE v IS NULL OR v > 1",
     ("s", "k", "v", "w")),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle,names", QUERIES, ids=[q[0] for q in QUERIES])
def test_unpivot_equals_duckdb(spark, tmp_path, qid, sql, oracle, names):
    assert streamfold.compile(sql, {"R": R.schema_sql()}).answer.output == names
    run = check_seeded(spark, str(tmp_path), f"unpivot-{qid}", sql, [R], oracle, batches=4)
    assert any(run.snapshots), "no row ever answered: the test would prove nothing"


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle,names", QUERIES[:2], ids=[q[0] for q in QUERIES[:2]])
def test_an_unpivot_recomputed_is_sparks_own(spark, tmp_path, qid, sql, oracle, names):
    check_seeded(spark, str(tmp_path), f"unpivot-recomputed-{qid}", sql, [R], oracle, batches=3, strategy="recompute")


def test_unpivots_spark_refuses_or_names_otherwise_are_refused():
    assert_refused([
        ("SELECT * FROM R UNPIVOT (v FOR k IN (a, s))", "TYPE_MISMATCH"),
        ("SELECT * FROM R UNPIVOT ((v, w) FOR k IN ((a, c), (b)))", "UNPIVOT_ARITY"),
        ("SELECT * FROM R UNPIVOT (v FOR k IN (a + 1, b))", "UNSUPPORTED_CLAUSE"),
    ], {"R": R.schema_sql()})
