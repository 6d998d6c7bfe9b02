"""States kept as a base and a tail (streamfold/runtime/runs.py) — join inputs, and aggregates,
counts and outputs read through their merge's touched keys: the same answers as DuckDB's
after every batch, whether a batch merges into the tail, folds it into the base, or starts the
runs; which states qualify; and that the layout is really used."""

from __future__ import annotations

import itertools
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import streamfold
from streamfold.runtime import shape
from streamfold.runtime import runs
from streamfold.settings import env_name

from ..streams import Source, check_stream
from ..strategies import stream, table_rows
from .test_differential import QUERIES, SETTINGS, SUBQUERY_SHAPES, _sources

pytestmark = [pytest.mark.spark]


def runs_settings(monkeypatch, min_rows: int, fold: float | None) -> None:
    """The settings runs_min_rows and runs_fold of the runs started next (the environment's: the
    run reads them when it starts)."""
    monkeypatch.setenv(env_name("runs_min_rows"), str(min_rows))
    if fold is None:
        monkeypatch.delenv(env_name("runs_fold"), raising=False)
    else:
        monkeypatch.setenv(env_name("runs_fold"), repr(fold))


# Queries whose plans have states that may be kept as runs (join inputs that only inner joins read;
# aggregates, counts and outputs read through joins, deltas and their merge's touched keys), and
# shapes around them that must keep their states whole (semi joins' counts, answers that read a state).
# (join-plain, join-global, join-residual, comma-join and join-nested-aggregate are the same shapes
# of join inputs as these, join-nested-distinct and exists-non-equi of states read on their touched
# keys, exists-not-equal-self of counts per key and value as exists-and-not-exists-not-equal's;
# STREAMFOLD_RUNS_ALL=1 adds them)
JOINS = {"join-groupby-seed", "self-join-three-way", "stream-static-stream", "join-distinct-agg",
         "not-exists-correlated", "left-join-count", "intersect-all", "exists-and-not-exists-not-equal"} | (
    {"join-plain", "join-global", "join-residual", "comma-join", "join-nested-aggregate", "join-nested-distinct",
     "exists-non-equi", "exists-not-equal-self"}
    if os.environ.get("STREAMFOLD_RUNS_ALL") else set())
CASES = [q for q in QUERIES + SUBQUERY_SHAPES if q[0] in JOINS] + [
    ("left-join-groupby", "SELECT R.a, count(S.k), sum(S.v) FROM R LEFT JOIN S ON R.a = S.k GROUP BY R.a", "RS", False),
    # TPC-H Q18's shape: the IN's aggregate (its HAVING read from the merge's touched keys) and
    # the semi join's left rows (read by an inner join with the keys whose matches flipped)
    ("in-having", "SELECT R.a, sum(R.b) FROM R WHERE R.a IN (SELECT k FROM S GROUP BY k HAVING sum(v) > 2) "
     "GROUP BY R.a", "RS", False),
    # TPC-H Q17's shape: a correlated scalar aggregate compared with each row
    ("scalar-avg-below", "SELECT sum(R.b) FROM R WHERE R.b < (SELECT avg(v) FROM S WHERE S.k = R.a)", "RS", False),
    ("exists-join", "SELECT R.a, sum(S.v) FROM R JOIN S ON R.a = S.k WHERE EXISTS (SELECT 1 FROM S x WHERE x.k = R.b) "
     "GROUP BY R.a", "RS", False),
]
_counter = itertools.count()


