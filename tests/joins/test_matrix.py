"""The join matrix's pure parts (no Spark): mappings and their ILF, Algorithm 2's choice and its
1.25 bound, the band a condition states and the bucket offsets that cover it."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import streamfold
from streamfold.plan.matrix import Band, Mapping, best_mapping, decide, mappings, square
from streamfold.ir.expr import Column
from streamfold.ir.types import INT


def test_mappings_are_the_grid_of_a_power_of_two():
    assert [str(m) for m in mappings(8)] == ["(1, 8)", "(2, 4)", "(4, 2)", "(8, 1)"]
    with pytest.raises(ValueError):
        mappings(6)
    assert square(4) == Mapping(2, 2) and square(64) == Mapping(8, 8) and square(8) == Mapping(4, 2)


def test_best_mapping_follows_the_sizes_as_in_figure_4_3():
    # |R| = 1, |S| = 64, J = 64: (8, 8) holds 8 1/8 per cell, (1, 64) holds 2
    assert Mapping(8, 8).ilf(1, 64) == Fraction(65, 8)
    assert best_mapping(1, 64, 64) == Mapping(1, 64)
    assert best_mapping(64, 1, 64) == Mapping(64, 1)
    assert best_mapping(100, 100, 16) == Mapping(4, 4)


def test_decide_waits_until_a_relation_grew_by_epsilon():
    current = Mapping(2, 2)
    assert decide(current, (100, 100), (150, 120)) is None  # neither doubled
    assert decide(current, (100, 100), (100, 200)) is None  # doubled, but (2, 2) is still best at J = 4
    assert decide(current, (100, 100), (100, 800)) == Mapping(1, 4)
    assert decide(current, (100, 100), (100, 150), epsilon=0.5) is None


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 400), st.integers(0, 400)), min_size=1, max_size=30),
       st.sampled_from([4, 16, 64]))
def test_algorithm_2_keeps_the_ilf_within_one_and_a_quarter_of_the_optimum(growth, cells):
    """Lemma 4.4.4: re-deciding whenever a relation doubles keeps ILF ≤ 1.25·ILF* after every
    batch, as long as |R|/|S| stays within a factor J (Theorem 4.4.1's assumption)."""
    r, s = 64, 64
    current = best_mapping(r, s, cells)
    last = (r, s)
    for dr, ds in growth:
        r, s = r + dr, s + ds
        choice = decide(current, last, (r, s))
        if r - last[0] >= last[0] or s - last[1] >= last[1]:
            last = (r, s)
        if choice is not None:
            current = choice
        if r * cells >= s and s * cells >= r:
            assert current.ilf(r, s) <= Fraction(5, 4) * best_mapping(r, s, cells).ilf(r, s)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.integers(-20, 20), st.integers(0, 30), st.integers(-100, 100), st.integers(-100, 100))
def test_bucket_offsets_cover_every_pair_of_the_band(lo, span, x, y):
    band = Band(Column("x", INT), Column("y", INT), lo, lo + span)
    if not band.lo <= x - y <= band.hi:
        return
    first, last = band.offsets
    assert first <= x // band.width - y // band.width <= last


SCHEMAS = {"R": "a INT, t INT, d DATE", "S": "k INT, u INT, e DATE"}


@pytest.mark.parametrize("condition,band", [
    ("abs(R.t - S.u) <= 1", "R.t − S.u ∈ [-1, 1]"),
    ("abs(S.u - R.t) < 3", "R.t − S.u ∈ [-2, 2]"),
    ("R.t BETWEEN S.u - 2 AND S.u + 3", "R.t − S.u ∈ [-2, 3]"),
    ("S.u >= R.t - 1 AND R.t + 4 > S.u + 1", "R.t − S.u ∈ [-2, 1]"),
    ("abs(datediff(R.d, S.e)) <= 7", "R.d − S.e ∈ [-7, 7]"),
    ("R.d BETWEEN date_sub(S.e, 3) AND date_add(S.e, 3)", "R.d − S.e ∈ [-3, 3]"),
])
def test_bands_are_recognised_in_the_forms_people_write(condition, band):
    text = streamfold.explain(f"SELECT R.a, S.k FROM R JOIN S ON {condition}", SCHEMAS)
    assert f"band {band}" in text and "mapping (n, m) = (2, 2)" in text


@pytest.mark.parametrize("condition,kind", [
    ("R.t < S.u", "inequality"), ("R.t <> S.u", "not-equal"), ("R.t < S.u OR R.a = S.k", "theta"),
    ("abs(R.t - S.u) <= R.a", "inequality"),
])
def test_other_conditions_are_a_nested_loop_per_cell(condition, kind):
    text = streamfold.explain(f"SELECT R.a, S.k FROM R JOIN S ON {condition}", SCHEMAS)
    assert f"{kind} condition: a nested loop over the pairs of each cell" in text


def test_equi_joins_and_stream_static_joins_keep_their_plans():
    assert "join matrix" not in streamfold.explain("SELECT R.a FROM R JOIN S ON R.t = S.u AND R.a < S.k", SCHEMAS)
    assert "join matrix" not in streamfold.explain("SELECT R.a FROM R JOIN S ON R.t < S.u", SCHEMAS, tables=["S"])


@pytest.mark.parametrize("sql", [
    "SELECT R.a, sum(R.t) AS s FROM R GROUP BY R.a HAVING sum(R.t) > (SELECT 0.5 * sum(S.u) FROM S)",
    "SELECT R.a FROM R WHERE R.t > (SELECT avg(S.u) FROM S WHERE S.k > 0)",
    "SELECT R.a FROM R JOIN (SELECT max(S.u) AS top FROM S) m ON R.t >= m.top - 3",
])
def test_a_theta_join_with_a_one_row_side_is_a_broadcast_not_a_matrix(sql):
    # A global aggregate has one row: a matrix would replicate the other side for nothing.
    plan = streamfold.compile(sql, SCHEMAS)
    text = streamfold.explain(sql, SCHEMAS)
    assert not plan.matrices and not plan.watched and "join matrix" not in text
    assert "a join with a relation of at most one row (a global aggregate) is a filtered cross product" in text


def test_theta_bench_schedule_swings_the_size_ratio():
    from streamfold.bench.theta import BATCHES_PER_PHASE, schedule

    plan = schedule(1000, 4, 3)
    assert plan[0] == (1000, 1000) and len(plan) == 1 + 3 * BATCHES_PER_PHASE
    sizes = [0, 0]
    ends = []
    for b, (a, c) in enumerate(plan):
        sizes = [sizes[0] + a, sizes[1] + c]
        if b % BATCHES_PER_PHASE == 0 and b:
            ends.append(sizes[0] / sizes[1])
    assert ends[0] > 3.5 and ends[1] < 1 / 3.5 and ends[2] > 3.5
