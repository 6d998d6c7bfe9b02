"""OVER window functions, maintained exactly: for random data with NULLs and ties, random batch
splits and deletions, every snapshot equals DuckDB's answer on the prefix and every changes file
is the snapshots' difference — for each function, each frame kind, over rows and over an
aggregate, with and without PARTITION BY, and top-k per group."""

from __future__ import annotations

import random

import pytest

from streamfold.runtime import runs, shape
from streamfold.settings import env_name

from ..streams import Source, check_stream
from ..strategies import random_stream
from .test_differential import R_COLS

pytestmark = [pytest.mark.spark]

# (id, query, runs): R has a INT, b INT, c DOUBLE, s STRING, d DATE, small values with NULLs, so
# partitions and ORDER BY values tie. Where a function picks a row among ties the ORDER BY is
# made total over the columns the query reads (the planner refuses it otherwise). ``runs``: the
# window's state kept as a base and a tail from batch 1 on, its tail folded at that fraction (0:
# after every batch; 1000: never), or None (kept whole; its size keeps it so outside the tests).
WINDOW_QUERIES = [
    # every function over one PARTITION BY: ranking with ties, then the functions that pick a row
    # among ties over an ORDER BY made total (b, s), ROWS and RANGE frames, the whole partition
    ("partitioned-rows",
     "SELECT a, b, s, rank() OVER (PARTITION BY a ORDER BY b DESC) AS r, dense_rank() OVER (PARTITION BY a ORDER BY b) AS dr, "
     "percent_rank() OVER (PARTITION BY a ORDER BY b) AS pr, cume_dist() OVER (PARTITION BY a ORDER BY b NULLS LAST) AS cd, "
     "row_number() OVER (PARTITION BY a ORDER BY b, s) AS rn, ntile(3) OVER (PARTITION BY a ORDER BY b DESC, s) AS nt, "
     "lag(b) OVER (PARTITION BY a ORDER BY b, s) AS l1, lead(b, 2, -1) OVER (PARTITION BY a ORDER BY b, s) AS l2, "
     "first_value(s) OVER (PARTITION BY a ORDER BY b, s) AS fv, nth_value(b, 2) OVER (PARTITION BY a ORDER BY b, s) AS n2, "
     "last_value(s) OVER (PARTITION BY a ORDER BY b, s ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING) AS lv, "
     "sum(b) OVER (PARTITION BY a ORDER BY b, s ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS s3, "
     "count(b) OVER (PARTITION BY a ORDER BY b, s ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS cb, "
     "max(s) OVER (PARTITION BY a ORDER BY b, s ROWS BETWEEN CURRENT ROW AND 2 FOLLOWING) AS mx, "
     "sum(b) OVER (PARTITION BY a ORDER BY b) AS running, "
     "min(b) OVER (PARTITION BY a ORDER BY b RANGE BETWEEN 1 PRECEDING AND 2 FOLLOWING) AS mn, "
     "avg(b) OVER (PARTITION BY a) AS av, "
     "count(*) OVER (PARTITION BY a ORDER BY b DESC RANGE BETWEEN CURRENT ROW AND UNBOUNDED FOLLOWING) AS n FROM R",
     0.0),
    # no PARTITION BY: one partition, recomputed whole
    ("one-partition", "SELECT s, b, sum(b) OVER (ORDER BY b RANGE BETWEEN 2 PRECEDING AND CURRENT ROW) AS t, "
     "rank() OVER (ORDER BY s) AS r FROM R", None),
    ("over-aggregate-global", "SELECT s, sum(b) AS t, rank() OVER (ORDER BY sum(b) DESC) AS r FROM R GROUP BY s", None),
    ("over-aggregate-partitioned", "SELECT a, s, count(*) AS n, sum(count(*)) OVER (PARTITION BY a) AS total, "
     "row_number() OVER (PARTITION BY a ORDER BY count(*) DESC, s) AS rn FROM R GROUP BY a, s", None),
    # (top-k per group: test_touched_partitions_are_looked_up_in_an_index_of_the_base_and_null_ones_apart)
    # insert-only, small states in one partition (the default bound): the other physical layout
    ("ranks-inserts", "SELECT a, b, s, rank() OVER (PARTITION BY s ORDER BY a DESC) AS r, "
     "lead(b, 1, 0) OVER (PARTITION BY s ORDER BY a, b) AS nb FROM R", None),
    # a window's change read by an aggregate, as a nested block's
    ("under-aggregate", "SELECT r, count(*) AS n, sum(b) AS t FROM (SELECT b, dense_rank() OVER (PARTITION BY s ORDER BY b) "
     "AS r FROM R) x GROUP BY r", None),
    # windows over windows: the upper's PARTITION BY holds the lower's (a; a, r), so one state
    # keeps the rows under both; then one whose partitions cut across the lower's (s over a)
    ("nested-one-state", "SELECT a, r, b, count(*) OVER (PARTITION BY a, r) AS peers, "
     "sum(r) OVER (PARTITION BY a ORDER BY b RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) AS near "
     "FROM (SELECT a, b, rank() OVER (PARTITION BY a ORDER BY b) AS r FROM R WHERE b IS NOT NULL OR a > 1) x "
     "WHERE r < 4", 0.0),
    # named windows (WINDOW w AS …; OVER w, OVER (w), a name for another name): written out in place
    ("named-windows", "SELECT a, b, sum(b) OVER w AS rs, rank() OVER w AS r, count(*) OVER (w2) AS n, "
     "max(b) OVER p AS mb FROM R WINDOW w AS (PARTITION BY a ORDER BY b), w2 AS w, p AS (PARTITION BY s)", None),
    # QUALIFY: a filter over the block's window columns (a window of its own, or a select alias's)
    ("qualify-rows", "SELECT a, b AS bb, s FROM R QUALIFY b = max(b) OVER (PARTITION BY a) "
     "OR count(*) OVER (PARTITION BY s ORDER BY b RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) > 2", None),
    ("qualify-over-aggregate", "SELECT DISTINCT s, sum(b) AS t FROM R GROUP BY s, a "
     "QUALIFY dense_rank() OVER (PARTITION BY a ORDER BY t DESC) <= 2 AND t > 1", None),
    ("nested-across", "SELECT s, a, r, dense_rank() OVER (PARTITION BY s ORDER BY r DESC) AS rr "
     "FROM (SELECT s, a, b, rank() OVER (PARTITION BY a ORDER BY b) AS r FROM R) x", None),
]


