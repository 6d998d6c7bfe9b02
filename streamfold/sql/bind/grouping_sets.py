"""GROUP BY GROUPING SETS, CUBE and ROLLUP, with ``grouping()`` and ``grouping_id()``.

:func:`expand` turns the GROUP BY clause into its grouping sets, as Spark does: plain items are in
every set, each ROLLUP, CUBE or GROUPING SETS multiplies the sets (``GROUP BY a, ROLLUP(b, c)``
is (a, b, c), (a, b), (a)), ``WITH ROLLUP``/``WITH CUBE`` apply to the whole list.

:func:`relation` builds what the block's Aggregate would be — the keys, then the aggregates —
as a UNION ALL of one branch per set: a key outside the set is NULL, and ``grouping(k)`` is the
set's constant (1 when k is rolled up), so a NULL key and a rolled-up one stay apart. Each branch
groups by its keys and its set's number too, so a set without keys has no row over no input, as
in Spark.

When every aggregate can be rolled up from partials (count, sum, min, max, avg, none DISTINCT),
the sets share one aggregate grouped by all the keys — the finest partials — and each set
aggregates those partials: a batch's change reaches each set through the change of the shared
one, and deletions stay exact (a min or max over the changing partials keeps their multiset,
docs/sql.md). Otherwise (DISTINCT, stddev, variance) each set aggregates the input itself.
"""

from __future__ import annotations

from itertools import combinations

from sqlglot import exp

from ...errors import BindError
from ...ir.averages import decimal_average
from ...ir.expr import Agg, Call, Cast, Column, Expr, Literal
from ...ir.rel import Aggregate, Project, Rel, Union
from ...ir.types import BIGINT, DOUBLE, STRING, sum_type
from .context import BindContext

CONSTRUCTS = (exp.GroupingSets, exp.Cube, exp.Rollup)
ROLLABLE = frozenset({"count", "sum", "min", "max", "avg"})


def expand(group: exp.Group | None) -> list[list[exp.Expr]] | None:
    """The grouping sets of a GROUP BY, each a list of its items; None for a plain GROUP BY."""
    if group is None:
        return None
    plain = [e for e in group.expressions if not isinstance(e, CONSTRUCTS)]
    constructs: list[list[list[exp.Expr]]] = [_sets(e) for e in group.expressions if isinstance(e, CONSTRUCTS)]
    if group.args.get("grouping_sets"):  # GROUP BY a, b GROUPING SETS ((a), (b)): the list only names them
        plain = []
        constructs += [_sets(e) for e in group.args["grouping_sets"]]
    for kind, expand_all in (("rollup", _rollup), ("cube", _cube)):
        if group.args.get(kind) and not any(isinstance(e, CONSTRUCTS) for e in group.expressions):
            constructs.append(expand_all([[e] for e in plain]))
            plain = []
    if not constructs:
        return None
    sets: list[list[exp.Expr]] = [plain]
    for options in constructs:
        sets = [s + o for s in sets for o in options]
    return sets


def _members(e: exp.Expr) -> list[exp.Expr]:
    if isinstance(e, exp.Tuple):
        return list(e.expressions)
    if isinstance(e, exp.Paren):
        return _members(e.this)
    return [e]


def _rollup(members: list[list[exp.Expr]]) -> list[list[exp.Expr]]:
    return [[x for m in members[:i] for x in m] for i in range(len(members), -1, -1)]


def _cube(members: list[list[exp.Expr]]) -> list[list[exp.Expr]]:
    n = len(members)
    return [[x for i in chosen for x in members[i]] for size in range(n, -1, -1) for chosen in combinations(range(n), size)]


def _sets(e: exp.Expr) -> list[list[exp.Expr]]:
    if isinstance(e, exp.Rollup):
        return _rollup([_members(m) for m in e.expressions])
    if isinstance(e, exp.Cube):
        return _cube([_members(m) for m in e.expressions])
    if isinstance(e, exp.GroupingSets):
        return [s for m in e.expressions for s in _sets(m)]
    return [_members(e)]


