"""Iterations (``WITH ITERATIVE``), exact mode: every snapshot equals the n-step iteration over
all data so far — checked against DuckDB (running the same query unrolled into n+1 CTEs) and,
for the examples, against the independent NumPy computations of ``streamfold.bench.reference``.
Diffusion mode is approximate by design: its tests check what it promises (exact on the first
batch, every key present, changes consistent, no worse than the exact n steps at approximating
the converged answer), and the benchmark measures its error.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest
import sqlglot

import streamfold

from streamfold.bench import reference
from streamfold.errors import StreamfoldError
from streamfold.sql import Catalog, bind
from streamfold.sql.iterate import extract, unrolled_sql

from streamfold.verify import net_rows

from ..streams import Source, check_stream

EXAMPLES = Path(__file__).parent.parent.parent / "examples"


def example(name: str, times: int) -> str:
    """An example's text with its number of steps set to ``times`` (10 in the file)."""
    text = (EXAMPLES / name).read_text()
    assert "TIMES 10" in text
    return text.replace("TIMES 10", f"TIMES {times}")


def edges_stream(rng: random.Random, batches: int, nodes: int, per_batch: int) -> list[list[tuple]]:
    """Random edges (repeats and self-loops allowed) with ``_weight``; from batch 2 on, some
    batches delete edges inserted earlier."""
    alive: list[tuple[int, int]] = []
    out = []
    for b in range(batches):
        rows = []
        for _ in range(per_batch):
            edge = (rng.randrange(nodes), rng.randrange(nodes))
            alive.append(edge)
            rows.append((*edge, 1))
        if b >= 2 and alive:
            for _ in range(rng.randrange(1, 4)):
                edge = alive.pop(rng.randrange(len(alive)))
                rows.append((*edge, -1))
        out.append(rows)
    return out


# -- without Spark -------------------------------------------------------------------------------
def test_unrolled_pagerank_in_duckdb_equals_numpy():
    """The unrolled SQL the oracle runs is itself the NumPy PageRank (so the oracle is sound)."""
    rng = np.random.default_rng(7)
    edges = rng.integers(0, 15, size=(60, 2))
    con = duckdb.connect()
    con.execute("CREATE TABLE edges (src BIGINT, dst BIGINT)")
    con.executemany("INSERT INTO edges VALUES (?, ?)", edges.tolist())
    text = sqlglot.transpile(unrolled_sql(example("pagerank.sql", 10)), read="spark", write="duckdb")[0]
    got = dict(con.execute(text).fetchall())
    want = reference.pagerank(edges, steps=10)
    assert got.keys() == want.keys()
    assert max(abs(got[k] - want[k]) for k in want) < 1e-12


def test_iterative_syntax_and_its_errors():
    text, loops = extract(example("pagerank.sql", 4))
    (loop,) = loops.values()
    assert loop.name == "ranks" and loop.times == 4 and loop.mode == "exact"
    assert "ITERATIVE" not in text and "STEP" not in text
    for written, mode in (("", "exact"), (" MODE EXACT", "exact"), (" MODE DIFFERENTIAL", "differential")):
        _, loops = extract(example("pagerank.sql", 4).replace("TIMES 4", "TIMES 4" + written))
        assert [it.mode for it in loops.values()] == [mode]
    catalog = Catalog.from_mapping({"edges": "src BIGINT, dst BIGINT"})
    bad = {
        "WITH ITERATIVE r (a) AS (SELECT src FROM edges STEP SELECT a + 1 FROM r TIMES 0) SELECT a FROM r":
            "INVALID_ITERATIONS",
        "WITH ITERATIVE r (a) AS (SELECT src FROM edges STEP SELECT a + 1 FROM r) SELECT a FROM r": "PARSE_ERROR",
        "WITH ITERATIVE r (a) AS (SELECT src FROM edges STEP SELECT a > 0 FROM r TIMES 2) SELECT a FROM r":
            "TYPE_MISMATCH",
        "WITH ITERATIVE r (a, b) AS (SELECT src FROM edges STEP SELECT a FROM r TIMES 2) SELECT a FROM r":
            "CTE_COLUMNS",
        "WITH ITERATIVE r (a) AS (SELECT src FROM edges STEP SELECT a FROM r TIMES 2 MODE FAST) SELECT a FROM r":
            "PARSE_ERROR",
        "WITH ITERATIVE r (a) AS (SELECT src FROM edges STEP SELECT a FROM r TIMES 2 MODE DIFFERENTIAL KEY (a)) "
        "SELECT a FROM r": "PARSE_ERROR",
    }
    for sql, code in bad.items():
        with pytest.raises(StreamfoldError) as e:
            bind(sql, catalog)
        assert e.value.code == code, (sql, e.value.code, str(e.value))
        assert e.value.hint, (sql, "an error without a hint")