@pytest.mark.slow
@pytest.mark.parametrize("qid,sql,uses,ordered", CASES, ids=[c[0] for c in CASES])
@SETTINGS
@given(data=st.data(), fold=st.sampled_from([0.0, 0.3, 1000.0, None]), hashed=st.booleans())
def test_runs_equal_duckdb_with_deletions(spark, tmp_path_factory, monkeypatch, qid, sql, uses, ordered, data,
                                          fold, hashed):
    # Every candidate kept in runs from its first merged batch; fold 0: every batch folds, 1000:
    # none does (the tail grows for the whole run), None: the bound from each batch's size
    # (runs.fold_fraction); both state layouts (one partition, hashed).
    monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
    runs_settings(monkeypatch, 0, fold)
    if hashed:
        monkeypatch.setattr(shape, "ONE_TASK_ROWS", 0)
    sources = _sources(uses, True)
    batches = data.draw(stream(sources, min_batches=4, max_batches=7, max_rows=10, min_rows=1), label="batches")
    tables = {s.name: data.draw(table_rows(s), label=s.name) for s in sources if s.static}
    tmp = str(tmp_path_factory.mktemp(f"runs-{qid}-{next(_counter)}"))
    check_stream(spark, tmp, sql, sources, batches, tables, ordered=ordered)


def test_join_inputs_read_by_inner_joins_are_candidates():
    schemas = {"R": "a INT, b INT", "S": "k INT, v INT"}

    def of(sql: str) -> tuple[set[str], set[str]]:
        plan = streamfold.compile(sql, schemas)
        return set(runs.candidates(plan)), {s.name for s in plan.states if s.role == "join input"}

    got, inputs = of("SELECT R.a, sum(S.v) FROM R JOIN S ON R.a = S.k GROUP BY R.a")
    assert got == inputs == {"in_R", "in_S"}
    # an outer join's padded rows come from a counts state, looked up for the batch's keys and
    # added up; its join inputs are read by inner joins, and so is its left side's state (joined
    # with the keys whose matches flipped)
    assert of("SELECT R.a, S.v FROM R LEFT JOIN S ON R.a = S.k") == ({"in_R", "in_S", "left", "matches"},
                                                                       {"in_R", "in_S"})
    # a theta join is laid out over a join matrix (cells in its states' keys): kept whole
    got, inputs = of("SELECT R.a, count(*) FROM R JOIN S ON R.a < S.k GROUP BY R.a")
    assert got == set() and inputs
    # a correlated scalar's aggregate is read from its merge's touched keys, and its left join's
    # sides as above: candidates too
    got, inputs = of("SELECT R.a, (SELECT sum(v) FROM S WHERE S.k = R.a) FROM R")
    assert got == {"agg", "in_R", "in_d1", "left", "matches"} and inputs == {"in_R", "in_d1"}


def test_states_read_through_their_merges_touched_keys_are_candidates():
    """Aggregates, counts and outputs whose every read is a join side, their delta, or their merge
    filtered on the touched keys (plan/runs.py); not one the answer shows, nor one with min/max."""
    schemas = {"R": "a INT, b INT", "S": "k INT, v INT"}

    def of(sql: str) -> tuple[set[str], dict[str, str]]:
        plan = streamfold.compile(sql, schemas)
        return set(runs.candidates(plan)), {s.name: s.role.value for s in plan.states}

    # TPC-H Q18's shape: both aggregates (the answer shows the semi join's rows, state out), the
    # semi join's left rows, and its counts (looked up for the batch's keys and added up per key)
    got, roles = of("SELECT R.a, sum(R.b) FROM R WHERE R.a IN (SELECT k FROM S GROUP BY k HAVING sum(v) > 2) "
                    "GROUP BY R.a")
    assert got == {"agg", "agg2", "left", "matches"} and roles["matches"] == "counts" and roles["out"] == "output"
    assert of("SELECT a, count(*) FROM R GROUP BY a")[0] == set()  # the answer reads the aggregate
    # a min is not a sum: its aggregate stays whole (its multiset too); the left rows need not
    got, roles = of("SELECT a, min(b) FROM (SELECT a, b FROM R WHERE a IN (SELECT k FROM S GROUP BY k "
                    "HAVING min(v) > 2)) x GROUP BY a")
    assert got == {"left", "matches"}
    assert of("SELECT count(*) FROM (SELECT DISTINCT a FROM R) d")[0] == {"distinct"}  # not the global row
    # TPC-H Q21's shape: the counts per key and value of a semi join on equalities and one <>,
    # looked up for the batch's keys and the touched ones, added up per key and value
    got, roles = of("SELECT a, count(*) FROM R WHERE EXISTS (SELECT 1 FROM S WHERE S.k = R.a AND S.v <> R.b) "
                    "GROUP BY a")
    assert "pairs" in got and roles["pairs"] == "counts"


