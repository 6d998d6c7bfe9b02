"""Controlling a running query through the Python API: pause and resume, breakpoints, inspect,
reconfiguration (restate and from now on), history. Every committed snapshot is checked against
DuckDB under the query version it was committed under (tests/controlled.py)."""

from __future__ import annotations

import os
import threading
import time

import pyarrow as pa
import pytest

import streamfold
from streamfold.errors import StreamfoldError

from ..controlled import Feed, check_every_commit, wait_for
from streamfold.verify import duckdb_answer

pytestmark = pytest.mark.spark

SQL = "SELECT k, sum(v) AS s, count(*) AS n FROM S GROUP BY k"


def start(spark, tmp_path, sql: str = SQL, **options):
    feed = Feed(str(tmp_path / "S"))
    out = str(tmp_path / "out")
    q = streamfold.start(sql, {"S": feed.directory}, out, schemas={"S": "k INT, v BIGINT"}, spark=spark,
                         trigger=0.1, partitions=2, endpoint=False, **options)
    return q, feed, out


def paused(q) -> bool:
    return q.status()["state"] == "paused"


def code_of(call) -> str:
    with pytest.raises(StreamfoldError) as e:
        call()
    return e.value.code


def test_a_pause_between_batches_holds_new_files_until_resume(spark, tmp_path):
    q, feed, out = start(spark, tmp_path)
    try:
        feed.put([(1, 5), (2, 7)])
        q.wait_for_batch(0, timeout=180)
        status = q.pause()
        assert status["state"] == "paused" and status["pause"]["step"] == "between batches"
        feed.put([(1, 1)])
        time.sleep(1.0)  # ten polls' worth
        assert q.last_batch == 0 and paused(q)
        assert q.resume()["state"] in ("running", "idle")
        q.wait_for_batch(1, timeout=180)
        assert code_of(q.resume) == "NOT_PAUSED"
        actions = [(r["action"], r.get("batch")) for r in q.history()]
        assert ("pause", 1) in actions and ("resume", 1) in actions
    finally:
        q.stop()
    check_every_commit(out, feed, SQL)


def test_a_pause_inside_a_batch_waits_at_a_step_boundary_and_commits_nothing_until_resume(spark, tmp_path):
    sql = "SELECT k, count(DISTINCT v) AS d, sum(v) AS s FROM S GROUP BY k"  # two states, two steps
    holder: dict = {}

    def progress(message: str) -> None:  # the engine's thread, inside batch 1 (one prepared job: its answer step)
        if message.startswith(("batch 000001: Δ", "batch 000001: answer")) and "q" in holder and not holder.get("asked"):
            holder["asked"] = True
            holder["q"].pause(wait=False)

    q, feed, out = start(spark, tmp_path, sql, progress=progress)
    holder["q"] = q
    try:
        feed.put([(1, 5), (1, 6), (2, 7)])
        q.wait_for_batch(0, timeout=180)
        feed.put([(1, 5), (3, 1)])
        wait_for(lambda: paused(q), what="the pause")
        status = q.status()
        assert status["in_batch"] and status["pause"]["batch"] == 1 and status["pause"]["step"] != "between batches"
        assert status["last_committed"] == 0 and not os.path.exists(os.path.join(out, "commits", "000001.json"))
        seen = q.inspect("SELECT count(*) FROM snapshot")
        assert seen["batch"] == 0 and seen["committed"] and seen["rows"] == [[2]]
        q.resume()
        q.wait_for_batch(1, timeout=180)
    finally:
        q.stop()
    check_every_commit(out, feed, sql)


