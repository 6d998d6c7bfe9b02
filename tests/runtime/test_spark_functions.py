"""Spark's scalar functions that DuckDB spells otherwise or lacks (``ir/functions.py``): each is
evaluated by Spark row by row, so kept exactly as any expression is; here, after every batch
with deletions and NULLs, the snapshot equals DuckDB's answer written in DuckDB's own words —
string and byte lengths, substrings up to a delimiter, base64, days and seconds since 1970 both
ways, weekdays, ``log1p``/``expm1``, more trigonometry, formatting (``format_number``,
``format_string``), ``typeof``, ``months_between``, ``timestampdiff``, masks and overlays, sorted arrays and
sequences, time zones, JSON (``get_json_object``, ``from_json``, ``to_json``, keys and lengths), NaN tests, ``try_add``/``try_subtract``/``try_multiply`` and the array functions that append, prepend,
compact, repeat, search and treat arrays as sets, day and month names and `regexp_substr`."""

from __future__ import annotations

import pytest

from ..streams import Source, check_seeded

R = Source("R", (("a", "INT"), ("s", "STRING"), ("c", "DOUBLE"), ("d", "DATE"), ("t", "TIMESTAMP")), weighted=True)

CASES = [
    ("strings",
     "SELECT a, substring_index(s, 'a', 1) AS before_a, substring_index(s, 'a', -1) AS after_a, base64(s) AS b64, "
     "octet_length(s) AS bytes, bit_length(s) AS bits FROM R",
     "SELECT a, array_to_string(string_split(s, 'a')[1:1], 'a'), array_to_string(string_split(s, 'a')[-1:], 'a'), "
     "to_base64(encode(s)), strlen(s), 8 * strlen(s) FROM R"),
    ("epochs",
     "SELECT a, unix_date(d) AS ud, date_from_unix_date(a * 400) AS back, weekday(d) AS wd, unix_seconds(t) AS us, "
     "unix_millis(t) AS um, unix_micros(t) AS uu, from_unixtime(a * 90061) AS txt, "
     "from_unixtime(a * 90061, 'yyyy-MM-dd') AS day_txt FROM R WHERE d IS NOT NULL OR t IS NOT NULL OR a > 0",
     "SELECT a, d - DATE '1970-01-01', DATE '1970-01-01' + a * 400, isodow(d) - 1, epoch(t)::BIGINT, epoch_ms(t), "
     "epoch_us(t), strftime(make_timestamp((a * 90061)::BIGINT * 1000000), '%Y-%m-%d %H:%M:%S'), "
     "strftime(make_timestamp((a * 90061)::BIGINT * 1000000), '%Y-%m-%d') "
     "FROM R WHERE d IS NOT NULL OR t IS NOT NULL OR a > 0"),
    ("timestamps grouped",
     "SELECT timestamp_seconds(a * 3600) AS h, timestamp_millis(a * 1000) AS ms, count(*) AS n FROM R "
     "GROUP BY timestamp_seconds(a * 3600), timestamp_millis(a * 1000)",
     "SELECT make_timestamp((a * 3600)::BIGINT * 1000000), make_timestamp((a * 1000)::BIGINT * 1000), count(*) "
     "FROM R GROUP BY 1, 2"),
    ("numbers",
     "SELECT a, log1p(c) AS l, expm1(a) AS e, isnan(c) AS nan, nanvl(c, 0D) AS nv, try_add(a, 2) AS ta, "
     "try_subtract(c, a) AS ts, try_multiply(a, 3) AS tm, try_add(d, a) AS td FROM R",
     "SELECT a, CASE WHEN c > -1 THEN ln(1 + c) END, exp(a) - 1, coalesce(isnan(c), false), "
     "CASE WHEN isnan(c) THEN 0 ELSE c END, a + 2, c - a, a * 3, d + a FROM R"),
    ("arrays",
     "SELECT a, array_position(array(s, 'a', s), 'a') AS pos, array_append(array(s), 'z') AS app, "
     "array_prepend(array(s), 'z') AS pre, array_compact(array(s, NULL, 'b')) AS compact, "
     "array_repeat(s, 2) AS twice, size(array_compact(array(s, s))) AS kept FROM R",
     "SELECT a, CASE WHEN s = 'a' THEN 1 ELSE 2 END, [s, 'z'], ['z', s], list_filter([s, NULL, 'b'], lambda x: x IS NOT NULL), "
     "[s, s], CASE WHEN s IS NULL THEN 0 ELSE 2 END FROM R"),
    ("array sets",
     "SELECT a, array_distinct(array(s, 'a', s, NULL)) AS dist, array_remove(array(s, NULL, 'b', 'a'), 'a') AS rem, "
     "array_union(array(s, 'a'), array('b', s)) AS uni, array_except(array(s, 'b', s), array('a')) AS exc, "
     "array_intersect(array('c', s, 'b'), array(s, 'c')) AS inter FROM R WHERE s IS NOT NULL OR a > 2",
     "SELECT a, CASE WHEN s IS NULL THEN [NULL, 'a'] WHEN s = 'a' THEN ['a', NULL] ELSE [s, 'a', NULL] END, "
     "CASE WHEN s = 'a' THEN [NULL, 'b'] ELSE [s, NULL, 'b'] END, "
     "CASE WHEN s IS NULL THEN [NULL, 'a', 'b'] WHEN s = 'a' THEN ['a', 'b'] WHEN s = 'b' THEN ['b', 'a'] "
     "ELSE [s, 'a', 'b'] END, "
     "CASE WHEN s IS NULL THEN [NULL, 'b'] WHEN s = 'a' THEN ['b'] WHEN s = 'b' THEN ['b'] ELSE [s, 'b'] END, "
     "CASE WHEN s IS NULL THEN ['c', NULL] WHEN s = 'c' THEN ['c'] ELSE ['c', s] END "
     "FROM R WHERE s IS NOT NULL OR a > 2"),
    ("names",
     "SELECT a, dayname(d) AS dn, monthname(d) AS mn, regexp_substr(s, '[a-b]+') AS rs FROM R",
     "SELECT a, left(dayname(d), 3), left(monthname(d), 3), nullif(regexp_extract(s, '[a-b]+'), '') FROM R"),
    ("more numbers",
     "SELECT a, acosh(abs(c) + 1) AS ach, atanh(c / 20) AS ath, hypot(c, a) AS hy, rint(c) AS ri, e() AS ee, "
     "sec(c) AS se, csc(c + 0.1) AS cs, shiftleft(a, 2) AS sl, bit_count(a) AS bc, format_number(c, 1) AS fn, "
     "format_string('%d-%s', a, s) AS fs, printf('<%s>', s) AS pf, typeof(a) AS ta, "
     "typeof(array(named_struct('x', a, 'y', s))) AS tz, typeof(NULL) AS tn, bigint(a) AS bi, smallint(a) AS si, "
     "decimal(c) AS dc FROM R",
     "SELECT a, acosh(abs(c) + 1), atanh(c / 20), sqrt(c * c + a * a), round_even(c, 0), exp(1), 1 / cos(c), "
     "1 / sin(c + 0.1), a << 2, bit_count(a), printf('%.1f', c), "
     "printf('%s-%s', coalesce(CAST(a AS VARCHAR), 'null'), coalesce(s, 'null')), "
     "printf('<%s>', coalesce(s, 'null')), 'int', 'array<struct<x:int,y:string>>', 'void', CAST(a AS BIGINT), "
     "CAST(a AS SMALLINT), CAST(c AS DECIMAL(10, 0)) FROM R"),
    ("strings and dates",
     "SELECT a, overlay(s PLACING 'X' FROM 2) AS ov, mask(s) AS mk, find_in_set(s, 'a,ab,c') AS fis, "
     "regexp_extract_all(s, '[ab]', 0) AS rea, months_between(d, DATE '2020-01-31') AS mb, "
     "timestampdiff(HOUR, t, TIMESTAMP '2024-01-01 00:00:00') AS hours FROM R",
     "SELECT a, CASE WHEN s IS NOT NULL THEN substring(s, 1, 1) || 'X' || substring(s, 3) END, "
     "regexp_replace(regexp_replace(regexp_replace(s, '[A-Z]', 'X', 'g'), '[a-z]', 'x', 'g'), '[0-9]', 'n', 'g'), "
     "CASE WHEN s IS NOT NULL THEN coalesce(list_position(['a', 'ab', 'c'], s), 0) END, "
     "regexp_extract_all(s, '[ab]', 0), "
     "CASE WHEN day(d) = 31 OR d = last_day(d) THEN ((year(d) - 2020) * 12 + month(d) - 1)::DOUBLE "
     "ELSE round((year(d) - 2020) * 12 + month(d) - 1 + (day(d) - 31) / 31, 8) END, "
     "trunc((1704067200 - epoch(t)) / 3600)::BIGINT FROM R"),
    ("sorted arrays and sequences",
     "SELECT a, array_insert(array(s, 'b'), 2, 'z') AS ins, arrays_overlap(array(a, 4), array(1, 2)) AS ov, "
     "sort_array(array(a, 2, NULL)) AS up, sort_array(array(a, 2), false) AS down, "
     "array_sort(array(a, 2, NULL)) AS nulls_last, sequence(0, a) AS seq, sequence(a, 0, -2) AS back FROM R",
     "SELECT a, [s, 'z', 'b'], (a = 1) OR (a = 2), list_sort([a, 2, NULL], 'ASC', 'NULLS FIRST'), "
     "list_sort([a, 2], 'DESC', 'NULLS LAST'), list_sort([a, 2, NULL], 'ASC', 'NULLS LAST'), "
     "CASE WHEN a IS NOT NULL THEN generate_series(0, a) END, CASE WHEN a IS NOT NULL THEN generate_series(a, 0, -2) END "
     "FROM R"),
    ("time zones",
     "SELECT a, from_utc_timestamp(t, 'America/New_York') AS ny, to_utc_timestamp(t, 'Asia/Kolkata') AS utc, "
     "convert_timezone('Europe/Berlin', 'America/New_York', t) AS moved, convert_timezone('Asia/Kolkata', t) AS ist, "
     "count(*) OVER (PARTITION BY hour(from_utc_timestamp(t, 'America/New_York'))) AS same_hour FROM R",
     "SELECT a, timezone('America/New_York', t), timezone('UTC', timezone('Asia/Kolkata', timezone('UTC', t))), "
     "timezone('America/New_York', timezone('Europe/Berlin', timezone('UTC', t))), "
     "timezone('Asia/Kolkata', t), "
     "count(*) OVER (PARTITION BY hour(timezone('America/New_York', t))) FROM R"),
    ("json",
     "SELECT a, get_json_object(j, '$.a') AS ga, get_json_object(j, '$.s') AS gs, "
     "from_json(j, 'a INT, s STRING').a AS fa, from_json(j, 'STRUCT<s: STRING>').s AS fs, "
     "json_array_length(concat('[', j, ',1]')) AS n, json_object_keys(j) AS keys, "
     "to_json(named_struct('a', a, 's', s)) AS back FROM (SELECT a, s, concat('{\"a\":', "
     "coalesce(CAST(a AS STRING), 'null'), ',\"s\":', CASE WHEN s IS NULL THEN 'null' ELSE concat('\"', s, '\"') END, "
     "'}') AS j FROM R) AS x",
     "SELECT a, CAST(a AS VARCHAR), s, a, s, 2, ['a', 's'], "
     "'{' || concat_ws(',', CASE WHEN a IS NOT NULL THEN '\"a\":' || a END, "
     "CASE WHEN s IS NOT NULL THEN '\"s\":\"' || s || '\"' END) || '}' FROM R"),
]


