"""Time windows (``GROUP BY window(ts, size[, slide[, start]])``, issue 56): after every batch —
with deletions and event times out of order across batches — the snapshot equals DuckDB's answer
on the prefix, DuckDB computing Spark's windows by arithmetic on epoch microseconds. That
arithmetic is itself checked against Spark's own batch query (``test_oracle_is_sparks_window``),
so the oracle is Spark's semantics and not a copy of the compiler's."""

from __future__ import annotations

import math
import random

import pytest

from streamfold.verify import compare, duckdb_answer

from ..streams import Source, check_stream
from ..strategies import random_rows, random_stream

pytestmark = [pytest.mark.spark]

R = Source("R", (("k", "INT"), ("ts", "TIMESTAMP"), ("v", "INT")), weighted=True)
S = Source("S", (("k", "INT"), ("w", "DOUBLE")), weighted=True)
MINUTE = 60_000_000


def windowed(source: str, size: int, slide: int | None = None, offset: int = 0, ts: str = "ts") -> str:
    """``source``'s rows, each once per window holding its ``ts`` (Spark's rule), with the
    window's start and end as ``_ws``/``_we``: DuckDB's text for what ``window(ts, …)`` does."""
    slide = slide or size
    t = f"epoch_us({ts})"
    start = f"{t} - (({t} - {offset}) % {slide} + {slide}) % {slide} - _n * {slide}"
    return (f"(SELECT *, make_timestamp(_s) AS _ws, make_timestamp(_s + {size}) AS _we FROM "
            f"(SELECT *, {start} AS _s FROM {source}, range({math.ceil(size / slide)}) AS _r(_n) "
            f"WHERE {ts} IS NOT NULL) AS _x WHERE _s <= {t} AND {t} < _s + {size})")


# (id, query, DuckDB's text for it, sources)
QUERIES = [
    ("tumbling-struct",
     "SELECT window, k, count(*) AS n, sum(v) AS t, max(v) AS m FROM R GROUP BY window(ts, '10 minutes'), k",
     "SELECT {'start': _ws, 'end': _we} AS window, k, count(*), sum(v), max(v) FROM "
     + windowed("R", 10 * MINUTE) + " AS w GROUP BY _ws, _we, k", [R]),
    ("sliding-fields",
     "SELECT window.start, window.end, count(*) AS n, avg(v) FROM R WHERE v > 0 "
     "GROUP BY window(ts, '10 minutes', '5 minutes')",
     "SELECT _ws, _we, count(*), avg(v) FROM " + windowed("(SELECT * FROM R WHERE v > 0)", 10 * MINUTE, 5 * MINUTE)
     + " AS w GROUP BY _ws, _we", [R]),
    ("sliding-uneven-offset",
     "SELECT window(ts, '10 minutes', '4 minutes', '1 minute') AS w, count(DISTINCT k) AS d, min(v) FROM R GROUP BY 1",
     "SELECT {'start': _ws, 'end': _we}, count(DISTINCT k), min(v) FROM "
     + windowed("R", 10 * MINUTE, 4 * MINUTE, MINUTE) + " AS w GROUP BY _ws, _we", [R]),
    ("row-wise-window",
     "SELECT k, v, window(ts, '1 hour').start AS hour FROM R",
     "SELECT k, v, _ws FROM " + windowed("R", 60 * MINUTE) + " AS w", [R]),
    ("windows-of-windows",
     "SELECT n, count(*) AS windows FROM (SELECT window, count(*) AS n FROM R GROUP BY window(ts, '5 minutes')) g "
     "GROUP BY n",
     "SELECT n, count(*) FROM (SELECT _ws, count(*) AS n FROM " + windowed("R", 5 * MINUTE)
     + " AS w GROUP BY _ws) g GROUP BY n", [R]),
    ("join-then-window",
     "SELECT window.start AS s, S.k, sum(S.w) AS total, count(*) AS n FROM R JOIN S ON R.k = S.k "
     "GROUP BY window(R.ts, '10 minutes', '5 minutes'), S.k HAVING count(*) > 1",
     "SELECT _ws, k2, sum(w), count(*) FROM " + windowed(
         "(SELECT R.ts, S.k AS k2, S.w FROM R JOIN S ON R.k = S.k)", 10 * MINUTE, 5 * MINUTE)
     + " AS x GROUP BY _ws, k2 HAVING count(*) > 1", [R, S]),
]


@pytest.mark.parametrize("qid,sql,oracle,sources", QUERIES, ids=[q[0] for q in QUERIES])
def test_windows_equal_duckdb_with_deletions(spark, tmp_path, qid, sql, oracle, sources):
    rng = random.Random(f"windows-{qid}")
    batches = random_stream(rng, sources, batches=3, max_rows=10, min_rows=3)
    run = check_stream(spark, str(tmp_path), sql, sources, batches, oracle_sql=oracle)
    assert run.batches == 3
    assert any(run.snapshots), "the windows never held a row: the test would prove nothing"


def test_windows_inserts_only(spark, tmp_path):
    """An insert-only source: no _weight, the same windows."""
    r = Source("R", R.columns)
    sql, oracle = QUERIES[1][1], QUERIES[1][2]
    batches = random_stream(random.Random("windows-inserts"), [r], batches=3, max_rows=10, min_rows=3)
    check_stream(spark, str(tmp_path), sql, [r], batches, oracle_sql=oracle)


@pytest.mark.parametrize("qid,sql,oracle,sources", QUERIES, ids=[q[0] for q in QUERIES])
def test_oracle_is_sparks_window(spark, qid, sql, oracle, sources):
    """DuckDB's text gives what Spark's batch query gives on the same rows (Spark's own
    ``window``, NULL times, times before 1970 and on window boundaries included)."""
    assert_oracle_is_sparks(spark, random.Random(f"oracle-{qid}"), sql, oracle, sources, 20, 10)


def assert_oracle_is_sparks(spark, rng: random.Random, sql: str, oracle: str, sources: list[Source], most: int,
                            least: int) -> None:
    """DuckDB's ``oracle`` and Spark's own ``sql`` give the same rows over random rows of
    ``sources`` (``least`` to ``most`` each)."""
    tables = {}
    for src in sources:
        table = src.table([r + (1,) for r in random_rows(rng, Source(src.name, src.columns), most, least)])
        tables[src.name] = table
        schema = ", ".join(f"{c} {t}" for c, t in src.columns)
        spark.createDataFrame(table.drop_columns(["_weight"]).to_pylist(), schema=schema).createOrReplaceTempView(src.name)
    expected = duckdb_answer(sql, {n: [t] for n, t in tables.items()}, duckdb_sql=oracle)
    got = [tuple(v.asDict() if hasattr(v, "asDict") else v for v in r) for r in spark.sql(sql).collect()]
    assert expected, "no rows: the comparison would prove nothing"
    result = compare(got, expected)
    assert result.matches, result.detail


def test_top_windows_in_order(spark, tmp_path):
    """ORDER BY … LIMIT over windows: the busiest two, in order, after every batch."""
    sql = ("SELECT window.start AS s, count(*) AS n FROM R GROUP BY window(ts, '10 minutes') "
           "ORDER BY n DESC, s LIMIT 2")
    oracle = ("SELECT _ws, count(*) AS n FROM " + windowed("R", 10 * MINUTE) + " AS w GROUP BY _ws "
              "ORDER BY n DESC, _ws LIMIT 2")
    batches = random_stream(random.Random("top-windows"), [R], batches=3, max_rows=10, min_rows=3)
    check_stream(spark, str(tmp_path), sql, [R], batches, ordered=True, oracle_sql=oracle)
