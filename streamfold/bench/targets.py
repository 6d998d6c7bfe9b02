"""The issue's targets, judged from the measured figures (never in timed tests: here only).

Each target says what was measured and whether it is met; a target that these sizes cannot
judge (a quick run, another increment size, recompute not in the run) says so instead of
passing or failing.
"""

from __future__ import annotations

import statistics
from typing import Any

SF = "streamfold"


# Issue 18's table: (median per 40K increment in seconds, share of recompute's median in the same run).
TARGETS: dict[str, tuple[float, float]] = {
    "groupby": (0.15, 0.5),
    "join-groupby": (0.6, 0.5),
    "groupby-10m": (0.2, 0.25),
    "groupby-100m": (0.3, 0.05),
}


# Issue 58's back-to-back table, for `streamfold run` in its own process (the streamfold-cli
# system): each increment's files renamed in as soon as the previous commit is visible; the median
# of increments 6–25 (its JVM warms up on 1–5), recompute's median over the same increments.
BACK_TO_BACK: dict[str, tuple[float, float]] = {
    "groupby": (0.15, 0.35),
    "join-groupby": (0.5, 0.3),
    "groupby-10m": (0.12, 0.2),
}
CLI = "streamfold-cli"
BACK_TO_BACK_INCREMENTS = 25


def _median(results: dict[str, Any], system: str) -> float | None:
    rec = results["systems"].get(system)
    return rec.get("median_s") if rec and rec.get("status") == "ok" else None


def _target(name: str, measured: str, met: bool | None, note: str = "") -> dict[str, Any]:
    return {"target": name, "measured": measured, "met": met, "note": note}


def evaluate(results: dict[str, Any], opts: Any) -> list[dict[str, Any]]:
    """The targets this run can judge, each with the measured figure."""
    w = results["workload"]
    inc = results["sizes"]["increment_rows_per_source"]
    sf = _median(results, SF)
    out: list[dict[str, Any]] = []
    full_size = inc == 40_000 and not results["sizes"]["quick"]
    rc = _median(results, "recompute")
    if w in TARGETS and sf is not None and not opts.memory:
        limit, ratio = TARGETS[w]
        note = "" if full_size else f"increments of {inc:,} rows, not 40,000"
        out.append(_target(f"{w}: streamfold median ≤ {limit} s per 40K increment", f"{sf:.3f} s",
                           sf <= limit if full_size else None, note))
        if rc is not None:
            out.append(_target(f"{w}: streamfold ≤ {ratio}× recompute in the same run",
                               f"{sf:.3f} s vs {rc:.3f} s ({sf / rc:.2f}×)", sf <= ratio * rc if full_size else None,
                               note))
        else:
            out.append(_target(f"{w}: streamfold ≤ {ratio}× recompute in the same run", "—", None,
                               "run recompute in the same run (--systems streamfold,recompute)"))
    if w in BACK_TO_BACK and _median(results, CLI) is not None and not opts.memory:
        out.extend(_back_to_back(results, w, full_size))
    if opts.memory:
        for name, rec in results["systems"].items():
            summary = rec.get("memory_summary")
            if not summary:
                continue
            for who in ("python", "jvm"):
                m = summary[who]
                if m["growth_pct"] is None:
                    continue
                judged = summary["last_increment"] >= 200
                out.append(_target(
                    f"{name}: {who} peak RSS growth under 10% from increment {summary['reference_increment']} "
                    f"to {summary['last_increment']}",
                    f"{m['peak_rss_at_reference_mb']:.0f} MB → {m['peak_rss_at_end_mb']:.0f} MB "
                    f"({m['growth_pct']:+.1f}%)",
                    m["growth_pct"] < 10 if judged else None,
                    "" if judged else "fewer than 200 increments"))
    return out


def _back_to_back(results: dict[str, Any], w: str, full_size: bool) -> list[dict[str, Any]]:
    """Issue 58's targets for ``streamfold run`` fed back to back, judged only at its protocol's
    size: 40K-row increments, at least 25 of them (``--increments 25``)."""
    limit, ratio = BACK_TO_BACK[w]
    cli = results["systems"][CLI]
    last = results["sizes"]["increments"]
    # the increments its median is of (bench/runner.py: at least the last one)
    warm = min(int(cli.get("describe", {}).get("warm_increments") or 0), last - 1)
    judged = full_size and last >= BACK_TO_BACK_INCREMENTS
    note = "" if judged else f"judged over {BACK_TO_BACK_INCREMENTS}+ increments of 40,000 rows (--increments 25)"
    span = f"increments {warm + 1}–{last}"
    out = [_target(f"{w}: `streamfold run` back to back, median ≤ {limit} s ({span})", f"{cli['median_s']:.3f} s",
                   cli["median_s"] <= limit if judged else None, note)]
    rec = results["systems"].get("recompute")
    if rec is None or rec.get("status") != "ok":
        out.append(_target(f"{w}: `streamfold run` back to back ≤ {ratio}× recompute", "—", None,
                           "run recompute in the same run (--systems streamfold-cli,recompute)"))
        return out
    same = [r["latency_s"] for r in rec["increments"] if warm < r["increment"] <= last]
    rc = statistics.median(same)
    share = cli["median_s"] / rc
    out.append(_target(f"{w}: `streamfold run` back to back ≤ {ratio}× recompute ({span} of both)",
                       f"{cli['median_s']:.3f} s vs {rc:.3f} s ({share:.2f}×)", share <= ratio if judged else None,
                       note))
    return out
