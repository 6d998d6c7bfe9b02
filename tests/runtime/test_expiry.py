"""Rows that expire (issue 56): ``WHERE ts > current_timestamp() - INTERVAL …`` read at each
batch's recorded time. After every batch — the clock moving (once backwards, which the batch time
must not follow), rows deleted, event times out of order and some already expired on arrival —
the snapshot equals DuckDB's answer over the prefix at the time the commit records, and rows the
clock passed leave as deletions in changes/ (check_stream checks the changes)."""

from __future__ import annotations

import datetime as dt
import random
import time

import pytest

from streamfold.runtime.checkpoint import OutputDir
from streamfold.runtime.features import batch_time

from streamfold.verify import compare, duckdb_answer, python_value

from ..streams import Source, check_stream
from ..strategies import random_stream
from .test_windows import MINUTE, windowed

pytestmark = [pytest.mark.spark]

R = Source("R", (("k", "INT"), ("ts", "TIMESTAMP"), ("v", "INT")), weighted=True)
S = Source("S", (("k", "INT"), ("w", "DOUBLE")), weighted=True)
T0 = int(dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc).timestamp()) * 1_000_000
# the wall clock at each batch: minutes after T0 (the third steps back, the batch time stays)
CLOCK = [8, 13, 11, 24, 35]


def bound(minutes: int, op: str = ">", ts: str = "ts"):
    """DuckDB's text for ``ts > current_timestamp() - INTERVAL minutes`` at a commit's batch time."""
    return lambda record: f"epoch_us({ts}) {op} {int(record['batch_time_us'])} - {minutes * MINUTE}"


QUERIES = [
    ("groupby",
     "SELECT k, count(*) AS n, sum(v) AS t, max(v) FROM R WHERE ts > current_timestamp() - INTERVAL 10 MINUTES "
     "GROUP BY k",
     lambda r: f"SELECT k, count(*), sum(v), max(v) FROM R WHERE {bound(10)(r)} GROUP BY k", [R]),
    ("rows",
     "SELECT k, ts, v FROM R WHERE v > 1 AND ts >= now() - INTERVAL '10' MINUTE",
     lambda r: f"SELECT k, ts, v FROM R WHERE v > 1 AND {bound(10, '>=')(r)}", [R]),
    ("join",
     "SELECT S.k, count(*) AS n, sum(S.w) FROM R JOIN S ON R.k = S.k "
     "WHERE R.ts > current_timestamp() - INTERVAL 10 MINUTES GROUP BY S.k",
     lambda r: f"SELECT S.k, count(*), sum(S.w) FROM R JOIN S ON R.k = S.k WHERE {bound(10, ts='R.ts')(r)} "
               "GROUP BY S.k", [R, S]),
]


def moving_clock(monkeypatch, minutes: list[int]) -> None:
    """The wall clock the batches read: ``minutes`` after T0, one value per batch."""
    times = iter(minutes)
    monkeypatch.setattr(batch_time, "wall_clock", lambda: T0 + next(times) * MINUTE)


# per query: which of a batch's R rows its time bound drops as late, at batch time ``now`` (µs)
LATE = {
    "groupby": lambda row, now: _micros(row[1]) <= now - 10 * MINUTE,
    "rows": lambda row, now: row[2] is not None and row[2] > 1 and _micros(row[1]) < now - 10 * MINUTE,
    "join": lambda row, now: _micros(row[1]) <= now - 10 * MINUTE,
}


def _micros(ts) -> float:
    return float("inf") if ts is None else int(ts.timestamp()) * 1_000_000


