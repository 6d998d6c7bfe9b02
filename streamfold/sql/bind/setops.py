"""Bind set operations: ``UNION [ALL]``, ``INTERSECT [ALL]``, ``EXCEPT [ALL]``.

Both sides must have as many columns; each column is widened to the sides' common type, and a
side is cast where its type differs (:func:`conform`). The names are the left side's. UNION is a
:class:`Union` (under a :class:`Distinct` without ALL); INTERSECT and EXCEPT are a
:class:`SetOp` whose right side's columns are named ``<name>#r``.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.expr import Cast, Expr
from ...ir.rel import Distinct, Project, Rel, SetKind, SetOp, Union
from ...ir.types import DataType, common_type
from ..scope import Scope
from .context import BindContext, Cte
from .order import order_limit


def union(ctx: BindContext, node: exp.SetOperation, ctes: dict[str, Cte],
          parent: Scope | None = None) -> tuple[Rel, list[str]]:
    """UNION [ALL], INTERSECT [ALL], EXCEPT [ALL]: both sides widened to common column types."""
    if node.args.get("by_name") or node.args.get("on") or node.args.get("side") or node.args.get("kind"):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_CLAUSE", "a set operation BY NAME or CORRESPONDING is not "
                      "Spark SQL", node, "select the columns in the same order on both sides", construct="BY NAME")
    left, names = ctx.query(node.left, ctes, parent)
    right, _ = ctx.query(node.right, ctes, parent)
    if len(left.schema) != len(right.schema):
        raise ctx.err(BindError, "SET_OPERATION_WIDTH",
                      f"UNION sides have {len(left.schema)} and {len(right.schema)} columns", node,
                      "select the same number of columns on both sides",
                      left=len(left.schema), right=len(right.schema))
    types = []
    for lf, rf in zip(left.schema, right.schema):
        t = common_type(lf.type, rf.type)
        if t is None:
            raise ctx.err(BindError, "TYPE_MISMATCH",
                          f"UNION column `{lf.name}` is {lf.type} on one side and {rf.type} on the other",
                          node, "CAST one side", left=lf.type.sql(), right=rf.type.sql())
        types.append(t)
    sides = [conform(left, names, types), conform(right, names, types)]
    distinct = bool(node.args.get("distinct"))
    rel: Rel
    if isinstance(node, exp.Union):
        rel = Union(tuple(sides))
        if distinct:
            rel = Distinct(rel)
    else:
        kind = ("intersect" if isinstance(node, exp.Intersect) else "except") + ("" if distinct else "_all")
        right_side = Project(sides[1], tuple((f"{n}#r", f.ref()) for n, f in zip(names, sides[1].schema)))
        rel = SetOp(SetKind(kind), sides[0], right_side)
    return order_limit(ctx, node, rel, names)


def conform(rel: Rel, names: list[str], types: list[DataType]) -> Rel:
    """``rel``'s columns under ``names``, each cast to its type in ``types`` where it differs."""
    exprs = []
    for name, f, t in zip(names, rel.schema, types):
        ref: Expr = f.ref()
        exprs.append((name, ref if f.type == t else Cast(ref, t)))
    return Project(rel, tuple(exprs))
