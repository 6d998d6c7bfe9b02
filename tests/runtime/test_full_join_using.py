"""`FULL [OUTER] JOIN … USING (k)`: the USING column is the side that has the row — Spark's
``coalesce(left.k, right.k)``, computed above the join (``sql/bind/from_clause.py``) — and is
one column in ``*``. After every batch, with deletions and NULL keys (which match nothing and
keep their row on their own side), the snapshot equals DuckDB's answer on the prefix."""

from __future__ import annotations

import random

import pytest

from ..streams import Source, check_stream
from ..strategies import random_stream

pytestmark = [pytest.mark.spark]

R = Source("R", (("a", "INT"), ("b", "INT")), weighted=True)
U = Source("U", (("a", "BIGINT"), ("c", "INT")), weighted=True)
V = Source("V", (("a", "INT"), ("d", "STRING")), static=True)

QUERIES = [
    ("star", "SELECT * FROM R FULL JOIN U USING (a)", None),
    ("grouped", "SELECT a, count(*) AS n, sum(b) AS sb, sum(c) AS sc FROM R FULL OUTER JOIN U USING (a) "
                "WHERE a IS NULL OR a > 0 GROUP BY a", None),
    ("then-inner", "SELECT a, b, c, d FROM R FULL JOIN U USING (a) JOIN V USING (a)",
     "SELECT coalesce(R.a, U.a) AS a, b, c, d FROM R FULL JOIN U ON R.a = U.a JOIN V ON coalesce(R.a, U.a) = V.a"),
]


@pytest.mark.parametrize("qid,sql,oracle", QUERIES, ids=[q[0] for q in QUERIES])
def test_full_join_using_equals_duckdb(spark, tmp_path, qid, sql, oracle):
    batches = random_stream(random.Random(qid), [R, U], batches=4, max_rows=8, min_rows=1)
    tables = {"V": [(k, f"v{k}") for k in range(-1, 4)]}
    sources = [R, U, V] if "V" in sql else [R, U]
    run = check_stream(spark, str(tmp_path), sql, sources, batches, tables=tables, oracle_sql=oracle)
    assert run.batches == 4