def relation(ctx: BindContext, group: exp.Group, rel: Rel, keys: list[tuple[str, Expr]],
             aggs: list[tuple[str, Agg]], sets: list[tuple[int, ...]]) -> Rel:
    """The grouping sets' rows, with the columns ``Aggregate(rel, keys, aggs)`` would have."""
    for _, a in aggs:
        if a.fn in ("grouping", "grouping_id"):
            _key_indexes(ctx, group, a, keys)
    real = [(n, a) for n, a in aggs if a.fn not in ("grouping", "grouping_id")]
    shared = all(a.fn in ROLLABLE and not a.distinct for _, a in real)
    partials: list[Agg] = []
    if shared:
        for _, a in real:
            for p in _partials(a):
                if p not in partials:
                    partials.append(p)
        part_names = {p: ctx.fresh("_part") for p in partials}
        source: Rel = Aggregate(rel, tuple(keys), tuple((part_names[p], p) for p in partials))
    branches = []
    gset = ctx.fresh("_gset")
    for i, members in enumerate(sets):
        set_keys = [(keys[k][0], Column(keys[k][0], keys[k][1].type) if shared else keys[k][1]) for k in members]
        # a text, not a number: Spark reads an integer in GROUP BY as a select-list position
        set_keys.append((gset, Literal(f"set {i}", STRING)))
        if shared and members and len(members) == len(keys):  # the finest set: the shared partials as they are
            finals = {n: _rolled(a, part_names, None, ctx) for n, a in real}
            grouped: Rel = source
        elif shared:
            outer: list[tuple[str, Agg]] = []
            finals = {n: _rolled(a, part_names, outer, ctx) for n, a in real}
            grouped = Aggregate(source, tuple(set_keys), tuple(outer))
        else:
            grouped = Aggregate(rel, tuple(set_keys), tuple(real))
            finals = {n: Column(n, a.type) for n, a in real}
        exprs: list[tuple[str, Expr]] = [
            (n, Column(n, e.type) if k in members else Literal(None, e.type)) for k, (n, e) in enumerate(keys)]
        for n, a in aggs:
            exprs.append((n, finals[n] if n in finals else Literal(_grouping_value(ctx, group, a, keys, members), a.type)))
        branches.append(Project(grouped, tuple(exprs)))
    return branches[0] if len(branches) == 1 else Union(tuple(branches))


def _key_indexes(ctx: BindContext, group: exp.Group, a: Agg, keys: list[tuple[str, Expr]]) -> list[int]:
    if not a.args:
        return list(range(len(keys)))
    found = []
    for arg in a.args:
        k = next((i for i, (_, e) in enumerate(keys) if e == arg), None)
        if k is None:
            raise ctx.err(BindError, "GROUPING_NOT_A_KEY", f"the argument of {a.fn}() is not a GROUP BY key", group,
                          f"{a.fn}() takes columns of GROUP BY, as written there", function=a.fn)
        found.append(k)
    return found


def _grouping_value(ctx: BindContext, group: exp.Group, a: Agg, keys: list[tuple[str, Expr]],
                    members: tuple[int, ...]) -> int:
    """grouping(k): 1 when the set rolls k up; grouping_id: those bits, the first key highest."""
    value = 0
    for k in _key_indexes(ctx, group, a, keys):
        value = value * 2 + (0 if k in members else 1)
    return value


def _partials(a: Agg) -> list[Agg]:
    """What the shared aggregate keeps for ``a``."""
    if a.fn == "avg":
        arg = a.args[0]
        return [Agg("sum", a.args, False, sum_type(arg.type)), Agg("count", a.args, False, BIGINT)]
    return [a]


def _rolled(a: Agg, names: dict[Agg, str], outer: list[tuple[str, Agg]] | None, ctx: BindContext) -> Expr:
    """``a`` of a set from the shared partials: counts and sums summed, min of mins, max of maxes,
    avg as the rolled sum over the rolled count (Spark's rounding for decimals). Without ``outer``
    (the finest set) the partials are read as they are."""

    def roll(p: Agg, fn: str) -> Column:
        col = Column(names[p], p.type)
        if outer is None:
            return col
        t = p.type if fn != "sum" or p.fn == "count" else sum_type(p.type)
        name = ctx.fresh("_roll")
        outer.append((name, Agg(fn, (col,), False, t)))
        return Column(name, t)

    if a.fn in ("count", "sum"):
        rolled = roll(a, "sum")
        return rolled if rolled.type == a.type else Cast(rolled, a.type)
    if a.fn in ("min", "max"):
        return roll(a, a.fn)
    total_p, count_p = _partials(a)
    total, count = roll(total_p, "sum"), roll(count_p, "sum")
    arg_t = a.args[0].type
    if arg_t.is_decimal:
        return decimal_average(Cast(total, sum_type(arg_t)), count, arg_t)
    return Call("/", (Cast(total, DOUBLE), Cast(count, DOUBLE)), DOUBLE)