def test_a_pause_cancels_a_step_that_runs_long_and_runs_it_again_after_resume(spark):
    from streamfold.control.pause import Gate

    session, tag = spark.newSession(), "streamfold-test-cancel"
    sc = spark.sparkContext
    gate = Gate(cancel=lambda: sc.cancelJobsWithTag(tag),
                tag=lambda on: sc.addJobTag(tag) if on else sc.removeJobTag(tag), grace=0.05)
    calls: list[int] = []

    def step() -> int:  # a job of minutes the first time; small when run again
        calls.append(1)
        n = 10**12 if len(calls) == 1 else 1000
        # (sum of id % 7, not of id: a task's running sum of id overflows a long within its first
        # 10^8 rows, and the job would fail before the pause came on an idle machine)
        return session.range(n).selectExpr("sum(id % 7) AS s").collect()[0][0]

    result: dict = {}
    worker = threading.Thread(target=lambda: result.setdefault("value", gate.guard(0, "long step", step)))
    worker.start()
    wait_for(lambda: calls and session.sparkContext.statusTracker().getActiveJobsIds(), what="the long job")
    gate.request("pause")
    assert gate.wait_paused(120)
    assert gate.cancellations == 1 and len(calls) == 1 and gate.waiting_at.step == "long step"
    gate.release()
    worker.join(120)
    assert result["value"] == sum(i % 7 for i in range(1000)) and len(calls) == 2


def test_a_halt_cancels_a_step_that_runs_long_and_the_query_stops_there(spark):
    """The studio's Stop during a long batch 0 (issue 58): the step's jobs are cancelled and its
    thread stops at its point; the step is not run again."""
    from streamfold.control.pause import Gate
    from streamfold.runtime.hooks import QueryStopped

    session, tag = spark.newSession(), "streamfold-test-halt"
    sc = spark.sparkContext
    gate = Gate(cancel=lambda: sc.cancelJobsWithTag(tag),
                tag=lambda on: sc.addJobTag(tag) if on else sc.removeJobTag(tag))
    calls: list[int] = []
    outcome: dict = {}

    def step() -> int:  # a job of minutes
        calls.append(1)
        return session.range(10**12).selectExpr("sum(id % 7) AS s").collect()[0][0]

    def work() -> None:
        try:
            outcome["value"] = gate.guard(0, "long step", step)
        except QueryStopped:
            outcome["stopped"] = True

    worker = threading.Thread(target=work)
    worker.start()
    wait_for(lambda: calls and session.sparkContext.statusTracker().getActiveJobsIds(), what="the long job")
    gate.halt()
    worker.join(60)
    assert not worker.is_alive() and outcome == {"stopped": True} and len(calls) == 1


def test_a_source_breakpoint_stops_the_batch_uncommitted_then_resume_commits_it_and_skip_drops_its_files(spark, tmp_path):
    q, feed, out = start(spark, tmp_path)
    try:
        feed.put([(1, 5)])
        q.wait_for_batch(0, timeout=180)
        bp = q.add_breakpoint("source", "S", "v < 0")
        bad = feed.put([(1, -3), (2, 4)])
        wait_for(lambda: paused(q), what="the breakpoint")
        hit = q.status()["breakpoint"]
        assert hit["breakpoint"]["id"] == bp["id"] and hit["batch"] == 1 and hit["files"] == {"S": [bad]}
        assert hit["rows"] == [{"k": 1, "v": -3, "_weight": 1, "_file": bad}]
        assert os.path.exists(os.path.join(out, "breakpoints", "000001", f"{bp['id']}.parquet"))
        assert not os.path.exists(os.path.join(out, "commits", "000001.json"))
        pending = q.inspect("SELECT s FROM snapshot WHERE k = 1")
        assert (pending["batch"], pending["committed"], pending["rows"]) == (1, False, [[2]])
        assert q.inspect("SELECT count(*) FROM delta_S")["rows"] == [[2]]
        q.resume()  # commits the batch as it is
        q.wait_for_batch(1, timeout=180)
        q.pause()
        skipped, kept = feed.put([(3, -1)]), feed.put([(4, 9)])
        q.resume()
        wait_for(lambda: paused(q), what="the second hit")
        assert q.status()["breakpoint"]["files"] == {"S": [skipped]}
        q.skip()
        q.wait_for_batch(2, timeout=180)
        assert q.commit(2)["inputs"] == {"S": [kept]}
        assert os.path.exists(os.path.join(out, "quarantine", "S", skipped))
        assert code_of(q.skip) == "SKIP_NOT_APPLICABLE"
    finally:
        q.stop()
    check_every_commit(out, feed, SQL)