def in_mode(sql: str, mode: str) -> str:
    """``sql`` with its iteration in ``mode`` (``exact`` is the default and is left unwritten)."""
    if mode == "exact":
        return sql
    found = re.findall(r"\bTIMES \d+\b", sql)
    assert len(found) == 1
    return sql.replace(found[0], f"{found[0]} MODE {mode.upper()}")


EXACT_MODES = pytest.mark.parametrize("mode", ["exact", "differential"])


# -- on Spark ------------------------------------------------------------------------------------
@pytest.mark.slow
@EXACT_MODES
def test_pagerank_exact_equals_numpy(spark, tmp_path, mode):
    steps = 3
    rng = random.Random(11)
    batches = [{"edges": rows} for rows in edges_stream(rng, 3, nodes=7, per_batch=6)]
    source = Source("edges", (("src", "BIGINT"), ("dst", "BIGINT")), weighted=True)

    def against_numpy(batch: int, snapshot: list[tuple], prefix: dict) -> None:
        edges = np.array([(r["src"], r["dst"]) for r in net_rows(prefix["edges"]).to_pylist()]).reshape(-1, 2)
        want = reference.pagerank(edges, steps=steps)
        got = dict(snapshot)
        assert got.keys() == want.keys(), f"batch {batch}: nodes differ"
        worst = max(abs(got[k] - want[k]) for k in want)
        assert worst < 1e-9, f"batch {batch}: a rank is {worst} off the NumPy PageRank"

    check_stream(spark, str(tmp_path), in_mode(example("pagerank.sql", steps), mode), [source], batches,
                 check=against_numpy)


@pytest.mark.slow
@EXACT_MODES
def test_kmeans_exact_equals_numpy(spark, tmp_path, mode):
    steps = 3
    rng = random.Random(5)
    # points on a coarse grid, so that exact ties between centroids happen
    batches = []
    for b in range(3):
        rows = [(float(rng.randrange(0, 10)), float(rng.randrange(0, 10)), 1) for _ in range(8)]
        if b == 2:
            rows.append((*batches[0]["points"][0][:2], -1))
        batches.append({"points": rows})
    centroids = [(1.0, 1.0), (8.0, 2.0), (5.0, 8.0), (5.0, 8.0)]
    points = Source("points", (("x", "DOUBLE"), ("y", "DOUBLE")), weighted=True)
    initial = Source("centroids0", (("x", "DOUBLE"), ("y", "DOUBLE")), static=True)

    def against_numpy(batch: int, snapshot: list[tuple], prefix: dict) -> None:
        rows = net_rows(prefix["points"]).to_pylist()
        want = reference.kmeans(np.array([(r["x"], r["y"]) for r in rows]).reshape(-1, 2), np.array(centroids), steps)
        got = sorted(snapshot)
        expected = sorted(tuple(r) for r in want[:, 2:].tolist())
        assert len(got) == len(expected), f"batch {batch}: {len(got)} clusters, NumPy has {len(expected)}"
        for (x, y), (wx, wy) in zip(got, expected):
            assert abs(x - wx) < 1e-9 and abs(y - wy) < 1e-9, f"batch {batch}: centroid ({x}, {y}) vs ({wx}, {wy})"

    check_stream(spark, str(tmp_path), in_mode(example("kmeans.sql", steps), mode), [points, initial], batches,
                 tables={"centroids0": centroids}, check=against_numpy)


def reach(times: int, select: str = "SELECT node FROM reach") -> str:
    """The nodes reachable from node 0 in at most ``times`` hops, then ``select`` over them."""
    return f"""
        WITH ITERATIVE reach (node) AS (
            SELECT DISTINCT src FROM edges WHERE src = 0
          STEP
            SELECT node FROM reach
            UNION
            SELECT e.dst FROM reach r JOIN edges e ON e.src = r.node
          TIMES {times}
        )
        {select}
    """


@pytest.mark.slow
def test_iteration_with_a_growing_set(spark, tmp_path):
    """A loop whose step filters and unions: reachability from node 0 in at most 3 hops, over
    edges that come and go (DuckDB checks every batch)."""
    sql = reach(3)
    rng = random.Random(3)
    batches = [{"edges": rows} for rows in edges_stream(rng, 4, nodes=8, per_batch=4)]
    source = Source("edges", (("src", "BIGINT"), ("dst", "BIGINT")), weighted=True)
    check_stream(spark, str(tmp_path), sql, [source], batches)


