"""Spellings of one query compile to one plan: sugar Spark accepts is rewritten in the binder to
what it means, so it needs no rule of its own (and is maintained exactly wherever its meaning is).
No Spark needed."""

from __future__ import annotations

import pytest

import streamfold
from streamfold.errors import BindError, StreamfoldError, UnsupportedError

SCHEMAS = {"F": "cid INT, pid INT, amount DOUBLE, status STRING, d DATE, ts TIMESTAMP, _weight BIGINT",
           "C": "cid INT, region STRING, _weight BIGINT"}

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
    ("named-window",
     "SELECT cid, count(*) OVER w AS n, rank() OVER (w) AS r, max(pid) OVER v AS m FROM F "
     "WINDOW w AS (PARTITION BY cid ORDER BY pid), v AS w",
     "SELECT cid, count(*) OVER (PARTITION BY cid ORDER BY pid) AS n, rank() OVER (PARTITION BY cid ORDER BY pid) AS r, "
     "max(pid) OVER (PARTITION BY cid ORDER BY pid) AS m FROM F"),
    ("qualify",  # a filter over the block's window column, as around a derived table
     "SELECT cid, pid FROM F QUALIFY row_number() OVER (PARTITION BY cid ORDER BY pid DESC, amount) <= 2",
     "SELECT cid, pid FROM (SELECT cid, pid, row_number() OVER (PARTITION BY cid ORDER BY pid DESC, amount) AS r "
     "FROM F) t WHERE r <= 2"),
    ("qualify-alias-over-aggregate",
     "SELECT status, sum(amount) AS t, rank() OVER (ORDER BY sum(amount) DESC) AS r FROM F GROUP BY status "
     "QUALIFY r <= 3 AND t > 0",
     "SELECT status, t, r FROM (SELECT status, sum(amount) AS t, rank() OVER (ORDER BY sum(amount) DESC) AS r "
     "FROM F GROUP BY status) x WHERE r <= 3 AND t > 0"),
    ("star-except", "SELECT * EXCEPT (amount, F.status) FROM F", "SELECT cid, pid, d, ts FROM F"),
    ("star-except-using", "SELECT F.* EXCEPT (cid), C.* EXCEPT (cid) FROM F JOIN C USING (cid)",
     "SELECT F.pid, F.amount, F.status, F.d, F.ts, C.region FROM F JOIN C USING (cid)"),
    ("like-any-all", "SELECT cid FROM F WHERE status LIKE ANY ('o%', 'c%') AND status NOT LIKE ALL ('%x', '%y') "
     "OR status ILIKE SOME ('A%')",
     "SELECT cid FROM F WHERE (status LIKE 'o%' OR status LIKE 'c%') AND (status NOT LIKE '%x' AND "
     "status NOT LIKE '%y') OR (status ILIKE 'A%')"),
    ("order-by-all", "SELECT cid, status FROM F ORDER BY ALL DESC NULLS FIRST LIMIT 3",
     "SELECT cid, status FROM F ORDER BY cid DESC NULLS FIRST, status DESC NULLS FIRST LIMIT 3"),
    ("order-by-all-of-a-union", "SELECT cid FROM F UNION SELECT cid FROM C ORDER BY ALL",
     "SELECT cid FROM F UNION SELECT cid FROM C ORDER BY cid"),
    ("group-by-all",
     "SELECT cid + 1 AS k, status, count(*) AS n, sum(amount) - 1 AS t FROM F GROUP BY ALL",
     "SELECT cid + 1 AS k, status, count(*) AS n, sum(amount) - 1 AS t FROM F GROUP BY cid + 1, status"),
    ("group-by-all-star", "SELECT * FROM F GROUP BY ALL", "SELECT * FROM F GROUP BY cid, pid, amount, status, d, ts"),
    ("group-by-all-global", "SELECT count(*) AS n FROM F GROUP BY ALL", "SELECT count(*) AS n FROM F"),
    ("lateral-column-alias",
     "SELECT cid, sum(amount) AS s, s / count(*) AS m, amount_n + 1 AS k FROM "
     "(SELECT cid, amount, amount * 2 AS amount_n FROM F) t GROUP BY cid, amount_n HAVING s > 0",
     "SELECT cid, sum(amount) AS s, sum(amount) / count(*) AS m, amount_n + 1 AS k FROM "
     "(SELECT cid, amount, amount * 2 AS amount_n FROM F) t GROUP BY cid, amount_n HAVING sum(amount) > 0"),
    ("lateral-column-alias-plain", "SELECT amount * 2 AS a2, a2 + 1 AS a3 FROM F",
     "SELECT amount * 2 AS a2, amount * 2 + 1 AS a3 FROM F"),
    ("ilike", "SELECT cid FROM F WHERE status ILIKE 'O%' OR status NOT ILIKE '%x'",
     "SELECT cid FROM F WHERE lower(status) LIKE lower('O%') OR lower(status) NOT LIKE lower('%x')"),
    ("using-chained",  # the second USING compares the first's merged column
     "SELECT cid, count(*) AS n FROM F JOIN C USING (cid) JOIN C c2 USING (cid) GROUP BY cid",
     "SELECT F.cid, count(*) AS n FROM F JOIN C ON F.cid = C.cid JOIN C c2 ON F.cid = c2.cid GROUP BY F.cid"),
    ("is-distinct-from",
     "SELECT cid IS DISTINCT FROM pid AS x, cid IS NOT DISTINCT FROM pid AS y FROM F WHERE cid IS DISTINCT FROM 3",
     "SELECT NOT (cid <=> pid) AS x, cid <=> pid AS y FROM F WHERE NOT (cid <=> 3)"),
    ("comments-and-semicolons",
     "-- revenue\nSELECT cid /* the key */, sum(amount) AS t FROM F GROUP BY cid; -- done\n",
     "SELECT cid, sum(amount) AS t FROM F GROUP BY cid"),
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


