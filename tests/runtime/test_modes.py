"""``mode(x, true)`` and ``mode() WITHIN GROUP (ORDER BY x [DESC])`` kept over the group's value
multiset with counts (``sql/bind_expr/modes.py``): after every batch, with deletions, NULLs (a group
of NULLs alone answers NULL) and ties (to the lowest value; DESC: the highest), the snapshot
equals DuckDB's answer on the prefix; ``mode(x)``, whose tie Spark breaks by the order it reads
rows in, is refused with the deterministic spelling."""

from __future__ import annotations

import pytest

import streamfold

from ..streams import Source, assert_refused, check_seeded

R = Source("R", (("a", "INT"), ("b", "INT"), ("s", "STRING"), ("c", "DOUBLE")), weighted=True)


def _mode(x: str, desc: bool = False, where: str = "TRUE") -> str:
    """DuckDB's most frequent non-NULL ``x`` per ``a``, ties to the lowest (``desc``: highest)."""
    return (f"(SELECT v FROM (SELECT {x} AS v, count(*) AS n FROM R r2 WHERE r2.a IS NOT DISTINCT FROM g.a "
            f"AND {x} IS NOT NULL AND ({where}) GROUP BY {x}) ORDER BY n DESC, v {'DESC' if desc else 'ASC'} LIMIT 1)")


QUERIES = [
    ("grouped", "SELECT a, mode(s, true) AS m, mode() WITHIN GROUP (ORDER BY b DESC) AS mb, "
     "mode() WITHIN GROUP (ORDER BY s) AS ms, count(*) AS n FROM R GROUP BY a",
     f"SELECT a, {_mode('s')}, {_mode('b', desc=True)}, {_mode('s')}, count(*) FROM R g GROUP BY a"),
    ("filtered", "SELECT a, mode(b, true) FILTER (WHERE c > 0) AS mf FROM R GROUP BY a",
     f"SELECT a, {_mode('b', where='c > 0')} FROM R g GROUP BY a"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle", QUERIES, ids=[q[0] for q in QUERIES])
def test_modes_equal_duckdb(spark, tmp_path, qid, sql, oracle):
    run = check_seeded(spark, str(tmp_path), f"mode-{qid}", sql, [R], oracle, batches=5)
    assert any(run.snapshots), "no group ever answered: the test would prove nothing"


@pytest.mark.spark
def test_a_mode_recomputed_is_sparks_own(spark, tmp_path):
    _, sql, oracle = QUERIES[0]
    check_seeded(spark, str(tmp_path), "mode-recomputed", sql, [R], oracle, strategy="recompute")


def test_a_mode_keeps_the_multiset_and_refuses_a_tie_spark_breaks_by_read_order():
    plan = streamfold.compile("SELECT a, mode(s, true) AS m, count(DISTINCT s) AS d FROM R GROUP BY a",
                              {"R": R.schema_sql()})
    assert len([s for s in plan.states if s.role.name == "MULTISET"]) == 1
    assert any("ties to the lowest value" in n for n in plan.notes), plan.notes
    assert_refused([("SELECT mode(s) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT mode(c, true) FROM R", "UNSUPPORTED_AGGREGATE"),
                    ("SELECT a, mode(s, true) OVER (PARTITION BY a) FROM R", "UNSUPPORTED_WINDOW")],
                   {"R": R.schema_sql()})
