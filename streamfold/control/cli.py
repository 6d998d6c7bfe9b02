"""``streamfold control OUTPUT ACTION``: the options, and the answers shown as text (or ``--json``).

``streamfold/cli.py`` adds the subparser (:func:`add_parser`) and calls :func:`main`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ..runtime.checkpoint import batch_name


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("control", help="pause, resume, inspect, reconfigure a running query",
                       description="Talk to the query running with --output OUTPUT (its endpoint and token "
                                   "are in OUTPUT/_control.json). See docs/control.md.")
    p.add_argument("output", metavar="OUTPUT", help="the running query's --output directory")
    p.add_argument("--json", action="store_true", help="print the endpoint's JSON answer")
    common = argparse.ArgumentParser(add_help=False)  # --json after the action too
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, **kw: Any) -> argparse.ArgumentParser:
        return actions.add_parser(name, parents=[common], **kw)

    action("status", help="state, batch and step, pause, breakpoint hit, query version")
    pause = action("pause", help="pause at the next step boundary (waits until paused)")
    pause.add_argument("--no-wait", action="store_true", help="return at once")
    pause.add_argument("--timeout", type=float, default=30.0, help="wait at most this long (default 30 s)")
    action("resume", help="go on (at a breakpoint: commit the batch as it is)")
    action("skip", help="at a source breakpoint: quarantine the files and redo the batch without them")
    bp = action("breakpoint", help="add, list or remove breakpoints")
    bps = bp.add_subparsers(dest="breakpoint_action", metavar="add|list|remove", required=True)
    add = bps.add_parser("add", parents=[common], help="stop before a batch's commit when a condition holds")
    on = add.add_mutually_exclusive_group(required=True)
    on.add_argument("--source", metavar="NAME", help="on the batch's new rows of stream NAME (with _weight)")
    on.add_argument("--changes", action="store_true", help="on the answer's changes (with _weight)")
    on.add_argument("--state", metavar="NAME", help="on the rows of state NAME (explain's name) the batch touched")
    on.add_argument("--after", type=int, metavar="N", help="after N batches (once)")
    add.add_argument("condition", nargs="?", metavar="CONDITION", help="a Spark SQL condition, e.g. 'amount < 0'")
    bps.add_parser("list", parents=[common], help="the breakpoints")
    rm = bps.add_parser("remove", parents=[common], help="remove a breakpoint")
    rm.add_argument("id", metavar="ID")
    ins = action("inspect", help="read-only SQL over snapshot, changes, the states, delta_<source>")
    ins.add_argument("sql", metavar="SQL")
    ins.add_argument("--limit", type=int, default=100, help="rows to show (default 100)")
    rec = action("reconfigure", help="change the query at the next batch boundary")
    rec.add_argument("query", metavar="NEW_QUERY", help="path to a .sql file, or the SQL text")
    rec.add_argument("--from-now-on", action="store_true",
                     help="the new logic for rows after the boundary (default: restate, over all the data)")
    rec.add_argument("--wait", action="store_true", help="return once its first batch is committed")
    rec.add_argument("--timeout", type=float, default=600.0, help="with --wait, at most this long (default 600 s)")
    action("history", help="the control log: every action with the batch it applied to")
    ev = action("events", help="events after a sequence number (long poll)")
    ev.add_argument("--after", type=int, default=0)
    ev.add_argument("--timeout", type=float, default=0.0)
    return p


def main(args: argparse.Namespace, query_text: Any) -> int:
    from .client import ControlClient

    client = ControlClient(args.output)
    action = args.action
    if action == "status":
        result = client.status()
    elif action == "pause":
        result = client.pause(wait=not args.no_wait, timeout=args.timeout)
    elif action == "resume":
        result = client.resume()
    elif action == "skip":
        result = client.skip()
    elif action == "breakpoint":
        result = _breakpoint(client, args)
    elif action == "inspect":
        result = client.inspect(args.sql, args.limit)
    elif action == "reconfigure":
        result = client.reconfigure(query_text(args.query), "from now on" if args.from_now_on else "restate",
                                    wait=args.wait, timeout=args.timeout)
    elif action == "history":
        result = client.history()
    else:
        result = client.events(args.after, args.timeout)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        sys.stdout.write(show(action, result, args))
    return 0


def _breakpoint(client: Any, args: argparse.Namespace) -> Any:
    if args.breakpoint_action == "list":
        return client.breakpoints()
    if args.breakpoint_action == "remove":
        return client.remove_breakpoint(args.id)
    if args.after is not None:
        return client.add_breakpoint("after", after=args.after)
    kind, target = ("changes", None) if args.changes else ("source", args.source) if args.source else ("state", args.state)
    return client.add_breakpoint(kind, target, args.condition)


# -- text ----------------------------------------------------------------------------------------
def show(action: str, result: Any, args: argparse.Namespace) -> str:
    if action in ("status", "pause", "resume", "skip"):
        return show_status(result)
    if action == "breakpoint":
        items = result if isinstance(result, list) else [result]
        verb = {"add": "added ", "remove": "removed ", "list": ""}[args.breakpoint_action]
        return "".join(f"{verb}{b['id']}  {b['description']}\n" for b in items) or "no breakpoints\n"
    if action == "inspect":
        note = "" if result["committed"] else " (not committed yet)"
        head = f"batch {batch_name(result['batch'])}{note}\n" if result["batch"] >= 0 else ""
        more = "… more rows (--limit)\n" if result["truncated"] else ""
        return head + table([c["name"] for c in result["columns"]], result["rows"]) + more
    if action == "reconfigure":
        out = (f"version {result['version']} ({result['semantics']}) applies {result['applies']}: "
               f"keeps {', '.join(result['kept_states']) or 'no state'}"
               + (f", builds {', '.join(result['rebuilt_states'])} from the history" if result["rebuilt_states"] else "")
               + "\n")
        done = result.get("result")
        if done:
            out += (f"applied at batch {batch_name(done['batch'])}\n" if done["type"] == "reconfigured"
                    else f"{done['type']}: {done.get('error', '')}\n")
        return out
    if action == "history":
        return "".join(_history_line(r) + "\n" for r in result)
    return "".join(json.dumps(e, default=str) + "\n" for e in result)


def show_status(s: dict[str, Any]) -> str:
    lines = []
    where = f"batch {batch_name(s['batch'])}"
    pause = s.get("pause")
    if s["state"] in ("paused", "pausing") and pause:
        at = f"batch {batch_name(pause['batch'])}, {pause['step']}"
        extra = []
        if pause.get("latency_s") is not None:
            extra.append(f"paused {pause['latency_s']:.3f} s after the request")
        if pause.get("cancelled_steps"):
            extra.append(f"{pause['cancelled_steps']} step(s) cancelled, to run again on resume")
        lines.append(f"{s['state']} at {at} ({pause['reason']}{'; ' + '; '.join(extra) if extra else ''})")
    elif s["state"] == "running":
        lines.append(f"running {where}" + (f", {s['step']}" if s.get("step") else ""))
    else:
        lines.append(f"{s['state']}" + (f", next {where}" if s["state"] == "idle" else ""))
    last = s.get("last_committed")
    lines.append(f"last committed: {'none' if last is None or last < 0 else 'batch ' + batch_name(last)}")
    q = s["query"]
    lines.append(f"query version {q['version']} ({q['semantics']}, since batch {batch_name(q['since_batch'])}): "
                 f"{' '.join(q['sql'].split())}")
    for sink in s.get("sinks") or []:
        held = sink["delivered"]
        lines.append(f"sink {sink['sink']}: " + ("nothing delivered" if held < 0 else f"holds batch {batch_name(held)}")
                     + (" (failing: retried after the next commit)" if sink["failing"] else ""))
    if s.get("reconfiguration"):
        r = s["reconfiguration"]
        lines.append(f"version {r['version']} ({r['semantics']}) applies {r['applies']}")
    hit = s.get("breakpoint")
    if hit:
        b = hit["breakpoint"]
        files = "; ".join(f"{src}: {', '.join(ns)}" for src, ns in hit["files"].items() if ns)
        lines.append(f"stopped by breakpoint {b['id']} ({b['description']}) at batch {batch_name(hit['batch'])}: "
                     f"{hit['row_count']} row(s)" + (f" from {files}" if files else "")
                     + (f"; written to {hit['path']}" if hit.get("path") else ""))
        if hit["rows"]:
            cols = list(hit["rows"][0])
            lines.append(table(cols, [[r.get(c) for c in cols] for r in hit["rows"]]).rstrip("\n"))
    for bp in s.get("breakpoints", []):
        lines.append(f"breakpoint {bp['id']}: {bp['description']}")
    if s.get("error"):
        lines.append(f"error: {s['error']}")
    return "\n".join(lines) + "\n"


def table(columns: list[str], rows: list[list[Any]]) -> str:
    text = [[("NULL" if v is None else str(v)) for v in row] for row in rows]
    widths = [max([len(c)] + [len(r[i]) for r in text]) for i, c in enumerate(columns)]
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip()
    out = [line, "  ".join("-" * w for w in widths)]
    out += ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in text]
    return "\n".join(out) + "\n"


def _history_line(r: dict[str, Any]) -> str:
    skip = {"seq", "time", "action", "batch", "pid"}
    at = f" batch {batch_name(r['batch'])}" if isinstance(r.get("batch"), int) else ""
    rest = ", ".join(f"{k}={' '.join(str(v).split()) if k == 'sql' else v}" for k, v in r.items() if k not in skip)
    return f"{r['seq']:>4}  {r['time']}  {r['action']}{at}" + (f"  {rest}" if rest else "")
