"""The issue's targets, judged from the measured figures (never in timed tests: here only).

Each target says what was measured and whether it is met; a target that these sizes cannot
judge (a quick run, another increment size, recompute not in the run) says so instead of
passing or failing.
"""

from __future__ import annotations

from typing import Any

SF = "streamfold"


# Issue 18's table: (median per 40K increment in seconds, share of recompute's median in the same run).
TARGETS: dict[str, tuple[float, float]] = {
    "groupby": (0.15, 0.5),
    "join-groupby": (0.6, 0.5),
    "groupby-10m": (0.2, 0.25),
    "groupby-100m": (0.3, 0.05),
}


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
