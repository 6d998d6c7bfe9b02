"""A recompute's netting of weighted streams (runtime/netting.py): only the rows that can meet a
deletion are grouped, and the bag is the same as netting every row.

The split is checked on its own (which files are plain, when it does not pay), then the netted
rows against a Python count of the net weights — random files, NULLs, copies, deletions of rows
that exist and of rows that do not — through the bench's recompute (``verify.recompute``) and the
engine's recompute strategy (against DuckDB after every batch)."""

from __future__ import annotations

import os
from collections import Counter

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamfold.runtime import netting
from streamfold.runtime.recompute import Recomputer
from streamfold.runtime.sources import parquet_weights_all_one
from streamfold.verify import python_value, recompute

from ..streams import Source, check_stream
from .test_differential import SETTINGS

R = Source("R", (("a", "INT"), ("s", "STRING"), ("c", "DOUBLE")), weighted=True)


def test_split_keeps_apart_the_files_that_may_delete():
    ones = {"f0": True, "f1": True, "f2": False}.__getitem__
    rows = {"f0": 100, "f1": 50, "f2": 10}.__getitem__
    assert netting.split(["f0", "f1", "f2"], 3, all_ones=ones, rows=rows) == (["f0", "f1"], ["f2"])
    assert netting.split(["f0", "f1"], 3, all_ones=ones, rows=rows) == (["f0", "f1"], [])  # nothing to net
    assert netting.split(["f2"], 3, all_ones=ones, rows=rows) is None  # nothing plain: net it all
    many = {"f0": 100, "f1": 50, "f2": 200}.__getitem__
    assert netting.split(["f0", "f1", "f2"], 3, all_ones=ones, rows=many) is None  # more to net than to keep
    wide = {"f0": 10**9, "f1": 50, "f2": netting.SPLIT_MAX_VALUES // 2}.__getitem__
    assert netting.split(["f0", "f2"], 3, all_ones=ones, rows=wide) is None  # too many values to broadcast


def test_the_probe_is_the_most_distinct_integer_columns(tmp_path):
    path = str(tmp_path / "w.parquet")
    rows = [(i % 3, f"s{i}", float(i), -1) for i in range(10)]  # `s` and `c` more distinct, not integers
    pq.write_table(R.table(rows), path)
    assert netting.probe_columns([path], ["a", "s", "c"]) == ["a"]
    T = Source("T", (("k", "BIGINT"), ("p", "INT"), ("d", "DATE"), ("n", "STRING")), weighted=True)
    import datetime
    pq.write_table(T.table([(i // 2, i, datetime.date(2020, 1, 1 + i % 2), "x", -1) for i in range(10)]), path)
    assert netting.probe_columns([path], ["k", "p", "d", "n"]) == ["k", "p"]  # in the columns' order
    assert netting.probe_columns([path], ["K", "n"]) == ["K"]  # names matched as Spark does
    S = Source("S", (("n", "STRING"), ("v", "DOUBLE")), weighted=True)
    pq.write_table(S.table([("x", float(i), -1) for i in range(5)]), path)
    assert netting.probe_columns([path], ["n", "v"]) == ["v"]  # no integer: the most distinct column


def test_a_file_proves_its_weights_from_its_footers(tmp_path):
    plain, copies, bare = (str(tmp_path / n) for n in ("plain.parquet", "copies.parquet", "bare.parquet"))
    pq.write_table(R.table([(1, "x", 1.0, 1), (None, None, None, 1)]), plain)
    pq.write_table(R.table([(1, "x", 1.0, 1), (2, "y", 2.0, 2)]), copies)
    pq.write_table(Source("B", (("a", "INT"),)).table([(1,)]), bare)
    assert parquet_weights_all_one(plain) and parquet_weights_all_one(bare)
    assert not parquet_weights_all_one(copies)


# a few values, so rows repeat and deletions meet them; -0.0 and 0.0 are the same value to both
values = st.tuples(st.sampled_from([None, 1, 2]), st.sampled_from([None, "x", "y"]),
                   st.sampled_from([None, 0.0, -0.0, 1.5, -2.25]))


@st.composite
def files(draw: st.DrawFn) -> list[list[tuple]]:
    """Files of rows with weights: the first plain and the largest, then plain ones (every
    weight 1) and weighted ones (copies, deletions of rows present or absent) in any order."""
    out = [[r + (1,) for r in draw(st.lists(values, min_size=8, max_size=30))]]
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.booleans()):
            out.append([r + (1,) for r in draw(st.lists(values, max_size=6))])
        else:
            out.append([r + (draw(st.sampled_from([-1, -1, 2, 1, -2])),)
                        for r in draw(st.lists(values, min_size=1, max_size=6))])
    return out


def expected_bag(batches: list[list[tuple]]) -> Counter:
    net: Counter = Counter()
    for rows in batches:
        for r in rows:
            net[r[:-1]] += r[-1]
    return Counter({r: n for r, n in net.items() if n > 0})


def _key(row: tuple) -> tuple:
    return tuple((v is None, 0.0 if v == 0 and isinstance(v, float) else v) for v in row)


@pytest.mark.spark
@given(batches=files())
@SETTINGS.__class__(SETTINGS, max_examples=6)
def test_the_bench_recompute_nets_like_grouping_every_row(spark, tmp_path_factory, batches):
    tmp = str(tmp_path_factory.mktemp("netting"))
    paths = []
    for i, rows in enumerate(batches):
        paths.append(os.path.join(tmp, f"{i:04d}.parquet"))
        pq.write_table(R.table(rows), paths[-1])
    got = recompute(spark, "SELECT a, s, c FROM R", {"R": paths}, netting=netting.register_files).rows or []
    want = expected_bag(batches)
    assert Counter(_key(tuple(python_value(v) for v in r)) for r in got) == \
        Counter({_key(r): n for r, n in want.items()})
    whole = recompute(spark, "SELECT a, s, c FROM R", {"R": tmp}).rows or []  # a directory: all netted
    assert sorted(map(_key, got)) == sorted(_key(tuple(python_value(v) for v in r)) for r in whole)


@pytest.mark.spark
@pytest.mark.parametrize("small", [False, True])
def test_the_recompute_strategy_nets_only_what_a_deletion_meets(spark, tmp_path, monkeypatch, small):
    """Batches 0–1 plain, batch 2 deletes rows of both and copies one, batch 3 inserts a deleted
    row again: every snapshot DuckDB's, and the batch with the deletion netted apart — or, a
    history of at most one task's rows (``small``), netted whole, once (issue 58)."""
    from streamfold.runtime import shape

    if not small:
        monkeypatch.setattr(shape, "ONE_TASK_ROWS", 0)
    base = [(i % 5, f"s{i % 3}", float(i % 4)) for i in range(40)] + [(None, None, None)] * 2
    batches = [
        {"R": [r + (1,) for r in base]},
        {"R": [(7, "s7", 7.0, 1), (1, "s1", 1.0, 1)]},
        {"R": [(0, "s0", 0.0, -1), (None, None, None, -1), (7, "s7", 7.0, -1), (1, "s1", 1.0, 2)]},
        {"R": [(7, "s7", 7.0, 1), (2, "s2", 2.0, 1)]},
    ]
    sql = "SELECT a, s, count(*) AS n, sum(c) AS total FROM R GROUP BY a, s"
    texts: list[str | None] = []  # per recompute: the plain view netted apart, or None
    real = netting.register
    monkeypatch.setattr(netting, "register", lambda spark, name, cols, weighted, plain=None, probe=None:
                        texts.append(plain) or real(spark, name, cols, weighted, plain, probe))
    kept: list[int] = []  # per recompute: the frames it cached (a small history netted whole is kept)
    register_all = Recomputer.register
    monkeypatch.setattr(Recomputer, "register", lambda self, history: (
        lambda cached: kept.append(len(cached)) or cached)(register_all(self, history)))
    check_stream(spark, str(tmp_path), sql, [R], batches, strategy="recompute")
    # batches 2 and 3; 0 and 1 need no netting (a small history is netted whole: no plain part)
    assert texts == ([None, None] if small else ["__plain_R", "__plain_R"]), texts
    # nothing is copied while no file deletes: the query reads the files as Spark's own would
    assert min(kept[-2:]) >= 1 and set(kept[:-2]) == {0}, kept
    files = sorted(os.path.join(tmp_path, "in", "R", n) for n in os.listdir(tmp_path / "in" / "R"))
    assert netting.split(files, 3) == (files[:2] + files[3:], files[2:3])
