"""Running window functions computed from each touched partition's first changed row
(``plan/rules_window_suffix.py``): for random data with NULLs and ties in the partition and
ORDER BY columns, random batch splits, deletions (of the first rows of a partition as well as of
its last), and batches that append after every row already there, every snapshot and every
changes file equals DuckDB's answer on the prefix; the plan says it uses the rule, and windows
it does not cover keep the general rule."""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal

import pytest

import streamfold
from streamfold.runtime import runs, shape
from streamfold.settings import env_name

from ..streams import Source, check_restarting, check_stream
from ..strategies import random_stream

pytestmark = [pytest.mark.spark]

# g partitions (NULLs included), t orders (ties, NULLs), x and w are decimals, y a BIGINT
COLS = (("g", "INT"), ("t", "INT"), ("u", "STRING"), ("x", "DECIMAL(12,2)"), ("w", "DECIMAL(28,6)"),
        ("y", "BIGINT"), ("d", "DATE"))
R = Source("R", COLS, weighted=True)
RUNNING_NOTE = "from the first row it changed"

QUERIES = [
    ("sums-and-ranks",
     "SELECT g, t, x, sum(x) OVER (PARTITION BY g ORDER BY t) AS rx, rank() OVER (PARTITION BY g ORDER BY t) AS r, "
     "dense_rank() OVER (PARTITION BY g ORDER BY t) AS dr, count(*) OVER (PARTITION BY g ORDER BY t) AS n, "
     "count(x) OVER (PARTITION BY g ORDER BY t) AS nx FROM R"),
    ("desc-nulls-first-rows-frame",
     "SELECT g, t, u, y, x, w, d, row_number() OVER (PARTITION BY g ORDER BY t DESC NULLS FIRST, u, y, x, w, d) AS rn, "
     "sum(y) OVER (PARTITION BY g ORDER BY t DESC NULLS FIRST, u, y, x, w, d "
     "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS ry, "
     "min(u) OVER (PARTITION BY g ORDER BY t DESC NULLS FIRST, u, y, x, w, d) AS mu, "
     "max(d) OVER (PARTITION BY g ORDER BY t DESC NULLS FIRST, u, y, x, w, d) AS md FROM R"),
    ("one-partition-nulls-last",
     "SELECT t, u, w, sum(w) OVER (ORDER BY t NULLS LAST) AS rw, dense_rank() OVER (ORDER BY t NULLS LAST, u) AS dr, "
     "max(w) OVER (ORDER BY t NULLS LAST) AS mw FROM R"),
    ("by-a-string-and-a-date",
     "SELECT u, d, y, count(y) OVER (PARTITION BY u ORDER BY d DESC) AS n, sum(y) OVER (PARTITION BY u ORDER BY d DESC) "
     "AS s, min(y) OVER (PARTITION BY u ORDER BY d DESC) AS lo FROM R"),
    ("over-an-aggregate",
     "SELECT g, t, sum(x) AS sx, sum(sum(x)) OVER (PARTITION BY g ORDER BY t) AS running, "
     "rank() OVER (PARTITION BY g ORDER BY t) AS r FROM R GROUP BY g, t"),
    ("read-by-an-aggregate",
     "SELECT r, count(*) AS n, sum(rx) AS total FROM (SELECT rank() OVER (PARTITION BY g ORDER BY t) AS r, "
     "sum(x) OVER (PARTITION BY g ORDER BY t) AS rx FROM R) q GROUP BY r"),
]


def _uses_rule(sql: str) -> bool:
    notes = streamfold.compile(sql, {"R": R.schema_sql()}).notes
    return any(RUNNING_NOTE in n for n in notes)


@pytest.mark.parametrize("qid,sql,fold", [(qid, sql, 1000.0 if i % 2 == 0 else None) for i, (qid, sql) in enumerate(QUERIES)],
                         ids=[q[0] for q in QUERIES])
def test_running_windows_equal_duckdb_with_deletions(spark, tmp_path, monkeypatch, qid, sql, fold):
    """``fold``: the state kept as a base and a tail from batch 1 on, never folded (so a row
    deleted from the base has a negative weight in the tail), or None (one state, one task) —
    every other query each way."""
    assert _uses_rule(sql), qid
    if fold is not None:
        monkeypatch.setattr(shape, "ONE_TASK_ROWS", 0)
        monkeypatch.setenv(env_name("runs_min_rows"), "0")
        monkeypatch.setenv(env_name("runs_fold"), repr(fold))
        monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
    batches = random_stream(random.Random(qid), [R], 6, max_rows=10, min_rows=2)
    check_stream(spark, str(tmp_path), sql, [R], batches)