def test_a_state_is_kept_in_runs_when_large_and_touched_little(monkeypatch):
    monkeypatch.setattr(runs, "MAX_TOUCHED", 0.3)
    assert not runs.worth_it(999, 1, min_rows=1000)  # small: a whole merge costs little
    assert runs.worth_it(10_000, 500, min_rows=1000)  # 5 % a batch
    assert runs.worth_it(10_000, 1_300, min_rows=1000)  # 13 % (join-groupby's 40K rows into ~300K): still pays
    assert not runs.worth_it(10_000, 3_001, min_rows=1000)  # nearly half: the tail would cost what it saves
    assert runs.worth_it(10_000, 10_000, min_rows=1000)  # the history touched every key: nothing known yet
    assert runs.worth_it(10_000, None, min_rows=1000)


def test_a_tail_is_folded_at_the_fraction_that_costs_least():
    """√(2x) of the base for batches touching x of it (runs.py's docstring), within its bounds;
    a fixed fraction (the setting runs_fold) wins."""
    assert runs.fold_fraction(1_000_000, 10_000) == runs.MIN_FOLD_FRACTION  # 1 %: √0.02 = 0.14, the floor
    assert runs.fold_fraction(1_000_000, 50_000) == pytest.approx(0.3162, abs=1e-4)  # 5 %
    assert runs.fold_fraction(300_000, 40_000) == pytest.approx((2 * 40_000 / 300_000) ** 0.5)  # 13 %: 0.52
    assert runs.fold_fraction(100, 90) == 1.0  # never past the base itself
    assert runs.fold_fraction(1_000, None) == runs.MIN_FOLD_FRACTION
    assert runs.fold_fraction(300_000, 40_000, fixed=0.0) == 0.0


@pytest.mark.parametrize("fold", [0.5, None], ids=["fixed", "adaptive"])
def test_a_long_run_folds_and_restarts_from_logged_deltas(spark, tmp_path, monkeypatch, fold):
    """Twelve batches with deletions over a join: the states start their runs, tails grow and fold
    (after a batch's commit, without ending the prepared plans: batches after a fold replay them),
    and a restart rebuilds the states by adding up the logged deltas; every answer DuckDB's. The
    fold bound fixed, or each fold's from the batch before (runs.fold_fraction)."""
    monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
    runs_settings(monkeypatch, 0, fold)
    sql = "SELECT R.a, count(*) AS n, sum(S.v) AS t FROM R JOIN S ON R.b = S.k GROUP BY R.a"
    r, s = Source("R", (("a", "INT"), ("b", "INT")), weighted=True), Source("S", (("k", "INT"), ("v", "INT")), weighted=True)
    dirs = {x.name: tmp_path / "in" / x.name for x in (r, s)}
    for d in dirs.values():
        d.mkdir(parents=True)
    live: dict[str, list[tuple]] = {"R": [], "S": []}
    seen_tail = False
    folds = 0  # folds so far, of this store and of the one before the restart
    replayed_after_fold = 0
    named_folds = 0
    query = None

    def start():
        return streamfold.start(sql, {n: str(d) for n, d in dirs.items()}, str(tmp_path / "out"), spark=spark,
                                background=False, partitions=2, schemas={"R": r.schema_sql(), "S": s.schema_sql()})

    import duckdb

    query = start()
    try:
        for i in range(12):
            for src, key in ((r, "R"), (s, "S")):
                rows = [(i * 7 + j, (i + j) % 5, 1) for j in range(6)] if key == "R" else \
                       [((i + j) % 5, i * 10 + j, 1) for j in range(4)]
                if i % 3 == 2 and live[key]:  # delete the oldest two rows
                    rows += [row[:-1] + (-1,) for row in live[key][:2]]
                    live[key] = live[key][2:]
                live[key] += [x for x in rows if x[-1] > 0]
                pq.write_table(src.table(rows), str(dirs[key] / f"{i:04d}.parquet"))
            if i == 6:  # kill and restart between batches: states restored from the changelogs
                query.stop()
                query = start()
            before = query.engine.store.folds
            result = query.process_available()
            assert result is not None
            store = query.engine.store
            seen_tail |= any(t is not None for t in store.tails.values())
            if folds and query.commit(result.batch).get("prepared") == "replay":
                replayed_after_fold += 1
            folds += store.folds - before
            if store.folds > before:  # its job is named as maintenance (Spark's UI; the soak's plan count)
                listed = spark._jsparkSession.sharedState().statusStore().executionsList()
                last = str(listed.apply(listed.size() - 1).description() or "")
                named_folds += last.startswith(runs.FOLD_JOB)
            assert store.bases or i == 0, "the join inputs are kept as runs from batch 1"
            con = duckdb.connect()
            con.register("R", pa.table({"a": [x[0] for x in live["R"]], "b": [x[1] for x in live["R"]]}))
            con.register("S", pa.table({"k": [x[0] for x in live["S"]], "v": [x[1] for x in live["S"]]}))
            want = sorted(con.execute(sql).fetchall())
            got = sorted(tuple(x) for x in query.snapshot_pandas().itertuples(index=False, name=None))
            assert got == want, f"batch {i}"
    finally:
        query.stop()
    assert seen_tail and folds and replayed_after_fold and named_folds


