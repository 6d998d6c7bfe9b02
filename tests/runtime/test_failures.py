"""A failed batch says why: the Java exception at the root of its chain, not py4j's call site;
when memory ran out, the setting to raise and how; ``--verbose`` shows the whole chain."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamfold
from streamfold.cli import main
from streamfold.errors import BatchError
from streamfold.runtime.failures import batch_failure, causes

pytestmark = pytest.mark.spark

CAST = "SELECT k, sum(CAST(v AS INT)) AS s FROM S GROUP BY k"  # v = 'x' fails at run time (ANSI SQL)


def _raised_through_py4j(spark, throwable):
    """The Python exception py4j raises for ``throwable`` thrown inside a JVM call (wrapped by the
    JDK in an ExecutionException, as Spark's own futures are)."""
    future = spark._jvm.java.util.concurrent.CompletableFuture.failedFuture(throwable)
    with pytest.raises(Exception) as caught:
        future.get()
    return caught.value


def test_an_out_of_memory_error_is_named_with_the_memory_setting_to_raise(spark):
    jvm = spark._jvm
    oom = jvm.java.lang.OutOfMemoryError("Java heap space")
    error = _raised_through_py4j(spark, jvm.org.apache.spark.SparkException("Job aborted", oom))
    failure = batch_failure(3, "Δagg", "computing Δagg", error)
    assert failure.code == "BATCH_FAILED"
    assert failure.params == {"batch": 3, "step": "Δagg", "cause": "java.lang.OutOfMemoryError",
                              "cause_message": "Java heap space", "out_of_memory": True}
    assert failure.message == "batch 3 failed computing Δagg: java.lang.OutOfMemoryError: Java heap space"
    assert "STREAMFOLD_DRIVER_MEMORY" in failure.hint and "spark.driver.memory" in failure.hint
    chain = [(c.language, c.name) for c in failure.causes]
    assert chain == [("python", "py4j.protocol.Py4JJavaError"),
                     ("java", "java.util.concurrent.ExecutionException"),
                     ("java", "org.apache.spark.SparkException"),
                     ("java", "java.lang.OutOfMemoryError")]
    assert "caused by (java) java.lang.OutOfMemoryError: Java heap space" in failure.chain()


def test_on_a_cluster_the_hint_names_the_executor_memory_too(spark):
    oom = spark._jvm.java.lang.OutOfMemoryError("Java heap space")
    failure = batch_failure(0, "write", "writing its answer", _raised_through_py4j(spark, oom), local=False)
    assert "spark.executor.memory" in failure.hint and failure.params["out_of_memory"] is True


def test_a_python_failure_keeps_its_own_chain():
    try:
        try:
            raise KeyError("x")
        except KeyError as inner:
            raise ValueError("outer") from inner
    except ValueError as e:
        error = e
    assert [(c.language, c.name) for c in causes(error)] == [("python", "ValueError"), ("python", "KeyError")]
    assert batch_failure(1, "Δs", "computing Δs", error).params["cause"] == "KeyError"


def test_a_failing_batch_names_the_spark_exception_through_the_api(spark, tmp_path):
    src = tmp_path / "S"
    src.mkdir()
    pq.write_table(pa.table({"k": [1, 2], "v": ["1", "x"]}), src / "000000.parquet")
    q = streamfold.start(CAST, {"S": str(src)}, str(tmp_path / "out"), spark=spark, background=False)
    try:
        with pytest.raises(BatchError) as caught:
            q.process_available()
    finally:
        q.stop()
    e = caught.value
    assert e.code == "BATCH_FAILED" and e.params["batch"] == 0
    assert e.params["cause"] == "org.apache.spark.SparkNumberFormatException"
    assert e.params["cause_message"].startswith("[CAST_INVALID_INPUT]")
    assert "out_of_memory" not in e.params
    # a row the query's own expression cannot compute: the hint says how the query can say what it is worth
    assert e.params["data_error"] == "CAST_INVALID_INPUT" and "TRY_CAST" in e.hint


def test_the_cli_prints_the_cause_and_with_verbose_the_whole_chain(spark, tmp_path, capsys):
    src = tmp_path / "S"
    src.mkdir()
    pq.write_table(pa.table({"k": [1, 2], "v": ["1", "x"]}), src / "000000.parquet")
    argv = ["run", CAST, "--source", f"S={src}", "--until-idle", "0", "--quiet"]
    assert main(argv + ["--output", str(tmp_path / "a")]) == 1
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert first.startswith("error: [BATCH_FAILED] batch 0 failed computing")
    assert "org.apache.spark.SparkNumberFormatException: [CAST_INVALID_INPUT]" in first
    assert "caused by" not in err and "Traceback" not in err
    assert main(argv + ["--output", str(tmp_path / "b"), "--verbose"]) == 1
    err = capsys.readouterr().err
    assert "because of (python) " in err and "caused by (java) org.apache.spark.SparkNumberFormatException" in err
    assert "stack of org.apache.spark.SparkNumberFormatException:" in err


def test_try_cast_is_null_where_cast_fails(spark, tmp_path):
    """What the hint above proposes works: ``try_cast`` gives NULL for a value that does not
    convert (a string, a date literal), in the select list, a group key, an aggregate and a filter —
    with deletions, against DuckDB after every batch."""
    from ..streams import Source, check_stream

    R = Source("R", (("a", "INT"), ("c", "STRING")), weighted=True)
    # (no '2.5' for an INT: Spark's try_cast gives NULL, DuckDB's rounds it)
    batches = [{"R": [(1, "", 1), (1, "7", 1), (2, "x", 1), (3, "-3", 1), (None, None, 1)]},
               {"R": [(1, "", -1), (2, "8", 2), (4, "y", 1)]},
               {"R": [(2, "x", -1), (5, "9", 1)]}]
    for i, sql in enumerate([
        "SELECT try_cast(c AS INT) AS ci, count(*) AS n, sum(try_cast(c AS DOUBLE)) AS s FROM R GROUP BY 1",
        "SELECT a, c FROM R WHERE try_cast(c AS INT) IS NULL",
        "SELECT a, try_cast('not a date' AS DATE) AS d, try_cast('2024-01-02' AS DATE) AS e FROM R",
    ]):
        check_stream(spark, str(tmp_path / str(i)), sql, [R], batches)


@pytest.mark.slow
def test_a_jvm_out_of_heap_ends_the_run_with_batch_failed_not_a_hang(tmp_path):
    """`streamfold run` whose batch fills Spark's heap (a 512 MB driver, a string of 1G characters
    per row): the JVM exits at once (ExitOnOutOfMemoryError) instead of lingering in
    its shutdown hooks, and the run ends within a bound with ``BATCH_FAILED`` naming the
    ``OutOfMemoryError`` and the setting to raise, not with py4j's ``ConnectionRefusedError``
    from whichever call found the JVM gone; nothing of the batch is committed."""
    import subprocess
    import sys

    source = tmp_path / "S"
    source.mkdir()
    pq.write_table(pa.table({"k": pa.array([1, 2, 3], pa.int32()), "s": ["abcdefghij"] * 3}), source / "0.parquet")
    out = tmp_path / "out"
    sql = "SELECT k, max(length(repeat(s, 100000000))) AS m FROM S GROUP BY k"
    run = subprocess.run([sys.executable, "-m", "streamfold", "run", sql, "--source", f"S={source}", "--output",
                          str(out), "--driver-memory", "512m", "--until-idle", "1"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode != 0
    error = next((line for line in run.stderr.splitlines() if line.startswith("error:")), run.stderr[-3000:])
    assert error == ("error: [BATCH_FAILED] batch 0 failed running: java.lang.OutOfMemoryError: Spark's JVM ran "
                     "out of memory and exited (code 3)"), run.stderr[-3000:]
    assert "--driver-memory" in run.stderr and "is 512m" in run.stderr
    assert "Traceback" not in run.stderr, run.stderr[-3000:]
    assert not (out / "commits").exists() or not list((out / "commits").iterdir())


def _java_children(pid: int) -> list[int]:
    found = []
    for child in open(f"/proc/{pid}/task/{pid}/children").read().split():
        with open(f"/proc/{child}/cmdline", "rb") as f:
            if b"java" in f.read():
                found.append(int(child))
    return found


@pytest.mark.slow
def test_a_jvm_killed_under_indexed_bases_ends_with_batch_failed_not_a_traceback(tmp_path):
    """Spark's JVM killed (as the kernel's OOM killer does) while a run holds prepared plans over
    states kept as a base and a tail, whose indexes live in that JVM: the next batch fails with
    ``BATCH_FAILED`` naming the JVM's exit, and releasing the plans while stopping — py4j finding
    the JVM gone — neither replaces that error with a ``ConnectionRefusedError`` traceback nor
    commits anything of the batch."""
    import json
    import os
    import signal
    import subprocess
    import sys
    import time

    dirs = {n: tmp_path / n for n in ("A", "B")}
    for d in dirs.values():
        d.mkdir()
    out = tmp_path / "out"

    def write(i: int, keys: range, names=("A", "B")) -> None:
        for n in names:
            t = pa.table({"k": pa.array(keys, pa.int64()), "v": pa.array(keys, pa.int64())})
            pq.write_table(t, dirs[n] / f".{i}.tmp")
            os.rename(dirs[n] / f".{i}.tmp", dirs[n] / f"{i:03d}.parquet")

    def committed(batch: int) -> None:
        while not (out / "commits" / f"{batch:06d}.json").exists():
            assert run.poll() is None, run.communicate()[1][-3000:]
            time.sleep(0.1)

    write(0, range(2000))
    sql = "SELECT A.k % 10 AS g, count(*) AS n, sum(B.v) AS s FROM A JOIN B ON A.k = B.k GROUP BY A.k % 10"
    run = subprocess.Popen([sys.executable, "-m", "streamfold", "run", sql, "--output", str(out), "--trigger", "0.1",
                            *[a for n, d in dirs.items() for a in ("--source", f"{n}={d}")]],
                           env=dict(os.environ, STREAMFOLD_RUNS_MIN_ROWS="0"), stderr=subprocess.PIPE, text=True)
    try:
        for i in (1, 2):  # runs start after batch 0; batch 1 captures the plans, batch 2 runs them
            committed(i - 1)
            write(i, range(2000 + 10 * i, 2010 + 10 * i))
        committed(2)
        assert json.loads((out / "commits" / "000002.json").read_text())["prepared"] == "replay"
        time.sleep(2.0)  # the post-commit work done
        jvms = _java_children(run.pid)
        assert jvms
        for pid in jvms:
            os.kill(pid, signal.SIGKILL)
        write(3, range(3000, 3010), ("A",))
        stderr = run.communicate(timeout=240)[1]
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1  # EXIT_FAILED
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: [BATCH_FAILED] batch 3 failed running: JVM exit: Spark's JVM exited (code -9) "
                      "while the batch ran"], stderr[-3000:]
    assert "Traceback" not in stderr and "ConnectionRefusedError" not in stderr, stderr[-3000:]
    assert not (out / "commits" / "000003.json").exists()
