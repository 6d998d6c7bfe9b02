"""The command line: explain without Spark, exit codes, errors without tracebacks, a real run."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamfold.cli import main
from streamfold.runtime.storage import size_text

SEED = "SELECT x.A, avg(y.D) FROM S1 x JOIN S2 y ON x.B = y.C GROUP BY x.A"


def test_explain_text_and_json(capsys, tmp_path):
    query = tmp_path / "q.sql"
    query.write_text(SEED)
    assert main(["explain", str(query), "--schema", "S1=A INT, B INT", "--schema", "S2=C INT, D INT"]) == 0
    text = capsys.readouterr().out
    assert "in_x  [join input]  key (x.B, x.A)" in text
    assert main(["explain", SEED, "--schema", "S1=A INT, B INT", "--schema", "S2=C INT, D INT",
                 "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"states", "delta", "merge", "answer"} <= set(doc)


def test_explain_reads_parquet_schemas_without_spark(capsys, tmp_path):
    src = tmp_path / "S"
    src.mkdir()
    pq.write_table(pa.table({"x": pa.array([1], pa.int32()), "y": pa.array([2], pa.int64())}), src / "0.parquet")
    assert main(["explain", "SELECT x, sum(y) FROM S GROUP BY x", "--source", f"S={src}"]) == 0
    assert "S  stream, insert-only: x INT, y BIGINT" in capsys.readouterr().out


def test_a_schema_names_columns_with_spaces_dots_and_commas_in_backquotes(capsys):
    from streamfold.sql.catalog import parse_schema

    assert [c for c, _ in parse_schema("`Order ID` INT, `amount.usd` DOUBLE, `a,b` DECIMAL(10,2), `x``y` INT, "
                                       "s STRUCT<p: INT, q: STRING>")] == ["Order ID", "amount.usd", "a,b", "x`y", "s"]
    sql = "SELECT `Order ID`, sum(`amount.usd`) FROM S GROUP BY `Order ID`"
    assert main(["explain", sql, "--schema", "S=`Order ID` BIGINT, `amount.usd` DOUBLE"]) == 0
    assert "S  stream, insert-only: `Order ID` BIGINT, `amount.usd` DOUBLE" in capsys.readouterr().out
    assert main(["explain", "SELECT 1 FROM S", "--schema", "S=`Order ID BIGINT"]) != 0  # no closing backquote
    assert "BAD_SCHEMA" in capsys.readouterr().err


@pytest.mark.parametrize("argv,code", [
    (["explain", "SELECT amout FROM S", "--schema", "S=amount INT"], "UNKNOWN_COLUMN"),
    (["explain", "SELECT a FROM S WHERE", "--schema", "S=a INT"], "PARSE_ERROR"),
    (["explain", "SELECT a FROM S", "--schema", "S=a NOTATYPE"], "BAD_SCHEMA"),
    (["explain", "missing.sql", "--schema", "S=a INT"], "QUERY_NOT_FOUND"),
    (["explain", "SELECT a FROM S", "--source", "S"], "BAD_INPUT_SPEC"),
    # found by `run` before it starts Spark
    (["run", "SELECT a FROM S", "--source", "S=/no/such/dir", "--output", "out"], "SOURCE_NOT_FOUND"),
    (["run", "SELECT a FROM S", "--source", "S=.:xls", "--output", "out"], "BAD_FORMAT"),
    (["run", "SELECT a FORM S", "--source", "S=.", "--output", "out"], "PARSE_ERROR"),
    (["run", "SELECT a FROM S", "--source", "S=.", "--table", "T=/no/such/file", "--output", "out"], "TABLE_NOT_FOUND"),
    (["run", "SELECT a FROM S", "--source", "S=.", "--output", "out", "--partitions", "0"], "BAD_OPTION"),
    (["run", "SELECT a FROM S", "--source", "S=.", "--output", "out", "--compact-every", "0"], "BAD_OPTION"),
    (["run", "SELECT a FROM S", "--source", "S=.", "--output", "out", "--control-port", "70000"], "BAD_OPTION"),
    (["run", "SELECT a FROM S", "--source", "S=.", "--output", "out", "--driver-memory", "lots"], "BAD_SETTING"),
    (["run", "SELECT a FROM S", "--source", "S=.", "--output", "out", "--driver-memory", "8"], "BAD_SETTING"),
])
def test_user_mistakes_exit_2_with_a_code_and_no_traceback(capsys, monkeypatch, argv, code):
    from streamfold.runtime import session

    monkeypatch.setattr(session, "get_spark", _no_spark)  # each is found before Spark starts
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"[{code}]" in err and "Traceback" not in err


def _no_spark(*args, **kwargs):
    raise AssertionError("Spark was started")


def test_an_iterative_query_passes_the_checks_before_spark(tmp_path, monkeypatch):
    """The check before Spark parses the query as the compiler does (WITH ITERATIVE included):
    it once refused every iteration, the README's PageRank among them, with PARSE_ERROR."""
    from pathlib import Path

    from streamfold.runtime import session

    monkeypatch.setattr(session, "get_spark", _no_spark)
    (tmp_path / "edges").mkdir()
    pagerank = Path(__file__).parent.parent.parent / "examples" / "pagerank.sql"
    with pytest.raises(AssertionError, match="Spark was started"):
        main(["run", str(pagerank), "--source", f"edges={tmp_path / 'edges'}", "--output", str(tmp_path / "out")])


