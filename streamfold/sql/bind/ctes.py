"""Bind common table expressions: ``WITH``, ``WITH ITERATIVE`` and ``WITH RECURSIVE``.

A CTE is kept as its tree (:class:`Cte`) and bound afresh where it is read, as a derived table;
the CTEs it sees are those before it. An iterative CTE (cut out of the text by
:mod:`..iterate`) is an :class:`Iterate`: its query is the start, and ``times`` × the step, which
reads the previous value under the CTE's name. A recursive CTE ``base UNION step …`` is a
:class:`Recursive`: the parts that read it are the step, which must read it once, through joins,
filters and projections only (linear and monotone); the CTE is kept as a set, which reaches its
fixpoint even on cycles.

*Invariant:* a loop's columns have one type each, the start's widened to hold what the step
computes; the step is bound against a :class:`LoopRef` of those types.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, UnsupportedError
from ...ir.rel import Field, Filter, Iterate, IterationMode, Join, LoopRef, Project, Recursive, Rel, Union
from ...ir.types import common_type
from ..parse import span_of
from .context import BindContext, Cte
from .setops import conform


def with_clause(ctx: BindContext, node: exp.Expr, ctes: dict[str, Cte]) -> dict[str, Cte]:
    """The CTEs in scope in ``node``: those around it and its own WITH clause's."""
    with_ = node.args.get("with_") or node.args.get("with")
    if not with_:
        return ctes
    out = dict(ctes)
    for cte in with_.expressions:
        alias = cte.args.get("alias")
        columns = [c.name for c in alias.columns] if alias is not None and alias.columns else None
        loop = ctx.loops.get(cte.alias.lower())
        if loop is not None and not _within(span_of(cte.this), loop.init_span):
            loop = None
        recursive = bool(with_.args.get("recursive")) and _reads(cte.this, cte.alias)
        out[cte.alias.lower()] = Cte(cte.this, dict(out), columns, loop, recursive=recursive)
    return out


def named_columns(ctx: BindContext, columns: list[str] | None, names: list[str], node: exp.Expr) -> list[str]:
    """The output names of a query that ``WITH t (a, b)`` (or ``(…) AS t (a, b)``) names ``columns``."""
    if columns is None:
        return names
    if len(columns) != len(names):
        raise ctx.err(BindError, "CTE_COLUMNS", f"the WITH clause names {len(columns)} columns, "
                      f"but its query has {len(names)}", node, "name every column once",
                      named=len(columns), columns=len(names))
    return list(columns)


def bind_cte(ctx: BindContext, cte: Cte, name: str, node: exp.Expr) -> tuple[Rel, list[str]]:
    """A read of the CTE ``name``, as (relation, output names)."""
    if cte.bound is not None:
        return cte.bound
    if cte.loop is not None:
        return _iterate(ctx, cte, name, node)
    if cte.recursive:
        return _recursive(ctx, cte, name)
    assert cte.node is not None
    inner, names = ctx.query(cte.node, cte.ctes)
    return inner, named_columns(ctx, cte.columns, names, cte.node)


def _iterate(ctx: BindContext, cte: Cte, name: str, node: exp.Expr) -> tuple[Rel, list[str]]:
    """``init`` then ``times`` × ``step``, the step reading the previous value as ``name``."""
    assert cte.loop is not None and cte.node is not None
    loop = cte.loop
    start, step, internal, names = _loop(ctx, cte, name, cte.node, [ctx.steps[loop.name.lower()]])
    key = []
    for k in loop.key:
        match = [n for n in names if n.lower() == k.lower()]
        if not match:
            raise ctx.err(BindError, "DIFFUSION_KEY", f"KEY column `{k}` is not a column of {name}",
                          cte.node, f"name columns of {name} ({', '.join(names)}) in KEY (…)",
                          column=k, columns=names)
        key.append(f"{internal}.{match[0]}")
    return Iterate(internal, start, step, loop.times, IterationMode(loop.mode), tuple(key)), names


def _recursive(ctx: BindContext, cte: Cte, name: str) -> tuple[Rel, list[str]]:
    """``WITH RECURSIVE name AS (base UNION step …)``: the parts of the UNION that read
    ``name`` are the step, the others the base; the step must be linear and monotone."""
    assert cte.node is not None
    parts: list[exp.Expr] = []

    def split(node: exp.Expr) -> None:
        if isinstance(node, exp.Union):
            if not node.args.get("distinct"):
                raise ctx.err(UnsupportedError, "UNSUPPORTED_RECURSIVE_CTE",
                              f"WITH RECURSIVE {name} joins its parts with UNION ALL", node,
                              "write UNION: streamfold keeps a recursive CTE as a set, which reaches a "
                              "fixpoint even on cycles", construct="UNION ALL")
            split(node.left)
            split(node.right)
        else:
            parts.append(node)

    if not isinstance(cte.node, exp.Union):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_RECURSIVE_CTE",
                      f"WITH RECURSIVE {name} must be `base UNION step`", cte.node,
                      "write the starting rows, UNION, then the query that reads the CTE",
                      construct="recursive CTE without UNION")
    split(cte.node)
    base = [p for p in parts if not _reads(p, name)]
    steps = [p for p in parts if _reads(p, name)]
    if not base:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_RECURSIVE_CTE",
                      f"every part of WITH RECURSIVE {name} reads {name}: it has no starting rows",
                      cte.node, "add a part that does not read it", construct="recursive CTE without base")
    init = base[0]
    for more in base[1:]:
        init = exp.Union(this=init, expression=more, distinct=True)
    start, step, internal, names = _loop(ctx, cte, name, init, steps)
    for part, tree in zip(step.inputs() if isinstance(step, Union) else (step,), steps):
        _check_recursive_step(ctx, part, internal, name, tree)
    return Recursive(internal, start, step), names