def _join_sum_in_runs(spark, tmp_path, monkeypatch):
    """``SELECT R.a, sum(S.v) … JOIN … GROUP BY R.a`` started over two empty source directories,
    every join input kept in runs from batch 1 and never folded (the tail keeps growing)."""
    monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
    runs_settings(monkeypatch, 0, 1000.0)
    r, s = Source("R", (("a", "INT"), ("b", "INT"))), Source("S", (("k", "INT"), ("v", "INT")))
    dirs = {x.name: tmp_path / "in" / x.name for x in (r, s)}
    for d in dirs.values():
        d.mkdir(parents=True)
    q = streamfold.start("SELECT R.a, sum(S.v) AS t FROM R JOIN S ON R.b = S.k GROUP BY R.a",
                         {n: str(d) for n, d in dirs.items()}, str(tmp_path / "out"), spark=spark,
                         background=False, partitions=2, schemas={"R": r.schema_sql(), "S": s.schema_sql()})
    return q, r, s, dirs


def test_inspection_sees_a_state_in_runs_one_row_per_key(spark, tmp_path, monkeypatch):
    """A key with rows in the base and in the tail is shown once, its runs added up."""
    q, r, s, dirs = _join_sum_in_runs(spark, tmp_path, monkeypatch)
    try:
        for i in range(3):  # key 1 of S gets a row in every batch: in the base, then twice in the tail
            pq.write_table(r.table([(i, 1)]), str(dirs["R"] / f"{i}.parquet"))
            pq.write_table(s.table([(1, 10 + i), (2 + i, 5)]), str(dirs["S"] / f"{i}.parquet"))
            assert q.process_available() is not None
        store = q.engine.store
        assert "in_S" in store.bases and store.tails["in_S"] is not None
        # S pre-aggregated on k: key 1 is (1 row, sum 10) in the base and (2 rows, sum 23) in the tail
        rows = q.inspect("SELECT `S.k`, _weight, `sum(S.v)` FROM in_S ORDER BY 1")["rows"]
        assert rows == [[1, 3, 33], [2, 1, 5], [3, 1, 5], [4, 1, 5]]
    finally:
        q.stop()