@pytest.mark.parametrize("call,lowered", [
    ("date_format(d, 'yyyy-MM')", "DATE_FORMAT(F.d, 'yyyy-MM')"),
    ("date_format(ts, 'yyyy-MM-dd HH:mm')", "DATE_FORMAT(F.ts, 'yyyy-MM-dd HH:mm')"),
    ("to_timestamp(status, 'yyyy-MM-dd HH:mm:ss')", "TO_TIMESTAMP(F.status, 'yyyy-MM-dd HH:mm:ss')"),
    ("date_format(d, status)", "DATE_FORMAT(F.d, F.status)"),
])
def test_a_time_format_reaches_spark_in_its_own_pattern_letters(call: str, lowered: str) -> None:
    """sqlglot keeps a literal time format in strftime letters (``%Y-%m``) and wraps date_format's
    argument in a conversion of its own: the format is written back by Spark's generator, and
    the argument is the column (date_format was refused as a call of `cast`; to_timestamp ran
    with the pattern ``%Y-%m…``)."""
    assert lowered in streamfold.explain(f"SELECT {call} AS x FROM F", SCHEMAS)


def _aggregate_classes() -> list[type]:
    from sqlglot import exp

    found, todo = set(), [exp.AggFunc]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found:
                found.add(sub)
                todo.append(sub)
    return sorted(found, key=lambda c: c.__name__)


def test_every_aggregate_spark_has_is_bound_or_refused_as_an_aggregate() -> None:
    """Each aggregate sqlglot knows, called as Spark spells it, compiles or is refused with
    UNSUPPORTED_AGGREGATE (not UNSUPPORTED_FUNCTION and a 'did you mean radians?', as median was)."""
    from sqlglot import exp

    codes: dict[str, str] = {}
    for cls in _aggregate_classes():
        if cls.__name__ in ("Any", "All") or not issubclass(cls, exp.Func):
            continue  # `x = ANY (subquery)`: a comparison, refused as UNSUPPORTED_SUBQUERY
        name = cls.sql_names()[0].lower() if cls.sql_names() else None
        if name is None:
            continue
        args = ", ".join(["amount"] + ["cid"] * (len([a for a, req in cls.arg_types.items() if req]) - 1))
        sql = f"SELECT status, {name}({args}) AS x FROM F GROUP BY status"
        try:
            streamfold.compile(sql, SCHEMAS)
            codes[name] = "ok"
        except streamfold.StreamfoldError as e:
            codes[name] = e.code
    assert codes["corr"] == "UNSUPPORTED_AGGREGATE"  # (corr of a DOUBLE: CAST it to a decimal)
    assert codes["median"] == "ok"
    assert codes["sum"] == codes["avg"] == codes["variance"] == codes["regr_avgx"] == "ok"
    assert "UNSUPPORTED_FUNCTION" not in codes.values() and "UNSUPPORTED_EXPRESSION" not in codes.values(), codes