@pytest.mark.slow
def test_exact_loop_runs_only_in_batches_that_change_what_it_reads(spark, tmp_path):
    """MODE EXACT steps from the start in a batch with rows for a stream the loop reads, and in
    no other; the snapshot is DuckDB's after every batch either way."""
    sql = reach(2, "SELECT r.node, l.name FROM reach r JOIN labels l ON l.node = r.node")
    edges = Source("edges", (("src", "BIGINT"), ("dst", "BIGINT")), weighted=True)
    labels = Source("labels", (("node", "BIGINT"), ("name", "STRING")))
    batches = [
        {"edges": [(0, 1, 1), (1, 2, 1), (2, 3, 1)], "labels": [(n, f"n{n}") for n in range(4)]},
        {"labels": [(n, f"again {n}") for n in range(3)]},  # the loop's value cannot change
        {"edges": [(1, 2, -1), (0, 3, 1), (3, 4, 1)], "labels": [(4, "n4")]},
    ]
    said: list[str] = []
    check_stream(spark, str(tmp_path), sql, [edges, labels], batches, progress=said.append)
    stepped = sorted({m.split(":")[0] for m in said if "reach step" in m})
    assert stepped == ["batch 000000", "batch 000002"], said


@pytest.mark.slow
def test_exact_loop_resumes_from_its_checkpoint(spark, tmp_path):
    """Stopped after two batches and started again, an exact PageRank goes on from the value it
    kept: the third batch's snapshot is still NumPy's PageRank of all edges."""
    src, out = tmp_path / "edges", str(tmp_path / "out")
    src.mkdir()
    source = Source("edges", (("src", "BIGINT"), ("dst", "BIGINT")))
    sql = example("pagerank.sql", 2)
    rng = random.Random(4)
    seen: list[tuple[int, int]] = []

    def start():
        return streamfold.start(sql, {"edges": str(src)}, out, spark=spark, background=False, partitions=2,
                                schemas={"edges": source.schema_sql()})

    query = start()
    for i in range(3):
        if i == 2:
            query.stop()
            query = start()
            assert query.last_batch == 1
        rows = [(rng.randrange(6), rng.randrange(6)) for _ in range(5)]
        seen += rows
        pq.write_table(source.table(rows), str(src / f"{i}.parquet"))
        assert query.process_available().batch == i
    try:
        got = {r[0]: r[1] for r in query.snapshot_pandas().itertuples(index=False, name=None)}
        want = reference.pagerank(np.array(seen), steps=2)
        assert got.keys() == want.keys() and max(abs(got[k] - want[k]) for k in want) < 1e-9
    finally:
        query.stop()


def test_examples_name_ten_steps():
    for name in ("pagerank.sql", "kmeans.sql"):
        assert re.search(r"\bTIMES 10\b", (EXAMPLES / name).read_text())


# -- WITH RECURSIVE ------------------------------------------------------------------------------
REACHABLE = (EXAMPLES / "reachability.sql")


@pytest.mark.slow
@pytest.mark.parametrize("deletions", [False, True], ids=["insert-only", "deletions"])
def test_transitive_closure_equals_duckdb_and_python(spark, tmp_path, deletions):
    rng = random.Random(21 if deletions else 8)
    rows = edges_stream(rng, 4, nodes=7, per_batch=4)
    if not deletions:
        rows = [[r for r in batch if r[2] > 0] for batch in rows]
    batches = [{"edges": [r if deletions else r[:2] for r in batch]} for batch in rows]
    source = Source("edges", (("src", "BIGINT"), ("dst", "BIGINT")), weighted=deletions)

    def against_python(batch: int, snapshot: list[tuple], prefix: dict) -> None:
        edges = [(r["src"], r["dst"]) for r in net_rows(prefix["edges"]).to_pylist()]
        assert sorted(snapshot) == sorted(reference.transitive_closure(edges)), f"batch {batch}"

    check_stream(spark, str(tmp_path), REACHABLE.read_text(), [source], batches, check=against_python)


@pytest.mark.slow
def test_a_recursion_without_fixpoint_stops_with_a_coded_error(spark, tmp_path, monkeypatch):
    """A step that makes new values forever stops the batch with NO_FIXPOINT, and commits nothing."""
    import pyarrow.parquet as pq

    import streamfold
    import streamfold.runtime.loops as loops

    monkeypatch.setattr(loops, "FIXPOINT_MAX_ROUNDS", 3)
    sql = "WITH RECURSIVE r (n) AS (SELECT src FROM edges UNION SELECT n + 1 FROM r) SELECT n FROM r"
    source = Source("edges", (("src", "BIGINT"), ("dst", "BIGINT")))
    (tmp_path / "edges").mkdir()
    pq.write_table(source.table([(1, 2)]), str(tmp_path / "edges" / "0.parquet"))
    query = streamfold.start(sql, {"edges": str(tmp_path / "edges")}, str(tmp_path / "out"),
                             schemas={"edges": source.schema_sql()}, spark=spark, background=False)
    try:
        with pytest.raises(StreamfoldError) as e:
            query.process_available()
        assert e.value.code == "NO_FIXPOINT" and e.value.hint and "3 rounds" in str(e.value)
        assert not (tmp_path / "out" / "commits").exists() or not list((tmp_path / "out" / "commits").iterdir())
    finally:
        query.stop()


