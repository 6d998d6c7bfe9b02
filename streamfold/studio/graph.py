"""The incremental plan as a graph to draw: sources → steps of h → states → the answer a.

Built from ``explain``'s JSON (its ``reads``), so it shows exactly the plan ``explain`` prints::

    source:S ──▶ step:agg ──▶ state:agg ──▶ answer
                    ▲               │
                    └──── old ──────┘   (a step reading a state as it was before the batch)

Nodes are placed in layers, left to right: a source in layer 0, a step one layer right of
everything it reads *this batch* (a source's new rows, a state's delta, a state after its
merge), a state one right of the step that merges into it, the answer one right of the states
it reads. Reads of a state's ``old`` version are drawn but do not place the step (they point
back, and would make the layering circular: a state's own step reads its old rows).
"""

from __future__ import annotations

from typing import Any


def plan_graph(plan: dict[str, Any]) -> dict[str, Any]:
    """``{"nodes": [...], "edges": [...]}`` for an ``explain`` dict; each node has ``layer`` and
    ``row`` (its position), ``kind`` (source, step, init, state, answer) and labels."""
    nodes: dict[str, dict[str, Any]] = {}
    edges: list[dict[str, str]] = []
    back: list[dict[str, str]] = []  # reads of old versions, wired once every node exists

    def add(node_id: str, kind: str, label: str, detail: str, layer: int) -> None:
        nodes[node_id] = {"id": node_id, "kind": kind, "label": label, "detail": detail, "layer": layer}

    for s in plan["sources"]:
        add(f"source:{s['name'].lower()}", "source", s["name"],
            "table" if s["kind"] == "table" else ("stream, deletions" if s["deletions"] else "stream"), 0)
    states = {st["name"]: st for st in plan["states"]}
    temps = {d["state"] for d in plan["delta"] if d["temp"]}

    def step(kind: str, d: dict[str, Any]) -> None:
        name = d["state"]
        step_id = f"{kind}:{name}"
        layer = 1
        wired: list[tuple[str, str]] = []
        for src in d["reads"]["sources"]:
            wired.append((f"source:{src.lower()}", "reads"))
        for read in d["reads"]["states"]:
            other, version = read["state"], read["version"]
            if version == "delta" or other in temps:
                wired.append((f"step:{other}", "delta"))
            else:
                wired.append((f"state:{other}", version))
        for origin, how in wired:
            if how == "old":
                back.append({"from": origin, "to": step_id, "kind": "old"})
            elif origin in nodes:
                layer = max(layer, nodes[origin]["layer"] + 1)
                edges.append({"from": origin, "to": step_id, "kind": how})
        add(step_id, kind, ("init " if kind == "init" else "Δ") + name, _step_detail(d), layer)
        if name in states:
            st = states[name]
            key = ", ".join(k["name"] for k in st["key"]) or "one row"
            add(f"state:{name}", "state", name, f"{st['role']} · key ({key})", layer + 1)
            edges.append({"from": step_id, "to": f"state:{name}", "kind": "merge"})

    for d in plan.get("init", []):
        step("init", {**d, "temp": False})
    for d in plan["delta"]:
        step("step", d)
    reads = plan["answer"]["reads"]["states"]
    layer = 1 + max((nodes[f"state:{r['state']}"]["layer"] for r in reads if f"state:{r['state']}" in nodes),
                    default=0)
    columns = ", ".join(o["name"] for o in plan["answer"]["output"])
    add("answer", "answer", "answer", columns, layer)
    for r in reads:
        origin = f"state:{r['state']}"
        if origin in nodes and {"from": origin, "to": "answer", "kind": r["version"]} not in edges:
            edges.append({"from": origin, "to": "answer", "kind": r["version"]})
    edges += [e for e in back if e["from"] in nodes and e not in edges]
    rows: dict[int, int] = {}
    for node in nodes.values():
        node["row"] = rows.get(node["layer"], 0)
        rows[node["layer"]] = node["row"] + 1
    return {"nodes": list(nodes.values()), "edges": edges}


def _step_detail(d: dict[str, Any]) -> str:
    for loop in ("fixpoint", "exact", "diffusion"):
        if d.get(loop):
            return f"{loop} loop over {d[loop]['loop']}"
    return "intermediate" if d.get("temp") else "h: state delta"
