"""Queries as data engineers write them, over the odd batch splits real feeds produce (the second
robustness sweep): facts before their dimension rows, files without rows, one-row batches,
delete-only batches that evict the current top rows, a dimension given as a source and updated
as delete + insert, everything deleted and inserted again. Keys are NULL and duplicated. Every
snapshot is checked against DuckDB, and every changes file against the snapshots' difference."""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from decimal import Decimal

import pytest

from ..streams import Source, check_stream

pytestmark = [pytest.mark.spark, pytest.mark.slow]

F = Source("F", (("fid", "INT"), ("cid", "INT"), ("qty", "INT"), ("price", "DECIMAL(10,2)"), ("note", "STRING"),
                 ("d", "DATE"), ("tags", "STRING")), weighted=True)
C = Source("C", (("cid", "INT"), ("name", "STRING"), ("region", "STRING")), weighted=True)


def _fact(r: random.Random) -> tuple:
    return (r.randint(0, 9), r.choice([None, 1, 2, 3, 3]), r.choice([None, 0, 1, 2, 5, 7]),
            r.choice([None, Decimal("1.50"), Decimal("10.00"), Decimal("-3.33")]),
            r.choice([None, " a b ", "Foo-1", "", "Zed"]),
            r.choice([None, dt.date(2020, 1, 31), dt.date(2020, 2, 29), dt.date(2021, 12, 31)]),
            r.choice([None, "a,b", "b", "", "a,,c"]))


def _customer(r: random.Random) -> tuple:
    return (r.choice([None, 1, 2, 3, 4]), r.choice([None, "ann", "bob"]), r.choice([None, "north", "south"]))


def odd_batches(seed: int) -> list[dict[str, list[tuple]]]:
    """Facts first; an empty fact file with the customers; one fact; empty files only; the facts
    with the largest qty deleted; a mix; customers updated (delete + insert); everything deleted;
    everything inserted again. Rows end in their weight."""
    r = random.Random(seed)
    live: dict[str, Counter] = {"F": Counter(), "C": Counter()}

    def present(name: str) -> list[tuple]:
        return sorted((row for row, n in live[name].items() for _ in range(n)), key=repr)

    def ins(rows: list[tuple]) -> list[tuple]:
        return [row + (1,) for row in rows]

    def dele(rows: list[tuple]) -> list[tuple]:
        return [row + (-1,) for row in rows]

    plan = [
        lambda: {"F": ins([_fact(r) for _ in range(10)])},
        lambda: {"C": ins([_customer(r) for _ in range(5)]), "F": []},
        lambda: {"F": ins([_fact(r)])},
        lambda: {"F": [], "C": []},
        lambda: {"F": dele(sorted(present("F"), key=lambda x: (x[2] is None, -(x[2] or 0)))[:4])},
        lambda: {"F": ins([_fact(r) for _ in range(3)]) + dele(r.sample(present("F"), 2)),
                 "C": ins([_customer(r)])},
        lambda: {"C": dele(present("C")[:2]) + ins([(x[0], "upd", x[2]) for x in present("C")[:2]])},
        lambda: {name: dele(present(name)) for name in live},
        lambda: {name: ins(saved[name]) for name in live},
    ]
    batches = []
    saved: dict[str, list[tuple]] = {}
    for i, make in enumerate(plan):
        if i == 7:
            saved = {name: present(name) for name in live}
        batch = make()
        for name, rows in batch.items():
            for row in rows:
                live[name][row[:-1]] += row[-1]
        batches.append(batch)
    return batches


def _run(spark, tmp_path, sql: str, uses: str = "FC", ordered: bool = False, oracle_sql: str | None = None) -> None:
    sources = [s for s in (F, C) if s.name in uses]
    batches = [{n: rows for n, rows in b.items() if n in uses} for b in odd_batches(7)]
    batches = [b for b in batches if b]
    run = check_stream(spark, str(tmp_path), sql, sources, batches, ordered=ordered, oracle_sql=oracle_sql,
                       empty_files=True)
    assert run.batches == len(batches)


def test_split_and_element_at_are_maintained(spark, tmp_path):
    # split is Spark's (a regular expression); sqlglot gives DuckDB str_split_regex
    _run(spark, tmp_path, "SELECT element_at(split(tags, ','), 1) AS first_tag, size(split(tags, ',')) AS n, "
         "count(*) AS rows, max(split(tags, ',')[1]) AS second FROM F GROUP BY 1, 2", uses="F")