def test_appends_after_every_row_and_deletes_the_first(spark, tmp_path):
    """A running sum over time: batches that append after every row so far (the prefix is all the
    partition's old rows), then one deleting each partition's first row (no prefix at all), then
    one inserting a row between existing ones."""
    sql = ("SELECT g, t, x, sum(x) OVER (PARTITION BY g ORDER BY t) AS rx, "
           "row_number() OVER (PARTITION BY g ORDER BY t, x) AS rn FROM R")
    def row(g, t, x, weight=1):
        return (g, t, None, None if x is None else Decimal(x), None, None, None, weight)

    rows = [(g, t, None if t % 5 == 0 else f"{t * 1.5:.2f}") for g in (1, 2, None) for t in range(8)]
    batches = [{"R": [row(*r) for r in rows if r[1] < 4]},
               {"R": [row(*r) for r in rows if 4 <= r[1] < 6]},
               {"R": [row(*r) for r in rows if r[1] >= 6]},
               {"R": [row(*r, weight=-1) for r in rows if r[1] == 0]},
               {"R": [row(1, 3, "0.50"), row(None, 3, None, weight=2)]}]
    check_stream(spark, str(tmp_path), sql, [R], batches)


def _appending(rng: random.Random, batches: int, descending: bool) -> list[dict[str, list[tuple]]]:
    """Batches over partitions g (NULL among them) that mostly append after every row so far (by
    t, and by d the other way round: one clock for all), and now and then insert between rows,
    delete a row (a partition's last one half of the time, so its last key moves back), or bring
    a NULL t (and d) — partitions appended to beside partitions changed inside, in one batch."""
    live: list[tuple] = []
    clock = 0
    out = []
    for _ in range(batches):
        rows: list[tuple] = []
        for g in (1, 2, 3, None):
            move = rng.random()
            if move < 0.6:  # append (a step of 0: a tie with the last row)
                for _ in range(rng.randint(1, 3)):
                    clock += rng.randint(0, 2)
                    rows.append(_event(rng, g, clock, descending))
            elif move < 0.75:  # insert between rows
                rows.append(_event(rng, g, rng.randint(0, clock), descending))
            elif move < 0.9:  # delete a row of the partition
                mine = [r for r in live if r[0] == g and r not in rows]
                if mine:
                    last = max(mine, key=lambda r: -1 if r[1] is None else (-r[1] if descending else r[1]))
                    rows.append((last if rng.random() < 0.5 else rng.choice(mine))[:-1] + (-1,))
            else:
                rows.append((g, None, rng.choice("ab"), Decimal("1.50"), None, 1, None, 1))
        for r in rows:
            if r[-1] < 0:
                live.remove(r[:-1] + (1,))
            else:
                live.append(r)
        out.append({"R": rows})
    return out


def _event(rng: random.Random, g: int | None, time: int, descending: bool) -> tuple:
    """A row of R at ``time``: t counts it up (down where the window orders by t DESC), d down."""
    x = rng.choice([None, Decimal("0.25"), Decimal("-3.00"), Decimal("12.50")])
    return (g, -time if descending else time, rng.choice("ab"), x, None, rng.choice([None, 1, 5]),
            dt.date(2030, 1, 1) - dt.timedelta(days=time), 1)


APPENDED = dict(QUERIES) | {
    "nulls-last-min-max": "SELECT g, t, x, y, sum(x) OVER (PARTITION BY g ORDER BY t NULLS LAST) AS rx, "
                          "max(y) OVER (PARTITION BY g ORDER BY t NULLS LAST) AS my, "
                          "dense_rank() OVER (PARTITION BY g ORDER BY t NULLS LAST) AS dr FROM R",
    "one-partition": "SELECT t, y, sum(y) OVER (ORDER BY t) AS s, count(y) OVER (ORDER BY t) AS n FROM R",
    # a nullable DECIMAL partition: its NULL partition looked up null-safely, not by a NULL-free key
    "by-a-nullable-decimal": "SELECT x, t, y, sum(y) OVER (PARTITION BY x ORDER BY t) AS s, "
                             "count(*) OVER (PARTITION BY x ORDER BY t) AS n FROM R",
}


