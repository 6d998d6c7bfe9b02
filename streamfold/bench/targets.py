"""The issue's targets, judged from the measured figures (never in timed tests: here only).

Each target says what was measured and whether it is met; a target that these sizes cannot
judge (a quick run, another increment size, a missing 1M-history run) says so instead of
passing or failing.
"""

from __future__ import annotations

import json
import os
from typing import Any

SF = "streamfold"


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
    limits = {"groupby": 0.3, "join-groupby": 1.0}
    if w in limits and sf is not None and not opts.memory:
        out.append(_target(f"{w}: streamfold median below {limits[w]} s per 40K increment", f"{sf:.3f} s",
                           sf < limits[w] if full_size else None,
                           "" if full_size else f"increments of {inc:,} rows, not 40,000"))
    if w == "groupby-10m" and sf is not None:
        rc = _median(results, "recompute")
        if rc is not None:
            out.append(_target("groupby-10m: streamfold ≤ 1/10 of recompute", f"{sf:.3f} s vs {rc:.3f} s "
                               f"(ratio 1/{rc / sf:.1f})", sf <= rc / 10 if not results["sizes"]["quick"] else None))
        one = _sibling(opts, "groupby")
        if one is not None and one["sizes"]["increment_rows_per_source"] == inc and _median(one, SF):
            base = _median(one, SF)
            assert base is not None
            out.append(_target("groupby-10m: streamfold ≤ 1.5× its latency at 1M history",
                               f"{sf:.3f} s vs {base:.3f} s at {one['sizes']['history_rows_per_source']:,} rows "
                               f"({sf / base:.2f}×)",
                               sf <= 1.5 * base if not results["sizes"]["quick"] else None))
        else:
            out.append(_target("groupby-10m: streamfold ≤ 1.5× its latency at 1M history", "—", None,
                               "run `streamfold bench groupby` with the same --out and --increment first"))
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


def _sibling(opts: Any, workload: str) -> dict[str, Any] | None:
    """Another workload's results.json in the same --out (e.g. groupby's, for the 10M ratio)."""
    path = os.path.join(opts.out, workload, "results.json")
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None