# -- MODE DIFFUSION (approximate) ----------------------------------------------------------------
def _run_batches(spark, tmp_path, sql: str, batches: list[list[tuple]]):
    """Feed edge batches to ``sql``; yield (batch, snapshot, changes, edges so far) after each."""
    import pyarrow.parquet as pq

    import streamfold

    source = Source("edges", (("src", "BIGINT"), ("dst", "BIGINT")), weighted=True)
    (tmp_path / "edges").mkdir()
    query = streamfold.start(sql, {"edges": str(tmp_path / "edges")}, str(tmp_path / "out"),
                             schemas={"edges": source.schema_sql()}, spark=spark, background=False, partitions=2)
    so_far: list = []
    try:
        for i, rows in enumerate(batches):
            pq.write_table(source.table(rows), str(tmp_path / "edges" / f"{i:04d}.parquet"))
            so_far.append(source.table(rows))
            assert query.process_available() is not None
            snapshot = list(query.snapshot_pandas().itertuples(index=False, name=None))
            changes = list(query.changes_pandas().itertuples(index=False, name=None))
            edges = [(r["src"], r["dst"]) for r in net_rows(so_far).to_pylist()]
            yield i, snapshot, changes, np.array(edges).reshape(-1, 2)
    finally:
        query.stop()


@pytest.mark.slow
def test_pagerank_diffusion_is_warm_started_pagerank(spark, tmp_path):
    """Diffusion (seed 000 Algorithm 1) on PageRank: the first batch is the exact n-step answer
    (nothing to start from); each later batch runs n more steps from the previous answer, new
    nodes at 1/N. Here every batch adds a node, so N — and with it every rank — changes and the
    change reaches every node in every round: then diffusion is exactly that warm-started
    PageRank (NumPy, 1e-9). The changes add up to the snapshots."""
    steps = 3
    sql = example("pagerank.sql", steps).replace(f"TIMES {steps}", f"TIMES {steps} MODE DIFFUSION KEY (node)")
    rng = random.Random(11)
    batches = edges_stream(rng, 3, 7, 5)
    for b, rows in enumerate(batches):
        rows.append((rng.randrange(7), 100 + b, 1))  # a new node
    previous: dict = {}
    for batch, snapshot, changes, edges in _run_batches(spark, tmp_path, sql, batches):
        got = dict(snapshot)
        assert len(got) == len(snapshot), f"batch {batch}: a node twice"
        want = reference.pagerank(edges, steps=steps, start=previous)
        assert got.keys() == want.keys(), f"batch {batch}: nodes differ"
        worst = max(abs(got[k] - want[k]) for k in want)
        assert worst < 1e-9, f"batch {batch}: a rank is {worst} off the warm-started NumPy PageRank"
        if batch > 0:  # it is not the exact answer, and the difference is what the benchmark reports
            cold = reference.pagerank(edges, steps=steps)
            assert max(abs(got[k] - cold[k]) for k in want) > 1e-6
        net: dict = {}
        for node, rank, w in changes:
            net[(node, rank)] = net.get((node, rank), 0) + w
        expected = {(k, v): 1 for k, v in got.items() if previous.get(k) != v}
        expected.update({(k, v): -1 for k, v in previous.items() if got.get(k) != v})
        assert {k: v for k, v in net.items() if v} == expected, f"batch {batch}: changes are not new − old"
        previous = got


@pytest.mark.slow
def test_diffusion_key_must_name_one_row(spark, tmp_path):
    sql = ("WITH ITERATIVE r (a, b) AS (SELECT src, dst FROM edges STEP SELECT a, b FROM r TIMES 1 "
           "MODE DIFFUSION KEY (a)) SELECT a, b FROM r")
    with pytest.raises(StreamfoldError) as e:
        for _ in _run_batches(spark, tmp_path, sql, [[(1, 2, 1), (1, 3, 1)]]):
            pass
    assert e.value.code == "DIFFUSION_KEY" and e.value.hint
    commits = tmp_path / "out" / "commits"
    assert not commits.exists() or not list(commits.iterdir())
