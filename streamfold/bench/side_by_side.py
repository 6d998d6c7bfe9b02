"""Two configurations of one query over the same files, batch by batch, in one Spark session: the
seed 004 benches (``linear_road.py``, ``seed004.py``).

The first configuration is streamfold maintaining the query. The second is either streamfold with
``STREAMFOLD_PUSH_DOWN_GROUPS=0`` (``unpushed``), or the query recomputed by Spark over the files
so far (``recompute``), its time bounds given by ``text_at(now, True)`` with ``now`` the files'
largest event time, as timestamp literals so that Parquet's statistics skip older row groups.
Which configuration goes first alternates, so a change of the machine's load falls on both; a
batch's time runs from its file's arrival to its answer read back. After every batch each answer
is checked against DuckDB's over the files so far, at streamfold's recorded batch time
(``text_at(now, False)``; ``now`` None for a query without a time bound).
"""

from __future__ import annotations

import os
import shutil
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..verify import compare, duckdb_answer, python_value


@dataclass(frozen=True)
class Query:
    """What both configurations run: ``sql`` over the stream ``source`` of ``columns``; its text at
    a time in µs for Spark (True) or DuckDB (False); and what the second configuration is."""

    tag: str  # prefixes the progress lines: "[linear-road] …"
    sql: str
    source: str
    columns: str
    text_at: Callable[[int | None, bool], str]
    other: str  # the second configuration's name in the results ("recompute", "unoptimized")
    unpushed: bool = False  # the second is streamfold with the group push-down off, not a recompute


def _rows(frame_rows: Any) -> list[tuple]:
    return [tuple(python_value(v) for v in r) for r in frame_rows]


def run_configs(spark: Any, q: Query, files: list[str], work: str, say: Any) -> dict[str, dict[str, Any]]:
    """Both configurations over ``files``; per batch its seconds, DuckDB's check, the answer's rows
    and its first value; then per configuration the mean, median, max and sd of batches 1 on (batch
    0, the first plans, left out) and whether every answer was exact."""
    import streamfold
    from ..settings import Settings

    names = ("streamfold", q.other)
    queries: dict[str, Any] = {}
    sources: dict[str, str] = {}
    rows: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    seen: list[str] = []
    try:
        for name in names if q.unpushed else names[:1]:
            base = os.path.join(work, name)
            shutil.rmtree(base, ignore_errors=True)
            sources[name] = os.path.join(base, "in", q.source)
            os.makedirs(sources[name])
            settings = Settings.from_environ().replace(push_down_groups=name == "streamfold")
            queries[name] = streamfold.start(q.sql, {q.source: sources[name]}, os.path.join(base, "out"),
                                             spark=spark, background=False, settings=settings,
                                             schemas={q.source: q.columns})
        for b, path in enumerate(files):
            seen.append(path)
            answers: dict[str, list[tuple]] = {}
            for name in names if b % 2 == 0 else names[::-1]:
                began = time.perf_counter()
                if name in queries:
                    shutil.copy(path, os.path.join(sources[name], os.path.basename(path)))
                    assert queries[name].process_available() is not None
                    answers[name] = _rows(queries[name].snapshot_pandas().itertuples(index=False))
                else:
                    frame = spark.read.parquet(*seen)
                    frame.createOrReplaceTempView(q.source)
                    now = frame.selectExpr("unix_micros(max(ts))").first()[0]
                    answers[name] = _rows(spark.sql(q.text_at(now, True)).collect())
                rows[name].append({"batch": b, "seconds": round(time.perf_counter() - began, 3)})
            now_us = queries["streamfold"].commit(b).get("batch_time_us")
            expected = duckdb_answer(q.sql, {q.source: list(seen)},
                                     duckdb_sql=q.text_at(int(now_us) if now_us is not None else None, False))
            for name, answer in answers.items():
                check = compare(answer, expected)
                rows[name][-1].update(exact=check.matches, answer_rows=len(answer),
                                      answer=answer[0][0] if answer else None)
                if not check.matches:
                    say(f"[{q.tag}] {name} batch {b}: WRONG against DuckDB: {check.detail}")
            say(f"[{q.tag}] batch {b}: " + ", ".join(f"{n} {rs[-1]['seconds']:.2f} s" for n, rs in rows.items())
                + f"; {len(expected)} rows in DuckDB's answer")
    finally:
        for query in queries.values():
            query.stop()
    out = {}
    for name, rs in rows.items():
        secs = [r["seconds"] for r in rs[1:]]
        out[name] = {"batches": rs, "mean_s": round(statistics.fmean(secs), 3),
                     "median_s": round(statistics.median(secs), 3), "max_s": round(max(secs), 3),
                     "sd_s": round(statistics.pstdev(secs), 3), "exact": all(r["exact"] for r in rs)}
    return out