@pytest.mark.spark
@pytest.mark.parametrize("qid,sql,oracle", CASES, ids=[c[0] for c in CASES])
def test_spark_functions_equal_duckdb(spark, tmp_path, qid, sql, oracle):
    check_seeded(spark, str(tmp_path), f"fn-{qid}", sql, [R], oracle, batches=4)


def test_from_json_needs_a_schema_it_can_read():
    import streamfold

    from ..streams import assert_refused

    schema = {"R": R.schema_sql()}
    plan = streamfold.compile("SELECT from_json(s, 'a INT, b ARRAY<STRING>, c STRUCT<x: INT>').c.x AS x FROM R", schema)
    assert plan.answer.output == ("x",)
    assert_refused([
        ("SELECT from_json(s, s) AS j FROM R", "UNSUPPORTED_FUNCTION"),
        ("SELECT from_json(s, 'a INTEGRAL') AS j FROM R", "TYPE_MISMATCH"),
        ("SELECT from_json(a, 'a INT') AS j FROM R", "TYPE_MISMATCH"),
        ("SELECT from_json(s, 'MAP<STRING, INT>') AS j FROM R", "UNSUPPORTED_TYPE"),
    ], schema)
    assert_refused([("SELECT sequence(d, d) AS j FROM R", "TYPE_MISMATCH")], schema, unhinted=("TYPE_MISMATCH",))
