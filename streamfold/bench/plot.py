"""The plots: latency per increment, one line per system (as the seed's Fig. 3–4), and memory."""

from __future__ import annotations

from typing import Any


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    return plt


def plot_latency(results: dict[str, Any], path: str) -> None:
    """x = increment number (1…N; the history load is in the table, not here), y = seconds."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    n = results["sizes"]["increments"]
    notes = []
    for name, rec in results["systems"].items():
        points = [(r["increment"], r["latency_s"]) for r in rec["increments"] if r["increment"] > 0]
        if points:
            xs, ys = zip(*points)
            median = "" if rec.get("median_s") is None else f" (median {rec['median_s']:.2f} s)"
            ax.plot(xs, ys, marker="o" if n <= 30 else None, markersize=4, linewidth=1.4, label=name + median)
        if rec["status"] == "stopped":
            notes.append(f"{name}: stopped at increment {rec['stopped_at_increment']} (> {rec['time_limit_s']:g} s)")
        elif not points:
            notes.append(f"{name}: {'rejected by Spark' if rec['status'] == 'rejected' else rec['status']}")
    sizes = results["sizes"]
    inc = ", ".join(f"{v[1]:,}" for v in sizes["sources"].values() if len(v) > 1)
    hist = " + ".join(f"{v[0]:,}" for v in sizes["sources"].values())
    load = results.get("load_average", {})
    busy = "" if load.get("quiet", True) else \
        f"\nmeasured while the machine was busy (1-minute load {(load.get('at_start') or [0])[0]:.1f})"
    ax.set_title(results["workload"] + busy, fontsize=11)
    ax.set_xlabel(f"increment number (history {hist} rows; increments of {inc} rows)")
    ax.set_ylabel("seconds (files appear → answer committed)")
    ax.set_ylim(bottom=0)
    if n <= 30:
        ax.set_xticks(range(1, n + 1))
    ax.grid(True, alpha=0.3)
    if ax.get_lines():
        ax.legend(loc="best", fontsize=8)
    if notes:
        ax.text(0.01, 0.02, "; ".join(notes), transform=ax.transAxes, fontsize=8, color="firebrick")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_memory(results: dict[str, Any], path: str) -> None:
    """RSS of the Python driver and of the JVM after each increment, and the JVM's live heap
    (after a full GC, where measured), per system."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for name, rec in results["systems"].items():
        for key, style, label in (("jvm_rss_mb", "-", "jvm RSS"), ("python_rss_mb", "--", "python RSS"),
                                  ("jvm_heap_used_after_gc_mb", "o:", "jvm live heap (after full GC)")):
            pts = [(s["increment"], s[key]) for s in rec.get("memory", []) if s.get(key)]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, style, linewidth=1.2, markersize=3, label=f"{name}: {label}")
    ax.set_title(f"{results['workload']}: memory")
    ax.set_xlabel("increment number")
    ax.set_ylabel("resident memory (MB)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