def test_after_a_large_history_the_first_increment_is_prepared(spark, tmp_path, monkeypatch):
    """A merge into nothing — batch 0's history, the first merge into an empty tail — counts every
    key it holds as touched (Spark drops a union with an empty side, and the delta's row count
    with it), so the engine sizes the next batch's outputs from it instead of from the states'
    rows: with the bound of a lazy batch below the history's rows, batch 1's plans are captured
    after batch 0's commit (over the base and its empty tail) and batch 1 on replays them, each
    counting the keys it touched (before, at SF 1: batches 1 and 2 planned eagerly, the capture at
    3; until stop 42 batch 1 was the capture)."""
    monkeypatch.setattr(shape, "SMALL_ROWS", 100)  # the history's 400 rows are "large"
    monkeypatch.setattr(shape, "AHEAD_MIN_ROWS", 400)
    q, r, s, dirs = _join_sum_in_runs(spark, tmp_path, monkeypatch)
    try:
        pq.write_table(r.table([(i % 3, i) for i in range(200)]), str(dirs["R"] / "0.parquet"))
        pq.write_table(s.table([(i, i) for i in range(200)]), str(dirs["S"] / "0.parquet"))
        assert q.process_available() is not None
        store = q.engine.store
        assert store.touched == {n: store.rows[n] for n in store.touched}, "a history touched every key"
        for i in range(1, 4):
            pq.write_table(r.table([(i, 300 + i)]), str(dirs["R"] / f"{i}.parquet"))
            pq.write_table(s.table([(300 + i, 1), (i, 2)]), str(dirs["S"] / f"{i}.parquet"))
            assert q.process_available() is not None
            assert all(t is not None for t in store.touched.values()), f"batch {i}: {store.touched}"
        assert set(store.bases) == {"in_R", "in_S"}
        assert [q.commit(b).get("prepared") for b in range(4)] == [None, "replay", "replay", "replay"]
        got = sorted(tuple(x) for x in q.snapshot_pandas().itertuples(index=False, name=None))
        r_rows = [(i % 3, i) for i in range(200)] + [(i, 300 + i) for i in range(1, 4)]
        s_all = [(i, i) for i in range(200)] + [(300 + i, 1) for i in range(1, 4)] + [(i, 2) for i in range(1, 4)]
        want: dict[int, int] = {}
        for a, b in r_rows:
            for k, v in s_all:
                if k == b:
                    want[a] = want.get(a, 0) + v
        assert got == sorted(want.items())
    finally:
        q.stop()


def test_an_outer_joins_counts_start_their_runs_after_the_history(spark, tmp_path, monkeypatch):
    """TPC-H Q13's shape: counts per row of a table, over a LEFT JOIN with a stream. The counts'
    delta is a union of the matched keys and the unmatched ones, and the row count Spark reports
    for it is one branch's; a merge into nothing still touched every key it holds, so the counts
    start their runs after the history like any state, and the plans captured then are replayed
    by every later batch (before: a third of the keys counted as touched, the state kept whole
    until batch 1 said otherwise, and batch 2 captured its plans again — 5.0 s against 1.3 s at
    SF 1)."""
    runs_settings(monkeypatch, 0, 1000.0)
    monkeypatch.setattr(shape, "SMALL_ROWS", 100)  # the history is "large": plans captured ahead
    monkeypatch.setattr(shape, "AHEAD_MIN_ROWS", 100)
    customers = list(range(300))
    pq.write_table(pa.table({"k": pa.array(customers, pa.int32())}), str(tmp_path / "C.parquet"))
    o = Source("O", (("ok", "INT"), ("ck", "INT")))
    (tmp_path / "in").mkdir()
    sql = ("SELECT c_count, count(*) AS n FROM (SELECT C.k, count(O.ok) AS c_count FROM C LEFT JOIN O ON C.k = O.ck "
           "GROUP BY C.k) t GROUP BY c_count")
    q = streamfold.start(sql, {"O": str(tmp_path / "in")}, str(tmp_path / "out"), spark=spark, background=False,
                         partitions=2, tables={"C": str(tmp_path / "C.parquet")},
                         schemas={"O": o.schema_sql(), "C": "k INT"})
    orders: list[tuple[int, int]] = []
    try:
        for b in range(4):  # the history: 200 orders of 100 customers; then a few a batch
            new = [(1000 * b + i, (7 * i) % 100 if b == 0 else (b * 37 + i) % 300) for i in range(200 if b == 0 else 5)]
            orders += new
            pq.write_table(o.table(new), str(tmp_path / "in" / f"{b}.parquet"))
            assert q.process_available() is not None
            store = q.engine.store
            if b == 0:
                assert store.touched == {n: store.rows[n] for n in store.touched}, "a history touched every key"
                assert "agg" in store.bases, (store.rows, store.touched)
            per = {c: sum(1 for _, ck in orders if ck == c) for c in customers}
            want = sorted((n, sum(1 for v in per.values() if v == n)) for n in set(per.values()))
            got = sorted(tuple(x) for x in q.snapshot_pandas().itertuples(index=False, name=None))
            assert got == want, f"batch {b}"
        assert [q.commit(b).get("prepared") for b in range(4)] == [None, "replay", "replay", "replay"]
    finally:
        q.stop()


