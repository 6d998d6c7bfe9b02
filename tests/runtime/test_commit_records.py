"""The commit records of fixed runs, timings masked, against golden files.

A commit record (``OUTPUT/commits/<batch>.json``) is what a reader, a restart and ``explain
--analyze`` go by: which files a batch applied, its rows, its states' rows, its statistics, how
it ran (its strategy, prepared plans, join matrices). Every field but the clock's must be the
same for the same input whatever the runtime's inner structure: these runs pin it. Each scenario
writes its files batch by batch with fixed random data and runs the query with ``background=False``.
``pytest --update-golden`` rewrites ``tests/fixtures/commits/<scenario>.json`` after a deliberate change.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfold

pytestmark = [pytest.mark.spark, pytest.mark.slow]

GOLDEN = Path(__file__).parent.parent / "fixtures" / "commits"
# Fields that come from the clock (or, under a cost model, from measured times), at any depth.
MASKED = {"duration_s", "committed_at", "cost", "install_s"}


def _pairs(rng: random.Random, n: int, keys: int, weighted: bool = False) -> pa.Table:
    xs = [rng.randrange(keys) for _ in range(n)]
    ys = [rng.randrange(1000) for _ in range(n)]
    cols = {"x": pa.array(xs, pa.int32()), "y": pa.array(ys, pa.int32())}
    if weighted:
        cols["_weight"] = pa.array([1] * n, pa.int64())
    return pa.table(cols)


def _deletions(table: pa.Table, rng: random.Random, n: int) -> pa.Table:
    rows = table.to_pylist()
    picked = rng.sample(rows, min(n, len(rows)))
    return pa.Table.from_pylist([{**r, "_weight": -1} for r in picked], schema=table.schema)


Batches = list[dict[str, pa.Table]]


def _groupby_with_deletions() -> tuple[str, Batches, dict]:
    rng = random.Random(1)
    first = _pairs(rng, 3000, 50, weighted=True)
    batches: Batches = [{"S": first}]
    for i in range(6):
        inc = _pairs(rng, 200, 50, weighted=True)
        if i % 2:
            inc = pa.concat_tables([inc, _deletions(first, rng, 40)])
        batches.append({"S": inc})
    sql = "SELECT x, count(*) AS n, sum(y) AS s, min(y) AS lo, max(y) AS hi FROM S GROUP BY x"
    return sql, batches, {}


def _join_distinct() -> tuple[str, Batches, dict]:
    rng = random.Random(2)
    batches: Batches = []
    for i in range(5):
        n = 2000 if i == 0 else 150
        batches.append({"A": _pairs(rng, n, 40), "B": _pairs(rng, n, 40)})
    sql = ("SELECT a.x, count(DISTINCT b.y) AS d, count(*) AS n FROM A a JOIN B b ON a.x = b.x "
           "GROUP BY a.x")
    return sql, batches, {}


def _large_history() -> tuple[str, Batches, dict]:
    rng = random.Random(3)
    batches: Batches = [{"S": _pairs(rng, 120_000, 5000)}]
    batches += [{"S": _pairs(rng, 2000, 5000)} for _ in range(4)]
    return "SELECT x, avg(y) AS a FROM S GROUP BY x", batches, {}


def _recompute() -> tuple[str, Batches, dict]:
    rng = random.Random(4)
    batches: Batches = [{"S": _pairs(rng, 1000, 30)} for _ in range(3)]
    return "SELECT x, sum(y) AS s FROM S GROUP BY x", batches, {"strategy": "recompute"}


def _band_join() -> tuple[str, Batches, dict]:
    rng = random.Random(5)
    batches: Batches = [{"A": _pairs(rng, 300 * (i + 1), 2000), "B": _pairs(rng, 300 * (i + 1), 2000)}
                        for i in range(4)]
    sql = ("SELECT count(*) AS n, sum(a.y + b.y) AS s FROM A a JOIN B b "
           "ON a.x BETWEEN b.x - 3 AND b.x + 3")
    return sql, batches, {}


def _runs() -> tuple[str, Batches, dict]:
    rng = random.Random(6)
    # a join input of ~85K keys touched by a few hundred per batch: kept as a base and a tail
    batches: Batches = [{"A": _pairs(rng, 90_000, 1_000_000), "B": _pairs(rng, 2000, 1_000_000)}]
    batches += [{"A": _pairs(rng, 500, 1_000_000), "B": _pairs(rng, 500, 1_000_000)} for _ in range(5)]
    sql = "SELECT a.x, count(*) AS n, sum(b.y) AS s FROM A a JOIN B b ON a.x = b.x GROUP BY a.x"
    return sql, batches, {}


def _reconfigured() -> tuple[str, Batches, dict]:
    rng = random.Random(7)
    sql = "SELECT x, sum(y) AS s, count(*) AS n FROM S GROUP BY x"
    batches: Batches = [{"S": _pairs(rng, 500, 20)}, {"S": _pairs(rng, 0, 20)}, {"S": _pairs(rng, 50, 20)},
                        {"S": _pairs(rng, 50, 20)}, {"S": _pairs(rng, 0, 20)}, {"S": _pairs(rng, 50, 20)}]
    # before batch 1: the answer only (no file: h does not run); before batch 3: a state rebuilt
    # from the history; before batch 4: the answer's columns change (a reset)
    steps = {1: f"{sql} HAVING count(*) > 20", 3: "SELECT x, sum(y) AS s, count(*) AS n FROM S WHERE y > 100 GROUP BY x",
             4: "SELECT x, sum(y) AS s FROM S WHERE y > 100 GROUP BY x"}
    return sql, batches, {"reconfigure": steps}


SCENARIOS: dict[str, Callable[[], tuple[str, Batches, dict]]] = {
    "groupby_with_deletions": _groupby_with_deletions,
    "join_distinct": _join_distinct,
    "large_history": _large_history,
    "recompute": _recompute,
    "band_join": _band_join,
    "runs": _runs,
    "reconfigured": _reconfigured,
}


def _masked(record: dict) -> dict:
    """``record`` with the clock's fields masked, and each state's bytes (Spark's size estimate of
    its blocks, which depends on the JVM's object layout) kept only as a key: which states are
    measured is pinned, their bytes are checked by tests/runtime/test_state_bytes.py."""
    return {k: "<masked>" if k in MASKED else {n: "<bytes>" for n in v} if k == "state_bytes"
            else _masked(v) if isinstance(v, dict) else v for k, v in record.items()}


def _records(spark, tmp: Path, sql: str, batches: Batches, options: dict) -> list[dict]:
    dirs = {name: tmp / "in" / name for name in batches[0]}
    for d in dirs.values():
        d.mkdir(parents=True)
    out = tmp / "out"
    reconfigure = options.pop("reconfigure", {})
    schemas = {n: ", ".join(f"{f.name} {'BIGINT' if f.name == '_weight' else 'INT'}" for f in t.schema)
               for n, t in batches[0].items()}
    query = streamfold.start(sql, {n: str(d) for n, d in dirs.items()}, str(out), spark=spark, schemas=schemas,
                             background=False, endpoint=False, partitions=2, **options)
    try:
        for i, batch in enumerate(batches):
            if i in reconfigure:
                query.reconfigure(reconfigure[i])
            for name, table in batch.items():
                if table.num_rows:
                    pq.write_table(table, os.path.join(dirs[name], f"{i:04d}.parquet"))
            result = query.process_available()
            assert result is not None and result.batch == i
    finally:
        query.stop()
    return [_masked(json.loads((out / "commits" / f"{b:06d}.json").read_text())) for b in range(len(batches))]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_commit_records_of_a_fixed_run(request: pytest.FixtureRequest, spark, tmp_path: Path, scenario: str) -> None:
    sql, batches, options = SCENARIOS[scenario]()
    actual = json.dumps(_records(spark, tmp_path, sql, batches, options), indent=1, sort_keys=True) + "\n"
    path = GOLDEN / f"{scenario}.json"
    if request.config.getoption("--update-golden"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        return
    assert path.exists(), f"{path} is missing; run pytest --update-golden and review it"
    assert actual == path.read_text(), f"{scenario}: commit records differ from {path.name} (pytest --update-golden)"
