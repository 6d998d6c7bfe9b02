"""Bind the FROM clause: sources, CTE reads, derived tables, joins and LATERAL VIEWs.

The FROM clause builds the block's :class:`Scope` as it goes, left to right: each table
reference adds an entry under its alias (a source's columns, a CTE's or a derived table's output
names), and a join's condition sees the entries so far. Every table gets an internal alias unique
in the whole query (``S``, then ``S#2`` …), which prefixes its columns. A semi or anti join's
right side leaves the scope after the join; ``USING`` and ``NATURAL`` columns are merged, so an
unqualified reference to one is not ambiguous.

A PIVOT is the grouped query it stands for (:mod:`.pivot`), an UNPIVOT the exploded rows
(:mod:`.unpivot`). Clauses that would change which rows a table gives (TABLESAMPLE, time travel,
hints) are refused, never ignored; so is a
derived table that reads a column of the query around it.
"""

from __future__ import annotations

from sqlglot import exp

from ...errors import BindError, SqlError, UnsupportedError, did_you_mean
from ...ir.expr import Agg, Call, Expr, Literal, and_all
from ...ir.rel import Aggregate, Field, Join, JoinKind, Project, Rel, Scan
from ...ir.types import BIGINT, BOOLEAN, INT, common_type
from ..bind_expr import ExprBinder
from ..scope import Scope, ScopeEntry
from .context import BindContext, Cte
from .ctes import bind_cte, named_columns
from .generators import lateral_join, lateral_view
from .pivot import pivot_query
from .unpivot import unpivot_query
from .values import ONE_ROW, values_query


def from_clause(ctx: BindContext, node: exp.Select, ctes: dict[str, Cte],
                parent: Scope | None = None) -> tuple[Rel, Scope]:
    from_ = node.args.get("from_") or node.args.get("from")
    if from_ is None:
        return _one_row(ctx, node, ctes), Scope([], ctx.sql, parent=parent)
    scope = Scope([], ctx.sql, parent=parent)
    rel = _table_ref(ctx, from_.this, ctes, scope)
    for join in node.args.get("joins") or []:
        if isinstance(join.this, exp.Lateral):
            rel = lateral_join(ctx, join, rel, scope)
            continue
        right = _table_ref(ctx, join.this, ctes, scope)
        rel = _join(ctx, join, rel, right, scope)
    for lateral in node.args.get("laterals") or []:
        rel = lateral_view(ctx, lateral, rel, scope)
    return rel, scope


def _one_row(ctx: BindContext, node: exp.Select, ctes: dict[str, Cte]) -> Rel:
    """A SELECT without FROM is over one row, as in Spark: ``SELECT 2 NOT IN (SELECT x FROM t)``.
    The row is a global aggregate over a table its subqueries read (a static one first), which
    always has one row, projected to a constant; a SELECT that reads no table is ``NO_FROM``."""
    sources = _sources_read(ctx, node, ctes)
    if not sources:
        raise ctx.err(UnsupportedError, "NO_FROM", "a continuous query must read at least one source", node,
                      "add FROM <source>")
    return _one_row_of(ctx, min(sources, key=lambda n: not ctx.catalog[n].static))


def _sources_read(ctx: BindContext, node: exp.Expr, ctes: dict[str, Cte]) -> list[str]:
    names = [t.name.lower() for t in node.find_all(exp.Table) if not (t.args.get("db") or t.args.get("catalog"))]
    known = {n.lower(): n for n in ctx.catalog}
    return [known[n] for n in names if n in known and n not in ctes]


def _one_row_of(ctx: BindContext, name: str) -> Rel:
    source = ctx.catalog[name]
    internal = ctx.unique_alias("_one_row")
    fields = tuple(Field(f"{internal}.{c}", t) for c, t in source.columns)
    scan = Scan(source.name, internal, fields, tuple(c for c, _ in source.columns), static=source.static,
                weighted=source.weighted)
    rows = Aggregate(scan, (), ((f"{internal}.rows", Agg("count", (), False, BIGINT)),))
    return Project(rows, ((f"{internal}.one", Literal(1, INT)),))


def _values(ctx: BindContext, node: exp.Values, ctes: dict[str, Cte]) -> exp.Subquery:
    """An inline table as the derived table it stands for (values.py), its one row counted over a
    static table (one the query reads first), which never changes, else over a stream it reads."""
    read = _sources_read(ctx, node.root(), ctes)
    candidates = read + [n for n in ctx.catalog if n not in read]
    if not candidates:
        raise ctx.err(UnsupportedError, "NO_FROM", "a continuous query must read at least one source", node,
                      "add FROM <source>")
    source = min(candidates, key=lambda n: (not ctx.catalog[n].static, n not in read))
    return values_query(ctx, node, source, lambda query: [f.type for f in ctx.query(query, ctes)[0].schema])


