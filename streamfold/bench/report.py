"""``results.json`` (everything measured), ``results.md`` (the tables) and the plots, per workload."""

from __future__ import annotations

import json
import os
import statistics
from typing import Any

from ..runtime.profile import Waterfall
from .plot import plot_latency, plot_memory

PHASE_ORDER = ("read", "write", "compact")


def write_outputs(results: dict[str, Any], directory: str) -> None:
    """Write the three outputs (and ``memory.png`` for a --memory run) into ``directory``."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "results.json"), "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=1, ensure_ascii=False, default=str)
        fh.write("\n")
    with open(os.path.join(directory, "results.md"), "w", encoding="utf-8") as fh:
        fh.write(markdown(results))
    plot_latency(results, os.path.join(directory, "plot.png"))
    waterfalls = [r["waterfall"] for rec in results["systems"].values() for r in rec.get("increments", [])
                  if r.get("waterfall")]
    if waterfalls:
        with open(os.path.join(directory, "waterfall.txt"), "w", encoding="utf-8") as fh:
            fh.write("\n\n".join("\n".join(Waterfall.from_json(w).lines()) for w in waterfalls) + "\n")
    if any(r.get("memory_summary") for r in results["systems"].values()):
        plot_memory(results, os.path.join(directory, "memory.png"))


def write_json_and_markdown(results: dict[str, Any], directory: str, markdown_text: str) -> None:
    """``results.json`` and ``results.md`` of a bench with a report of its own (replan, theta)."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "results.json"), "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=2)
    with open(os.path.join(directory, "results.md"), "w", encoding="utf-8") as fh:
        fh.write(markdown_text)


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def _stopped(rec: dict[str, Any], inc: int) -> str | None:
    """The cell of an increment a system stopped by ``--time-limit`` did not finish ("> T s")."""
    if rec["status"] == "stopped" and inc == rec.get("stopped_at_increment"):
        return f"> {rec['time_limit_s']:g} (stopped)"
    return None


def _shown(n: int) -> list[int]:
    """Which increments the Markdown table lists: all up to 25, else 0–10, every 10th and the last."""
    if n <= 25:
        return list(range(n + 1))
    return sorted(set(range(11)) | set(range(20, n + 1, 10)) | {n})


def _warm(warm: dict[str, Any] | None) -> str:
    if not warm:
        return "none — the first system measured also warms the JVM all systems share"
    ran = (f"the same history then its first {warm['increments']} increments" if "replays" in warm else
           f"{warm['history_rows_per_source']:,} rows then {warm['increments']} × "
           f"{warm['increment_rows_per_source']:,} rows per source")
    return f"before measuring, each system ran the query over {ran}, untimed (the JVM's JIT is warm for every system)"


def _sql(text: str) -> list[str]:
    """A query as Markdown: inline when it is one line, else a fenced block."""
    text = text.strip()
    return [f"`{text}`"] if "\n" not in text else ["```sql", text, "```"]