def test_changes_state_and_after_breakpoints_stop_where_their_conditions_hold(spark, tmp_path):
    q, feed, out = start(spark, tmp_path)
    try:
        feed.put([(1, 5)])
        q.wait_for_batch(0, timeout=180)
        assert code_of(lambda: q.add_breakpoint("source", "S", "nope > 1")) == "BREAKPOINT_BAD_CONDITION"
        assert code_of(lambda: q.add_breakpoint("source", "S", "(SELECT 1) = 1")) == "BREAKPOINT_BAD_CONDITION"
        assert code_of(lambda: q.add_breakpoint("source", "T", "v > 1")) == "BREAKPOINT_UNKNOWN_TARGET"
        assert code_of(lambda: q.add_breakpoint("state", "nope", "_weight > 1")) == "BREAKPOINT_UNKNOWN_TARGET"
        assert code_of(lambda: q.add_breakpoint("sometimes")) == "BREAKPOINT_BAD_KIND"

        on_changes = q.add_breakpoint("changes", condition="s > 100 AND _weight > 0")
        feed.put([(1, 200), (2, 1)])
        wait_for(lambda: paused(q), what="the changes breakpoint")
        assert q.status()["breakpoint"]["rows"] == [{"k": 1, "s": 205, "n": 2, "_weight": 1}]
        q.resume()
        q.wait_for_batch(1, timeout=180)
        q.remove_breakpoint(on_changes["id"])

        q.add_breakpoint("state", "agg", "_weight >= 3")
        feed.put([(2, 1), (2, 2)])
        wait_for(lambda: paused(q), what="the state breakpoint")
        rows = q.status()["breakpoint"]["rows"]
        assert [(r["S.k"], r["_weight"]) for r in rows] == [(2, 3)]
        q.resume()
        q.wait_for_batch(2, timeout=180)
        assert code_of(lambda: q.remove_breakpoint("b99")) == "BREAKPOINT_UNKNOWN"
        for b in q.breakpoints():
            q.remove_breakpoint(b["id"])

        after = q.add_breakpoint("after", after=2)
        assert after["batch"] == 4
        feed.put([(5, 5)])
        q.wait_for_batch(3, timeout=180)
        feed.put([(6, 6)])
        wait_for(lambda: paused(q), what="the after breakpoint")
        assert q.status()["breakpoint"]["batch"] == 4
        q.resume()
        q.wait_for_batch(4, timeout=180)
    finally:
        q.stop()
    check_every_commit(out, feed, SQL)


def test_inspect_reads_the_snapshot_the_states_and_the_last_batch_and_refuses_anything_else(spark, tmp_path):
    q, feed, out = start(spark, tmp_path)
    try:
        feed.put([(1, 5), (1, 6), (2, 7)])
        q.wait_for_batch(0, timeout=180)
        feed.put([(2, 1)])
        q.wait_for_batch(1, timeout=180)
        assert q.inspect("SELECT k, s, n FROM snapshot ORDER BY k")["rows"] == [[1, 11, 2], [2, 8, 2]]
        assert q.inspect("SELECT * FROM changes ORDER BY k, _weight")["rows"] == [[2, 7, 1, -1], [2, 8, 2, 1]]
        state = q.inspect("SELECT `S.k`, _weight, `sum(S.v)` FROM agg ORDER BY 1")
        assert state["rows"] == [[1, 2, 11], [2, 2, 8]] and state["batch"] == 1 and state["committed"]
        assert q.inspect("WITH d AS (SELECT * FROM delta_S) SELECT k, v, _weight FROM d")["rows"] == [[2, 1, 1]]
        assert q.inspect_pandas("SELECT k FROM snapshot ORDER BY k")["k"].tolist() == [1, 2]
        assert q.inspect("SELECT k FROM snapshot", limit=1)["truncated"]
        for sql in ("INSERT INTO agg SELECT * FROM agg", "DROP TABLE agg", "CREATE TABLE x AS SELECT 1",
                    "SELECT 1; SELECT 2", "CACHE TABLE agg", "SET spark.sql.shuffle.partitions=1"):
            assert code_of(lambda sql=sql: q.inspect(sql)) == "INSPECT_NOT_A_QUERY", sql
        for sql in ("SELECT * FROM S", "SELECT * FROM parquet.`/tmp`", "SELECT * FROM range(3)"):
            assert code_of(lambda sql=sql: q.inspect(sql)) == "INSPECT_UNKNOWN_TABLE", sql
        forbidden = "SELECT reflect('java.lang.System', 'exit', '0') FROM snapshot"
        assert code_of(lambda: q.inspect(forbidden)) == "INSPECT_FORBIDDEN_FUNCTION"
        assert code_of(lambda: q.inspect("SELECT nope FROM snapshot")) == "INSPECT_FAILED"
    finally:
        q.stop()


