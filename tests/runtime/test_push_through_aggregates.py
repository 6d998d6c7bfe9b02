"""A filter on GROUP BY keys runs before the GROUP BY (``passes/push_filters.py``; seed 004 §4.1's
predicate push-down, Fig. 5): the group state keeps only the groups the filter lets through, and
every snapshot still equals DuckDB's answer on the prefix — random rows with NULLs and ties,
deletions, random batches, keys plain and computed, HAVING and an outer WHERE, the aggregates that
keep multisets (min, max, count distinct) as well as sums."""

from __future__ import annotations

import random

import pytest

from streamfold.plan import explain_text
from streamfold.plan.compilation import Compilation
from streamfold.settings import Settings
from streamfold.sql import Catalog

from ..streams import Source, check_stream
from ..strategies import random_stream

pytestmark = pytest.mark.spark

R = Source("R", (("k", "INT"), ("g", "STRING"), ("x", "INT")), weighted=True)
S = Source("S", (("k", "INT"), ("y", "INT")), weighted=True)

QUERIES = {
    "having on a key": (
        "SELECT k, count(*) AS n, min(x) AS lo, max(x) AS hi, count(DISTINCT x) AS d FROM R "
        "GROUP BY k HAVING k > 1 AND count(*) > 1"),
    "outer where on a computed key, over a join": (
        "SELECT gk, k, n, sy FROM (SELECT upper(R.g) AS gk, R.k, count(*) AS n, sum(S.y) AS sy "
        "FROM R JOIN S ON R.k = S.k GROUP BY upper(R.g), R.k) t WHERE gk <> 'A' AND (k IS NULL OR k <> 2)"),
    "rollup with having on its keys": (
        "SELECT k, g, count(*) AS n, max(x) AS hi FROM R GROUP BY ROLLUP(k, g) HAVING g IS NULL AND (k IS NULL OR k > 1)"),
    "a key and an aggregate in one disjunction stay above": (
        "SELECT k, s FROM (SELECT k, sum(x) AS s FROM R GROUP BY k) t WHERE k < 3 OR s > 4"),
}


@pytest.mark.parametrize("name", list(QUERIES))
@pytest.mark.parametrize("seed", [1, 2])
def test_a_filter_on_group_keys_before_the_group_by_equals_duckdb(spark, tmp_path, name, seed):
    batches = random_stream(random.Random(f"push-agg-{name}-{seed}"), [R, S], batches=5, max_rows=12, min_rows=2)
    run = check_stream(spark, str(tmp_path), QUERIES[name], [R, S], batches)
    assert run.batches == 5 and any(run.snapshots)


def test_with_the_switch_off_the_filter_stays_above_and_the_answers_are_the_same(spark, tmp_path):
    batches = random_stream(random.Random("push-agg-off"), [R, S], batches=4, max_rows=12, min_rows=2)
    name = "outer where on a computed key, over a join"
    run = check_stream(spark, str(tmp_path), QUERIES[name], [R, S], batches,
                       settings=Settings().replace(push_down_groups=False))
    assert run.batches == 4 and any(run.snapshots)


FIG5 = "SELECT key, value FROM (SELECT key, avg(value) AS value FROM x GROUP BY key) gb WHERE key > 10"


def _delta_and_answer(push_down_groups: bool) -> tuple[str, str]:
    plan = Compilation(FIG5, Catalog.from_mapping({"x": "key INT, value INT"}),
                       push_down_groups=push_down_groups).plan
    text = explain_text(plan)
    return text.split("h — per batch")[1].split("⊗ — merge")[0], text.split("a — the answer")[1]


def test_the_group_state_sees_only_the_kept_keys():
    delta, answer = _delta_and_answer(True)
    assert "WHERE x.key > 10" in delta and delta.index("WHERE") < delta.index("GROUP BY")
    assert "key > 10" not in answer
    delta, answer = _delta_and_answer(False)  # STREAMFOLD_PUSH_DOWN_GROUPS=0
    assert "key > 10" not in delta and "key > 10" in answer
