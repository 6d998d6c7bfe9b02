"""Per query of a TPC bench (``bench tpch``, ``bench tpcds``): its batches against Spark
recomputing the query in the same run — the medians, the ratios, its row of the results table.

A query's ``batches`` are dicts with ``batch``, ``streamfold_s`` (files in → answer committed),
``after_commit_s``, ``recompute_s``, ``strategy`` and ``check`` ("ok" or the difference)."""

from __future__ import annotations

import statistics
from typing import Any

HEADER = ["| query | status | batch 0: streamfold (+ after its commit) / recompute | increments, median: streamfold "
          "/ recompute | median ratio | worst ratio | strategies | DuckDB check |",
          "|---|---|---|---|---|---|---|---|"]


def median(values: list[float]) -> float | None:
    return round(statistics.median(values), 4) if values else None


def summarize(batches: list[dict[str, Any]]) -> dict[str, Any]:
    """The increments' (every batch after the history) medians and ratios to recompute."""
    later = [b for b in batches[1:] if b["recompute_s"]]
    ratios = [b["streamfold_s"] / b["recompute_s"] for b in later]
    # a recompute after deletions nets the rows by _weight first, which costs more than the
    # query over inserts alone: the insert increments' ratio is the one without that help
    inserts = [b["streamfold_s"] / b["recompute_s"] for b in later if not b.get("deletes")]
    return {"median_increment_s": median([b["streamfold_s"] for b in later]),
            "median_recompute_s": median([b["recompute_s"] for b in later]),
            "median_ratio": median(ratios), "max_ratio": max(ratios) if ratios else None,
            "median_insert_ratio": median(inserts)}


def _s(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f} s"


def _r(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def row(name: str, q: dict[str, Any]) -> str:
    """The query's row under :data:`HEADER`."""
    bs = q["batches"]
    after = bs[0].get("after_commit_s") if bs else None
    first = (f"{_s(bs[0]['streamfold_s'])}{f' (+{after:.2f} s)' if after else ''} / {_s(bs[0]['recompute_s'])}"
             if bs else "—")
    inc = f"{_s(q['median_increment_s'])} / {_s(q['median_recompute_s'])}"
    strategies: dict[str, int] = {}
    for b in bs:
        strategies[b["strategy"]] = strategies.get(b["strategy"], 0) + 1
    checks = "all ok" if bs and all(b["check"] == "ok" for b in bs) else (
        "—" if not bs else f"differs from batch {next(b['batch'] for b in bs if b['check'] != 'ok')}")
    if "sinks_differ" in q:
        checks += "; sinks " + (f"differ at batches {q['sinks_differ']}" if q["sinks_differ"] else "all ok")
        checks += f" (delivery, median {_s(q['median_delivery_s'])})"
    status = q["status"] if q["status"] != "refused" else f"refused ({q['code']})"
    return (f"| {name} | {status} | {first} | {inc} | {_r(q['median_ratio'])} | {_r(q['max_ratio'])} "
            f"| {', '.join(f'{k} {v}' for k, v in strategies.items()) or '—'} | {checks} |")


def summary(queries: list[dict[str, Any]]) -> str:
    """How many queries meet the targets: median increment ≤ ⅓ and worst ≤ 1.1× of recompute."""
    ok = [q for q in queries if q["median_ratio"] is not None]
    inserts = [q["median_insert_ratio"] for q in ok if q.get("median_insert_ratio") is not None]
    return (f"Ratio = streamfold's time / recompute's time in the same run, per increment. "
            f"Queries with median ≤ 1/3: {sum(q['median_ratio'] <= 1 / 3 for q in ok)} of {len(ok)}; "
            f"worst increment ≤ 1.1 × recompute: {sum((q['max_ratio'] or 0) <= 1.1 for q in ok)} of {len(ok)}"
            + (f"; over the insert increments alone (the recompute after deletions nets the rows by `_weight`, "
               f"which makes it slower), median ≤ 1/3: {sum(r <= 1 / 3 for r in inserts)} of {len(inserts)}"
               if inserts and len(inserts) == len(ok) else "") + ".")


FOOTNOTE = ("A batch's time is until its commit (its answer is there); batch 0's work after it — preparing "
            "batch 1's plans and, under `--strategy auto`, measuring an empty increment and a recompute — "
            "is in parentheses (the next batch starts after it).")


def plot(queries: dict[str, dict[str, Any]], title: str, path: str) -> None:
    """Per query, the median ratio of an increment to recompute (log scale), with 1 and 1/3 marked."""
    from .plot import _pyplot

    plt = _pyplot()
    items = [(n.upper(), q["median_ratio"], q["max_ratio"]) for n, q in queries.items()
             if q["median_ratio"] is not None]
    fig, ax = plt.subplots(figsize=(max(5.0, 0.45 * len(items) + 2), 4.0), dpi=110)
    if items:
        xs = range(len(items))
        ax.bar(xs, [m for _, m, _ in items], color="steelblue", label="median increment / recompute")
        ax.scatter(xs, [w for _, _, w in items], color="firebrick", marker="_", s=200, label="worst increment")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([n for n, _, _ in items], rotation=60, fontsize=8)
        ax.set_yscale("log")
        top = max(max(m, w or m) for _, m, w in items)
        ax.set_ylim(min(0.1, min(m for _, m, _ in items) / 2), max(2.0, top * 2))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(1 / 3, color="gray", linewidth=0.8, linestyle="--")
    ax.set_ylabel("streamfold / recompute (same run)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