def test_restate_keeps_shared_states_rebuilds_the_others_from_history_and_commits_new_minus_old(spark, tmp_path):
    first = f"{SQL} HAVING count(*) > 1"
    threshold = f"{SQL} HAVING count(*) > 2"  # the answer only: every state is kept
    filtered = "SELECT k, sum(v) AS s, count(*) AS n FROM S WHERE v > 2 GROUP BY k"  # agg rebuilt
    narrower = "SELECT k, sum(v) AS s FROM S WHERE v > 2 GROUP BY k"  # columns change: a reset
    q, feed, out = start(spark, tmp_path, first)
    try:
        feed.put([(1, 5), (1, 1), (2, 7), (2, 3), (2, 9), (3, 4)])
        q.wait_for_batch(0, timeout=180)
        done = q.reconfigure(threshold, wait=True)
        assert (done["kept_states"], done["rebuilt_states"], done["result"]["batch"]) == (["agg"], [], 1)
        assert q.commit(1)["inputs"] == {"S": []} and q.commit(1)["query_version"] == 2
        # no file came: the new answer is committed from the kept states, h not run, nothing read
        q.wait_for_batch(1, timeout=60)
        first_under_new = next(r for r in q.results if r.batch == 1)
        assert [p for p in first_under_new.timings if p.startswith(("h ", "read"))] == []
        feed.put([(1, 2), (3, 1)])
        q.wait_for_batch(2, timeout=180)

        # at a breakpoint, reconfigure first: the stopped batch runs again under the new query
        q.add_breakpoint("source", "S", "v < 0")
        feed.put([(1, -4), (4, 8)])
        wait_for(lambda: paused(q), what="the breakpoint")
        rebuilt = q.reconfigure(filtered)
        assert rebuilt["rebuilt_states"] == ["agg"] and rebuilt["kept_states"] == []
        assert code_of(lambda: q.reconfigure(narrower)) == "RECONFIGURE_PENDING"
        q.resume()
        q.wait_for_batch(3, timeout=180)
        assert q.commit(3)["query_version"] == 3 and q.commit(3)["inputs"]["S"] == ["0002.parquet"]

        q.reconfigure(narrower, wait=True)
        assert q.commit(4)["reset"] is True
        feed.put([(5, 3)])
        q.wait_for_batch(5, timeout=180)
        assert [q.commit(b)["query_version"] for b in range(6)] == [1, 2, 2, 3, 4, 4]
    finally:
        q.stop()
    check_every_commit(out, feed, first)


def test_a_reconfiguration_received_while_paused_after_a_commit_applies_at_the_next_batch(spark, tmp_path):
    """A pause that lands after a batch's commit (in its compaction) must not redo that batch."""
    q, feed, out = start(spark, tmp_path)
    committed = q.controller.committed

    def then_pause(batch: int, record: dict) -> None:  # the engine's thread: compaction comes next
        committed(batch, record)
        if batch == 0:
            q.pause(wait=False)

    q.controller.committed = then_pause
    try:
        feed.put([(1, 5), (2, 6)])
        wait_for(lambda: paused(q), what="the pause after batch 0's commit")
        assert q.status()["pause"]["step"] == "compact"
        q.reconfigure(f"{SQL} HAVING count(*) > 0")
        q.resume()
        q.wait_for_batch(1, timeout=180)
    finally:
        q.stop()
    records = check_every_commit(out, feed, SQL)
    assert [r["query_version"] for r in records] == [1, 2] and records[1]["inputs"] == {"S": []}


