"""Outer joins reduced by the conditions above them (passes/outer_joins.py): a LEFT, RIGHT or FULL
JOIN whose NULL-padded rows a filter or an inner join's ON drops is planned as the join that keeps
only what reaches the answer — and every snapshot still equals DuckDB's (which runs the query as
written), with NULLs on both sides and deletions. Conditions that let a padded row through
(``IS NULL``, ``coalesce``, ``<=>``, an OR with one such branch) keep the outer join: those
queries are here too, each checked not to have been reduced."""

from __future__ import annotations

import random

import pytest

from streamfold.ir.expr import Call, Column, Literal
from streamfold.ir.rel import Join
from streamfold.ir.types import BOOLEAN, INT
from streamfold.passes import normalize
from streamfold.passes.outer_joins import rejects
from streamfold.sql import Catalog, bind

from ..streams import Source, check_stream
from ..strategies import random_rows, random_stream

R = Source("R", (("a", "INT"), ("b", "INT"), ("s", "STRING")), weighted=True)
S = Source("S", (("k", "INT"), ("v", "INT")), weighted=True)
D = Source("D", (("k", "INT"), ("g", "INT")), static=True)

# (id, query, the join kinds it is planned with, outer ones first)
QUERIES = [
    ("left-where-on-the-padded-side",
     "SELECT R.a, S.v FROM R LEFT JOIN S ON R.b = S.k WHERE S.v > 1", ["inner"]),
    ("left-then-inner-on-the-padded-side",  # TPC-DS Q93's shape: the ON of a comma join above
     "SELECT R.a, count(*) AS n, sum(S.v) AS t FROM R LEFT JOIN S ON R.b = S.k, D WHERE S.v = D.k AND D.g <> 2 "
     "GROUP BY R.a", ["inner", "inner"]),
    ("right-where-on-the-padded-side",
     "SELECT S.k, R.a FROM R RIGHT JOIN S ON R.b = S.k WHERE R.a + 1 >= 2", ["inner"]),
    ("full-where-on-one-side",
     "SELECT R.a, S.k, S.v FROM R FULL JOIN S ON R.b = S.k WHERE S.v IN (0, 1, 2)", ["right"]),
    ("full-where-on-both-sides",
     "SELECT R.a, S.v FROM R FULL JOIN S ON R.b = S.k WHERE R.s LIKE 'a%' AND S.v IS NOT NULL", ["inner"]),
    ("left-or-of-two-rejecting-branches",
     "SELECT R.a, S.v FROM R LEFT JOIN S ON R.b = S.k WHERE S.v = 1 OR S.k > 2", ["inner"]),
    ("left-in-a-derived-table",
     "SELECT j.a, count(*) AS n FROM (SELECT R.a, S.v AS w FROM R LEFT JOIN S ON R.b = S.k) j "
     "WHERE j.w < 3 GROUP BY j.a", ["inner"]),
    ("left-where-is-null-kept",
     "SELECT R.a, R.b FROM R LEFT JOIN S ON R.b = S.k WHERE S.k IS NULL", ["left"]),
    ("left-where-coalesce-kept",
     "SELECT R.a, S.v FROM R LEFT JOIN S ON R.b = S.k WHERE coalesce(S.v, 0) = 0", ["left"]),
    ("left-where-null-safe-kept",
     "SELECT R.a, S.v FROM R LEFT JOIN S ON R.b = S.k WHERE NOT (S.v <=> 1)", ["left"]),
    ("left-or-with-a-preserved-branch-kept",
     "SELECT R.a, S.v FROM R LEFT JOIN S ON R.b = S.k WHERE S.v = 1 OR R.a = 0", ["left"]),
    ("left-where-on-the-preserved-side-kept",
     "SELECT R.a, S.v FROM R LEFT JOIN S ON R.b = S.k WHERE R.a > 0", ["left"]),
]
# … run against DuckDB: each kind of reduction, and one outer join left so (the others left
# outer are planned as test_differential's outer joins; a reduction of any of them fails it)
RUN = ["left-then-inner-on-the-padded-side", "right-where-on-the-padded-side", "full-where-on-one-side",
       "left-or-of-two-rejecting-branches", "left-in-a-derived-table", "left-where-is-null-kept"]


def _kinds(sql: str) -> list[str]:
    sources = [R, S, D]
    catalog = Catalog.from_mapping({s.name: s.schema_sql() for s in sources}, static=["D"])
    rel = normalize(bind(sql, catalog).rel)
    kinds = [str(n.kind) for n in rel.walk() if isinstance(n, Join) and n.kind not in ("semi", "anti")]
    return sorted(kinds, key=lambda k: k == "inner")


@pytest.mark.parametrize("qid,sql,kinds", QUERIES, ids=[q[0] for q in QUERIES])
def test_outer_joins_reduced_only_where_no_padded_row_passes(qid, sql, kinds):
    assert _kinds(sql) == kinds


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql", [(q[0], q[1]) for q in QUERIES if q[0] in RUN], ids=RUN)
def test_outer_joins_reduced_exactly_as_the_query_reads_with_deletions(spark, tmp_path, qid, sql):
    rng = random.Random(qid)
    tables = {"D": random_rows(rng, D, max_size=6, min_size=3)}
    batches = random_stream(rng, [R, S], batches=3, max_rows=12, min_rows=2)
    check_stream(spark, str(tmp_path), sql, [R, S, D], batches, tables)


def test_rejects_reads_the_shape_of_a_condition():
    """NULL through arithmetic, comparison and IN's first argument; not through CASE-like forms."""
    v, w = Column("s.v", INT), Column("r.a", INT)
    one = Literal(1, INT)
    names = frozenset({"s.v"})
    gt = Call(">", (Call("+", (v, one), INT), one), BOOLEAN)
    assert rejects(gt, names)
    assert rejects(Call("IS NOT NULL", (v,), BOOLEAN), names)
    assert rejects(Call("IN", (v, one), BOOLEAN), names)
    assert not rejects(Call("IN", (one, v), BOOLEAN), names)
    assert not rejects(Call("IS NULL", (v,), BOOLEAN), names)
    assert not rejects(Call("<=>", (v, one), BOOLEAN), names)
    assert not rejects(Call("=", (Call("coalesce", (v, one), INT, "coalesce({0}, {1})"), one), BOOLEAN), names)
    assert not rejects(Call("OR", (gt, Call(">", (w, one), BOOLEAN)), BOOLEAN), names)
    assert rejects(Call("AND", (gt, Call(">", (w, one), BOOLEAN)), BOOLEAN), names)