@pytest.mark.parametrize("qid", ["sums-and-ranks", "desc-nulls-first-rows-frame", "nulls-last-min-max",
                                 "one-partition", "by-a-string-and-a-date", "by-a-nullable-decimal"])
def test_batches_that_append_read_the_summary_and_equal_duckdb(spark, tmp_path, monkeypatch, qid):
    """Most batches append to most partitions: those partitions' carries come from their summary
    (``totals``), not from their rows; the rest are read. Seven batches, the states kept as a base
    and a tail (so a summary replaced is a row in the base and its negation in the tail)."""
    monkeypatch.setattr(shape, "ONE_TASK_ROWS", 0)
    monkeypatch.setenv(env_name("runs_min_rows"), "0")
    monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
    sql = APPENDED[qid]
    batches = _appending(random.Random(qid), 7, descending="t DESC" in sql)
    check_stream(spark, str(tmp_path), sql, [R], batches)


def test_a_restart_reads_the_summaries_back_and_appends_exactly(spark, tmp_path):
    """Stopped after every third batch and started again: the summaries come back from the
    checkpoint with the window's rows, and the batches after a restart that append read them."""
    sql = APPENDED["nulls-last-min-max"]
    batches = _appending(random.Random("restart"), 9, descending=False)
    check_restarting(spark, str(tmp_path), sql, R, [b["R"] for b in batches], every=3)


def _rows(*rows: tuple) -> list[tuple]:
    """(g, t, u, y, weight) as rows of R (x, w, d NULL)."""
    return [(g, t, u, None, None, y, None, weight) for g, t, u, y, weight in rows]


# Windows whose carry would be wrong if the rule took them (found by a random campaign): calls
# partitioned differently, a partition by an expression, dense_ranks over different ORDER BYs.
# Each goes to the general rule and is exact.
MIXED = [
    ("SELECT g, t, rank() OVER (PARTITION BY g ORDER BY t) AS r, sum(y) OVER (ORDER BY t) AS s FROM R",
     [_rows((1, 1, None, 1, 1), (2, 1, None, 10, 1)), _rows((1, 2, None, 2, 1))]),
    ("SELECT g, t, u, rank() OVER (PARTITION BY g ORDER BY t) AS r, rank() OVER (PARTITION BY g, u ORDER BY t) AS s "
     "FROM R", [_rows((1, 1, "a", None, 1)), _rows((1, 2, "b", None, 1))]),
    ("SELECT g, t, rank() OVER (PARTITION BY g % 2 ORDER BY t) AS r FROM R",
     [_rows((1, 1, None, None, 1), (2, 1, None, None, 1)), _rows((1, 2, None, None, 1))]),
    ("SELECT g, t, u, dense_rank() OVER (PARTITION BY g ORDER BY t) AS r, "
     "dense_rank() OVER (PARTITION BY g ORDER BY t, u) AS s FROM R",
     [_rows((1, 1, "a", None, 1), (1, 1, "b", None, 1)), _rows((1, 2, "a", None, 1), (1, 1, "a", None, -1))]),
]


@pytest.mark.parametrize("sql,batches", MIXED, ids=["partitions-differ", "partitions-nest", "partition-expression",
                                                    "dense-ranks-differ"])
def test_windows_the_carry_cannot_serve_keep_the_general_rule_and_are_exact(spark, tmp_path, sql, batches):
    assert not _uses_rule(sql)
    check_stream(spark, str(tmp_path), sql, [R], [{"R": b} for b in batches])


@pytest.mark.parametrize("sql", [
    # a frame that does not start at the partition's first row, an average, a floating-point sum,
    # a function that looks ahead, a decimal sum Spark would round when adding a carry to it
    "SELECT g, t, sum(y) OVER (PARTITION BY g ORDER BY t RANGE BETWEEN 1 PRECEDING AND CURRENT ROW) AS s FROM R",
    "SELECT g, t, avg(x) OVER (PARTITION BY g ORDER BY t) AS a FROM R",
    "SELECT g, t, y, lead(y) OVER (PARTITION BY g ORDER BY t, y) AS l FROM R",
    "SELECT g, t, sum(CAST(w AS DECIMAL(30,10))) OVER (PARTITION BY g ORDER BY t) AS s FROM R",
    "SELECT g, t, rank() OVER (PARTITION BY g ORDER BY t) AS r, count(*) OVER (PARTITION BY g ORDER BY y) AS n FROM R",
])
def test_other_windows_keep_the_general_rule(sql):
    assert not _uses_rule(sql)