def test_a_bad_setting_in_the_environment_stops_a_run_before_spark_with_what_it_takes(capsys, monkeypatch):
    from streamfold.runtime import session
    from streamfold.settings import env_name

    monkeypatch.setattr(session, "get_spark", _no_spark)
    monkeypatch.setenv(env_name("watch"), "maybe")
    assert main(["run", "SELECT a FROM S", "--source", "S=.", "--output", "out"]) == 2
    err = capsys.readouterr().err
    assert "[BAD_SETTING]" in err and f"hint: {env_name('watch')} takes 1 or 0" in err


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "run" in capsys.readouterr().out


@pytest.mark.spark
@pytest.mark.slow
def test_run_until_idle_end_to_end(spark, tmp_path, capsys, monkeypatch):
    # `streamfold run` in this process, on the suite's Spark session (as in test_failures.py): a
    # JVM of its own cost 10 s of the test's 16. `python -m streamfold run` in a process of its
    # own, to its exit code, is run by test_kill_restart.py, test_control_restart.py and test_cluster_faults.py.
    src, out = tmp_path / "S", tmp_path / "out"
    src.mkdir()
    pq.write_table(pa.table({"k": pa.array([1, 1, 2], pa.int32()), "v": [1.0, 2.0, 5.0]}), src / "0.parquet")
    monkeypatch.setenv("STREAMFOLD_STATE_REPORT_EVERY", "1")  # the states' line after every batch
    code = main(["run", "SELECT k, avg(v) AS m FROM S GROUP BY k ORDER BY k",
                 "--source", f"S={src}", "--output", str(out), "--until-idle", "1", "--trigger", "0.2", "--profile"])
    proc = capsys.readouterr()
    assert code == 0, proc.err[-2000:]
    assert "batch 000000" in proc.out
    recorded = json.loads((out / "commits" / "000000.json").read_text())["state_bytes"]
    assert set(recorded) == {"agg"} and recorded["agg"] > 0
    assert f"states after batch 000000: agg 2 rows {size_text(recorded['agg'])} │" in proc.out
    rows = pq.read_table(out / "snapshots" / "000000").to_pylist()
    assert rows == [{"k": 1, "m": 1.5}, {"k": 2, "m": 5.0}]
    assert os.path.exists(out / "commits" / "000000.json")
    assert "batch 000000 waterfall:" in proc.out and "py4j by method:" in proc.out
    profile = json.loads((out / "_profile" / "000000.json").read_text())
    assert profile["jobs"] and {"read", "write", "commit"} <= {p["name"] for p in profile["phases"]}
    # the batch's statistics ride in its commit record; explain --analyze shows them beside the plan
    stats = json.loads((out / "commits" / "000000.json").read_text())["stats"]
    assert stats["sources"] == {"S": {"rows": 3}}
    assert stats["states"]["agg"] == {"rows": 2, "rows_before": 0, "touched_keys": 2}
    assert main(["explain", "--analyze", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "States (lineage key" in shown and "Statistics of batch 0" in shown
    assert "agg            rows 0 → 2, touched 2  (100.0% of the state)" in shown
