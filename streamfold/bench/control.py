"""``streamfold bench pause`` and ``streamfold bench reconfigure``: the control targets, measured.

**pause** — a groupBy over a large history (default 10M rows: a batch 0 of about a minute on a
2-core machine) is paused ``--pauses`` times at random instants of batch 0 through its HTTP
endpoint, as ``streamfold control OUT pause`` does; each pause's latency is the time from the
request until the query is paused (every thread of it waits at a step boundary or its step's jobs
are cancelled), measured by the controller, and the client's round trip. Batch 0's answer is then
checked against DuckDB.

**reconfigure** — the same query shape over a large history (default 10M rows), increments
arriving, and a change that touches only the answer (a HAVING threshold, then an output
expression, alternately): the delay from the request to the commit of the first batch under the
new query, and how many batches that took, against stopping and starting the new query from
scratch over the same files (in the same warm JVM, so the restart is charged no JVM start),
alternated ``--reps`` times. Each rep measures two situations: **idle** (every file so far
committed: the new answer is committed from the kept states, no pass of h) and **arriving** (an
increment arrives just before the request, so the request may meet a batch in progress, which
commits first). Every answer is checked against the from-scratch one.

Besides the warm in-JVM start, each rep also times the restart a user of the command line makes:
``streamfold run NEW_QUERY`` started as a process of its own over the same files, from its start
until its batch 0 is committed (a new JVM, the query compiled, the history read) — what stopping
the running command and starting it again with the new query costs, less the stop. The target is
judged against the warm start, the stricter of the two.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import time
from typing import Any

from ..verify import compare, read_rows
from .data import write_pairs
from .systems.cli import run_command

PAUSE_SQL = "SELECT x, count(DISTINCT y) AS d, avg(y) AS a, max(y) AS m FROM S GROUP BY x"
RECONFIGURE_SQL = "SELECT x, count(*) AS n, avg(y) AS a{more} FROM S GROUP BY x HAVING count(*) > {threshold}"
DISTINCT = ", count(DISTINCT y) AS d"  # --distinct: a multiset state too, as a heavier h
SITUATIONS = ("idle", "arriving")  # no file since the last batch; an increment just before the request
# The threshold starts at the mean rows per key (x takes 10,001 values: 1,000 for the 10M-row
# history), so about half the keys are in the answer whatever the history's size.
ANSWER_CHANGES = (  # (what changes, the new query's text for rep i over a threshold starting at t)
    ("HAVING threshold", lambda i, t, more: RECONFIGURE_SQL.format(threshold=t + i + 1, more=more)),
    ("output expression", lambda i, t, more: RECONFIGURE_SQL.format(threshold=t + i + 1, more=more)
     .replace("avg(y) AS a", "avg(y) * 2 AS a")),
)


def _history(directory: str, rows: int, files: int = 10) -> list[str]:
    os.makedirs(directory, exist_ok=True)
    paths = []
    for j in range(files):
        p = os.path.join(directory, f"000000-{j:03d}.parquet")
        write_pairs(p, ("x", "y"), rows // files + (1 if j < rows % files else 0), 2016 + j)
        paths.append(p)
    return paths


def bench_pause(history: int, pauses: int, out: str, master: str | None) -> dict[str, Any]:
    import streamfold

    from ..control.client import ControlClient
    from ..runtime.session import get_spark
    from ..verify import duckdb_answer

    root = os.path.join(out, "pause")
    shutil.rmtree(root, ignore_errors=True)
    print(f"pause: writing a {history:,}-row history …", flush=True)
    files = _history(os.path.join(root, "S"), history)
    spark = get_spark(master)
    output = os.path.join(root, "out")
    q = streamfold.start(PAUSE_SQL, {"S": os.path.join(root, "S")}, output, spark=spark, trigger=0.2)
    samples: list[dict[str, Any]] = []
    try:
        client = ControlClient(output)
        began = time.monotonic()
        rng = random.Random(7)
        while q.last_batch < 0 and len(samples) < pauses:
            time.sleep(rng.uniform(2.0, 6.0))
            status = client.status()
            if q.last_batch >= 0 or not status["in_batch"]:
                continue
            t0 = time.monotonic()
            paused = client.pause(wait=True, timeout=120)
            trip = time.monotonic() - t0
            pause = paused["pause"]
            if pause["latency_s"] is None:  # not paused within the wait: count the round trip
                pause["latency_s"] = round(trip, 4)
            samples.append({"at_s": round(t0 - began, 2), "latency_s": pause["latency_s"],
                            "round_trip_s": round(trip, 4), "step": pause["step"],
                            "cancelled_steps": pause["cancelled_steps"]})
            print(f"  pause {len(samples)} at {t0 - began:5.1f} s of batch 0, in {pause['step']}: "
                  f"paused after {pause['latency_s']:.3f} s (round trip {trip:.3f} s), "
                  f"{pause['cancelled_steps']} step(s) cancelled", flush=True)
            time.sleep(1.0)
            client.resume()
        q.wait_for_batch(0, timeout=3600)
        batch0 = q.commit(0)
        check = compare(read_rows(q.engine.output.snapshot_path(0)), duckdb_answer(PAUSE_SQL, {"S": files}))
    finally:
        q.stop()
    latencies = [s["latency_s"] for s in samples]
    return {"query": PAUSE_SQL, "history_rows": history, "batch0_s": batch0["duration_s"], "pauses": samples,
            "latency_max_s": max(latencies, default=None),
            "latency_median_s": statistics.median(latencies) if latencies else None,
            "round_trip_max_s": max((s["round_trip_s"] for s in samples), default=None),
            "target": "pause acknowledged within 0.5 s during a minute-long batch 0",
            "met": bool(latencies) and max(latencies) <= 0.5, "check": check.to_json()}


def bench_reconfigure(history: int, increment: int, reps: int, out: str, master: str | None,
                      distinct: bool = False) -> dict[str, Any]:
    import streamfold

    from ..runtime.session import get_spark

    root = os.path.join(out, "reconfigure")
    shutil.rmtree(root, ignore_errors=True)
    source = os.path.join(root, "S")
    print(f"reconfigure: writing a {history:,}-row history …", flush=True)
    _history(source, history)
    spark = get_spark(master)
    counter = iter(range(1, 10_000))

    def arrive() -> None:
        k = next(counter)
        write_pairs(os.path.join(source, f"{k:06d}-000.parquet"), ("x", "y"), increment, 2016 + 1000 * k)

    more = DISTINCT if distinct else ""
    threshold = max(1, history // 10_000)
    first = RECONFIGURE_SQL.format(threshold=threshold, more=more)
    q = streamfold.start(first, {"S": source}, os.path.join(root, "live"), spark=spark, trigger=0.2)
    runs: list[dict[str, Any]] = []
    try:
        q.wait_for_batch(0, timeout=7200)
        history_s = q.commit(0)["duration_s"]
        print(f"  batch 0 (the history) {history_s:.1f} s", flush=True)
        arrive()
        q.wait_for_batch(1, timeout=600)
        for i, situation in ((i, s) for i in range(reps) for s in SITUATIONS):
            what, make = ANSWER_CHANGES[i % len(ANSWER_CHANGES)]
            sql = make(2 * i + SITUATIONS.index(situation), threshold, more)
            if situation == "arriving":
                arrive()  # data keeps arriving: the request may meet a batch in progress
            before = q.last_batch
            t0 = time.monotonic()
            done = q.reconfigure(sql, wait=True, timeout=3600)
            delay = time.monotonic() - t0
            applied = done["result"]["batch"]
            q.wait_for_batch(applied, timeout=600)
            live = read_rows(q.engine.output.snapshot_path(applied))
            scratch = os.path.join(root, f"scratch-{i}")
            t0 = time.monotonic()
            # no file arrives meanwhile: the new query from scratch reads the files the live one has
            restarted = streamfold.start(sql, {"S": source}, scratch, spark=spark, endpoint=False, background=False)
            try:
                restarted.process_available()
                restart = time.monotonic() - t0
                check = compare(live, read_rows(restarted.engine.output.snapshot_path(0)))
            finally:
                restarted.stop()
            shutil.rmtree(scratch, ignore_errors=True)
            process_s, process_check = _restart_process(sql, source, scratch, live)
            runs.append({"situation": situation, "change": what, "sql": sql, "delay_s": round(delay, 4),
                         "batches": applied - before, "commit_s": q.commit(applied)["duration_s"],
                         "kept_states": done["kept_states"], "restart_s": round(restart, 4),
                         "speedup": round(restart / delay, 1), "matches_restart": check.matches,
                         "restart_process_s": process_s, "speedup_process": round(process_s / delay, 1),
                         "process_matches": process_check})
            print(f"  {situation}, {what}: in effect after {delay:.2f} s, {applied - before} batch(es); "
                  f"stop-and-restart from scratch {restart:.2f} s ({restart / delay:.1f}×), "
                  f"as a new `streamfold run` process {process_s:.2f} s ({process_s / delay:.1f}×); "
                  f"answers equal: {'yes' if check.matches and process_check else 'NO'}", flush=True)
    finally:
        q.stop()
    summary: dict[str, dict[str, float | None]] = {}
    for situation in SITUATIONS:
        mine = [r for r in runs if r["situation"] == situation]
        med_delay = statistics.median(r["delay_s"] for r in mine) if mine else None
        med_restart = statistics.median(r["restart_s"] for r in mine) if mine else None
        med_process = statistics.median(r["restart_process_s"] for r in mine) if mine else None
        summary[situation] = {"delay_median_s": med_delay, "restart_median_s": med_restart,
                              "speedup_median": round(med_restart / med_delay, 1) if med_delay and med_restart else None,
                              "restart_process_median_s": med_process,
                              "speedup_process_median": round(med_process / med_delay, 1) if med_delay and med_process
                              else None}
    idle = summary["idle"]["speedup_median"]
    return {"query": first, "history_rows": history, "increment_rows": increment, "history_s": history_s,
            "runs": runs, "situations": summary,
            "target": "an answer-only change takes effect within 2 batches and ≥ 10× faster than stop-and-restart "
                      "(idle: no batch in progress)",
            "met": bool(runs) and all(r["batches"] <= 2 for r in runs) and (idle or 0) >= 10
            and all(r["matches_restart"] and r["process_matches"] for r in runs)}


def _restart_process(sql: str, source: str, scratch: str, live: list[tuple]) -> tuple[float, bool]:
    """``streamfold run sql`` as a new process over ``source``: seconds from its start to its batch
    0's commit, and whether that snapshot equals ``live``. The process is stopped afterwards."""
    commit = os.path.join(scratch, "commits", f"{0:06d}.json")
    args = run_command(sql, {"S": source}, scratch)
    log = f"{scratch}.log"  # its output, read if it fails (a pipe left unread could fill and stall it)
    t0 = time.monotonic()
    with open(log, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            while not os.path.exists(commit):
                if proc.poll() is not None:
                    with open(log, encoding="utf-8", errors="replace") as fh:
                        tail = fh.read().strip().splitlines()[-3:]
                    raise RuntimeError(f"streamfold run exited with code {proc.returncode}: {' | '.join(tail)}")
                time.sleep(0.01)
            seconds = time.monotonic() - t0
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
    os.remove(log)
    matches = compare(live, read_rows(os.path.join(scratch, "snapshots", f"{0:06d}"))).matches
    shutil.rmtree(scratch, ignore_errors=True)
    return round(seconds, 4), matches


def main(which: str, history: int | None, increment: int | None, reps: int, out: str,
         master: str | None, distinct: bool = False) -> int:
    from .machine import machine_info
    from ..runtime.session import get_spark

    if which == "pause":
        result = bench_pause(history or 10_000_000, reps, out, master)
    else:
        result = bench_reconfigure(history or 10_000_000, increment or 40_000, reps, out, master, distinct)
    result["machine"] = machine_info(get_spark(master))
    path = os.path.join(out, f"{which}.json")
    os.makedirs(out, exist_ok=True)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2, default=str)
    print(f"target: {result['target']}: {'met' if result['met'] else 'NOT met'}; wrote {path}")
    return 0 if result.get("check", {}).get("matches_duckdb", True) and result["met"] else 1