@pytest.mark.parametrize("qid,sql,oracle,sources", QUERIES, ids=[q[0] for q in QUERIES])
def test_expiring_rows_equal_duckdb_at_the_batch_time(spark, tmp_path, monkeypatch, qid, sql, oracle, sources):
    moving_clock(monkeypatch, CLOCK)
    batches = random_stream(random.Random(f"expiry-{qid}"), sources, batches=len(CLOCK), max_rows=10, min_rows=2)
    output = OutputDir(str(tmp_path / "out"))
    late: list[int] = []

    def check(batch, snapshot, prefix):
        record = output.read_commit(batch)
        expected = sum(row[-1] for row in batches[batch].get("R", []) if row[-1] > 0
                       and LATE[qid](row, record["batch_time_us"]))
        assert record["late_rows"] == {"live": expected}, (batch, record["late_rows"], expected)
        late.append(expected)

    run = check_stream(spark, str(tmp_path), sql, sources, batches, oracle_sql=oracle, check=check)
    assert run.batches == len(CLOCK)
    assert any(run.snapshots), "nothing inside the bound: the test would prove nothing"
    assert sum(late) > 0, "no late row: the count would prove nothing"
    # batches 2–4 replay the plans batch 1 captured, each at its own batch time (Prepared.tick)
    assert [output.read_commit(b).get("prepared") for b in range(run.batches)] == [
        None, "capture", "replay", "replay", "replay"]


@pytest.mark.parametrize("strategy", ["incremental", "recompute"])
def test_an_interval_of_several_units_bounds_as_their_sum(spark, tmp_path, monkeypatch, strategy):
    """Spark's ``INTERVAL 9 MINUTES 60 SECONDS`` (to sqlglot, a sum of intervals) is ten minutes,
    maintained and recomputed (its text is what Spark runs then)."""
    moving_clock(monkeypatch, CLOCK)
    batches = random_stream(random.Random("expiry-units"), [R], batches=len(CLOCK), max_rows=10, min_rows=2)
    sql = "SELECT k, count(*) AS n, sum(v) AS t FROM R WHERE ts > current_timestamp() - INTERVAL 9 MINUTES 60 SECONDS GROUP BY k"
    run = check_stream(spark, str(tmp_path), sql, [R], batches, strategy=strategy,
                       oracle_sql=lambda r: f"SELECT k, count(*), sum(v) FROM R WHERE {bound(10)(r)} GROUP BY k")
    assert run.batches == len(CLOCK) and any(run.snapshots)


def test_a_batch_without_rows_of_the_bounded_stream_still_expires_its_rows(spark, tmp_path, monkeypatch):
    """Batches that bring only S: the live rows of R read no new row, yet the clock passed some of
    them, so their step runs (it is never skipped as 'reads nothing new') and they leave."""
    moving_clock(monkeypatch, [8, 14, 21, 35])
    qid, sql, oracle, sources = QUERIES[2]
    batches = random_stream(random.Random("only-S"), sources, batches=4, max_rows=10, min_rows=4)
    for later in batches[1:]:
        later["R"] = []
    run = check_stream(spark, str(tmp_path), sql, sources, batches, oracle_sql=oracle)
    assert run.batches == 4 and run.snapshots[0] != run.snapshots[2], "nothing left: the test proves nothing"