@pytest.mark.parametrize("sql", [
    # the CTE's two copies name their column `cid` alike: the join compared cid with itself (a
    # cross join, each pair once per row), and with `b.cid + 1` found nothing
    "WITH u AS (SELECT DISTINCT cid FROM F) SELECT a.cid, b.cid AS cid2 FROM u a LEFT JOIN u b ON a.cid = b.cid + 1",
    "SELECT a.cid, count(*) AS n FROM (SELECT DISTINCT cid, qty FROM F) a JOIN (SELECT DISTINCT cid, qty FROM F) b "
    "ON a.cid = b.cid AND a.qty > b.qty GROUP BY a.cid",
], ids=["distinct-cte-self-left-join", "distinct-derived-self-join-agg"])
def test_a_distinct_relation_joined_with_itself_is_kept_apart(spark, tmp_path, sql):
    _run(spark, tmp_path, sql, uses="F")


def test_tables_aliased_as_the_planner_names_derived_inputs_are_kept_apart(spark, tmp_path):
    # derived inputs are named d1, d2, …: a table aliased d1 beside one collided (an internal
    # "duplicate field 'd1._weight'" at compile time)
    _run(spark, tmp_path, "SELECT d1.name, d2.q, count(*) AS n FROM (SELECT DISTINCT cid, qty FROM F) x "
         "JOIN C d1 ON d1.cid = x.cid JOIN (SELECT cid, sum(qty) AS q FROM F GROUP BY cid) d2 ON d2.cid = x.cid "
         "GROUP BY d1.name, d2.q")


@pytest.mark.parametrize("sql, oracle", [
    ("SELECT cid, count(*) AS n, sum(qty) AS q FROM F NATURAL JOIN C GROUP BY cid", None),
    ("SELECT region, sum(qty) AS q FROM C NATURAL JOIN F GROUP BY region", None),
    # Spark puts a NATURAL (or USING) join's shared columns first in `*`; DuckDB keeps the left's order
    ("SELECT * FROM F NATURAL LEFT JOIN C",
     "SELECT cid, fid, qty, price, note, d, tags, name, region FROM F NATURAL LEFT JOIN C"),
], ids=["inner-aggregated", "dimension-first", "left-star"])
def test_a_natural_join_compares_the_columns_both_sides_have(spark, tmp_path, sql, oracle):
    _run(spark, tmp_path, sql, oracle_sql=oracle)


def test_count_distinct_over_several_columns_counts_tuples_without_a_null(spark, tmp_path):
    # DuckDB counts a row value even with a NULL member: the oracle says which tuples count
    _run(spark, tmp_path,
         "SELECT cid, count(DISTINCT qty, note) AS n, count(DISTINCT note, d, price) AS m, count(*) AS k "
         "FROM F GROUP BY cid",
         uses="F",
         oracle_sql="SELECT cid, count(DISTINCT CASE WHEN qty IS NOT NULL AND note IS NOT NULL "
                    "THEN struct_pack(q := qty, t := note) END) AS n, "
                    "count(DISTINCT CASE WHEN note IS NOT NULL AND d IS NOT NULL AND price IS NOT NULL "
                    "THEN struct_pack(t := note, d := d, p := price) END) AS m, count(*) AS k FROM F GROUP BY cid")


def test_count_distinct_tuples_are_told_apart_when_their_texts_run_together(spark, tmp_path):
    # ('a:', 'b') and ('a', ':b'), (1, '2') and (12, ''): equal texts once concatenated
    P = Source("P", (("k", "INT"), ("a", "STRING"), ("b", "STRING"), ("n", "INT"), ("t", "STRING")), weighted=True)
    rows = [(1, "a:", "b", 1, "2"), (1, "a", ":b", 12, ""), (1, "a", ":b", 12, ""), (2, "", "", None, "x"),
            (2, ":", "", 0, ":")]
    batches = [{"P": [r + (1,) for r in rows[:3]]}, {"P": [r + (1,) for r in rows[3:]]},
               {"P": [rows[0] + (-1,)]}]
    check_stream(spark, str(tmp_path), "SELECT k, count(DISTINCT a, b) AS ab, count(DISTINCT n, t) AS nt FROM P "
                 "GROUP BY k", [P], batches,
                 oracle_sql="SELECT k, count(DISTINCT CASE WHEN a IS NOT NULL AND b IS NOT NULL THEN "
                            "struct_pack(a := a, b := b) END) AS ab, count(DISTINCT CASE WHEN n IS NOT NULL AND t IS "
                            "NOT NULL THEN struct_pack(n := n, t := t) END) AS nt FROM P GROUP BY k")


@pytest.mark.parametrize("sql", [
    "SELECT regexp_extract(note, '([A-Za-z]+)', 1) AS w, count(*) AS n FROM F GROUP BY 1",
    "SELECT fid, regexp_extract(note, '([a-z]+)-([0-9])', 2) AS digit FROM F WHERE note RLIKE '^F' OR regexp_like(note, 'e')",
    "SELECT cid, count(*) AS n FROM F WHERE NOT note RLIKE '[0-9]' GROUP BY cid",
], ids=["extract-grouped", "extract-rlike-regexp-like", "not-rlike"])
def test_regular_expressions_are_maintained(spark, tmp_path, sql):
    _run(spark, tmp_path, sql, uses="F")