def test_a_state_in_runs_keeps_its_hash_partitioning(spark, tmp_path, monkeypatch):
    """Base and tail are both hash-partitioned on the state's partition key, and so is the union
    the joins read: a delta joining it shuffles only itself, not the base (Spark 4.3 passes a
    partitioning through UNION ALL only when its columns are the children's output columns:
    lowering.runs renames them; without that the base moved every batch)."""
    monkeypatch.setattr(shape, "ONE_TASK_ROWS", 0)  # the hash-partitioned layout
    q, r, s, dirs = _join_sum_in_runs(spark, tmp_path, monkeypatch)
    try:
        for i in range(3):
            pq.write_table(r.table([(i, i), (i + 1, i + 2)]), str(dirs["R"] / f"{i}.parquet"))
            pq.write_table(s.table([(i, 1), (i + 2, 2)]), str(dirs["S"] / f"{i}.parquet"))
            assert q.process_available() is not None
        store = q.engine.store
        assert set(store.bases) == {"in_R", "in_S"} and all(store.tails[n] is not None for n in store.bases)
        for name, key in (("in_R", "R.b"), ("in_S", "S.k")):
            part = store.current[name]._jdf.queryExecution().executedPlan().outputPartitioning()
            assert part.getClass().getSimpleName() == "HashPartitioning", (name, part.toString())
            assert [e.name() for e in _seq(part.expressions())] == [key]
    finally:
        q.stop()


def _seq(scala_seq):
    return [scala_seq.apply(i) for i in range(scala_seq.size())]


