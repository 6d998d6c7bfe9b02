"""Golden fixtures: explain plans, pass rewrites and rendered errors. No Spark needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import streamfold
from streamfold.errors import StreamfoldError
from streamfold.ir.sqltext import rel_sql
from streamfold.passes import PIPELINE, normalize
from streamfold.sql import Catalog, bind

from ..golden import check, fixtures, load


@pytest.mark.parametrize("path", fixtures("explain"), ids=lambda p: p.stem)
def test_explain(request: pytest.FixtureRequest, path: Path) -> None:
    fx = load(path)
    check(request, path, streamfold.explain(fx.sql, fx.schemas, fx.tables))


@pytest.mark.parametrize("path", fixtures("errors"), ids=lambda p: p.stem)
def test_error(request: pytest.FixtureRequest, path: Path) -> None:
    fx = load(path)
    with pytest.raises(StreamfoldError) as info:
        streamfold.compile(fx.sql, fx.schemas, fx.tables)
    assert info.value.code == fx.headers["error"], str(info.value)
    check(request, path, str(info.value) + "\n")


@pytest.mark.parametrize("path", fixtures("passes"), ids=lambda p: p.stem)
def test_pass(request: pytest.FixtureRequest, path: Path) -> None:
    fx = load(path)
    rel = bind(fx.sql, Catalog.from_mapping(fx.schemas, static=fx.tables)).rel
    name = fx.headers["pass"]
    if name == "normalize":
        out = normalize(rel)
    else:
        out = dict(PIPELINE)[name](rel)
    check(request, path, f"-- before\n{rel_sql(rel)}\n\n-- after {name}\n{rel_sql(out)}\n")


def test_seed_explain_json_has_the_contract_keys() -> None:
    fx = load(next(p for p in fixtures("explain") if p.stem == "seed_join_groupby"))
    doc = json.loads(streamfold.explain(fx.sql, fx.schemas, format="json"))
    assert {"states", "delta", "merge", "answer"} <= set(doc)
    for state in doc["states"]:
        assert {"name", "key", "columns"} <= set(state)
        assert all("monoid" in c for c in state["columns"])
    states = {s["name"]: s for s in doc["states"]}
    # lineage: S1's state is keyed by the join key and the group key
    assert [k["name"] for k in states["in_x"]["key"]] == ["x.B", "x.A"]
    # (sum, count) of avg in h, division in a
    assert {"sum(y.D)", "count(y.D)"} <= {c["name"] for c in states["agg"]["columns"]}
    assert "/" in doc["answer"]["sql"]
