"""One compilation object (streamfold/plan/compilation.py): a query's text is parsed once, each
phase kept, and a join matrix's re-plan starts from the kept normalized query. No Spark needed."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import sqlglot

import streamfold
from streamfold.errors import ParseError
from streamfold.plan import incrementalize
from streamfold.plan.compilation import Compilation, compilation_of, replanned
from streamfold.plan.matrix import MatrixPolicy
from streamfold.sql import Catalog, bind
from streamfold.sql import parse as parse_module
from streamfold.sql.iterate import spark_schema_sql

SCHEMAS = {"R": "a INT, b INT", "S": "k INT, v INT"}
THETA = "SELECT R.a, count(*) AS n FROM R JOIN S ON R.a < S.k GROUP BY R.a"
EXAMPLES = Path(__file__).parent.parent.parent / "examples"


@pytest.fixture
def parses(monkeypatch) -> Counter:
    """Calls of every way the package parses SQL text: sqlglot's two and streamfold's own."""
    counts: Counter = Counter()

    def counted(name, real):
        def call(*args, **kwargs):
            counts[name] += 1
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(sqlglot, "parse", counted("sqlglot.parse", sqlglot.parse))
    monkeypatch.setattr(sqlglot, "parse_one", counted("sqlglot.parse_one", sqlglot.parse_one))
    monkeypatch.setattr(parse_module, "parse", counted("streamfold.sql.parse.parse", parse_module.parse))
    return counts


def test_explain_parses_the_query_once(parses):
    streamfold.explain(THETA, SCHEMAS)
    streamfold.explain(THETA, SCHEMAS, format="json")
    # two explains: one parse each (before, the text was bound once per call, and the runtime's
    # Spark text and every re-plan parsed it again)
    assert parses == {"streamfold.sql.parse.parse": 2, "sqlglot.parse": 2}


def test_compile_and_replan_parse_the_query_once(parses):
    plan = streamfold.compile(THETA, SCHEMAS)
    (matrix,) = plan.matrices
    assert (matrix.n, matrix.m) == (2, 2)
    again = replanned(plan, {matrix.left: (1, 4)})
    hybrid = replanned(again, {matrix.left: (4, 1)})
    assert plan.compilation.spark_sql == "SELECT R.a, COUNT(*) AS n FROM R JOIN S ON R.a < S.k GROUP BY R.a"
    assert parses == {"streamfold.sql.parse.parse": 1, "sqlglot.parse": 1}
    assert [(m.n, m.m) for m in again.matrices] == [(1, 4)] and [(m.n, m.m) for m in hybrid.matrices] == [(4, 1)]
    assert again.compilation is hybrid.compilation is plan.compilation  # the re-plans keep it too


def test_a_replan_is_the_plan_compiled_afresh_with_the_mappings():
    catalog = Catalog.from_mapping(SCHEMAS)
    plan = Compilation(THETA, catalog).plan
    mappings = {plan.matrices[0].left: (4, 1)}
    fresh = incrementalize(bind(THETA, catalog), mappings)
    assert replanned(plan, mappings) == fresh  # (the compilation is not part of a plan's value)
    assert fresh.compilation is None and compilation_of(fresh).replanned(mappings) == fresh


def test_each_phase_is_computed_once_and_kept():
    c = Compilation(THETA, Catalog.from_mapping(SCHEMAS), MatrixPolicy(cells=16))
    assert c.plan is c.plan and c.bound is c.bound and c.normalized is c.normalized
    assert c.plan.compilation is c and c.plan.matrices[0].cells == 16
    assert c.normalized == c.plan.logical and c.bound.sql == c.text == c.plan.sql
    assert "kept: parsed, bound, normalized, plan" in repr(c)


def test_the_parse_needs_no_catalog_and_is_shared_by_the_bindings(parses):
    text = Compilation(THETA)
    assert text.parsed.sql == THETA  # a syntax error would be raised here, before any input is read
    first = text.against(Catalog.from_mapping(SCHEMAS))
    second = text.against(Catalog.from_mapping({"R": "a BIGINT, b INT", "S": "k BIGINT, v INT"}), MatrixPolicy(16))
    assert first.parsed is second.parsed is text.parsed
    assert first.plan.sources[0].columns != second.plan.sources[0].columns and second.policy.cells == 16
    assert parses["sqlglot.parse"] == 1
    with pytest.raises(streamfold.StreamfoldError) as e:
        text.bound  # noqa: B018
    assert e.value.code == "INTERNAL"


def test_a_phase_that_fails_raises_its_coded_error_each_time():
    c = Compilation("SELECT a FORM R", Catalog.from_mapping(SCHEMAS))
    for _ in range(2):
        with pytest.raises(ParseError) as e:
            c.plan  # noqa: B018
        assert e.value.code == "PARSE_ERROR"
    c = Compilation("SELECT amout FROM R", Catalog.from_mapping({"R": "amount INT"}))
    with pytest.raises(streamfold.BindError) as e:
        c.bound  # noqa: B018
    assert e.value.code == "UNKNOWN_COLUMN" and "parsed" in c.__dict__ and "bound" not in c.__dict__


@pytest.mark.parametrize("query", [
    (EXAMPLES / "pagerank.sql").read_text(),  # WITH ITERATIVE: unrolled
    "WITH RECURSIVE reach (n) AS (SELECT k FROM S UNION SELECT S.v FROM reach JOIN S ON reach.n = S.k) "
    "SELECT n FROM reach",  # a recursive CTE's UNION as UNION ALL
    THETA,
], ids=["iterative", "recursive", "plain"])
def test_the_spark_text_from_the_kept_trees_is_the_texts(query, parses):
    c = Compilation(query)
    trees = [c.parsed.tree.sql(), *(step.sql() for step in c.parsed.steps.values())]
    assert c.spark_sql == spark_schema_sql(query)  # (spark_schema_sql parses the text itself)
    assert parses["sqlglot.parse"] == 1 + len(c.parsed.steps)  # the text, and each iteration's step
    # the trees the binder reads are not changed by writing the Spark text
    assert [c.parsed.tree.sql(), *(step.sql() for step in c.parsed.steps.values())] == trees
    assert c.parsed.spark_sql() == c.spark_sql