def test_from_now_on_applies_the_new_logic_to_the_rows_after_the_boundary(spark, tmp_path):
    old = "SELECT k, sum(v) AS s, count(*) AS n FROM S WHERE v > 10 GROUP BY k"
    new = "SELECT k, sum(v) AS s, count(*) AS n, max(v) AS m FROM S WHERE v > 5 GROUP BY k"
    q, feed, out = start(spark, tmp_path, old)
    try:
        feed.put([(1, 7), (1, 20), (2, 12)])
        q.wait_for_batch(0, timeout=180)
        assert code_of(lambda: q.reconfigure("SELECT v, count(*) AS n FROM S GROUP BY v", "from now on")) \
            == "RECONFIGURE_CANNOT_TRANSFORM"
        assert code_of(lambda: q.reconfigure("SELECT k, count(DISTINCT v) AS d FROM S GROUP BY k", "from now on")) \
            == "RECONFIGURE_CANNOT_TRANSFORM"
        done = q.reconfigure(new, "from now on", wait=True)
        assert done["mixed_states"] == ["agg"] and done["result"]["batch"] == 1
        feed.put([(1, 8), (2, 3), (3, 6)])
        q.wait_for_batch(2, timeout=180)
    finally:
        q.stop()
    empty = pa.table({"k": pa.array([], pa.int32()), "v": pa.array([], pa.int64())})

    def oracle(batch: int, version: int, consumed: list[str]) -> list[tuple]:
        if version == 1:
            return duckdb_answer(old, {"S": [feed.tables[n] for n in consumed]})
        before, after = [feed.tables[consumed[0]], empty], [feed.tables[n] for n in consumed[1:]] + [empty]
        both = ("SELECT k, sum(v), count(*), max(m) FROM (SELECT k, v, NULL AS m FROM B WHERE v > 10 "
                "UNION ALL SELECT k, v, v AS m FROM A WHERE v > 5) GROUP BY k")
        return duckdb_answer("", {"B": before, "A": after}, duckdb_sql=both)

    check_every_commit(out, feed, old, oracle=oracle)


def test_a_reconfiguration_that_does_not_compile_is_refused_and_the_query_runs_on(spark, tmp_path):
    q, feed, out = start(spark, tmp_path)
    try:
        feed.put([(1, 5)])
        q.wait_for_batch(0, timeout=180)
        assert code_of(lambda: q.reconfigure("SELECT k, sum(nope) FROM S GROUP BY k")) == "UNKNOWN_COLUMN"
        assert code_of(lambda: q.reconfigure("SELEC k FROM S")) == "PARSE_ERROR"
        assert code_of(lambda: q.reconfigure(SQL, "sideways")) == "BAD_SEMANTICS"
        feed.put([(1, 6)])
        q.wait_for_batch(1, timeout=180)
        assert q.commit(1)["query_version"] == 1 and q.status()["query"]["version"] == 1
    finally:
        q.stop()
    check_every_commit(out, feed, SQL)


def test_a_reconfiguration_whose_answer_does_not_fit_the_sinks_tables_is_refused(spark, tmp_path):
    """A Delta sink keeps the answer's columns and key: a new query with another column, another
    type or another key is refused with a coded error before anything changes; one with the same
    answer applies, and the sink's table follows it."""
    from tests.sinks.oracle import delta_rows

    delta = str(tmp_path / "answer")
    q, feed, out = start(spark, tmp_path, sinks=[f"{delta}:delta"])
    try:
        feed.put([(1, 5), (2, 7)])
        q.wait_for_batch(0, timeout=180)
        for sql in ("SELECT k, sum(v) AS s FROM S GROUP BY k",  # a column less
                    "SELECT k, sum(v) AS s, count(*) AS n, max(v) AS m FROM S GROUP BY k",  # a column more
                    "SELECT k, avg(v) AS s, count(*) AS n FROM S GROUP BY k",  # another type
                    "SELECT k, v AS s, 1 AS n FROM S"):  # no key: a multiset
            assert code_of(lambda sql=sql: q.reconfigure(sql)) == "RECONFIGURE_SINK_ANSWER", sql
        same = "SELECT k, sum(v) AS s, count(*) AS n FROM S WHERE v > 5 GROUP BY k"
        q.reconfigure(same, wait=True)
        feed.put([(1, 9)])
        q.wait_for_batch(2, timeout=180)
        assert sorted(delta_rows(delta)) == [(1, 9, 1), (2, 7, 1)]
    finally:
        q.stop()
