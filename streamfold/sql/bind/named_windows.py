"""Named windows: ``… OVER w … WINDOW w AS (PARTITION BY k ORDER BY v)`` is the window written out.

A block's ``WINDOW`` clause names window specifications; ``OVER w`` (or ``OVER (w)``) reads one
whole, and ``WINDOW w2 AS w`` names one again — Spark's forms. The binder writes each reference
out in place and drops the clause, so a named window is maintained wherever the same window
written out is. A name no window has is ``UNKNOWN_WINDOW``; a reference with more after the name
(``OVER (w ORDER BY v)``, which Spark's parser refuses) is ``INVALID_WINDOW``.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError
from .context import BindContext

_PARTS = ("partition_by", "order", "spec")


def inline(ctx: BindContext, node: exp.Select) -> None:
    """Write the block's named windows out where they are read, and drop its ``WINDOW`` clause."""
    named = node.args.get("windows")
    if not named:
        return
    specs: dict[str, dict[str, object]] = {}
    for window in named:  # in order: a named window may build on the ones before it
        specs[window.name.lower()] = _resolved(ctx, window, specs)
    for window in [w for w in node.find_all(exp.Window) if w.find_ancestor(exp.Select) is node and w.args.get("alias")]:
        for part, value in _resolved(ctx, window, specs).items():
            window.set(part, value.copy() if isinstance(value, exp.Expression) else
                       [v.copy() for v in value] if isinstance(value, list) else value)
        window.set("alias", None)
    node.set("windows", None)


def _resolved(ctx: BindContext, window: exp.Window, specs: dict[str, dict[str, object]]) -> dict[str, object]:
    """The window's own parts over those of the window it names, if any."""
    base_name = window.args.get("alias")
    parts = {p: window.args.get(p) for p in _PARTS if window.args.get(p)}
    if base_name is None:
        return parts
    base = specs.get(base_name.name.lower())
    if base is None:
        raise ctx.err(BindError, "UNKNOWN_WINDOW", f"no window is named `{base_name.name}`", window,
                      f"name it in the WINDOW clause: WINDOW {base_name.name} AS (PARTITION BY … ORDER BY …)"
                      + (f"; the block names {', '.join(sorted(specs))}" if specs else ""), window=base_name.name)
    if parts:
        raise ctx.err(BindError, "INVALID_WINDOW", f"Spark reads a named window whole (`OVER {base_name.name}`), "
                      "not with more after its name", window,
                      "write the window out in OVER (…), or name the whole of it in the WINDOW clause",
                      window=base_name.name)
    return dict(base)
