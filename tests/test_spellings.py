"""Spellings of one query compile to one plan: sugar Spark accepts is rewritten in the binder to
what it means, so it needs no rule of its own (and is maintained exactly wherever its meaning is).
No Spark needed."""

from __future__ import annotations

import pytest

import streamfold

SCHEMAS = {"F": "cid INT, pid INT, amount DOUBLE, status STRING, _weight BIGINT"}

# (id, the spelling, what it means)
SPELLINGS = [
    ("filter-clause",
     "SELECT cid, count(*) FILTER (WHERE status = 'open') AS n, sum(amount) FILTER (WHERE pid > 1) AS s, "
     "count(DISTINCT pid) FILTER (WHERE amount > 0) AS d, var_samp(amount) FILTER (WHERE pid IS NULL) AS v FROM F GROUP BY cid",
     "SELECT cid, count(CASE WHEN status = 'open' THEN 1 END) AS n, sum(CASE WHEN pid > 1 THEN amount END) AS s, "
     "count(DISTINCT CASE WHEN amount > 0 THEN pid END) AS d, var_samp(CASE WHEN pid IS NULL THEN amount END) AS v "
     "FROM F GROUP BY cid"),
    ("having-alias",
     "SELECT cid, sum(amount) AS total FROM F GROUP BY cid HAVING total > 1 AND count(*) > 1",
     "SELECT cid, sum(amount) AS total FROM F GROUP BY cid HAVING sum(amount) > 1 AND count(*) > 1"),
    ("having-alias-input-column-first",  # `pid` is a column of F, so HAVING's pid is the group key
     "SELECT pid, count(*) AS pid_n, max(cid) AS cid FROM F GROUP BY pid HAVING pid > 1",
     "SELECT pid, count(*) AS pid_n, max(cid) AS cid FROM F GROUP BY pid HAVING F.pid > 1"),
]


def _plan(sql: str) -> list[str]:
    text = streamfold.explain(sql, SCHEMAS).splitlines()
    return text[text.index("Sources"):]  # all but the query's own text


@pytest.mark.parametrize("qid,spelling,meaning", SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_a_spelling_compiles_to_the_plan_of_what_it_means(qid: str, spelling: str, meaning: str) -> None:
    assert _plan(spelling) == _plan(meaning)


def test_filter_on_something_not_an_aggregate_is_refused_with_a_code() -> None:
    with pytest.raises(streamfold.UnsupportedError) as e:
        streamfold.compile("SELECT cid, upper(status) FILTER (WHERE pid > 1) FROM F", SCHEMAS)
    assert e.value.code == "UNSUPPORTED_EXPRESSION" and e.value.params == {"construct": "FILTER"}