def _table_ref(ctx: BindContext, node: exp.Expr, ctes: dict[str, Cte], scope: Scope) -> Rel:
    if isinstance(node, exp.Values):  # an inline table: the rows exploded from one row (values.py)
        node = _values(ctx, node, ctes)
    if isinstance(node, exp.Table) and node.name.startswith(ONE_ROW + ":"):
        return _one_row_of(ctx, node.name[len(ONE_ROW) + 1:])
    pivots = node.args.get("pivots")
    if pivots:  # the grouped query (pivot.py) or the exploded rows (unpivot.py) it stands for
        rewrite = unpivot_query if pivots[0].args.get("unpivot") else pivot_query
        node = rewrite(ctx, node, lambda ref, own: _columns(ctx, ref, ctes, own),
                       lambda query: [f.type for f in ctx.query(query, ctes)[0].schema])
    _table_clauses(ctx, node)
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Func):
        raise ctx.err(UnsupportedError, "UNSUPPORTED_FROM",
                      f"the table-valued function `{node.this.sql(dialect='spark')}` in FROM is not supported", node,
                      "explode an array column with FROM s, LATERAL explode(s.arr) AS t(v)"
                      if isinstance(node.this, exp.Explode) else "read sources named with --source or --table",
                      construct="table-valued function")
    if isinstance(node, exp.Table):
        if node.args.get("db") or node.args.get("catalog"):
            raise ctx.err(UnsupportedError, "UNSUPPORTED_TABLE_NAME",
                          f"qualified table name `{node.sql()}` is not supported", node,
                          "name sources with --source NAME=PATH and use NAME", construct="qualified table")
        name = node.name
        alias = node.alias or name
        ctx.check_alias(alias, node, scope)
        internal = ctx.unique_alias(alias)
        cte = ctes.get(name.lower())
        if cte is not None:
            inner, names = bind_cte(ctx, cte, name, node)
            return _derived(inner, names, alias, internal, scope)
        if name.lower() not in {n.lower() for n in ctx.catalog}:
            raise ctx.err(BindError, "UNKNOWN_TABLE", f"unknown table `{name}`", node,
                          did_you_mean(name, list(ctx.catalog) + [c for c in ctes])
                          or f"known sources: {', '.join(ctx.catalog) or 'none'} (add --source {name}=PATH)",
                          table=name)
        source = ctx.catalog[name]
        fields = tuple(Field(f"{internal}.{c}", t) for c, t in source.columns)
        scan = Scan(source.name, internal, fields, tuple(c for c, _ in source.columns),
                    static=source.static, weighted=source.weighted)
        scope.entries.append(ScopeEntry.of(alias, [(c, f) for (c, _), f in zip(source.columns, fields)]))
        return scan
    if isinstance(node, exp.Subquery):
        try:
            inner, names = ctx.query(node.this, ctes)
        except BindError as e:
            _outer_reference_in_derived_table(ctx, e, scope)
            raise
        table_alias = node.args.get("alias")
        if table_alias is not None and table_alias.columns:
            names = named_columns(ctx, [c.name for c in table_alias.columns], names, node)
        alias = node.alias
        if not alias:
            alias = ctx.derived_alias()
        ctx.check_alias(alias, node, scope)
        return _derived(inner, names, alias, ctx.unique_alias(alias), scope)
    raise ctx.err(UnsupportedError, "UNSUPPORTED_FROM", f"`{node.sql(dialect='spark')}` in FROM is not supported",
                  node, construct=node.key)


def _columns(ctx: BindContext, node: exp.Expr, ctes: dict[str, Cte], scope: Scope) -> list[str]:
    """The column names of the table reference ``node``, bound into ``scope`` (a scope of its own)."""
    _table_ref(ctx, node, ctes, scope)
    return list(scope.entries[-1].names.values())


def _table_clauses(ctx: BindContext, node: exp.Expr) -> None:
    """Clauses on a table reference that change which rows it gives — refused, never ignored
    (``F TABLESAMPLE (10 PERCENT)`` read as all of ``F`` would be a wrong answer)."""
    clauses = {"sample": ("TABLESAMPLE", "a continuous query keeps the answer over all rows; filter them "
                                         "with a condition in WHERE instead"),
               "version": ("time travel (VERSION/TIMESTAMP AS OF)", "the inputs are the source directories"),
               "hints": ("table hints", "remove the hint")}
    for arg, (construct, hint) in clauses.items():
        value = node.args.get(arg)
        if value:
            raise ctx.err(UnsupportedError, "UNSUPPORTED_CLAUSE", f"{construct} is not supported",
                          value[0] if isinstance(value, list) else value, hint, construct=construct)