def test_state_stays_bounded_by_the_time_bound(spark, tmp_path, monkeypatch):
    """Twelve batches, five minutes apart, each of rows from the last ten minutes: the live rows
    and the windows' groups stay those of the last ten minutes while the history grows, and every
    answer is still DuckDB's at the batch time."""
    n, per_batch, step = 7, 6, 5
    moving_clock(monkeypatch, [step * i for i in range(n)])
    r = Source("R", R.columns)  # insert-only: the deletions are the clock's
    rng = random.Random("bounded")
    batches = [{"R": [(rng.randint(0, 3), dt.datetime.fromtimestamp((T0 + (step * i - rng.randint(0, 9)) * MINUTE) / 1e6,
                                                                   dt.timezone.utc), rng.randint(0, 5))
                      for _ in range(per_batch)]} for i in range(n)]
    sql = ("SELECT window.start, count(*) AS n, sum(v) AS t FROM R WHERE ts > current_timestamp() - INTERVAL 10 MINUTES "
           "GROUP BY window(ts, '5 minutes')")

    def oracle(record):
        return ("SELECT _ws, count(*), sum(v) FROM " + windowed(f"(SELECT * FROM R WHERE {bound(10)(record)})", 5 * MINUTE)
                + " AS w GROUP BY _ws")

    states: list[dict] = []
    output = OutputDir(str(tmp_path / "out"))

    def check(batch, snapshot, prefix):
        record = output.read_commit(batch)
        states.append(record["state_rows"])
        assert len(snapshot) <= 3  # windows of 5 minutes meeting the last 10 minutes
        if batch > 0:
            # the appended live rows' merge shows the rows its delta brought (runtime/stats.py:
            # a batch's outputs are sized by them; without, every batch was planned anew)
            assert record["stats"]["states"]["live"].get("touched_keys") is not None, record["stats"]

    check_stream(spark, str(tmp_path), sql, [r], batches, oracle_sql=oracle, check=check)
    # (a state's rows are its merge's, which still counts the keys leaving in that batch: one more
    # batch's rows, one more window)
    live = [s["live"] for s in states]
    assert max(live) <= 4 * per_batch, live
    assert max(live[n // 2:]) <= max(live[:n // 2]) + per_batch, live  # no trend while the history doubles
    assert max(s["agg"] for s in states) <= 4, states


class _Killed(BaseException):
    """The process dying at this instant (nothing after it runs, no handler catches it)."""


def _sessions_query():
    """A bounded session query and its oracle (test_session_windows), for the kill test."""
    from .test_session_windows import SECOND, sessions

    sql = ("SELECT k, session_window.start AS s, session_window.end AS e, count(*) AS n FROM R "
           "WHERE ts > current_timestamp() - INTERVAL 10 MINUTES GROUP BY k, session_window(ts, '2 minutes')")
    return sql, lambda record: ("SELECT k, _ss, _se, count(*) FROM " + sessions(
        f"(SELECT * FROM R WHERE {bound(10)(record)})", ("k",), str(120 * SECOND)) + " AS s GROUP BY k, _ss, _se")


@pytest.mark.parametrize("compact_every,qid", [(20, "groupby"), (2, "groupby"), (2, "sessions")])
def test_killed_across_an_expiration_the_restart_keeps_the_recorded_times(spark, tmp_path, monkeypatch, compact_every,
                                                                        qid):
    """Killed before batch 2's commit, the rerun evaluates batch 2 at its own (later) time; killed
    right after batch 3's commit, the restart starts from batch 3's recorded time even though the
    wall clock now reads earlier. Every committed batch equals DuckDB at the time it records, and
    the rows the clock passed while the run was down leave with the next batch. The live rows are
    an appended state (a row and its deletion may both be held): a restart adds up its logged
    deltas — after a compaction (``compact_every`` 2), over the states written whole. Also for
    session windows, whose events leave their sessions as the clock passes them."""
    import streamfold

    src, out = tmp_path / "R", str(tmp_path / "out")
    src.mkdir()
    rng = random.Random("kill")
    r = Source("R", R.columns, weighted=True)
    files = random_stream(rng, [r], batches=5, max_rows=8, min_rows=3)
    sql, oracle = (QUERIES[0][1], QUERIES[0][2]) if qid == "groupby" else _sessions_query()
    # wall clock per batch run: 0, 1, (2 killed at 16), 2 rerun at 19, 3 at 24, (killed after commit), 4 at 21 < 24
    moving_clock(monkeypatch, [8, 13, 16, 19, 24, 21])

    def start():
        return streamfold.start(sql, {"R": str(src)}, out, spark=spark, background=False, partitions=2,
                                schemas={"R": r.schema_sql()}, compact_every=compact_every)

    def feed(i):
        import pyarrow.parquet as pq
        pq.write_table(r.table(files[i]["R"]), str(src / f"{i:04d}.parquet"))

    real_commit = OutputDir.commit

    def die_at(batch, after):
        def commit(self, b, record):
            if b == batch:
                if after:
                    real_commit(self, b, record)
                raise _Killed
            real_commit(self, b, record)
        monkeypatch.setattr(OutputDir, "commit", commit)

    q = start()
    for i in (0, 1):
        feed(i)
        assert q.process_available() is not None
    feed(2)
    die_at(2, after=False)
    with pytest.raises(_Killed):
        q.process_available()
    q.engine.close()
    monkeypatch.setattr(OutputDir, "commit", real_commit)
    q = start()
    assert q.process_available() is not None  # batch 2 again, at the next clock reading
    feed(3)
    die_at(3, after=True)
    with pytest.raises(_Killed):
        q.process_available()
    q.engine.close()
    monkeypatch.setattr(OutputDir, "commit", real_commit)
    q = start()
    try:
        feed(4)
        assert q.process_available() is not None
        times = [q.commit(b)["batch_time_us"] for b in range(5)]
        assert times == [T0 + m * MINUTE for m in (8, 13, 19, 24, 24)], times
        for b in range(5):
            prefix = {"R": [r.table(files[i]["R"]) for i in range(b + 1)]}
            check = compare(_rows(q.snapshot_pandas(b)), duckdb_answer(sql, prefix, duckdb_sql=oracle(q.commit(b))))
            assert check.matches, f"batch {b}: {check.detail}"
        assert any(len(q.snapshot_pandas(b)) for b in range(5)), "nothing inside the bound: the test proves nothing"
    finally:
        q.stop()


def _rows(frame):
    return [tuple(python_value(v) for v in row) for row in frame.itertuples(index=False, name=None)]


def test_rows_leave_as_the_clock_passes_them_with_no_new_file(spark, tmp_path, monkeypatch):
    """Between files, an idle query whose wall-clock bound has passed live rows runs a batch with no
    files (``clock_only``) that removes them; a look that finds none passed makes no batch. After
    every batch — files with deletions, or the clock alone — the snapshot equals DuckDB at the
    recorded time and changes/ is the difference; ``run(until_idle=…)`` still returns when no file
    comes, after the clock's batch."""
    import pyarrow.parquet as pq

    import streamfold
    from streamfold.verify import changes_difference

    src, out = tmp_path / "R", str(tmp_path / "out")
    src.mkdir()
    r = Source("R", R.columns, weighted=True)
    files = random_stream(random.Random("clock-only"), [r], batches=3, max_rows=12, min_rows=6)
    sql, oracle = QUERIES[0][1], QUERIES[0][2]
    now = {"t": T0 + 8 * MINUTE}
    monkeypatch.setattr(batch_time, "wall_clock", lambda: now["t"])
    q = streamfold.start(sql, {"R": str(src)}, out, spark=spark, background=False, partitions=2, trigger=0.01,
                         schemas={"R": r.schema_sql()})
    fed: list = []
    previous: list[tuple] = []
    clock_batches = []

    def checked(result) -> None:
        nonlocal previous
        record = q.commit(result.batch)
        assert record.get("clock_only", False) is result.clock_only
        snapshot = _rows(q.snapshot_pandas())
        expected = duckdb_answer(sql, {"R": fed or [r.table([])]}, duckdb_sql=oracle(record))
        check = compare(snapshot, expected)
        assert check.matches, f"batch {result.batch} at {record['batch_time']}: {check.detail}"
        assert changes_difference(previous, snapshot, _rows(q.changes_pandas())) is None
        previous = snapshot
        if result.clock_only:
            clock_batches.append(result.batch)

    # (minutes on the clock, the file fed then or None): the rows' times lie 7 minutes before T0
    # to 30 after it, the bound is 10 minutes
    steps = [(8, 0), (8, None), (12, None), (12.5, None), (14, None), (15, 1), (20, None), (26, 2)]
    try:
        for minutes, file in steps:
            now["t"] = T0 + int(minutes * MINUTE)
            if file is not None:
                pq.write_table(r.table(files[file]["R"]), str(src / f"{file:04d}.parquet"))
                fed.append(r.table(files[file]["R"]))
            result = q.process_available()
            if file is None and minutes in (8, 12.5):  # the clock did not move, or passed no row
                assert result is None, (minutes, result)
                continue
            assert result is not None and result.clock_only is (file is None), (minutes, result)
            checked(result)
        now["t"] = T0 + 60 * MINUTE  # the rest passed: run() removes them and still goes idle
        last = q.last_batch
        q.run(trigger=0.01, until_idle=0.2)
        assert q.last_batch == last + 1 and q.commit(last + 1)["clock_only"]
        assert previous and _rows(q.snapshot_pandas()) == []
    finally:
        q.stop()
    assert len(clock_batches) >= 3, clock_batches


@pytest.mark.parametrize("beside", ["", " AND k = 1"])
def test_event_time_bound_equals_duckdb_at_the_largest_event_time(spark, tmp_path, beside):
    """``max_event_time()``: each batch's time is the largest event time inserted so far (a
    deletion does not lower it, an older row does not move it) — of all the stream's rows, also
    those another conjunct beside the bound drops — rows older than it by the interval leave, and
    late rows (of those the other conjuncts keep) are dropped and counted."""
    sql = ("SELECT k, count(*) AS n, sum(v) AS t FROM R WHERE ts > max_event_time() - INTERVAL 10 MINUTES"
           f"{beside} GROUP BY k")
    oracle = lambda r: f"SELECT k, count(*), sum(v) FROM R WHERE {bound(10)(r)}{beside} GROUP BY k"  # noqa: E731
    kept = (lambda row: row[0] == 1) if beside else (lambda row: True)
    batches = random_stream(random.Random("event-time" + beside), [R], batches=4, max_rows=12, min_rows=6)
    output = OutputDir(str(tmp_path / "out"))
    seen: list[int] = []

    def check(batch, snapshot, prefix):
        record = output.read_commit(batch)
        seen.extend(_micros(row[1]) for row in batches[batch]["R"] if row[-1] > 0 and row[1] is not None)
        assert record["batch_time_us"] == max(seen), (batch, record["batch_time_us"], max(seen))
        late = sum(row[-1] for row in batches[batch]["R"]
                   if row[-1] > 0 and kept(row) and _micros(row[1]) <= max(seen) - 10 * MINUTE)
        assert record["late_rows"] == {"live": late}

    run = check_stream(spark, str(tmp_path), sql, [R], batches, oracle_sql=oracle, check=check)
    assert run.batches == 4 and any(run.snapshots)


def test_explain_analyze_shows_the_batch_time_and_late_rows():
    """No Spark: the text and JSON of ``explain --analyze`` read the commit record."""
    import json

    import streamfold
    from streamfold.runtime.analyze import Analyzed

    plan = streamfold.compile(QUERIES[0][1], {"R": R.schema_sql()})
    record = {"batch_time": "2024-01-01T00:31:00Z", "batch_time_us": T0 + 31 * MINUTE, "late_rows": {"live": 2}}
    text = Analyzed(4, record, plan).text("PLAN")
    assert "batch time of batch 4: 2024-01-01T00:31:00Z" in text and "late rows dropped: live 2" in text
    assert json.loads(Analyzed(4, record, plan).json("{}"))["late_rows"] == {"live": 2}
    assert "ran for the clock alone" not in text
    clock = {**record, "clock_only": True}
    assert "batch 4 ran for the clock alone" in Analyzed(4, clock, plan).text("PLAN")
    assert json.loads(Analyzed(4, clock, plan).json("{}"))["clock_only"] is True


L = Source("L", (("vid", "INT"), ("ts", "TIMESTAMP"), ("speed", "INT"), ("seg", "INT")), weighted=True)


@pytest.mark.parametrize("seed,weighted", [("linear-road-2", True), ("linear-road-3", True), ("linear-road-4", False)])
def test_two_event_time_bounds_of_one_column_read_one_clock_and_equal_duckdb(spark, tmp_path, monkeypatch, seed,
                                                                            weighted):
    """Linear Road's congestion query (seed 004 §4.2), scaled to the test's event times: the
    segments whose average speed over the last 10 minutes is low, and the cars reported in them
    in the last 4 — two bounds of one stream's column, one clock, each its own live rows; rows out
    of order and deleted, every batch against DuckDB at the batch time its commit records.
    Insert-only (``weighted=False``), every batch's earliest and latest event time come from its
    file's footers: no job reads them, and a batch with no late row reads no frame."""
    sql = ("SELECT count(r.vid) AS c, count(DISTINCT r.vid) AS cars FROM L r JOIN (SELECT seg FROM L "
           "WHERE ts > max_event_time() - INTERVAL 10 MINUTES GROUP BY seg HAVING avg(speed) < 2.5) s "
           "ON r.seg = s.seg WHERE r.ts > max_event_time() - INTERVAL 4 MINUTES")

    def oracle(record):
        return (f"SELECT count(r.vid), count(DISTINCT r.vid) FROM L r JOIN (SELECT seg FROM L WHERE {bound(10)(record)} "
                f"GROUP BY seg HAVING avg(speed) < 2.5) s ON r.seg = s.seg WHERE {bound(4, ts='r.ts')(record)}")

    source = L if weighted else Source(L.name, L.columns)
    batches = random_stream(random.Random(seed), [source], batches=6, max_rows=16, min_rows=6)
    output = OutputDir(str(tmp_path / "out"))
    late: list[list[int]] = []
    footers: list[object] = []
    read = batch_time.parquet_time_range
    monkeypatch.setattr(batch_time, "parquet_time_range", lambda *a: footers.append(read(*a)) or footers[-1])

    def weight(r):
        return r[-1] if weighted else 1

    def check(batch, snapshot, prefix):  # each bound's late rows, counted by one statement with the time
        record = output.read_commit(batch)
        now = record["batch_time_us"]
        rows = [r for r in batches[batch]["L"] if weight(r) > 0]
        assert now == max(_micros(r[1]) for b in batches[:batch + 1] for r in b["L"]
                          if weight(r) > 0 and r[1] is not None), batch
        late.append([sum(weight(r) for r in rows if _micros(r[1]) <= now - m * MINUTE) for m in (4, 10)])
        assert sorted(record["late_rows"].values()) == sorted(late[-1]), (batch, record["late_rows"], late[-1])

    run = check_stream(spark, str(tmp_path), sql, [source], batches, oracle_sql=oracle, check=check)
    assert run.batches == 6 and any(s != [(0, 0)] for s in run.snapshots), run.snapshots
    assert any(n for counts in late for n in counts), "no late row: the counts would prove nothing"
    if not weighted:  # the footers told every batch's times
        assert len(footers) == 6 and None not in footers, footers
    # batches 2–5 replay at their own event times
    assert [output.read_commit(b).get("prepared") for b in range(6)] == [None, "capture"] + ["replay"] * 4


def test_lost_live_rows_are_read_back_as_of_the_last_commit(spark, tmp_path):
    """The live rows' blocks lost before a batch (a worker gone: ``test_lost_states.py``) are read
    back from the checkpoint, which logs the rows that entered them, and restored as of the last
    committed batch's time — not the failed batch's, which would drop the rows expiring in it
    without their deletions — then the batch runs again; every answer equals DuckDB's at its time."""
    import pyarrow.parquet as pq

    import streamfold
    from streamfold.runtime.state import release

    sql = "SELECT k, count(*) AS n, sum(v) AS t FROM R WHERE ts > max_event_time() - INTERVAL 10 MINUTES GROUP BY k"
    oracle = lambda r: f"SELECT k, count(*), sum(v) FROM R WHERE {bound(10)(r)} GROUP BY k"  # noqa: E731
    src, out = tmp_path / "R", str(tmp_path / "out")
    src.mkdir()
    rng = random.Random("lost-live")
    files: list[dict] = []
    alive: list[tuple] = []
    for b in range(6):  # five minutes of events a batch: a ten-minute bound passes rows at every batch
        rows = [(rng.randint(0, 3), _at(5 * b - rng.randint(0, 4)), rng.randint(0, 9), 1) for _ in range(8)]
        if b >= 2:  # deletions of rows still inside the bound, and of rows it has passed
            gone = rng.sample(alive[-16:], 3)
            rows += [(k, ts, v, -1) for k, ts, v, _ in gone]
            for r in gone:
                alive.remove(r)
        alive += [r for r in rows if r[-1] > 0]
        files.append({"R": rows})
    q = streamfold.start(sql, {"R": str(src)}, out, spark=spark, background=False, partitions=2,
                         schemas={"R": R.schema_sql()}, compact_every=3)
    try:
        for b in range(6):
            pq.write_table(R.table(files[b]["R"]), str(src / f"{b:04d}.parquet"))
            if b in (2, 4):
                for df in list(q.engine.store.backings()):
                    release(df)
                time.sleep(1)  # unpersisting is asynchronous
            assert q.process_available() is not None
            record = q.commit(b)
            if b in (2, 4):
                assert "recovered" in record, record
            prefix = {"R": [R.table(files[i]["R"]) for i in range(b + 1)]}
            check = compare(_rows(q.snapshot_pandas(b)), duckdb_answer(sql, prefix, duckdb_sql=oracle(record)))
            assert check.matches, f"batch {b}: {check.detail}"
    finally:
        q.stop()


def _at(minutes: int) -> dt.datetime:
    return dt.datetime.fromtimestamp((T0 + minutes * MINUTE) / 1e6, dt.timezone.utc)
