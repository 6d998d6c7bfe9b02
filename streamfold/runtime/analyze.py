"""``streamfold explain --analyze OUTPUT``: the plan of a run beside its last batch's statistics.

Reads only files — no Spark: the query and its inputs' schemas from the checkpoint's
``query.json`` (what the run was started with), the plan compiled again from them, and the
statistics of the last committed batch from its commit record (:mod:`.stats`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointError
from ..plan import IncrementalPlan, incrementalize
from ..sql import Catalog, bind
from . import files
from .checkpoint import OutputDir
from .stats import stats_text


@dataclass(frozen=True)
class Analyzed:
    batch: int
    record: dict[str, Any]
    plan: IncrementalPlan

    def text(self, plan_text: str) -> str:
        stats = self.record.get("stats")
        tail = (stats_text(stats, self.batch, self.plan) if stats else
                f"Statistics of batch {self.batch}: none in its commit record (written by an older streamfold)\n")
        version = self.record.get("query_version")
        if version not in (None, 1):
            tail += (f"  note: batch {self.batch} ran query version {version} (reconfigured); the plan above is the "
                     "query the run was started with — `streamfold control OUTPUT history` shows the versions\n")
        tail += partitioning_text(self.record, self.batch)
        tail += order_text(self.record, self.batch)
        tail += positions_text(self.record, self.batch)
        if "batch_time" in self.record:  # a time bound's clock (docs/windows.md)
            late = ", ".join(f"{n} {c}" for n, c in (self.record.get("late_rows") or {}).items()) or "none counted"
            tail += (f"  batch time of batch {self.batch}: {self.record['batch_time']} (the time bounds read it; rows "
                     f"the bound passed left as deletions); late rows dropped: {late}\n")
            if self.record.get("clock_only"):
                tail += f"  batch {self.batch} ran for the clock alone: no file came, live rows passed their bound\n"
        strategy = self.record.get("strategy")
        if strategy:
            reason = (self.record.get("cost") or {}).get("reason")
            tail += f"  strategy of batch {self.batch}: {strategy}" + (f" ({reason})" if reason else "") + "\n"
        return plan_text + "\n" + tail

    def json(self, plan_json: str) -> str:
        return json.dumps({"batch": self.batch, "stats": self.record.get("stats"),
                           "strategy": self.record.get("strategy"), "cost": self.record.get("cost"),
                           "matrix": self.record.get("matrix"), "partitioning": self.record.get("partitioning"),
                           "join_order": self.record.get("join_order"),
                           "positions": self.record.get("positions"),
                           "batch_time": self.record.get("batch_time"), "late_rows": self.record.get("late_rows"),
                           "clock_only": bool(self.record.get("clock_only")),
                           "plan": json.loads(plan_json)}, indent=2)


def order_text(record: dict[str, Any], batch: int) -> str:
    """``explain --analyze``'s lines: each delta term's current join order, when it last changed
    and why (from the last commit record)."""
    out = ""
    for start, e in (record.get("join_order") or {}).items():
        fan = ", ".join(f"{n} {v:.3g}" for n, v in e.get("fanout", {}).items()) or "not measured yet"
        changed = (f"changed after batch {e['changed_after']}: {e['why']}" if e.get("changed_after") is not None
                   else "the compile-time order")
        out += (f"  current join order of Δ{start} after batch {batch}: {' ⋈ '.join(['Δ' + start] + e['next'])} "
                f"({changed}); selectivities {fan}"
                + (f"; {' ⋈ '.join(e['candidate'])} cheaper for {e['streak']} batch(es)" if e.get("candidate") else "")
                + "\n")
    return out


def positions_text(record: dict[str, Any], batch: int) -> str:
    """Where each staged source (a Delta table, a streaming DataFrame) stood after a batch."""
    out = ""
    for name, p in (record.get("positions") or {}).items():
        if p.get("kind") == "delta":
            out += f"  source {name} (Delta table) after batch {batch}: version {p['version']}" \
                   f" (this batch applied versions {p['first_version']}..{p['version']})\n"
        elif p.get("kind") == "spark":
            out += f"  source {name} (streaming DataFrame) after batch {batch}: Spark micro-batch(es) " \
                   f"{', '.join(str(i) for i in p['batch_ids'])}\n"
    return out


def partitioning_text(record: dict[str, Any], batch: int) -> str:
    """How each join of two streams laid over a join matrix, or watched under
    ``matrix_equi="auto"``, was partitioned after a batch, and why (from its commit record)."""
    out = ""
    for left, e in (record.get("partitioning") or {}).items():
        r, s = e["checked_at"]
        why = (f"no key held more than a joiner's fair share at the last check (|R| = {r}, |S| = {s} rows)"
               if (r, s) != (0, 0) else "not checked yet")
        if "checked" in e and e["checked"].get("largest"):
            key, rows = e["checked"]["largest"]
            why += f"; its largest key, {key!r}, {rows} rows, share {e['checked']['share']:g}"
        out += (f"  partitioning of {left} ⋈ {e['right']} after batch {batch}: hash on the key (matrix_equi=auto): "
                f"{why}; checked again once R or S has grown by ε\n")
    for left, e in (record.get("matrix") or {}).items():
        n, m = e["mapping"]
        layout = f"mapping ({n}, {m}), ILF/ILF* {e['ilf_ratio']}"
        if "switched_at" in e:
            how = (f"hybrid since batch {e['switched_at']} (matrix_equi=auto: a key held more than a joiner's fair "
                   f"share), heavy keys {e['heavy']} over the join matrix, {layout}")
        elif "heavy" in e:
            how = f"hybrid, heavy keys {e['heavy']} over the join matrix, {layout}"
        else:
            how = f"join matrix, {layout}"
        out += f"  partitioning of {left} ⋈ {e['right']} after batch {batch}: {how}\n"
    return out


def analyze(output: str, checkpoint: str | None = None) -> Analyzed:
    """The last committed batch of the run writing to ``output``, and its plan."""
    out = OutputDir(output)
    batch = out.last_committed()
    if batch < 0:
        raise CheckpointError(f"{output} has no committed batch", code="NO_COMMITTED_BATCH", params={"path": output},
                              hint="give the --output directory of a run that committed a batch")
    query_file = os.path.join(checkpoint or os.path.join(out.root, "_checkpoint"), "query.json")
    try:
        identity = files.read_json(query_file)["identity"]
    except (OSError, ValueError, KeyError) as e:
        raise CheckpointError(f"cannot read the run's query from {query_file}: {e}", code="CHECKPOINT_DAMAGED",
                              params={"path": query_file}, hint="give --checkpoint if the run used one") from None
    schemas: dict[str, list[tuple[str, str]]] = {}
    tables = []
    for name, source in identity["sources"].items():
        schemas[name] = [(c, t) for c, t in source["columns"]] + ([("_weight", "BIGINT")] if source["deletions"] else [])
        if source["static"]:
            tables.append(name)
    plan = incrementalize(bind(identity["sql"], Catalog.from_mapping(schemas, static=tables)))
    return Analyzed(batch, out.read_commit(batch), plan)
