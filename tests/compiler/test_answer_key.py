"""The answer's key (``plan/answer_key.py``): the output columns a sink keys its table on, or
None for a multiset. No Spark needed."""

from __future__ import annotations

import pytest

import streamfold
from streamfold.plan.answer_key import answer_key

SCHEMAS = {"S": "k INT, v INT, _weight BIGINT", "T": "k INT, w STRING"}
CASES = [
    ("SELECT k AS kk, sum(v) AS s, count(*) AS n FROM S GROUP BY k", ("kk",)),
    ("SELECT k, sum(v) AS s FROM S GROUP BY k ORDER BY s DESC LIMIT 3", ("k",)),  # top-k
    ("SELECT S.k, T.w, sum(v) AS s FROM S JOIN T ON S.k = T.k GROUP BY S.k, T.w", ("k", "w")),
    ("SELECT k, max(v) AS m FROM S GROUP BY k HAVING count(*) > 1", ("k",)),
    ("SELECT k, count(DISTINCT v) AS c FROM S GROUP BY k", ("k",)),
    ("SELECT k + 1 AS k1, sum(v) AS s FROM S GROUP BY k + 1", ("k1",)),
    ("SELECT sum(v) AS s FROM S", ()),  # one row
    ("SELECT sum(v) AS s FROM S GROUP BY k", None),  # the key is not in the output
    ("SELECT k, v FROM S WHERE v > 1", None),
    ("SELECT S.k, T.w FROM S JOIN T ON S.k = T.k", None),
    ("SELECT DISTINCT k FROM S", None),
]


@pytest.mark.parametrize("sql,key", CASES, ids=[c[0] for c in CASES])
def test_answer_key(sql, key):
    assert answer_key(streamfold.compile(sql, SCHEMAS)) == key