@pytest.mark.parametrize("qid,sql,fold", WINDOW_QUERIES, ids=[q[0] for q in WINDOW_QUERIES])
def test_window_snapshots_equal_duckdb_with_deletions(spark, tmp_path, monkeypatch, qid, sql, fold):
    weighted = not qid.endswith("-inserts")
    if weighted:  # hash-partitioned states (the bound at 0), so the touched partitions are met where they lie
        monkeypatch.setattr(shape, "ONE_TASK_ROWS", 0)
    if fold is not None:  # runs for any state size and share of it touched
        monkeypatch.setenv(env_name("runs_min_rows"), "0")
        monkeypatch.setenv(env_name("runs_fold"), repr(fold))
        monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
    sources = [Source("R", R_COLS, weighted=weighted)]
    # one random example per query (seeded by its name): three batches of inserts, the later
    # ones deleting up to half the rows present (weighted sources)
    batches = random_stream(random.Random(qid), sources, 3, max_rows=12, min_rows=4)
    said: list[str] = []
    check_stream(spark, str(tmp_path), sql, sources, batches, progress=said.append)
    if fold == 0.0:  # the window's state was kept in runs: its tail folded after a batch
        assert any(m.startswith("folding the tail of win") for m in said), said


@pytest.mark.parametrize("fold", [1000.0, 0.0], ids=["tail-grows", "folds-every-batch"])
@pytest.mark.parametrize("column", ["d", "a"], ids=["date-null-apart", "int-null-free-key"])
def test_touched_partitions_are_looked_up_in_an_index_of_the_base_and_null_ones_apart(spark, tmp_path, monkeypatch,
                                                                                      fold, column):
    """A window kept as a base and a tail reads the partitions a batch touched through an index of
    the base (``Plans.lookups``: the semi join on the partition key compares with ``=``, so the
    hash-partitioned state is met where it lies, not shuffled). A DATE partition's NULL — which
    ``=`` does not match — is read null-safely apart, from the tail alone while the base holds no
    NULL partition key (``StateStore.tail_versions``); an INT partition is kept as a NULL-free key
    (IS NULL, coalesce), whose NULL partition ``=`` meets like any other. The history has no NULL
    partition; later batches insert and delete rows of it: exact after every batch, whether the
    tail grows (the NULL partition only in the tail) or folds into the base after every batch
    (the base then holds it, and the plans read the base again)."""
    from streamfold.runtime.prepared import Prepared
    from streamfold.runtime.state import StateStore

    monkeypatch.setenv(env_name("one_partition"), "0")  # hash-partitioned states
    monkeypatch.setenv(env_name("runs_min_rows"), "0")
    monkeypatch.setenv(env_name("runs_fold"), repr(fold))
    monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
    seen = {"lookups": 0, "tail only": 0}
    look_up, tails = Prepared._look_up, StateStore.tail_versions

    def counted(prepared: Prepared, plan):  # type: ignore[no-untyped-def]
        before = prepared.lookups
        look_up(prepared, plan)
        seen["lookups"] += prepared.lookups - before

    def tail_only(store: StateStore, name, merged, views):  # type: ignore[no-untyped-def]
        out = tails(store, name, merged, views)
        seen["tail only"] += out is not None and f"R.{column}" in out[0]
        return out

    monkeypatch.setattr(Prepared, "_look_up", counted)
    monkeypatch.setattr(StateStore, "tail_versions", tail_only)
    sources = [Source("R", R_COLS, weighted=True)]
    history = random_stream(random.Random("window history"), sources, 1, max_rows=12, min_rows=8)[0]
    at = [c for c, _ in R_COLS].index(column)
    history = {"R": [row for row in history["R"] if row[at] is not None]}
    later = random_stream(random.Random("window look-ups"), sources, 6, max_rows=12, min_rows=4)
    assert any(row[at] is None for batch in later for row in batch["R"]), "a later batch touches the NULL partition"
    sql = (f"SELECT {column}, b, s FROM (SELECT {column}, b, s, row_number() OVER (PARTITION BY {column} "
           "ORDER BY b DESC, s) AS rn FROM R WHERE b IS NOT NULL) x WHERE rn <= 2")
    check_stream(spark, str(tmp_path), sql, sources, [history] + later)
    assert seen["lookups"] > 0, "the touched partitions were not looked up in the base's index"
    if column == "d":
        assert seen["tail only"] > 0, "the NULL partition was read from the base although it holds none"


def test_qualify_recomputed_is_sparks_own_clause(spark, tmp_path):
    """The batch text keeps QUALIFY (sqlglot's Spark writer would move it into a derived table
    whose ``SELECT *`` outputs the window column too): recomputed, the answer equals DuckDB's."""
    from streamfold.sql.parse import parse_query

    sql = "SELECT * FROM R QUALIFY dense_rank() OVER (PARTITION BY a ORDER BY b DESC) <= 2"
    assert "QUALIFY" in parse_query(sql).batch_sql()
    sources = [Source("R", R_COLS, weighted=True)]
    batches = random_stream(random.Random("qualify-recomputed"), sources, 3, max_rows=12, min_rows=4)
    check_stream(spark, str(tmp_path), sql, sources, batches, strategy="recompute")