@pytest.mark.parametrize("call", ["product(amount)", "try_sum(amount)", "collect_set(amount)", "any_value(cid)",
                                  "percentile_approx(amount, 0.5)", "first(amount)"])
def test_spark_spellings_of_aggregates_are_refused_as_aggregates(call: str) -> None:
    with pytest.raises(streamfold.UnsupportedError) as e:
        streamfold.compile(f"SELECT status, {call} AS x FROM F GROUP BY status", SCHEMAS)
    assert e.value.code == "UNSUPPORTED_AGGREGATE" and e.value.hint


def test_a_natural_join_is_a_using_join_on_the_shared_columns():
    schemas = {"F": "fid INT, cid INT, qty INT", "C": "cid INT, name STRING", "G": "x INT", "H": "cid INT, x INT"}
    natural = streamfold.compile("SELECT * FROM F NATURAL JOIN C", schemas)
    using = streamfold.compile("SELECT * FROM F JOIN C USING (cid)", schemas)
    assert natural.answer.output == using.answer.output == ("cid", "fid", "qty", "name")
    assert natural.sql != using.sql and natural.states == using.states
    # nothing shared: a cross join, as in Spark
    assert streamfold.compile("SELECT * FROM F NATURAL JOIN G", schemas).answer.output == ("fid", "cid", "qty", "x")
    # after a USING join its merged column is one column: shared once
    assert streamfold.compile("SELECT * FROM F JOIN C USING (cid) NATURAL JOIN H", schemas).answer.output == \
        ("cid", "fid", "qty", "name", "x")
    with pytest.raises(BindError) as e:  # two left columns of that name, neither merged
        streamfold.compile("SELECT * FROM F JOIN C ON F.cid = C.cid NATURAL JOIN H", schemas)
    assert e.value.code == "AMBIGUOUS_COLUMN" and "USING" in e.value.hint


def test_count_distinct_over_several_columns_is_refused_where_a_value_is_not_its_text():
    schemas = {"F": "a INT, x DOUBLE, s STRING"}
    plan = streamfold.compile("SELECT count(DISTINCT a, s) FROM F", schemas)
    assert plan.answer.output == ("count(DISTINCT a, s)",)  # Spark's name for the column
    for sql in ("SELECT count(DISTINCT a, x) FROM F", "SELECT sum(DISTINCT a, a) FROM F"):
        with pytest.raises(UnsupportedError) as e:
            streamfold.compile(sql, schemas)
        assert e.value.code == "UNSUPPORTED_AGGREGATE" and e.value.hint


@pytest.mark.parametrize("spelling,meaning", [
    ("SELECT t.tag, count(*) AS n FROM E, LATERAL explode(E.tags) AS t(tag) GROUP BY t.tag",
     "SELECT t.tag, count(*) AS n FROM E LATERAL VIEW explode(E.tags) t AS tag GROUP BY t.tag"),
    ("SELECT id, col FROM E CROSS JOIN LATERAL explode(tags)", "SELECT id, col FROM E LATERAL VIEW explode(tags) x"),
    ("SELECT id, t.pos, t.tag FROM E JOIN LATERAL posexplode(tags) AS t(pos, tag)",
     "SELECT id, t.pos, t.tag FROM E LATERAL VIEW posexplode(tags) t AS pos, tag"),
    ("SELECT id, tag FROM E LEFT JOIN LATERAL explode(tags) AS t(tag) ON true",
     "SELECT id, tag FROM E LATERAL VIEW OUTER explode(tags) t AS tag"),
    ("SELECT id, tag FROM E JOIN LATERAL explode(tags) AS t(tag) ON tag <> 'x'",
     "SELECT id, tag FROM E LATERAL VIEW explode(tags) t AS tag WHERE tag <> 'x'"),
])
def test_a_lateral_generator_in_a_join_is_a_lateral_view(spelling: str, meaning: str) -> None:
    """Spark 3.4's ``FROM s, LATERAL explode(arr) AS t(v)`` (and its JOIN spellings)."""
    schemas = {"E": "id INT, tags ARRAY<STRING>"}
    assert streamfold.compile(spelling, schemas).states == streamfold.compile(meaning, schemas).states
    assert streamfold.compile(spelling, schemas).answer.output == streamfold.compile(meaning, schemas).answer.output