def markdown(results: dict[str, Any]) -> str:
    """The report a person reads: sizes, machine, latency table, checks, rejections, phases, targets."""
    sizes, m, systems = results["sizes"], results["machine"], results["systems"]
    n = sizes["increments"]
    names = list(systems)
    lines = [f"# streamfold bench: {results['workload']}", "", *_sql(results["sql"]), ""]
    if results.get("description"):
        lines += [results["description"] + ".", ""]
    rows = ", ".join(f"{s} {v[0]:,} rows then {len(v) - 1} × {v[1] if len(v) > 1 else 0:,}"
                     for s, v in sizes["sources"].items())
    lines += [f"* Data: {rows}{' (quick mode)' if sizes['quick'] else ''}.",
              f"* Machine: {m['cores']} cores, {m['memory_gb']} GB, {m.get('cpu') or '?'}; Spark `{m['spark_master']}`, "
              f"PySpark {m['pyspark']}, {m.get('java') or 'Java ?'}, DuckDB {m['duckdb']}, Python {m['python']}.",
              f"* Code: {_code(m.get('streamfold_code'))}.",
              f"* Load average before measuring: {_load(results['load_average'])}.",
              f"* Latency: {results['latency_definition']}.",
              f"* Warm-up: {_warm(results.get('warm_up'))}.",
              "* streamfold is driven through its Python API with `background=False`: `process_available()` is called "
              "right after the files appear, so there is no poll delay (a background poll would add up to its "
              "trigger interval).", ""]
    lines += ["## Latency per increment (seconds)", "",
              "| increment | rows | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for inc in _shown(n):
        cells = []
        for name in names:
            by = {r["increment"]: r["latency_s"] for r in systems[name]["increments"]}
            cells.append("rejected" if systems[name]["status"] == "rejected" else _stopped(systems[name], inc)
                         or _fmt(by.get(inc)))
        label = "0 (history)" if inc == 0 else str(inc)
        total = " + ".join(f"{v[inc]:,}" for v in sizes["sources"].values())
        lines.append(f"| {label} | {total} | " + " | ".join(cells) + " |")
    lines.append(f"| **median 1–{n}** | | " + " | ".join(_median_cell(systems[s], n) for s in names) + " |")
    lines += ["", "## Answers checked against DuckDB", "",
              f"DuckDB's answer over all the data ({results['duckdb']['rows']:,} rows), compared as bags, floats to "
              "a relative 1e-9, from:", "", *_sql(results["duckdb"]["sql"]), "",
              "| system | how it ran | matches DuckDB | rows | 1-minute load after its run |", "|---|---|---|---|---|"]
    for name, rec in systems.items():
        check = rec.get("check")
        if check and not rec.get("exact", True):
            verdict = "approximate by design: not checked" + (" (it matches)" if check["matches_duckdb"] else "")
        else:
            verdict = ("yes" if check["matches_duckdb"] else f"no ({check['detail']})") if check else \
                {"rejected": "no answer: Spark rejects the query",
                 "failed": f"no answer: failed ({rec.get('error')})",
                 "stopped": f"no answer: {rec.get('error')}"}.get(rec["status"], "—")
        after = rec.get("load_average_after") or []
        lines.append(f"| {name} | {_how(name, rec)} | {verdict} | {check['rows'] if check else '—'} | "
                     f"{after[0] if after else '—'} |")
    rejections = {(n_, mode): msg for n_, rec in systems.items()
                  for mode, msg in ({**rec.get("describe", {}).get("rejected_modes", {}), **rec.get("rejections", {})}).items()}
    if rejections:
        lines += ["", "## Spark's rejections (exact messages)", ""]
        for (name, mode), msg in rejections.items():
            lines += [f"{name}, output mode `{mode}`:", "", "```", msg.rstrip(), "```", ""]
    lines += _errors(results)
    lines += _phases(results)
    if results.get("targets"):
        lines += ["", "## Targets", "", "| target | measured | met |", "|---|---|---|"]
        for t in results["targets"]:
            met = {True: "yes", False: "**no**", None: "not judged"}[t["met"]]
            lines.append(f"| {t['target']} | {t['measured']} | {met}{' — ' + t['note'] if t['note'] else ''} |")
    lines += _memory(results)
    if results.get("command"):
        lines += ["", "## Command", "", "```", " ".join(results["command"]), "```"]
    return "\n".join(lines).rstrip() + "\n"


def _code(code: dict[str, Any] | None) -> str:
    if not code:
        return "not a git checkout"
    text = f"streamfold at commit `{code['commit'][:10]}`"
    if code["modified_files"]:
        text += f" with uncommitted changes to {', '.join(code['modified_files'])}"
    return text


def _load(load: dict[str, Any]) -> str:
    text = " ".join(f"{v:.2f}" for v in load.get("at_start") or [])
    if load.get("cpu_busy_at_start") is not None:
        text += f", CPUs {load['cpu_busy_at_start']:.0%} busy"
    if load.get("waited_s", 0) >= 1:
        text += f" (waited {load['waited_s']:.0f} s for it to drop below {load['limit']})"
    if not load.get("quiet", True):
        text += " — **the machine was busy: figures may be high**"
    return text


def _median_cell(rec: dict[str, Any], n: int) -> str:
    """A system's median in the table's last row; a system with warm-up increments of its own (its
    own JVM: ``streamfold run``) says which increments its median is of."""
    if rec["median_s"] is None:
        return str(rec["status"])
    warm = min(int(rec.get("describe", {}).get("warm_increments") or 0), n - 1)
    if not warm:
        return f"**{_fmt(rec['median_s'])}**"
    return f"**{_fmt(rec['median_s'])}** (of {warm + 1}–{n})" if warm + 1 < n else f"**{_fmt(rec['median_s'])}** (of {n})"


def _how(name: str, rec: dict[str, Any]) -> str:
    d = rec.get("describe", {})
    if name == "spark-streaming":
        return f"output mode {d.get('output_mode') or '—'}, foreachBatch → Parquet"
    if d.get("command"):  # a process of its own
        return f"`{d['command']}`, its first {d.get('warm_increments', 0)} increments its JVM's warm-up"
    if name.startswith("streamfold"):
        mode = d.get("iteration_mode")
        return "Python API, process_available() after each increment" + (f"; iteration MODE {mode.upper()}"
                                                                          if mode else "")
    return "Spark SQL batch job over all files, answer written as Parquet"


def _errors(results: dict[str, Any]) -> list[str]:
    """With --errors: each system's answer against NumPy's over all the data so far, per increment."""
    systems = {n: {r["increment"]: r["error"] for r in rec["increments"] if r.get("error") is not None}
               for n, rec in results["systems"].items()}
    systems = {n: e for n, e in systems.items() if e}
    if not systems:
        return []
    what = ("L1 distance of the rank vectors" if "pagerank" in results["workload"]
            else "largest distance from a centroid to the nearest exact one")
    out = ["", f"## Error against NumPy's answer over the data so far ({what})", "",
           "| increment | " + " | ".join(systems) + " |", "|---|" + "---|" * len(systems)]
    for inc in _shown(results["sizes"]["increments"]):
        out.append(f"| {inc} | " + " | ".join(f"{e[inc]:.1e}" if inc in e else "—" for e in systems.values()) + " |")
    return out


def _phases(results: dict[str, Any]) -> list[str]:
    """Median per phase over increments 1–N: where an increment's time goes."""
    out: list[str] = []
    for name, rec in results["systems"].items():
        incs = [r for r in rec["increments"] if r["increment"] > 0 and r.get("timings")]
        if not incs:
            continue
        keys: list[str] = []
        for r in incs:
            keys += [k for k in r["timings"] if k not in keys and isinstance(r["timings"][k], float)]
        med = {k: statistics.median(r["timings"].get(k, 0.0) for r in incs) for k in keys}
        lat = statistics.median(r["latency_s"] for r in incs)
        jobs = [r["spark_jobs"] for r in incs if r.get("spark_jobs") is not None]
        title = "streamfold phases (BatchResult.timings)" if name == "streamfold" else \
            f"{name} phases (Spark's durationMs per micro-batch)"
        out += ["", f"## {title}, median over increments 1–{results['sizes']['increments']} (seconds)", "",
                "| phase | median | of the median latency |", "|---|---|---|"]
        for k in sorted(keys, key=lambda k: -med[k]):
            out.append(f"| {k} | {med[k]:.3f} | {100 * med[k] / lat:.0f}% |" if lat else f"| {k} | {med[k]:.3f} | |")
        if name == "streamfold":
            engine = statistics.median(r.get("engine_s", 0.0) for r in incs)
            out.append(f"| (the batch as the engine times it) | {engine:.3f} | {100 * engine / lat:.0f}% |")
            out.append(f"| (latency) | {lat:.3f} | 100% |")
        if jobs:
            out += ["", f"Spark jobs per increment (median): {statistics.median(jobs):g}."]
    return out


def _memory(results: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for name, rec in results["systems"].items():
        s = rec.get("memory_summary")
        if not s:
            continue
        out += ["", f"## Memory: {name} (peak RSS from /proc/<pid>/status VmHWM; JVM = Spark driver + executor)", "",
                f"| process | peak RSS at increment {s['reference_increment']} | peak RSS at increment "
                f"{s['last_increment']} | growth | RSS now at {s['reference_increment']} → {s['last_increment']} |",
                "|---|---|---|---|---|"]
        for who in ("python", "jvm"):
            p = s[who]
            out.append(f"| {who} | {p['peak_rss_at_reference_mb']} MB | {p['peak_rss_at_end_mb']} MB | "
                       f"{p['growth_pct']:+.1f}% | {p['rss_at_reference_mb']} → {p['rss_at_end_mb']} MB |")
        j = s["jvm"]
        series = j.get("heap_used_after_gc_mb") or []
        if series:
            points = ", ".join(f"{mb} MB at {inc}" for inc, mb in series)
            trend = j.get("heap_trend_kb_per_increment")
            out.append(f"\nJVM heap in use after a full GC (the live data): {points}"
                       + (f"; trend {trend:+.1f} KB per increment (least squares)." if trend is not None else "."))
        if j.get("peak_heap_mb") is not None:
            out.append(f"\nPeak JVM heap: {j['peak_heap_mb']} MB (its pools' peaks since the JVM started, summed).")
        st = s.get("states") or {}
        if st.get("state_bytes_at_end") is not None and st.get("data_bytes_at_end"):
            at_reference = (f"{_mb(st['state_bytes_at_reference'])} against {_mb(st['data_bytes_at_reference'])} at "
                            f"increment {s['reference_increment']}, " if s["reference_increment"] != s["last_increment"] else "")
            out.append(f"\nStates in Spark's block stores against the streams' files so far: {at_reference}"
                       f"{_mb(st['state_bytes_at_end'])} against {_mb(st['data_bytes_at_end'])} at increment "
                       f"{s['last_increment']} ({st['ratio_at_end']:g}× the data).")
        if not series and j.get("heap_used_after_gc_at_reference_mb") is not None:  # reports written before the series
            out.append(f"\nJVM heap in use after a full GC: {j['heap_used_after_gc_at_reference_mb']} MB at increment "
                       f"{s['reference_increment']}, {j['heap_used_after_gc_at_end_mb']} MB at increment "
                       f"{s['last_increment']}.")
    return out


def _mb(n: int | None) -> str:
    return "?" if n is None else f"{n / 2**20:.1f} MB"


def rerender(directory: str) -> None:
    """Rewrite ``results.md`` and the plots of ``directory`` from its ``results.json`` (after a report change)."""
    with open(os.path.join(directory, "results.json"), encoding="utf-8") as fh:
        write_outputs(json.load(fh), directory)


if __name__ == "__main__":
    import sys

    for d in sys.argv[1:]:
        rerender(d)