def _check_recursive_step(ctx: BindContext, step: Rel, internal: str, name: str, tree: exp.Expr) -> None:
    refs = [n for n in step.walk() if isinstance(n, LoopRef) and n.name == internal]
    if len(refs) != 1:
        raise ctx.err(UnsupportedError, "UNSUPPORTED_RECURSIVE_CTE",
                      f"this part of WITH RECURSIVE {name} reads {name} {len(refs)} times", tree,
                      "read it once per part (linear recursion)", construct="non-linear recursion")

    def monotone(rel: Rel) -> bool:  # the path to the loop goes through joins, filters, projections
        if isinstance(rel, LoopRef):
            return True
        if not any(isinstance(n, LoopRef) for n in rel.walk()):
            return True
        if isinstance(rel, (Project, Filter, Union)) or (isinstance(rel, Join) and rel.kind in ("inner", "cross")):
            return all(monotone(c) for c in rel.inputs())
        return False

    if not monotone(step):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_RECURSIVE_CTE",
                      f"this part of WITH RECURSIVE {name} reads {name} through an aggregate, DISTINCT, "
                      "a negation or an outer join", tree,
                      f"read {name} through joins, filters and projections only", construct="non-monotone recursion")


def _loop(ctx: BindContext, cte: Cte, name: str, init_node: exp.Expr,
          step_trees: list[exp.Expr]) -> tuple[Rel, Rel, str, list[str]]:
    """The start and step of a loop over ``name`` (their UNION if several step trees), with
    the loop's columns of one type each: the start's, widened (a few rounds at most) to hold
    what the step computes."""
    init, names = ctx.query(init_node, cte.ctes)
    names = named_columns(ctx, cte.columns, names, init_node)
    internal = ctx.unique_alias(name)
    types = [f.type for f in init.schema]
    where = step_trees[0]
    for _ in range(4):
        fields = tuple(Field(f"{internal}.{n}", t) for n, t in zip(names, types))
        ref = LoopRef(internal, fields)
        step_ctes = {**cte.ctes, name.lower(): Cte(None, cte.ctes, bound=(ref, names))}
        steps = [ctx.query(tree, step_ctes)[0] for tree in step_trees]
        for step, tree in zip(steps, step_trees):
            if len(step.schema) != len(fields):
                raise ctx.err(BindError, "ITERATION_WIDTH",
                              f"the step of {name} gives {len(step.schema)} columns, its start {len(fields)}",
                              tree, "the step must give the same columns as the starting query",
                              start=len(fields), step=len(step.schema))
        wider = []
        for k, f in enumerate(fields):
            t = f.type
            for step in steps:
                g = step.schema[k]
                common = common_type(t, g.type)
                if common is None:
                    raise ctx.err(BindError, "TYPE_MISMATCH",
                                  f"column `{f.name.split('.', 1)[1]}` of {name} starts as {f.type} but the step "
                                  f"makes it {g.type}", where, "CAST one of them",
                                  start=f.type.sql(), step=g.type.sql())
                t = common
            wider.append(t)
        if wider == types:  # what the step computes fits the loop's types
            break
        types = wider
    else:
        changing = [f"{n}: {t} → {g.type}" for n, t, g in zip(names, types, steps[0].schema) if t != g.type]
        raise ctx.err(BindError, "ITERATION_TYPES",
                      f"the step of {name} keeps changing the type of its columns ({'; '.join(changing)})",
                      where, "CAST the step's columns to fixed types, e.g. DOUBLE", columns=changing)
    out = [f.name for f in fields]
    start = conform(init, out, types)
    conformed = [conform(step, out, types) for step in steps]
    body = conformed[0] if len(conformed) == 1 else Union(tuple(conformed))
    return start, body, internal, names


def _reads(node: exp.Expr, name: str) -> bool:
    """Whether a query tree reads a table called ``name`` (a recursive CTE reading itself)."""
    return any(t.name.lower() == name.lower() for t in node.find_all(exp.Table))


def _within(span: tuple[int, int] | None, outer: tuple[int, int]) -> bool:
    return span is not None and outer[0] <= span[0] and span[1] <= outer[1]
