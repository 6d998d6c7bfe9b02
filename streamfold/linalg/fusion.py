"""Products that read the same view, computed in one pass over it.

A trigger program reads each large view through products with thin matrices: ``x·U`` and
``V·x`` for a squared view, ``x₁·U₀``, ``V₀·x₁`` and ``x₁·D`` for least squares' inverse. Each
such product streams the whole view from memory (or, on Spark, through every block), so the
view's products are gathered and computed together: ``x·[T₁, T₂]`` and ``[S₁; S₂]·x`` in a
single pass (a symmetric view's left products become right ones: ``S·x = (x·Sᵀ)ᵀ``). The
cost model (operations) is unchanged; what changes is how often a view is read.

A product can join the group of its view only if its thin operand does not depend on another
product of the group; the lets its operand needs are computed early (lets are pure, so order
among independent ones is free). This is a plan per trigger program, made once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .ir import Expr, Mul, Transpose, Var
from .meta import SELECTOR, SELECTOR_T, Inferrer, Meta
from .numpy_backend import Selector
from .trigger import Trigger


LARGE = 512  # views with at least this many rows and columns have their products fused
THIN = 512  # a product joins a group only if its other operand is at most this thin


@dataclass(frozen=True)
class Member:
    """A product with the view: ``x·T`` (right) or ``T·x`` (left). ``flip``: computed transposed,
    ``(x·Tᵀ)ᵀ`` or ``(Tᵀ·x)ᵀ`` — for ``xᵀ`` in the product, or a symmetric view's left product."""

    node: Mul  # the product as it appears in a let
    thin: Expr  # the operand that is not the view
    side: str
    flip: bool


@dataclass
class Group:
    view: str
    members: list[Member] = field(default_factory=list)
    needs: list[int] = field(default_factory=list)  # lets to compute first (their indices, in order)
    first_let: int = 0  # the first let that reads one of the products


def _view(e: Expr, views: set[str]) -> tuple[str, bool] | None:
    if isinstance(e, Var) and e.name in views:
        return e.name, False
    if isinstance(e, Transpose) and isinstance(e.arg, Var) and e.arg.name in views:
        return e.arg.name, True
    return None


def _member(node: Mul, views: set[str], symmetric: set[str]) -> tuple[str, Member] | None:
    left, right = _view(node.left, views), _view(node.right, views)
    if left is not None and right is None:
        name, transposed = left
        (side, flip), thin = (("left", True) if transposed else ("right", False)), node.right
    elif right is not None and left is None:
        name, transposed = right
        (side, flip), thin = (("right", True) if transposed else ("left", False)), node.left
    else:
        return None
    if name in symmetric and side == "left":  # S·x = (x·Sᵀ)ᵀ, and xᵀ·T = x·T
        side, flip = "right", not flip
    return name, Member(node, thin, side, flip)


def plan(trigger: Trigger, anf_metas: dict[str, Meta], large: int = LARGE, thin: int = THIN) -> list[Group]:
    """The groups of products worth fusing (two or more distinct products with one view)."""
    views = {n for n, m in anf_metas.items() if min(m.rows, m.cols) >= large}
    symmetric = {n for n in views if anf_metas[n].symmetric}
    infer = Inferrer(anf_metas)
    for c in trigger.changes:
        mu, mv = c.factor_metas(anf_metas[c.input])
        infer.bind(f"U_{c.input}", mu)
        infer.bind(f"V_{c.input}", mv)
    for name, m in trigger.metas.items():
        infer.bind(name, m)
    lets = trigger.lets
    index = {s.name: i for i, s in enumerate(lets)}
    reads: list[set[int]] = []  # per let: the lets it reads, transitively
    for s in lets:
        direct = {index[n.name] for n in s.expr.walk() if isinstance(n, Var) and n.name in index}
        closure = set(direct)
        for d in direct:
            closure |= reads[d]
        reads.append(closure)
    found: dict[str, dict[Mul, tuple[int, Member]]] = {}
    for i, s in enumerate(lets):
        for node in s.expr.walk():
            if isinstance(node, Mul) and (got := _member(node, views, symmetric)) is not None:
                meta = infer(got[1].thin)
                if min(meta.rows, meta.cols) <= thin and meta.structure not in (SELECTOR, SELECTOR_T):
                    found.setdefault(got[0], {}).setdefault(node, (i, got[1]))
    groups = []
    for view, members in found.items():
        if len(members) < 2:
            continue
        containing = {i for i, _ in members.values()}
        group = Group(view, first_let=min(containing))
        needed: set[int] = set()
        for _, member in sorted(members.values(), key=lambda im: im[0]):
            deps = {index[n.name] for n in member.thin.walk() if isinstance(n, Var) and n.name in index}
            closure = set(deps)
            for d in deps:
                closure |= reads[d]
            if closure & containing:  # its operand needs a product of the group
                continue
            group.members.append(member)
            needed |= closure
        if len(group.members) >= 2:
            group.needs = sorted(needed)
            groups.append(group)
    return groups


def run_group(group: Group, env: dict[str, Any], memo: dict[Expr, Any], backend: Any,
              evaluate: Callable[..., Any], lets: tuple[Any, ...]) -> None:
    """Compute a group's products in one pass over its view; their values go into ``memo``."""
    for i in group.needs:
        let = lets[i]
        if let.name not in env:
            env[let.name] = backend.keep(evaluate(let.expr, env, backend, memo))
    members = [m for m in group.members if m.node not in memo]
    thins = [evaluate(m.thin, env, backend, memo) for m in members]
    if len(members) < 2 or any(isinstance(t, Selector) for t in thins):
        return  # a selector operand is gathered, not multiplied: nothing to share
    operands = [backend.transpose(t) if m.flip else t for m, t in zip(members, thins)]
    right = [o for m, o in zip(members, operands) if m.side == "right"]
    left = [o for m, o in zip(members, operands) if m.side == "left"]
    r_out, l_out = backend.products(env[group.view], right, left)
    r_it, l_it = iter(r_out), iter(l_out)
    for m in members:
        value = next(r_it) if m.side == "right" else next(l_it)
        memo[m.node] = backend.transpose(value) if m.flip else value