@pytest.mark.parametrize("layout,budget", [("single", "indexed"), ("hashed", "indexed"), ("hashed", "over-budget")])
def test_joins_probing_a_base_look_its_rows_up_by_key(spark, tmp_path, monkeypatch, layout, budget):
    """Joins that probe a base with the keys of their other side — a delta joining a join input,
    the touched keys of an aggregate or of a semi join's counts — read the base's rows of those
    keys only (prepared.py, ``Plans.lookups``): from an index of the base kept across batches, or,
    when the indexes would outgrow their budget, by a scan for those keys. Either way the answer
    is DuckDB's after every batch, through folds (a new base, a new index) and deletions."""
    import random

    from streamfold.runtime.prepared import Prepared

    from ..strategies import random_stream

    monkeypatch.setattr(runs, "MAX_TOUCHED", 1.0)
    runs_settings(monkeypatch, 0, 0.5)  # folds every few batches
    if layout == "hashed":
        monkeypatch.setenv(env_name("one_partition"), "0")
    seen = {"lookups": 0}
    look_up = Prepared._look_up
    plans = spark._jvm.streamfold.jvm.Plans

    def counted(prepared: Prepared, plan):  # type: ignore[no-untyped-def]
        before = prepared.lookups
        look_up(prepared, plan)
        seen["lookups"] += prepared.lookups - before

    monkeypatch.setattr(Prepared, "_look_up", counted)
    held = list(plans.indexes())  # [held, bytes, built, evicted, refused as too large] in this JVM
    plans.indexBudget(1 if budget == "over-budget" else -1)
    try:
        for qid in ("in-having", "join-groupby-seed") if budget == "indexed" else ("in-having",):
            sql, uses, ordered = next((q[1], q[2], q[3]) for q in CASES if q[0] == qid)
            sources = _sources(uses, True)
            rng = random.Random(f"look-ups {qid} {layout} {budget}")
            batches = random_stream(rng, sources, batches=8, max_rows=14, min_rows=4)
            check_stream(spark, str(tmp_path / qid), sql, sources, batches, ordered=ordered)
    finally:
        plans.indexBudget(-1)
    assert seen["lookups"] > 0, "no join probed a base through a look-up"
    now = list(plans.indexes())
    built, refused = now[2] - held[2], now[4] - held[4]
    if budget == "indexed":
        assert built > 0, "no base was indexed"
    else:
        assert built == 0 and refused > 0, (built, refused)


def test_a_bases_keys_with_a_null_are_looked_up_without_a_shuffle(spark):
    """``lowering.runs_merged`` over a base holding NULL keys: each key the tail's merge touched,
    once, its base and tail rows added up — a touched key with a NULL among them, an untouched one
    left out — and the base read where it lies: no join on coalesced keys (which shuffled both
    sides every batch, TPC-DS Q87), and the sums over the union of the runs in the key's
    partitioning: no shuffle at all."""
    from streamfold.ir.rel import WEIGHT, Field
    from streamfold.ir.types import BIGINT, STRING
    from streamfold.plan.model import Monoid, State, StateColumn, StateRole
    from streamfold.runtime.lowering import StateTable, runs_merged
    from streamfold.runtime.session import engine_session

    spark = engine_session(spark, 2)
    state = State("s", StateRole.AGGREGATE, (Field("k", STRING), Field("j", BIGINT)),
                  (StateColumn(WEIGHT, BIGINT, Monoid.SUM), StateColumn("v", BIGINT, Monoid.SUM)))
    table = StateTable(state, (("k", "string"), ("j", "bigint"), (WEIGHT, "bigint"), ("v", "bigint")))
    base = spark.createDataFrame([("a", 1, 1, 10), (None, 1, 1, 20), (None, 2, 1, 30), ("b", None, 2, 40)],
                                 "k string, j bigint, _weight bigint, v bigint").repartition(2, "k", "j").localCheckpoint()
    merged = spark.createDataFrame(  # the tail's merge: (NULL, 1) and ('a', 1) touched, ('b', NULL) not
        [("a", 1, 1, 1, None, None, 1), (None, 1, 2, 5, 1, 2, 1), ("b", None, 1, 1, 1, 1, 0)],
        "k string, j bigint, _weight bigint, v bigint, `__old::_weight` bigint, `__old::v` bigint, __touched int",
    ).repartition(2, "k", "j").localCheckpoint()
    base.createOrReplaceTempView("nulls_base")
    merged.createOrReplaceTempView("nulls_merged")
    try:
        out = spark.sql(runs_merged(table, "nulls_base", "nulls_merged"))
        rows = sorted(out.collect(), key=lambda r: (str(r["k"]), str(r["j"])))
        plan = out._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.catalog.dropTempView("nulls_base")
        spark.catalog.dropTempView("nulls_merged")
    assert [(r["k"], r["j"], r[WEIGHT], r["v"], r["__old::v"]) for r in rows] == [
        (None, 1, 3, 25, 22), ("a", 1, 2, 11, 10)]
    assert "coalesce(" not in plan, plan
    assert "Exchange hashpartitioning" not in plan, plan  # (the touched keys broadcast, as outside a capture)
