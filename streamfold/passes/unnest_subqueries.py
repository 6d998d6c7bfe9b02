"""Unnest subqueries into joins (seed 000 §6: "the query unnesting is done with a … join").

Before::

    Filter[x.D > (SELECT sum(y.C) FROM Y y WHERE x.A = y.B)](Scan X x)

After::

    Project[x.*](Filter[x.D > _sq0.value](
        Join inner ON x.A = _sq0.key0 (Scan X x,
            Project[sum AS _sq0.value, y.B AS _sq0.key0](Aggregate[y.B; sum(y.C)](Scan Y y)))))

* ``EXISTS (…)`` and ``v IN (…)`` become semi joins, ``NOT EXISTS`` an anti join, ``v NOT IN (…)``
  a null-aware anti join (NOT IN's NULL rules); the subquery's correlated predicates move into
  the join condition.
* A scalar subquery that aggregates without GROUP BY becomes a join with that aggregate: grouped
  by its correlation keys when it is correlated (equalities only), or its single row when not.
  A correlated count gives 0, not NULL, for a key with no rows (the "count bug"): there the join
  is a LEFT JOIN and the value defaults to the aggregate over no rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from ..errors import UnsupportedError
from ..ir.expr import Call, Case, Column, Expr, Literal, OuterColumn, SubqueryExpr, and_all, conjuncts, outer_columns
from ..ir.rel import Aggregate, Distinct, Filter, Join, JoinKind, Project, Rel, Sort
from ..ir.types import BOOLEAN, INT

_COMPARE = {"=", "<>", "<", "<=", ">", ">="}
_STRICT = {"+", "-", "*", "/", "%", "neg", "div"}


def run(rel: Rel) -> Rel:
    names = itertools.count()
    return _unnest(rel, names)


def _unnest(rel: Rel, names: Iterator[int]) -> Rel:
    def rewrite(node: Rel) -> Rel | None:
        if isinstance(node, Filter) and _has_subquery(node.condition):
            return _filter(node, names)
        if isinstance(node, Project) and any(_has_subquery(e) for _, e in node.exprs):
            return _project(node, names)
        if isinstance(node, Join) and node.condition is not None and _has_subquery(node.condition):
            raise _unsupported("a subquery in a JOIN condition", "move it to WHERE")
        if isinstance(node, Aggregate) and any(_has_subquery(e) for _, e in node.keys + node.aggs):
            raise _unsupported("a subquery in GROUP BY or inside an aggregate", "compute it in WHERE or a derived table")
        return None

    return rel.transform(rewrite)


def _has_subquery(e: Expr) -> bool:
    return any(isinstance(x, SubqueryExpr) for x in e.walk())


def _unsupported(what: str, hint: str) -> UnsupportedError:
    return UnsupportedError(f"{what} is not supported", code="UNSUPPORTED_SUBQUERY", params={"construct": what},
                            hint=hint)


def _filter(node: Filter, names: Iterator[int]) -> Rel:
    rel = node.input
    kept: list[Expr] = []
    for c in conjuncts(node.condition):
        negated = isinstance(c, Call) and c.op == "NOT" and isinstance(c.args[0], SubqueryExpr)
        core = c.args[0] if negated else c  # type: ignore[attr-defined]
        if isinstance(core, SubqueryExpr) and core.kind in ("exists", "in"):
            rel = _semi(rel, core, negated, names)
            continue
        c, rel = _scalars(c, rel, names, null_rejecting=_null_rejecting(c))
        if _has_subquery(c):
            raise _unsupported("EXISTS or IN inside OR, CASE or another expression",
                               "use it as a condition of its own, joined with AND")
        kept.append(c)
    cond = and_all(kept)
    out: Rel = Filter(rel, cond) if cond is not None else rel
    return Project(out, tuple((f.name, f.ref()) for f in node.input.schema))


def _project(node: Project, names: Iterator[int]) -> Rel:
    rel = node.input
    exprs = []
    for n, e in node.exprs:
        e, rel = _scalars(e, rel, names, null_rejecting=False)
        if _has_subquery(e):
            raise _unsupported("EXISTS or IN in the select list", "use it in WHERE")
        exprs.append((n, e))
    return Project(rel, tuple(exprs))


# -- EXISTS, IN -----------------------------------------------------------------------------------
def _semi(rel: Rel, sq: SubqueryExpr, negated: bool, names: Iterator[int]) -> Rel:
    sub, corr = _pull(_unnest(sq.rel, names))
    n = next(names)
    conds = [_localize(c) for c in corr]
    # The right side keeps only what the join reads: IN's value and the correlated columns.
    needed = sorted({c for p in corr for c in p.columns()} & set(sub.names))
    exprs: list[tuple[str, Expr]] = [(c, sub.field(c).ref()) for c in needed]
    if sq.kind == "in":
        assert sq.arg is not None
        value = f"_sq{n}.in"
        exprs.insert(0, (value, sub.schema[0].ref()))
        conds.insert(0, Call("=", (sq.arg, Column(value, sub.schema[0].type)), BOOLEAN))
    sub = Project(sub, tuple(exprs) or ((f"_sq{n}.one", Literal(1, INT)),))
    if negated and sq.kind == "in":
        if corr:
            raise _unsupported("a correlated NOT IN", "write it as NOT EXISTS (… WHERE … AND x = y)")
        kind = JoinKind.NULL_AWARE_ANTI
    else:
        kind = JoinKind.ANTI if negated else JoinKind.SEMI
    return Join(rel, sub, kind, and_all(conds))


def _localize(e: Expr) -> Expr:
    """A correlated predicate as a join condition: outer references become plain columns."""
    return e.transform(lambda x: Column(x.name, x.type) if isinstance(x, OuterColumn) else None)


def _pull(rel: Rel) -> tuple[Rel, list[Expr]]:
    """Take the correlated conjuncts out of a subquery: (the subquery without them, them).

    The subquery keeps (as extra output columns) the columns those conjuncts read.
    """
    if isinstance(rel, Filter):
        inner, preds = _pull(rel.input)
        mine = [c for c in conjuncts(rel.condition) if _is_correlated(c)]
        rest = and_all([c for c in conjuncts(rel.condition) if not _is_correlated(c)])
        return (Filter(inner, rest) if rest is not None else inner), preds + mine
    if isinstance(rel, Project):
        inner, preds = _pull(rel.input)
        if not preds:
            return Project(inner, rel.exprs), preds
        out = {n for n, _ in rel.exprs}
        extra = []
        for p in preds:
            for name in sorted(p.columns()):
                if name not in out:
                    extra.append((name, inner.field(name).ref()))
                    out.add(name)
        return Project(inner, rel.exprs + tuple(extra)), preds
    if isinstance(rel, Distinct):
        inner, preds = _pull(rel.input)
        return Distinct(inner), preds
    if isinstance(rel, Sort):
        return _pull(rel.input)
    if outer_columns(rel):
        raise _unsupported(f"a correlated reference inside a {type(rel).__name__.lower()} of a subquery",
                           "correlate in the subquery's WHERE")
    return rel, []


def _is_correlated(e: Expr) -> bool:
    return any(isinstance(x, OuterColumn) for x in e.walk())


# -- scalar subqueries ---------------------------------------------------------------------------
def _scalars(e: Expr, rel: Rel, names: Iterator[int], null_rejecting: bool) -> tuple[Expr, Rel]:
    """Replace each scalar subquery of ``e`` by a column of a relation joined to ``rel``."""
    found: list[SubqueryExpr] = [x for x in e.walk() if isinstance(x, SubqueryExpr) and x.kind == "scalar"]
    replacements: dict[SubqueryExpr, Expr] = {}
    for sq in found:
        value, rel = _scalar(sq, rel, names, null_rejecting)
        replacements[sq] = value
    if replacements:
        e = e.transform(lambda x: replacements.get(x) if isinstance(x, SubqueryExpr) else None)
    return e, rel


def _scalar(sq: SubqueryExpr, rel: Rel, names: Iterator[int], null_rejecting: bool) -> tuple[Expr, Rel]:
    sub = _unnest(sq.rel, names)
    agg, value = _aggregate_of(sub)
    n = next(names)
    if not outer_columns(sub):
        single = Project(sub, ((f"_sq{n}.value", sub.schema[0].ref()),))
        return single.schema[0].ref(), Join(rel, single, JoinKind.CROSS, None)
    inner, preds = _pull(agg.input)
    keys: list[tuple[str, Expr]] = []
    conds: list[Expr] = []
    for p in preds:
        pair = _equality(p)
        if pair is None:
            raise _unsupported("a correlated scalar subquery correlated by anything but equalities",
                               "correlate with column = outer column")
        inner_e, outer_e = pair
        key = f"_sq{n}.key{len(keys)}"
        keys.append((key, inner_e))
        conds.append(Call("=", (_localize(outer_e), Column(key, inner_e.type)), BOOLEAN))
    grouped = Aggregate(inner, tuple(keys), agg.aggs)
    out_name = f"_sq{n}.value"
    exprs: list[tuple[str, Expr]] = [(out_name, value)] + [(k, Column(k, e.type)) for k, e in keys]
    empty = _over_no_rows(value, agg)
    count_bug = not (isinstance(empty, Literal) and empty.value is None)
    if count_bug:
        exprs.append((f"_sq{n}.present", Literal(True, BOOLEAN)))
    derived = Project(grouped, tuple(exprs))
    column = Column(out_name, value.type)
    if not count_bug and null_rejecting:
        return column, Join(rel, derived, JoinKind.INNER, and_all(conds))
    joined = Join(rel, derived, JoinKind.LEFT, and_all(conds))
    if not count_bug:
        return column, joined
    present = Call("IS NULL", (Column(f"_sq{n}.present", BOOLEAN),), BOOLEAN)
    return Case(((present, empty),), column, value.type), joined


def _aggregate_of(sub: Rel) -> tuple[Aggregate, Expr]:
    """A scalar subquery's aggregate and its value over that aggregate's output."""
    if isinstance(sub, Project) and len(sub.exprs) == 1 and isinstance(sub.input, Aggregate) and not sub.input.keys:
        return sub.input, sub.exprs[0][1]
    raise _unsupported("a scalar subquery that is not an aggregate without GROUP BY",
                       "make it return one aggregate value (e.g. SELECT max(x) …)")


def _equality(p: Expr) -> tuple[Expr, Expr] | None:
    """``inner = outer`` as (inner expression, outer expression), if ``p`` is one."""
    if not (isinstance(p, Call) and p.op == "="):
        return None

    def outer_only(e: Expr) -> bool:
        return _is_correlated(e) and not e.columns()

    def inner_only(e: Expr) -> bool:
        return not _is_correlated(e) and bool(e.columns())

    a, b = p.args
    if inner_only(a) and outer_only(b):
        return a, b
    if inner_only(b) and outer_only(a):
        return b, a
    return None


def _over_no_rows(value: Expr, agg: Aggregate) -> Expr:
    """The subquery's value for a key with no rows: count is 0, every other aggregate NULL."""
    counts = {n for n, a in agg.aggs if a.fn == "count"} & value.columns()
    if not counts:
        return Literal(None, value.type)
    return value.substitute({n: Literal(0 if n in counts else None, a.type) for n, a in agg.aggs})


def _null_rejecting(c: Expr) -> bool:
    """Whether ``c`` is false or NULL whenever a scalar subquery in it is NULL (then an inner
    join, which drops keys with no rows, gives the same answer as a left join)."""
    if not (isinstance(c, Call) and c.op in _COMPARE):
        return False

    def strict(e: Expr) -> bool:
        if isinstance(e, SubqueryExpr):
            return True
        if isinstance(e, Call) and e.op in _STRICT:
            return any(strict(a) for a in e.args)
        return False

    return any(strict(a) for a in c.args)


__all__ = ["run"]
