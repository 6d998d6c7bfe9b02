"""The workloads ``streamfold bench`` knows: a query, its sources and a schedule of increments.

The built-in ones are the seed's (000 §11): random integer pairs in [0, 10000] with a fixed
seed for ``groupby`` and ``join-groupby``; an R-MAT graph growing by new nodes and edges for
``pagerank``; points in four squares and a static table of initial centroids for ``kmeans``
(:mod:`.iterative` makes both). The iterative ones run ``examples/pagerank.sql`` and
``examples/kmeans.sql`` (exact mode); the systems that are not streamfold get the same query
unrolled into plain Spark SQL (:attr:`Workload.batch_sql`), as does DuckDB for the check.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property

from ..errors import UsageError

SEED = 2016


@dataclass(frozen=True)
class Source:
    """One input stream of a workload: its name in the query and its columns (all INT)."""

    name: str
    columns: tuple[str, ...]


@dataclass(frozen=True)
class Workload:
    """A query and its schedule: ``history`` rows per source first, then ``increments`` × ``increment``.

    ``keys`` are the answer columns that identify a row (the group keys), used to rebuild the
    answer from a system that commits upserts (Spark's update mode); ``None`` means the answer
    is the union of what is emitted (a query without aggregation).
    """

    name: str
    sql: str
    sources: tuple[Source, ...]
    history: int
    increment: int
    increments: int
    keys: tuple[str, ...] | None
    history_files: int = 1  # the history is split into this many files (10M rows: ten files)
    # how data is made: "pairs", "pairs-deleting" (pairs with _weight; increments delete as many), "ticks"
    # (a time counting up, a key, an amount), "rmat", "kmeans";
    # "files" replays a user's files
    generator: str = "pairs"
    groups: int = 10_001  # "pairs-deleting": the first column's values, 0 … groups − 1
    tables: tuple[Source, ...] = ()  # static tables the query reads, made with the data
    example: str = ""  # the query is examples/<example>.sql (read by get_workload), not ``sql``
    seed: int = SEED
    description: str = ""
    files: dict[str, list[str]] = field(default_factory=dict)  # custom: the user's files per source
    diffusion_key: str = ""  # an iteration's KEY for MODE DIFFUSION (the columns naming a row of each step)
    # What DuckDB checks the answers with, when not the query itself: the same query written so
    # DuckDB plans it well (it must be equivalent on every input the workload generates).
    oracle: str = ""

    def sized(self, history: int | None = None, increment: int | None = None,
              increments: int | None = None) -> Workload:
        """The same workload with other sizes (``None`` keeps a size)."""
        for label, value in (("--history", history), ("--increment", increment), ("--increments", increments)):
            if value is not None and value < (0 if label == "--increments" else 1):
                raise UsageError(f"{label} must be positive, not {value}", code="BAD_SIZE",
                                 params={"option": label, "value": value},
                                 hint="sizes are row counts (--history, --increment) and a count of increments")
        return replace(self, history=history or self.history, increment=increment or self.increment,
                       increments=self.increments if increments is None else increments)

    def with_steps(self, steps: int | None) -> Workload:
        """An iterative workload with ``TIMES steps`` instead of its example's 10 (``None`` keeps it)."""
        if steps is None:
            return self
        if self.steps is None:
            raise UsageError(f"--steps applies to an iteration; {self.name} has none", code="BAD_OPTION",
                             params={"option": "--steps"}, hint="use --steps with pagerank or kmeans")
        if steps < 1:
            raise UsageError(f"--steps must be at least 1, not {steps}", code="BAD_SIZE",
                             params={"option": "--steps", "value": steps}, hint="the number of steps of the iteration")
        return replace(self, sql=_TIMES.sub(f"TIMES {steps}", self.sql, count=1))

    @property
    def steps(self) -> int | None:
        """The iteration's number of steps (``TIMES n``), or None without one."""
        found = _TIMES.search(self.sql)
        return int(found.group(1)) if found else None

    def in_mode(self, mode: str) -> str:
        """The query with its iteration in ``mode`` (exact, differential or diffusion)."""
        if mode not in MODES:
            raise UsageError(f"unknown iteration mode {mode!r}", code="BAD_OPTION", params={"option": "--mode"},
                             hint=f"use one or more of {', '.join(MODES)}, comma-separated")
        if self.steps is None:
            raise UsageError(f"--mode applies to an iteration; {self.name} has none", code="BAD_OPTION",
                             params={"option": "--mode"}, hint="use --mode with pagerank or kmeans")
        written = {"exact": "", "differential": " MODE DIFFERENTIAL",
                   "diffusion": f" MODE DIFFUSION KEY ({self.diffusion_key})"}[mode]
        return _TIMES.sub(lambda m: m.group(0) + written, self.sql, count=1)

    @cached_property
    def batch_sql(self) -> str:
        """The query in plain Spark SQL (an iteration unrolled): what recompute, Spark streaming
        and DuckDB run."""
        from ..sql.iterate import unrolled_sql

        return unrolled_sql(self.sql)

    @property
    def oracle_sql(self) -> str:
        """The query DuckDB's answer comes from: :attr:`oracle` if set, else :attr:`batch_sql`."""
        return self.oracle or self.batch_sql


_TIMES = re.compile(r"\bTIMES\s+(\d+)", flags=re.IGNORECASE)
MODES = ("exact", "differential", "diffusion")  # an iteration's modes (WITH ITERATIVE … MODE …)
GROUPBY_SQL = "SELECT x, avg(y) AS avg_y FROM S GROUP BY x"
JOIN_GROUPBY_SQL = "SELECT x.A, avg(y.D) AS avg_d FROM S1 x JOIN S2 y ON x.B = y.C GROUP BY x.A"
# A band join of two streams (issue 20): no equality, so streamfold keeps it over a join matrix with
# a value bucket; Spark streaming refuses a stream-stream join without an equality.
BAND_JOIN_SQL = ("SELECT x.A, count(*) AS n, sum(y.D) AS total FROM S1 x JOIN S2 y ON abs(x.B - y.C) <= 1 "
                 "GROUP BY x.A")
# The same band as two inequalities (equal for the generated integers in [0, 10000]): DuckDB runs
# ``abs(…) <= 1`` as a nested loop (quadratic: hours at 1M rows), and BETWEEN as a range join, so
# the check of a 1M-row run takes seconds.
BAND_JOIN_ORACLE = ("SELECT x.A, count(*) AS n, sum(y.D) AS total FROM S1 x JOIN S2 y "
                    "ON x.B BETWEEN y.C - 1 AND y.C + 1 GROUP BY x.A")
# Top-k per group (issue 59): the 3 largest y per x, over ~100 rows per group; an increment of 100
# random rows touches ~1 % of the 10,001 groups, and only those partitions are recomputed.
TOPK_PER_GROUP_SQL = ("SELECT x, y, rn FROM (SELECT x, y, row_number() OVER (PARTITION BY x ORDER BY y DESC) AS rn "
                      "FROM S) t WHERE rn <= 3")
# A running window over large partitions (issue 59): each of 10 accounts' balance over time, and
# how many of its events left it below zero; an increment appends events after every earlier one,
# so each partition is computed from its new rows on (plan/rules_window_suffix.py).
RUNNING_SUM_SQL = ("SELECT k, count(*) AS overdrawn FROM (SELECT k, sum(v) OVER (PARTITION BY k ORDER BY ts) AS balance "
                   "FROM S) t WHERE balance < 0 GROUP BY k")
EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


def example_sql(name: str) -> str:
    """The text of ``examples/<name>.sql`` (read when the workload runs: a clone has it)."""
    path = os.path.normpath(os.path.join(EXAMPLES, f"{name}.sql"))
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        raise UsageError(f"the {name} workload runs {path}, which is missing", code="NO_EXAMPLE",
                         params={"path": path}, hint="run streamfold bench from a clone of the repository") from None

WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("groupby", GROUPBY_SQL, (Source("S", ("x", "y")),), 1_000_000, 40_000, 9, ("x",),
                 description="seed 000 §11 groupBy: 1M-row history, nine 40K increments"),
        Workload("join-groupby", JOIN_GROUPBY_SQL, (Source("S1", ("A", "B")), Source("S2", ("C", "D"))),
                 100_000, 40_000, 9, ("A",),
                 description="seed 000 §11 join-groupBy: 100K + 100K history, nine 40K increments to each input"),
        Workload("band-join", BAND_JOIN_SQL, (Source("S1", ("A", "B")), Source("S2", ("C", "D"))),
                 1_000_000, 40_000, 9, ("A",),
                 description="issue 20's band join: |x.B − y.C| ≤ 1 over two streams of random pairs, a 1M-row "
                             "history and nine 40K increments to each input, counted and summed per x.A",
                 oracle=BAND_JOIN_ORACLE),
        Workload("topk-per-group", TOPK_PER_GROUP_SQL, (Source("S", ("x", "y")),), 1_000_000, 100, 9, None,
                 description="issue 59's top-k per group: row_number() per x over a 1M-row history, the top 3 "
                             "kept; nine 100-row increments, each touching ~1 % of the groups"),
        Workload("topk-deleting", TOPK_PER_GROUP_SQL, (Source("S", ("x", "y")),), 1_000_000, 100, 9, None,
                 generator="pairs-deleting",
                 description="issue 59's top-k per group under deletions: as topk-per-group, each increment also "
                             "deleting 100 rows, half of them the top row of a random group"),
        Workload("topk-deleting-large", TOPK_PER_GROUP_SQL, (Source("S", ("x", "y")),), 1_000_000, 100, 9, None,
                 generator="pairs-deleting", groups=100,
                 description="topk-deleting over 100 groups of ~10,000 rows: each increment inserts 100 rows and "
                             "deletes 100, half of them a group's top row"),
        Workload("running-sum", RUNNING_SUM_SQL, (Source("S", ("ts", "k", "v")),), 1_000_000, 10_000, 9, ("k",),
                 generator="ticks",
                 description="issue 59's running window: a running balance per account (10 accounts) over a 1M-event "
                             "history, the events below zero counted; nine 10K-event increments after every earlier one"),
        Workload("groupby-10m", GROUPBY_SQL, (Source("S", ("x", "y")),), 10_000_000, 40_000, 9, ("x",),
                 history_files=10,
                 description="groupBy with a 10M-row history: how an increment's cost grows with the history"),
        Workload("groupby-100m", GROUPBY_SQL, (Source("S", ("x", "y")),), 100_000_000, 40_000, 9, ("x",),
                 history_files=100,
                 description="groupBy with a 100M-row history (100 files, generated once under bench-out/data/)"),
        # The seed's sizes (000 §11): 5K nodes / 50K edges plus 100 nodes and edges per increment;
        # 1M points plus 10K per increment.
        Workload("pagerank", "", (Source("edges", ("src", "dst")),), 50_000, 100, 9, ("node",),
                 generator="rmat", example="pagerank", diffusion_key="node",
                 description="seed 000 §11 PageRank (10 steps, exact): an R-MAT graph of history/10 nodes and "
                             "`history` edges; each increment adds min(100, increment) new nodes and `increment` "
                             "edges"),
        Workload("kmeans", "", (Source("points", ("x", "y")),), 1_000_000, 10_000, 9, None, generator="kmeans",
                 tables=(Source("centroids0", ("x", "y")),), example="kmeans", diffusion_key="x0, y0",
                 description="seed 000 §11 k-means (10 Lloyd steps, exact): points in four squares, four "
                             "initial centroids near their centres (a static table)"),
    )
}