def _outer_reference_in_derived_table(ctx: BindContext, error: BindError, scope: Scope) -> None:
    """A name a derived table does not know, that the query around it (or a subquery's
    enclosing query) does: a correlated derived table, refused by its own code."""
    if error.code not in ("UNKNOWN_COLUMN", "UNKNOWN_TABLE_ALIAS") or "column" not in error.params:
        return
    table = error.params.get("alias") or error.params.get("table")
    try:
        scope.resolve(str(table) if table else None, str(error.params["column"]), None)
    except SqlError:
        return
    raise UnsupportedError(
        "a derived table (a subquery in FROM) reading a column of the query around it is not supported",
        code="UNSUPPORTED_SUBQUERY", sql=ctx.sql, span=error.span,
        params={"construct": "correlated derived table", "column": str(error.params["column"])},
        hint="select the column it compares with in the derived table, and write the condition "
             "outside it (in the WHERE or ON around it)") from None


def _derived(inner: Rel, names: list[str], alias: str, internal: str, scope: Scope) -> Rel:
    exprs = tuple((f"{internal}.{n}", f.ref()) for n, f in zip(names, inner.schema))
    rel = Project(inner, exprs)
    scope.entries.append(ScopeEntry.of(alias, [(n, f) for n, f in zip(names, rel.schema)]))
    return rel


def _join(ctx: BindContext, join: exp.Join, left: Rel, right: Rel, scope: Scope) -> Rel:
    side = (join.side or "").lower()
    kind = (join.kind or "").lower()
    method = str(join.args.get("method") or "").upper()
    if method and method != "NATURAL":
        raise ctx.err(UnsupportedError, "UNSUPPORTED_JOIN", f"{method} JOIN is not supported", join,
                      "name the columns: JOIN … USING (col, …) or JOIN … ON", construct=f"{method.lower()} join")
    if kind in ("semi", "anti"):
        jkind = kind
    elif side in ("left", "right", "full"):
        jkind = side
    elif kind == "cross":
        jkind = "cross"
    else:
        jkind = "inner"
    on = join.args.get("on")
    using = join.args.get("using") or (_natural(ctx, join, scope) if method else None)
    condition: Expr | None = None
    coalesced: list[tuple[str, Expr]] = []  # a FULL join's USING columns: (name, coalesce(left, right))
    if using:
        right_entry = scope.entries[-1]
        preds = []
        for ident in using:
            col = ident.name.lower()
            left_hits = [e for e in scope.entries[:-1] if col in e.columns]
            # after `A JOIN B USING (k)`, the left side of `… JOIN C USING (k)` has one k: the merged one
            merged = scope.merged.get(col)
            if (len(left_hits) != 1 and merged is None) or col not in right_entry.columns:
                raise ctx.err(BindError, "UNKNOWN_COLUMN", f"USING column `{ident.name}` must be on both sides",
                              ident, "name a column both sides have (once on the left)", column=ident.name)
            lf, rf = merged if merged is not None else left_hits[0].columns[col], right_entry.columns[col]
            preds.append(Call("=", (lf.ref(), rf.ref()), BOOLEAN))
            if jkind in ("inner", "left", "semi", "anti"):
                scope.merged[col] = lf
            elif jkind == "right":
                scope.merged[col] = rf
            else:  # full: the column is the side that has the row (Spark's coalesce(left, right))
                shared = common_type(lf.type, rf.type) or lf.type
                merged_field = Field(f"{col}#using{len(scope.merged)}", shared)
                coalesced.append((merged_field.name, Call("coalesce", (lf.ref(), rf.ref()), shared,
                                                          "coalesce({0}, {1})")))
                scope.merged[col] = merged_field
        condition = and_all(preds)
    elif on is not None:
        condition = ExprBinder(scope, "ON").boolean(on)
    elif jkind not in ("cross", "inner"):
        raise ctx.err(BindError, "MISSING_JOIN_CONDITION", f"{jkind.upper()} JOIN needs an ON condition", join)
    if condition is None and jkind == "inner":
        jkind = "cross"
    if jkind in ("semi", "anti"):
        scope.entries.pop()  # the right side of a semi/anti join is not visible after it
    joined = Join(left, right, JoinKind(jkind), condition)
    if not coalesced:
        return joined
    return Project(joined, tuple((f.name, f.ref()) for f in joined.schema) + tuple(coalesced))


def _natural(ctx: BindContext, join: exp.Join, scope: Scope) -> list[exp.Identifier]:
    """A NATURAL join's USING columns: those the right side shares with the left, in the left's
    order (none: a cross join, as in Spark)."""
    right = scope.entries[-1].columns
    names = list(scope.merged) + [c for e in scope.entries[:-1] for c in e.columns]
    shared = [c for c in dict.fromkeys(names) if c in right]
    for col in shared:
        owners = [e.alias for e in scope.entries[:-1] if col in e.columns]
        if len(owners) > 1 and col not in scope.merged:
            raise ctx.err(BindError, "AMBIGUOUS_COLUMN",
                          f"NATURAL JOIN: column `{col}` is in {' and '.join(owners)} on its left", join,
                          "join with USING (col, …) or ON, naming which column to compare", column=col)
    return [exp.to_identifier(scope.entries[-1].names[c]) for c in shared]