@pytest.mark.parametrize("sql,code,hint", [
    ("SELECT * FROM E LEFT JOIN LATERAL explode(tags) AS t(tag) ON tag = 'x'", "UNSUPPORTED_JOIN", "ON true"),
    ("SELECT * FROM E RIGHT JOIN LATERAL explode(tags) AS t(tag) ON true", "UNSUPPORTED_JOIN", "LATERAL explode"),
    ("SELECT tag FROM E, LATERAL (SELECT explode(tags) AS tag)", "UNSUPPORTED_CLAUSE", "LATERAL explode"),
    ("SELECT t.tag FROM E, explode(E.tags) AS t(tag)", "UNSUPPORTED_FROM", "LATERAL explode"),
    ("SELECT * FROM range(10)", "UNSUPPORTED_FROM", "--source"),
])
def test_lateral_forms_that_are_not_a_generator_joined_are_refused_with_a_hint(sql: str, code: str, hint: str) -> None:
    with pytest.raises(UnsupportedError) as e:
        streamfold.compile(sql, {"E": "id INT, tags ARRAY<STRING>"})
    assert e.value.code == code and hint in (e.value.hint or "")


# (SQL, code): what Spark would not run, or sqlglot reads but Spark does not (several of those
# dropped by sqlglot's Spark writer, so Spark would not refuse them): refused with a code and a hint
REFUSED = [
    # named windows Spark would not read
    ("SELECT cid, count(*) OVER x AS n FROM F WINDOW w AS (PARTITION BY cid)", "UNKNOWN_WINDOW"),
    ("SELECT cid, count(*) OVER (w ORDER BY pid) AS n FROM F WINDOW w AS (PARTITION BY cid)", "INVALID_WINDOW"),
    # QUALIFY: Spark's rules
    ("SELECT cid FROM F QUALIFY pid > 1", "QUALIFY_WITHOUT_WINDOW"),
    ("SELECT cid, sum(amount) AS t FROM F GROUP BY cid QUALIFY count(*) > 1 AND rank() OVER (ORDER BY cid) = 1",
     "QUALIFY_AGGREGATE_NOT_ALLOWED"),
    ("SELECT cid, pid FROM F QUALIFY count(*) OVER () > 1 AND sum(pid) > 1", "QUALIFY_AGGREGATE_NOT_ALLOWED"),
    # * EXCEPT of a column the star has not
    ("SELECT * EXCEPT (nope) FROM F", "UNKNOWN_COLUMN"),
    ("SELECT F.* EXCEPT (region) FROM F JOIN C USING (cid)", "UNKNOWN_COLUMN"),  # not a column of F.*
    ("SELECT * EXCEPT (cid) FROM F JOIN C ON F.cid = C.cid", "AMBIGUOUS_COLUMN"),
    # other dialects' clauses
    ("SELECT cid FROM F UNION ALL BY NAME SELECT cid FROM C", "UNSUPPORTED_CLAUSE"),
    ("SELECT cid FROM F ORDER BY cid LIMIT 2 PERCENT", "UNSUPPORTED_CLAUSE"),
    ("SELECT cid INTO z FROM F", "UNSUPPORTED_CLAUSE"),
    ("SELECT cid, count(*) AS n FROM F GROUP BY cid WITH TOTALS", "UNSUPPORTED_CLAUSE"),
    ("SELECT cid FROM F ORDER BY cid WITH FILL", "UNSUPPORTED_CLAUSE"),
    ("SELECT * ILIKE 'c%' FROM F", "UNSUPPORTED_CLAUSE"),
    ("SELECT * FROM F WITH ORDINALITY", "UNSUPPORTED_CLAUSE"),
    ("SELECT cid FROM (SELECT AS STRUCT cid FROM F) x", "UNSUPPORTED_CLAUSE"),
    ("SELECT cid, sum(pid) OVER (ORDER BY cid, pid, amount, status, d, ts ROWS BETWEEN UNBOUNDED PRECEDING AND "
     "CURRENT ROW EXCLUDE CURRENT ROW) AS s FROM F", "UNSUPPORTED_WINDOW"),
]


@pytest.mark.parametrize("sql,code", REFUSED)
def test_what_spark_would_not_run_is_refused_with_a_code(sql: str, code: str) -> None:
    with pytest.raises(StreamfoldError) as e:
        streamfold.compile(sql, SCHEMAS)
    assert e.value.code == code and e.value.hint