# --quick: the same shapes at sizes that run in seconds (used by tests/bench/test_bench.py).
QUICK: dict[str, Callable[[Workload], Workload]] = {
    "groupby": lambda w: w.sized(20_000, 2_000, 3),
    "join-groupby": lambda w: w.sized(5_000, 1_000, 3),
    "band-join": lambda w: w.sized(5_000, 1_000, 3),
    "topk-per-group": lambda w: w.sized(20_000, 100, 3),
    "topk-deleting": lambda w: w.sized(20_000, 100, 3),
    "topk-deleting-large": lambda w: w.sized(20_000, 100, 3),
    "running-sum": lambda w: w.sized(20_000, 1_000, 3),
    "groupby-10m": lambda w: replace(w.sized(100_000, 2_000, 3), history_files=2),
    "groupby-100m": lambda w: replace(w.sized(100_000, 2_000, 3), history_files=2),
    "pagerank": lambda w: w.sized(300, 5, 2).with_steps(2),
    "kmeans": lambda w: w.sized(60, 10, 2).with_steps(2),
}


def get_workload(name: str) -> Workload:
    """The built-in workload ``name``, or a usage error listing the known ones."""
    try:
        workload = WORKLOADS[name]
    except KeyError:
        raise UsageError(f"unknown workload {name!r}", code="UNKNOWN_WORKLOAD", params={"workload": name},
                         hint=f"use one of {', '.join(WORKLOADS)}, or custom with --query FILE --source NAME=DIR") from None
    return replace(workload, sql=example_sql(workload.example)) if workload.example else workload


def quick(workload: Workload) -> Workload:
    """The workload at --quick sizes (custom workloads keep their files)."""
    return QUICK[workload.name](workload) if workload.name in QUICK else workload
