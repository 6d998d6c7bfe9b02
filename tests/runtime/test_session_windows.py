"""Session windows (``GROUP BY k, session_window(ts, gap)``, issue 56): after every batch — with
deletions that split sessions, insertions that merge them, event times out of order across
batches and NULL keys and times — the snapshot equals DuckDB's answer on the prefix. DuckDB
finds the sessions another way than the compiler does (a row starts a session when no earlier
row of its key reaches it; a session is the run of rows since the last start), and that text
is checked against Spark's own ``session_window`` (``test_oracle_is_sparks_session_window``),
so the oracle is Spark's semantics."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from streamfold.errors import SqlError

from ..streams import Source, check_stream
from ..strategies import random_stream
from .test_windows import assert_oracle_is_sparks

pytestmark = [pytest.mark.spark]

R = Source("R", (("k", "INT"), ("ts", "TIMESTAMP"), ("v", "INT")), weighted=True)
S = Source("S", (("k", "INT"), ("w", "DOUBLE")), weighted=True)
SECOND = 1_000_000


def sessions(source: str, keys: tuple[str, ...], gap: str) -> str:
    """``source``'s rows with a time, each with its session's start and end as ``_ss``/``_se``:
    DuckDB's text for what ``session_window(ts, gap)`` does, ``gap`` DuckDB's microseconds
    (an expression of the row for a dynamic gap)."""
    same = " AND ".join(f"o.{k} IS NOT DISTINCT FROM r.{k}" for k in keys) or "TRUE"
    part = ", ".join(keys)
    by = f"PARTITION BY {part} " if keys else ""
    rows = f"(SELECT *, epoch_us(ts) AS _t, epoch_us(ts) + ({gap}) AS _e FROM {source} WHERE ts IS NOT NULL) AS _x"
    starts = (f"(SELECT r.*, CASE WHEN EXISTS (SELECT 1 FROM {rows.replace(' AS _x', ' AS o')} WHERE {same} "
              f"AND o._t < r._t AND o._e >= r._t) THEN 0 ELSE 1 END AS _new FROM {rows.replace(' AS _x', ' AS r')} "
              "WHERE r._e > r._t) AS _y")
    numbered = f"(SELECT *, sum(_new) OVER ({by}ORDER BY _t RANGE UNBOUNDED PRECEDING) AS _sid FROM {starts}) AS _z"
    within = f"PARTITION BY {part + ', ' if keys else ''}_sid"
    return (f"(SELECT *, make_timestamp(min(_t) OVER ({within})) AS _ss, "
            f"make_timestamp(max(_e) OVER ({within})) AS _se FROM {numbered})")


MINUTES = "'2 minutes'"
# (id, query, DuckDB's text for it, sources)
QUERIES = [
    ("per-key-struct",
     "SELECT k, session_window, count(*) AS n, sum(v) AS t, max(v) AS m FROM R "
     "GROUP BY k, session_window(ts, '2 minutes')",
     "SELECT k, {'start': _ss, 'end': _se}, count(*), sum(v), max(v) FROM "
     + sessions("R", ("k",), str(120 * SECOND)) + " AS s GROUP BY k, _ss, _se", [R]),
    ("one-partition-fields",
     "SELECT session_window.start AS s, session_window.end AS e, count(*) AS n, count(DISTINCT k) AS d "
     "FROM R WHERE v > 0 GROUP BY session_window(ts, '5 minutes')",
     "SELECT _ss, _se, count(*), count(DISTINCT k) FROM "
     + sessions("(SELECT * FROM R WHERE v > 0)", (), str(300 * SECOND)) + " AS s GROUP BY _ss, _se", [R]),
    ("expression-key-having",
     "SELECT k % 2 AS parity, session_window.end AS e, avg(v) AS a FROM R "
     "GROUP BY k % 2, session_window(ts, '3 minutes') HAVING count(*) > 1",
     "SELECT p, _se, avg(v) FROM " + sessions("(SELECT *, k % 2 AS p FROM R)", ("p",), str(180 * SECOND))
     + " AS s GROUP BY p, _ss, _se HAVING count(*) > 1", [R]),
    ("dynamic-gap",
     "SELECT k, session_window.start AS s, session_window.end AS e, count(*) AS n FROM R "
     "GROUP BY k, session_window(ts, CASE WHEN v > 2 THEN '10 minutes' ELSE '1 minute' END)",
     "SELECT k, _ss, _se, count(*) FROM "
     + sessions("R", ("k",), f"CASE WHEN v > 2 THEN {600 * SECOND} ELSE {60 * SECOND} END")
     + " AS s GROUP BY k, _ss, _se", [R]),
    ("join-then-session",
     "SELECT S.k, session_window.start AS s, sum(S.w) AS total FROM R JOIN S ON R.k = S.k "
     "GROUP BY S.k, session_window(R.ts, '4 minutes')",
     "SELECT k2, _ss, sum(w) FROM " + sessions("(SELECT R.ts, S.k AS k2, S.w FROM R JOIN S ON R.k = S.k)",
                                                ("k2",), str(240 * SECOND)) + " AS s GROUP BY k2, _ss, _se",
     [R, S]),
    ("sessions-of-sessions",
     "SELECT n, count(*) AS sessions FROM (SELECT k, count(*) AS n FROM R GROUP BY k, session_window(ts, '2 minutes')) g "
     "GROUP BY n",
     "SELECT n, count(*) FROM (SELECT k, count(*) AS n FROM " + sessions("R", ("k",), str(120 * SECOND))
     + " AS s GROUP BY k, _ss, _se) g GROUP BY n", [R]),
    ("row-wise",
     "SELECT k, v, session_window(ts, '2 minutes') AS w FROM R",
     f"SELECT k, v, {{'start': ts, 'end': ts + INTERVAL {MINUTES}}} FROM R WHERE ts IS NOT NULL", [R]),
]


@pytest.mark.parametrize("qid,sql,oracle,sources", QUERIES, ids=[q[0] for q in QUERIES])
def test_sessions_equal_duckdb_with_deletions(spark, tmp_path, qid, sql, oracle, sources):
    rng = random.Random(f"sessions-{qid}")
    batches = random_stream(rng, sources, batches=4, max_rows=10, min_rows=3)
    run = check_stream(spark, str(tmp_path), sql, sources, batches, oracle_sql=oracle)
    assert run.batches == 4
    assert any(run.snapshots), "no session ever held a row: the test would prove nothing"


@pytest.mark.parametrize("qid,sql,oracle,sources", QUERIES, ids=[q[0] for q in QUERIES])
def test_oracle_is_sparks_session_window(spark, qid, sql, oracle, sources):
    """DuckDB's text gives what Spark's batch query gives on the same rows (NULL times and keys,
    events exactly a gap apart, times before 1970 included)."""
    assert_oracle_is_sparks(spark, random.Random(f"session-oracle-{qid}"), sql, oracle, sources, 24, 12)


def test_a_late_event_merges_two_sessions_and_its_deletion_splits_them(spark, tmp_path):
    """Two sessions of one key, then the event between them (they become one), then its deletion
    (two again): each batch's snapshot is the batch query's."""
    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    at = [t0 + dt.timedelta(minutes=m) for m in (0, 1, 4, 5, 2.5)]
    batches = [{"R": [(1, at[0], 1, 1), (1, at[1], 2, 1), (1, at[2], 3, 1), (1, at[3], 4, 1)]},
               {"R": [(1, at[4], 5, 1)]},
               {"R": [(1, at[4], 5, -1)]}]
    sql = "SELECT k, session_window, count(*) AS n FROM R GROUP BY k, session_window(ts, '2 minutes')"
    oracle = ("SELECT k, {'start': _ss, 'end': _se}, count(*) FROM " + sessions("R", ("k",), str(120 * SECOND))
              + " AS s GROUP BY k, _ss, _se")
    seen = []
    run = check_stream(spark, str(tmp_path), sql, [R], batches, oracle_sql=oracle,
                       check=lambda batch, snapshot, prefix: seen.append(len(snapshot)))
    assert run.batches == 3
    assert seen == [2, 1, 2]


def test_session_window_refusals():
    import streamfold

    schemas = {"R": R.schema_sql()}
    cases = {
        "SELECT k, count(*) FROM R GROUP BY k, session_window(ts, '0 seconds')": "INVALID_WINDOW",
        "SELECT k, count(*) FROM R GROUP BY k, session_window(ts, 300)": "INVALID_WINDOW",
        "SELECT k, count(*) FROM R GROUP BY k, session_window(ts, v)": "TYPE_MISMATCH",
        "SELECT k, count(*) FROM R GROUP BY k, session_window(v, '1 minute')": "TYPE_MISMATCH",
        "SELECT count(*) FROM R GROUP BY ROLLUP(k, session_window(ts, '1 minute'))": "UNSUPPORTED_CLAUSE",
        "SELECT count(*) FROM R GROUP BY session_window(ts, '1 minute'), window(ts, '1 minute')":
            "MULTIPLE_TIME_WINDOWS",
    }
    for sql, code in cases.items():
        with pytest.raises(SqlError) as err:
            streamfold.explain(sql, schemas)
        assert err.value.code == code, (sql, err.value)


def test_sessions_under_a_time_bound_expire_and_equal_duckdb_at_the_batch_time(spark, tmp_path, monkeypatch):
    """``WHERE ts > current_timestamp() - INTERVAL 10 MINUTES``: events the clock passes leave their
    sessions as deletions (a session shrinks from its start, or goes), and the window's state
    forgets them; after every batch the snapshot is DuckDB's at the batch's recorded time."""
    from .test_expiry import CLOCK, bound, moving_clock

    moving_clock(monkeypatch, CLOCK)
    sql = ("SELECT k, session_window.start AS s, session_window.end AS e, count(*) AS n FROM R "
           "WHERE ts > current_timestamp() - INTERVAL 10 MINUTES GROUP BY k, session_window(ts, '2 minutes')")

    def oracle(record):
        rows = f"(SELECT * FROM R WHERE {bound(10)(record)})"
        return ("SELECT k, _ss, _se, count(*) FROM " + sessions(rows, ("k",), str(120 * SECOND))
                + " AS s GROUP BY k, _ss, _se")

    batches = random_stream(random.Random("sessions-expiring"), [R], batches=len(CLOCK), max_rows=12, min_rows=3)
    run = check_stream(spark, str(tmp_path), sql, [R], batches, oracle_sql=oracle)
    assert run.batches == len(CLOCK)
    assert any(run.snapshots), "nothing inside the bound: the test would prove nothing"


def test_recomputed_batches_hand_on_the_sessions_that_changed(spark, tmp_path, monkeypatch):
    """A batch ``auto`` recomputes after an incremental one answers with Spark's own
    ``session_window``, whose column carries Spark's session metadata: the changes (the
    recomputed answer against the incremental one before, grouped) must not be planned as a
    session aggregation, which merged a key's old and new sessions and lost both rows."""
    from streamfold.runtime.strategy import Choice, CostModel

    monkeypatch.setattr(CostModel, "choose", lambda self, *a, **k: Choice("recompute", "the test's"))
    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    sql = "SELECT k, session_window AS sw FROM R GROUP BY k, session_window(ts, '1 minute')"
    oracle = ("SELECT k, {'start': _ss, 'end': _se} FROM " + sessions("R", ("k",), str(60 * SECOND))
              + " AS s GROUP BY k, _ss, _se")
    # the session [00:00, 00:01) becomes [00:00, 00:02), then [00:00, 00:03) and one of key 2
    batches = [{"R": [(1, t0, 1, 1)]}, {"R": [(1, t0 + dt.timedelta(minutes=1), 4, 1)]},
               {"R": [(1, t0 + dt.timedelta(minutes=2), 2, 1), (2, t0, 3, 1)]}]
    run = check_stream(spark, str(tmp_path), sql, [R], batches, oracle_sql=oracle, strategy="auto")
    assert [len(s) for s in run.snapshots] == [1, 1, 2]
