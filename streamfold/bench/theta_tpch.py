"""``streamfold bench theta --skew``: the thesis's Table 4.1 joins on Zipf-skewed TPC-H (§4.5.1–4.5.2).

The queries, streamed — both inputs arrive in a history and equal increments (:mod:`.zipf_tpch`;
the intermediate results R⋈N⋈S and S⋈N materialised beforehand, as in the thesis):

* **EQ5** — (R⋈N⋈S) ⋈ L on the supplier key, Q5's region (ASIA);
* **EQ7** — (S⋈N) ⋈ L on the supplier key, Q7's nations and ship dates;
* **BCI** — L1 ⋈ L2 on |L1.shipdate − L2.shipdate| ≤ 1, TRUCK against the other modes, quantity > 45
  (a band join whose output is many times its input);
* **BNCI** — L1 ⋈ L2 on |L1.orderkey − L2.orderkey| ≤ 1, TRUCK, NONE, quantity > 48 (a band join
  whose output is smaller than its input).

The thesis's operators emit the joined tuples; here each query counts and sums them (per nation
for EQ5 and EQ7), the sum reading a column of *each* side, so that both inputs are kept row by
row as the thesis's joiners keep tuples (streamfold keeps an input pre-aggregated on what the
query reads of it; a sum of one side's column alone would let it keep one row per join key).

Four partitionings over J cells (``--cells``; the hash join over J partitions):

* **SHJ** — the equi-join hash-partitioned on its key, as the planner does by default (equi-joins
  only: Spark and streamfold have no hash partitioning for a band);
* **STATICMID** — the join matrix with the square mapping (√J, √J), never re-mapped;
* **STATICOPT** — the join matrix with the best mapping for the final sizes (known in hindsight:
  from DYNAMIC's last commit), never re-mapped;
* **DYNAMIC** — the join matrix starting square, re-mapped by Algorithm 2 (ε = 1);
* **HYBRID** — (equi-joins) §4.4.4's hybrid: the keys with more rows than a joiner's fair share
  over the join matrix (DYNAMIC's), the others hashed to one cell each; the heavy keys picked
  from the frequencies whenever Algorithm 2 decides.

The J cells are laid over as many Spark partitions as a state has by default (one per core, at
least 2; each partition runs J/P cells on average); ``--partitions J`` gives a task per joiner,
the thesis's setting, which on a machine of few cores is mostly task overhead (docs/journal.md,
"Stop 48"). The partitions change what a batch pays per task, not which rows each cell keeps.

Each partitioning runs ``--reps`` rounds (default 2), in the given order and then reversed, and
each batch's time is its least over the rounds: a partitioning timed first in the JVM pays the JIT
compilation of the query's paths at full size, which the untimed small run before does not finish.

Per batch: the time to commit it; the *largest partition's input* — the rows of both join
states that one joiner holds: per cell of the matrix (a left row is in the m cells of its row
group, a right row in the n cells of its column group), per hash partition for SHJ
(``pmod(hash(key), J)``, Spark's own hash partitioning of the states); ILF* — the least
|R|/n + |S|/m over the mappings of J cells for the states' sizes |R|, |S| (rows of each input
once) — and their ratio; the rows all joiners hold together; and whether the answer equals
DuckDB's on the prefix (every batch is checked).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
from typing import Any

from ..errors import UsageError
from ..plan.matrix import best_mapping, square
from ..verify import compare, duckdb_answer
from . import zipf_tpch

QUERIES: dict[str, tuple[str, tuple[str, ...]]] = {
    "eq5": ("SELECT r.n_name, count(*) AS n, sum(l.l_extendedprice * (1 - l.l_discount) + r.s_acctbal) AS total "
            "FROM RNS r JOIN LINEITEM l ON r.s_suppkey = l.l_suppkey WHERE r.r_name = 'ASIA' GROUP BY r.n_name",
            ("RNS", "LINEITEM")),
    "eq7": ("SELECT s.n_name, count(*) AS n, sum(l.l_extendedprice * (1 - l.l_discount) + s.s_acctbal) AS total "
            "FROM SN s JOIN LINEITEM l ON s.s_suppkey = l.l_suppkey WHERE s.n_name IN ('FRANCE', 'GERMANY') "
            "AND l.l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31' GROUP BY s.n_name",
            ("SN", "LINEITEM")),
    "bci": ("SELECT count(*) AS n, sum(l1.l_extendedprice + l2.l_extendedprice) AS total "
            "FROM LINEITEM l1 JOIN LINEITEM l2 ON abs(datediff(l1.l_shipdate, l2.l_shipdate)) <= 1 "
            "WHERE l1.l_shipmode = 'TRUCK' AND l2.l_shipmode <> 'TRUCK' AND l1.l_quantity > 45",
            ("LINEITEM",)),
    "bnci": ("SELECT count(*) AS n, sum(l1.l_extendedprice + l2.l_extendedprice) AS total "
             "FROM LINEITEM l1 JOIN LINEITEM l2 ON abs(l1.l_orderkey - l2.l_orderkey) <= 1 "
             "WHERE l1.l_shipmode = 'TRUCK' AND l2.l_shipinstruct = 'NONE' AND l1.l_quantity > 48",
             ("LINEITEM",)),
}
EQUI = ("eq5", "eq7")
# DYNAMIC first: STATICOPT takes its final sizes
SYSTEMS = ("DYNAMIC", "STATICOPT", "STATICMID", "SHJ", "HYBRID")
SCHEMAS = {
    "RNS": "r_name STRING, n_name STRING, s_suppkey BIGINT, s_nationkey BIGINT, s_acctbal DOUBLE",
    "SN": "s_suppkey BIGINT, s_acctbal DOUBLE, n_name STRING, s_nationkey BIGINT",
    "LINEITEM": ("l_orderkey BIGINT, l_linenumber INT, l_suppkey BIGINT, l_quantity DOUBLE, l_extendedprice DOUBLE, "
                 "l_discount DOUBLE, l_shipdate DATE, l_shipmode STRING, l_shipinstruct STRING"),
}


def applies(system: str, query: str) -> bool:
    """SHJ and HYBRID hash a key: a band join has none."""
    return query in EQUI or system not in ("SHJ", "HYBRID")


def options(system: str, cells: int, start: tuple[int, int] | None, partitions: int | None = None) -> dict[str, Any]:
    """streamfold's run options for one partitioning: the J cells (joiners) laid over ``partitions``
    Spark partitions (None: the engine's default, one per core, at least 2)."""
    common: dict[str, Any] = {"matrix_cells": cells, **({"partitions": partitions} if partitions else {})}
    if system == "SHJ":
        return {**common, "matrix_equi": "hash"}
    if system == "HYBRID":
        return {**common, "matrix_equi": "hybrid", "matrix_epsilon": 1.0}
    if system == "DYNAMIC":
        return {**common, "matrix_equi": "matrix", "matrix_epsilon": 1.0}
    if system == "STATICMID":
        return {**common, "matrix_equi": "matrix", "matrix_epsilon": None}
    assert system == "STATICOPT" and start is not None
    return {**common, "matrix_equi": "matrix", "matrix_epsilon": None, "matrix_start": start}


def largest_partition(q: Any, system: str, states: tuple[tuple[str, tuple[str, ...]], ...], cells: int) -> int:
    """The rows of both join states one joiner holds, at most: per cell of the matrix, per hash
    partition of the key for SHJ."""
    parts = []
    for name, key in states:
        if system == "SHJ":
            where = f"pmod(hash({', '.join(f'`{k}`' for k in key)}), {cells})"  # Spark's HashPartitioning
        else:
            cell = next(k for k in key if k.endswith("._cell"))
            where = f"`{cell}`"
        parts.append(f"SELECT {where} AS joiner, count(*) AS c FROM {name} GROUP BY 1")
    sql = f"SELECT max(c) AS c FROM (SELECT joiner, sum(c) AS c FROM ({' UNION ALL '.join(parts)}) GROUP BY joiner)"
    rows = q.inspect(sql, limit=1)["rows"]
    return int(rows[0][0] or 0)


def run_one(spark: Any, query: str, system: str, manifest: dict[str, Any], cells: int, work: str,
            start: tuple[int, int] | None, say: Any, partitions: int | None = None) -> dict[str, Any]:
    """One query under one partitioning over every batch of one data set."""
    import streamfold

    sql, sources = QUERIES[query]
    base = os.path.join(work, f"{query}-{system}")
    shutil.rmtree(base, ignore_errors=True)
    dirs = {s: os.path.join(base, "in", s) for s in sources}
    for d in dirs.values():
        os.makedirs(d)
    out = os.path.join(base, "out")
    q = streamfold.start(sql, dirs, out, spark=spark, background=False, schemas={s: SCHEMAS[s] for s in sources},
                         **options(system, cells, start, partitions))
    rows: list[dict[str, Any]] = []
    exact = True
    try:
        # the two join inputs' states, each with the key it is partitioned on (with the cell on a matrix)
        states = tuple((st.name, st.partition or ()) for st in q.engine.plan.states if st.name.startswith("in_"))
        assert len(states) == 2, states
        batches = len(manifest["files"][sources[0]])
        for b in range(batches):
            for s in sources:
                path = manifest["files"][s][b]
                shutil.copy(path, os.path.join(dirs[s], os.path.basename(path)))
            result = q.process_available()
            assert result is not None
            with open(os.path.join(out, "commits", f"{b:06d}.json"), encoding="utf-8") as fh:
                record = json.load(fh)
            stored = {n: result.state_rows.get(n, 0) for n, _ in states}
            entry = next(iter((record.get("matrix") or {}).values()), None)
            if entry is not None:
                mapping = tuple(entry["mapping"])
                sizes = tuple(entry["sizes"])
            else:
                mapping = None
                sizes = tuple(stored[n] for n, _ in states)
            largest = largest_partition(q, system, states, cells)
            best = best_mapping(sizes[0], sizes[1], cells)
            ilf_opt = float(best.ilf(sizes[0], sizes[1]))
            snapshot = [tuple(r) for r in q.snapshot_pandas().itertuples(index=False)]
            expected = duckdb_answer(sql, {s: manifest["files"][s][: b + 1] for s in sources})
            ok = compare(snapshot, expected).matches
            exact = exact and ok
            rows.append({"batch": b, "seconds": round(result.duration_s, 3), "mapping": mapping,
                         "migrated": bool(entry and "migrated_from" in entry), "sizes": list(sizes),
                         "largest_partition": largest, "ilf_opt": ilf_opt,
                         "ilf_ratio": round(largest / ilf_opt, 3) if ilf_opt else 1.0,
                         "ilf_ratio_sizes": entry["ilf_ratio"] if entry is not None else None,
                         "heavy": entry.get("heavy") if entry is not None else None,
                         "stored_rows": sum(stored.values()), "exact": ok})
            say(f"[theta-skew] {query} {system} batch {b}: {result.duration_s:.2f} s, mapping {mapping}, "
                f"sizes {sizes}, largest partition {largest:,} (ILF* {ilf_opt:,.0f}), "
                f"stored {sum(stored.values()):,}, {'exact' if ok else 'WRONG'}")
    finally:
        q.stop()
    return {"batches": rows, "exact": exact, "median_increment_s": _median_increment(rows),
            "start": list(start) if start else None}


def _median_increment(batches: list[dict[str, Any]]) -> float:
    """The median seconds of the increments (batch 0, the history, only if there is no other)."""
    return statistics.median([r["seconds"] for r in batches[1:]] or [batches[0]["seconds"]])


def combine(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One partitioning's runs of the same batches (every round's), as one: each batch's time the
    least over the rounds (each round's times kept as ``seconds_by_round``), exact only if every
    round was; the rest (mapping, sizes, partitions, rows stored) is the same in every round."""
    first = rounds[0]
    batches = []
    for b, row in enumerate(first["batches"]):
        times = [r["batches"][b]["seconds"] for r in rounds]
        batches.append({**row, "seconds": min(times), "seconds_by_round": times,
                        "exact": all(r["batches"][b]["exact"] for r in rounds)})
    return {"batches": batches, "exact": all(r["exact"] for r in rounds),
            "median_increment_s": _median_increment(batches),
            "median_increment_s_by_round": [r["median_increment_s"] for r in rounds], "start": first["start"]}


def run(sf: float, zipfs: list[float], queries: list[str], systems: list[str], cells: int, history: float,
        increments: int, out: str, master: str | None, say: Any = print, partitions: int | None = None,
        rounds: int = 2) -> dict[str, Any]:
    """Every (query, z, system), ``rounds`` times in alternating orders; results.json and
    results.md under ``out``/theta-skew."""
    from ..runtime.session import default_partitions, get_spark
    from ..settings import Settings
    from .machine import load_average

    directory = os.path.join(out, "theta-skew")
    work = os.path.join(directory, "work")
    os.makedirs(directory, exist_ok=True)
    spark = get_spark(master or "local[*]", app_name="streamfold-bench-theta-skew")
    results: dict[str, Any] = {"sf": sf, "cells": cells, "partitions": partitions or Settings.from_environ().partitions
                               or default_partitions(spark),
                               "history": history, "increments": increments, "rounds": rounds,
                               "square": [square(cells).n, square(cells).m],
                               "load_average": {"at_start": load_average()}, "runs": []}
    warm = zipf_tpch.write(os.path.join(work, "data", "warm"), 0.002, 1.0, 0.5, 1)
    for query in queries:
        # untimed: each partitioning of this query run once on a small data set first, so that
        # the first one timed is not charged for warming the JVM and Spark's code generation
        for system in systems:
            if not applies(system, query):
                continue
            start = (1, cells) if system == "STATICOPT" else None
            run_one(spark, query, system, warm, cells, os.path.join(work, "warm"), start, lambda msg: None, partitions)
        for z in (zipfs if query in EQUI else [0.0]):  # the band joins on uniform data, as in the thesis
            manifest = zipf_tpch.write(os.path.join(work, "data", f"z{z}"), sf, z, history, increments)
            entry: dict[str, Any] = {"query": query, "z": z, "rows": manifest["rows"],
                                     "top_supplier_share": manifest["top_supplier_share"], "systems": {}}
            # Each round runs the partitionings in another order (the first, the reverse, …): a
            # partitioning run first pays the JVM's JIT compilation of this query's paths at full
            # size, which the untimed small run above does not finish (docs/journal.md, "Stop 51":
            # the partitioning timed first looked the slower one). Each batch's time is its least
            # over the rounds.
            by_round: dict[str, list[dict[str, Any]]] = {}
            for round_ in range(rounds):
                order = systems if round_ % 2 == 0 else systems[::-1]
                for system in order:
                    if not applies(system, query):
                        continue
                    start = None
                    if system == "STATICOPT":
                        dynamic = by_round.get("DYNAMIC")
                        if not dynamic:
                            continue
                        r, s = dynamic[0]["batches"][-1]["sizes"]
                        best = best_mapping(r, s, cells)
                        start = (best.n, best.m)
                    if rounds > 1:
                        say(f"[theta-skew] {query} {system}: round {round_ + 1} of {rounds}")
                    by_round.setdefault(system, []).append(
                        run_one(spark, query, system, manifest, cells, os.path.join(work, "runs"), start, say,
                                partitions))
            entry["systems"] = {s: combine(by_round[s]) for s in systems if s in by_round}
            results["runs"].append(entry)
            results["load_average"]["at_end"] = load_average()
            with open(os.path.join(directory, "results.json"), "w", encoding="utf-8") as fh:
                json.dump(results, fh, indent=2)
            with open(os.path.join(directory, "results.md"), "w", encoding="utf-8") as fh:
                fh.write(report(results))
    plot(results, os.path.join(directory, "plot.png"))
    return results


def _targets(results: dict[str, Any]) -> list[str]:
    """The issue's targets, per run where they apply."""
    lines = []
    for run_ in results["runs"]:
        sy = run_["systems"]
        label = f"{run_['query'].upper()} z={run_['z']}"
        if run_["z"] == 1.0 and "SHJ" in sy and "DYNAMIC" in sy:
            shj, dyn = sy["SHJ"]["batches"][-1], sy["DYNAMIC"]["batches"][-1]
            lines.append(f"- {label}: SHJ's largest partition / DYNAMIC's = {shj['largest_partition']:,} / "
                         f"{dyn['largest_partition']:,} = **{shj['largest_partition'] / dyn['largest_partition']:.2f}×** "
                         "(target ≥ 5×)")
            if "HYBRID" in sy:
                hyb = sy["HYBRID"]
                lines.append(f"- {label}: HYBRID's largest partition {hyb['batches'][-1]['largest_partition']:,} "
                             f"(heavy keys {hyb['batches'][-1].get('heavy')}), rows stored "
                             f"{hyb['batches'][-1]['stored_rows']:,} against SHJ's {shj['stored_rows']:,}; "
                             f"median s per increment HYBRID {hyb['median_increment_s']:.2f}, SHJ "
                             f"{sy['SHJ']['median_increment_s']:.2f}, DYNAMIC {sy['DYNAMIC']['median_increment_s']:.2f}")
        if {"DYNAMIC", "STATICMID", "STATICOPT"} <= set(sy):
            opt = sy["STATICOPT"]["start"]
            if opt and opt != results["square"]:
                d, m, o = (sy[k]["median_increment_s"] for k in ("DYNAMIC", "STATICMID", "STATICOPT"))
                lines.append(f"- {label} (best mapping {tuple(opt)}): DYNAMIC / STATICMID = {d:.2f} / {m:.2f} s = "
                             f"**{d / m:.2f}** (target ≤ 0.5); DYNAMIC / STATICOPT = {d:.2f} / {o:.2f} s = "
                             f"**{d / o:.2f}** (target ≤ 1.2)")
    return lines


def report(results: dict[str, Any]) -> str:
    """A summary line per (query, z, system), the targets, then every run's batches."""
    out = [f"SF {results['sf']}, J = {results['cells']} cells (STATICMID {tuple(results['square'])}) over "
           f"{results.get('partitions', results['cells'])} Spark partitions, history "
           f"{results['history']:.0%} then {results['increments']} increments, "
           f"{results.get('rounds', 1)} round(s) per partitioning (each batch's time the least); load average at start "
           f"{results['load_average']['at_start']}, at end {results['load_average'].get('at_end')}", "",
           "| query | z | system | mapping (final) | median s per increment | largest partition (final) | "
           "ILF/ILF* (final) | rows stored (final) | answers |", "|---|---|---|---|---|---|---|---|---|"]
    for run_ in results["runs"]:
        for name, rec in run_["systems"].items():
            last = rec["batches"][-1]
            mapping = tuple(last["mapping"]) if last["mapping"] else "hash"
            out.append(f"| {run_['query'].upper()} | {run_['z']} | {name} | {mapping} | {rec['median_increment_s']:.2f} | "
                       f"{last['largest_partition']:,} | {last['ilf_ratio']:.2f} | {last['stored_rows']:,} | "
                       f"{'exact' if rec['exact'] else 'WRONG'} |")
    out += ["", "Targets:", *(_targets(results) or ["- (no run the targets apply to)"]), ""]
    for run_ in results["runs"]:
        names = list(run_["systems"])
        out += [f"#### {run_['query'].upper()}, z = {run_['z']} (rows per batch: "
                + "; ".join(f"{k} {v}" for k, v in run_["rows"].items() if k in QUERIES[run_["query"]][1]) + ")", "",
                "| batch | " + " | ".join(f"{n} s | {n} largest | {n} ILF/ILF*" for n in names) + " |",
                "|---" * (1 + 3 * len(names)) + "|"]
        for b in range(len(run_["systems"][names[0]]["batches"])):
            cols = []
            for n in names:
                r = run_["systems"][n]["batches"][b]
                mark = " (migrated)" if r["migrated"] else ""
                rounds = r.get("seconds_by_round") or []
                each = f" ({', '.join(f'{t:.2f}' for t in rounds)})" if len(rounds) > 1 else ""
                cols.append(f"{r['seconds']:.2f}{each} | {r['largest_partition']:,}{mark} | {r['ilf_ratio']:.2f}")
            out.append(f"| {b} | " + " | ".join(cols) + " |")
        out.append("")
    return "\n".join(out) + "\n"


def plot(results: dict[str, Any], path: str) -> None:
    """Per equi-join query: the final largest partition against z, one line per system (Fig. 4.7b's
    kind); and per query at the last z, seconds per batch (Fig. 4.8's kind)."""
    from .plot import _pyplot

    plt = _pyplot()
    runs = results["runs"]
    queries = list(dict.fromkeys(r["query"] for r in runs))
    fig, axes = plt.subplots(2, max(len(queries), 1), figsize=(4.2 * max(len(queries), 1), 7), dpi=100, squeeze=False)
    for i, query in enumerate(queries):
        mine = [r for r in runs if r["query"] == query]
        ax = axes[0][i]
        if len(mine) > 1:  # against z
            for system in SYSTEMS:
                pts = [(r["z"], r["systems"][system]["batches"][-1]["largest_partition"])
                       for r in mine if system in r["systems"]]
                if pts:
                    ax.plot(*zip(*pts), marker="o", label=system)
            ax.set_title(f"{query.upper()}: largest partition (final)", fontsize=10)
            ax.set_xlabel("Zipf z")
        else:  # one z: per batch
            for system, rec in mine[0]["systems"].items():
                ax.plot([r["batch"] for r in rec["batches"]], [r["largest_partition"] for r in rec["batches"]],
                        marker="o", label=system)
            ax.set_title(f"{query.upper()} z={mine[0]['z']}: largest partition", fontsize=10)
            ax.set_xlabel("batch (0: history)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
        ax = axes[1][i]
        last = mine[-1]
        for system, rec in last["systems"].items():
            ax.plot([r["batch"] for r in rec["batches"]], [r["seconds"] for r in rec["batches"]], marker="o", label=system)
        ax.set_title(f"{query.upper()} z={last['z']}: seconds per batch", fontsize=10)
        ax.set_xlabel("batch (0: history)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(sf: float | None, zipfs: str | None, queries: str | None, systems: str | None, cells: int | None,
         increments: int | None, out: str, master: str | None, partitions: int | None = None,
         rounds: int | None = None) -> int:
    zs = [float(z) for z in (zipfs or "0,0.25,0.5,0.75,1").split(",")]
    qs = [q.strip().lower() for q in (queries or "eq5,eq7,bci,bnci").split(",")]
    sy = [s.strip().upper() for s in (systems or ",".join(SYSTEMS)).split(",")]
    sy = [s for s in SYSTEMS if s in sy]  # DYNAMIC before STATICOPT
    for option, value, hint in (("--partitions", partitions, "the Spark partitions the cells are laid over"),
                                ("--reps", rounds, "the rounds of every partitioning, in alternating orders")):
        if value is not None and value < 1:
            raise UsageError(f"{option} must be at least 1, not {value}", code="BAD_SIZE",
                             params={"option": option, "value": value}, hint=f"{hint}; 1 or more")
    results = run(sf or 0.01, zs, qs, sy, cells or 16, 0.5, increments or 4, out, master, partitions=partitions,
                  rounds=rounds or 2)
    print(report(results))
    return 0 if all(rec["exact"] for r in results["runs"] for rec in r["systems"].values()) else 1
