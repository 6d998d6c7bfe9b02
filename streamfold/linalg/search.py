"""Cost-based search over equivalent programs (seed 001 §5.3.3, §5.6.1 "Search Space").

The driver knows no rule: it applies every rule of :mod:`.rules` at every node of an
expression, simplifies each result (:mod:`.simplify`), and explores cheapest-first (a
best-first search where the thesis used breadth-first; both visit the same space, this one
reaches cheap programs sooner). A cache of canonical forms — sums flattened and sorted, so
ADD-COMM and ADD-ASSOC never make a program look new — keeps it from revisiting a program.
The search is confined to one statement at a time, as the thesis does for large programs
(§5.3.5), and stops after ``budget`` expansions.

A program reached through an unstable rule is kept aside: if it is cheaper than the chosen one
the result says so (``explain`` prints it), but it is never chosen.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from itertools import count

from ..errors import LinalgError
from .ir import Add, Expr
from .meta import Inferrer
from .rules import ARITHMETIC_ONLY, RULES, Rule
from .semiring import Semiring
from .simplify import simplify

DEFAULT_BUDGET = 400


@dataclass(frozen=True)
class Found:
    expr: Expr
    cost: int
    rules: tuple[str, ...]  # the rules applied on the way, in order


@dataclass
class SearchResult:
    start: Found
    best: Found
    unstable: Found | None  # a cheaper program found only through an unstable rule
    explored: int = 0  # programs expanded
    applications: int = 0  # rule applications
    cache_hits: int = 0
    by_rule: dict[str, int] = field(default_factory=dict)


def canonical(e: Expr) -> object:
    """A key equal for expressions that differ only in the order and grouping of sums."""
    if isinstance(e, Add):
        terms: list[Expr] = []
        _terms(e, terms)
        return ("+", tuple(sorted((canonical(t) for t in terms), key=repr)))
    kids = e.children()
    if not kids:
        return e
    return (type(e).__name__, *(getattr(e, f) for f in e.__dataclass_fields__ if f not in _CHILD_FIELDS),
            tuple(canonical(k) for k in kids))


_CHILD_FIELDS = {"left", "right", "arg", "value", "body", "init"}


def _terms(e: Expr, out: list[Expr]) -> None:
    if isinstance(e, Add):
        _terms(e.left, out)
        _terms(e.right, out)
    else:
        out.append(e)


def neighbours(e: Expr, infer: Inferrer, rules: tuple[Rule, ...]) -> list[tuple[Expr, Rule]]:
    """Every expression one rule application away from ``e`` (at any node)."""
    out: list[tuple[Expr, Rule]] = []
    for rule in rules:
        for alt in rule.apply(e, infer):
            out.append((alt, rule))
    kids = e.children()
    for i, kid in enumerate(kids):
        for alt, rule in neighbours(kid, infer, rules):
            out.append((e.with_children(kids[:i] + (alt,) + kids[i + 1:]), rule))
    return out


def search(e: Expr, infer: Inferrer, ring: Semiring, budget: int = DEFAULT_BUDGET,
           max_growth: int = 3) -> SearchResult:
    """The cheapest stable expression equal to ``e`` found within ``budget`` expansions."""
    rules = RULES if ring.inverse else tuple(r for r in RULES if r.name not in ARITHMETIC_ONLY)
    start = Found(e, infer.cost(e), ())
    result = SearchResult(start, start, None)
    limit = max_growth * e.size() + 8
    ticket = count()
    heap: list[tuple[int, int, Found, bool]] = [(start.cost, next(ticket), start, True)]
    seen = {canonical(e)}
    while heap and result.explored < budget:
        _, _, cur, stable = heapq.heappop(heap)
        result.explored += 1
        for alt, rule in neighbours(cur.expr, infer, rules):
            result.applications += 1
            result.by_rule[rule.name] = result.by_rule.get(rule.name, 0) + 1
            try:
                alt = simplify(alt, infer, ring)
                key = canonical(alt)
                if key in seen:
                    result.cache_hits += 1
                    continue
                seen.add(key)
                if alt.size() > limit:
                    continue
                found = Found(alt, infer.cost(alt), cur.rules + (rule.name,))
            except LinalgError:  # a rewrite whose dimensions do not fit is no candidate
                continue
            ok = stable and rule.stable
            if ok and found.cost < result.best.cost:
                result.best = found
            if not ok and found.cost < result.best.cost and (
                    result.unstable is None or found.cost < result.unstable.cost):
                result.unstable = found
            heapq.heappush(heap, (found.cost, next(ticket), found, ok))
    if result.unstable is not None and result.unstable.cost >= result.best.cost:
        result.unstable = None
    return result
