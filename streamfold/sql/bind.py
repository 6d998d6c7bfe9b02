"""Bind a parsed query to the logical IR.

The shape produced for one SELECT block is the textbook one::

    Limit? ← Sort? ← Project(select list [+ hidden sort columns]) ← Filter(HAVING)?
        ← Aggregate(GROUP BY keys, aggregate calls)?  ← Filter(WHERE)? ← joins of Scans

Output names follow Spark's rules closely enough for ``explain``; the runtime takes the exact
names and types from Spark's own analysis of the query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from ..errors import BindError, SqlError, UnsupportedError, did_you_mean
from ..ir.expr import Agg, Call, Cast, Column, Expr, SubqueryExpr, and_all, outer_columns
from ..ir.rel import (
    Aggregate, Distinct, Explode, Field, Filter, IterationMode, Iterate, Join, Limit, LoopRef, Project, Recursive, Rel, Scan,
    JoinKind, SetKind, SetOp, Sort, SortKey, Union,
)
from ..ir.types import BOOLEAN, common_type
from .bind_expr import WINDOW_HINT, ExprBinder
from .catalog import Catalog
from .iterate import Iterative
from .parse import ParsedQuery, parse_query, span_of, widen_to_call
from .scope import Scope, ScopeEntry


@dataclass(frozen=True)
class BoundQuery:
    """A bound query: its logical plan, the output column names, and what it was bound against."""

    rel: Rel
    output_names: tuple[str, ...]
    sql: str
    catalog: Catalog


def bind(query: str | ParsedQuery, catalog: Catalog) -> BoundQuery:
    """Bind ``query`` (its text, parsed here, or parsed already) against ``catalog``; raises a
    coded :class:`SqlError` on a mistake."""
    parsed = query if isinstance(query, ParsedQuery) else parse_query(query)
    sql = parsed.sql
    try:
        rel, names = _QueryBinder(parsed, catalog).query(parsed.tree, {})
    except SqlError as e:
        raise e.with_sql(sql) from None
    check_output_names(names, sql)
    return BoundQuery(rel, tuple(names), sql, catalog)


def check_output_names(names: list[str], sql: str) -> None:
    """Refuse two output columns with one name (outputs are Parquet files). The runtime checks
    Spark's own names too, which for unnamed subqueries (``scalarsubquery(k)``) can collide."""
    lowered = [n.lower() for n in names]
    for n in names:
        if lowered.count(n.lower()) > 1:
            raise BindError(
                f"the query outputs two columns named `{n}`", code="DUPLICATE_OUTPUT_COLUMN", sql=sql,
                params={"column": n}, hint="give them distinct names with AS; outputs are written as Parquet",
            )


@dataclass
class _Cte:
    node: exp.Expr | None
    ctes: dict[str, _Cte]
    columns: list[str] | None = None  # WITH t (a, b) AS (…): the names it gives the columns
    loop: Iterative | None = None  # WITH ITERATIVE: the step and its count
    bound: tuple[Rel, list[str]] | None = None  # inside a step: the iteration's previous value
    recursive: bool = False  # WITH RECURSIVE, and the CTE reads itself


class _QueryBinder:
    def __init__(self, parsed: ParsedQuery, catalog: Catalog) -> None:
        self.sql, self.loops, self.steps = parsed.sql, parsed.loops, parsed.steps  # (each loop's step parsed)
        self.catalog = catalog
        self._auto_alias = 0
        # Internal names are unique across the whole query, so blocks can later be joined
        # (a subquery may reuse an alias of the outer query, and every block has a _agg0).
        self._names: dict[str, int] = {}
        self._aliases: set[str] = set()

    def fresh(self, prefix: str) -> str:
        n = self._names.get(prefix, 0)
        self._names[prefix] = n + 1
        return f"{prefix}{n}"

    def unique_alias(self, alias: str) -> str:
        """The internal alias for a table alias: itself, or ``alias#2`` … if another scope has it."""
        if alias.lower() not in self._aliases:
            self._aliases.add(alias.lower())
            return alias
        k = 2
        while f"{alias}#{k}".lower() in self._aliases:
            k += 1
        self._aliases.add(f"{alias}#{k}".lower())
        return f"{alias}#{k}"

    def err(self, cls: type[SqlError], code: str, message: str, node: exp.Expr | None,
            hint: str | None = None, **params: object) -> SqlError:
        return cls(message, code=code, sql=self.sql, span=widen_to_call(self.sql, span_of(node)),
                   hint=hint, params=params)

    # -- queries ---------------------------------------------------------------------------------
    def query(self, node: exp.Expr, ctes: dict[str, _Cte], parent: Scope | None = None) -> tuple[Rel, list[str]]:
        ctes = self._with(node, ctes)
        if isinstance(node, exp.Subquery):
            rel, names = self.query(node.this, ctes, parent)
            return self._order_limit(node, rel, names, ctes)
        if isinstance(node, exp.Select):
            return self.select(node, ctes, parent)
        if isinstance(node, (exp.Union, exp.Intersect, exp.Except)):
            return self.union(node, ctes, parent)
        raise self.err(UnsupportedError, "UNSUPPORTED_QUERY", f"{node.key.upper()} is not supported", node,
                       construct=node.key)

    def _with(self, node: exp.Expr, ctes: dict[str, _Cte]) -> dict[str, _Cte]:
        with_ = node.args.get("with_") or node.args.get("with")
        if not with_:
            return ctes
        out = dict(ctes)
        for cte in with_.expressions:
            alias = cte.args.get("alias")
            columns = [c.name for c in alias.columns] if alias is not None and alias.columns else None
            loop = self.loops.get(cte.alias.lower())
            if loop is not None and not _within(span_of(cte.this), loop.init_span):
                loop = None
            recursive = bool(with_.args.get("recursive")) and _reads(cte.this, cte.alias)
            out[cte.alias.lower()] = _Cte(cte.this, dict(out), columns, loop, recursive=recursive)
        return out

    def _cte_columns(self, cte: _Cte, names: list[str], node: exp.Expr) -> list[str]:
        if cte.columns is None:
            return names
        if len(cte.columns) != len(names):
            raise self.err(BindError, "CTE_COLUMNS", f"the WITH clause names {len(cte.columns)} columns, "
                           f"but its query has {len(names)}", node, "name every column once",
                           named=len(cte.columns), columns=len(names))
        return list(cte.columns)

    # -- WITH ITERATIVE --------------------------------------------------------------------------
    def iterate(self, cte: _Cte, name: str, node: exp.Expr) -> tuple[Rel, list[str]]:
        """``init`` then ``times`` × ``step``, the step reading the previous value as ``name``."""
        assert cte.loop is not None and cte.node is not None
        loop = cte.loop
        start, step, internal, names = self._loop(cte, name, cte.node, [self.steps[loop.name.lower()]])
        key = []
        for k in loop.key:
            match = [n for n in names if n.lower() == k.lower()]
            if not match:
                raise self.err(BindError, "DIFFUSION_KEY", f"KEY column `{k}` is not a column of {name}",
                               cte.node, f"name columns of {name} ({', '.join(names)}) in KEY (…)",
                               column=k, columns=names)
            key.append(f"{internal}.{match[0]}")
        return Iterate(internal, start, step, loop.times, IterationMode(loop.mode), tuple(key)), names

    def recursive(self, cte: _Cte, name: str) -> tuple[Rel, list[str]]:
        """``WITH RECURSIVE name AS (base UNION step …)``: the parts of the UNION that read
        ``name`` are the step, the others the base; the step must be linear and monotone."""
        assert cte.node is not None
        parts: list[exp.Expr] = []

        def split(node: exp.Expr) -> None:
            if isinstance(node, exp.Union):
                if not node.args.get("distinct"):
                    raise self.err(UnsupportedError, "UNSUPPORTED_RECURSIVE_CTE",
                                   f"WITH RECURSIVE {name} joins its parts with UNION ALL", node,
                                   "write UNION: streamfold keeps a recursive CTE as a set, which reaches a "
                                   "fixpoint even on cycles", construct="UNION ALL")
                split(node.left)
                split(node.right)
            else:
                parts.append(node)

        if not isinstance(cte.node, exp.Union):
            raise self.err(UnsupportedError, "UNSUPPORTED_RECURSIVE_CTE",
                           f"WITH RECURSIVE {name} must be `base UNION step`", cte.node,
                           "write the starting rows, UNION, then the query that reads the CTE",
                           construct="recursive CTE without UNION")
        split(cte.node)
        base = [p for p in parts if not _reads(p, name)]
        steps = [p for p in parts if _reads(p, name)]
        if not base:
            raise self.err(UnsupportedError, "UNSUPPORTED_RECURSIVE_CTE",
                           f"every part of WITH RECURSIVE {name} reads {name}: it has no starting rows",
                           cte.node, "add a part that does not read it", construct="recursive CTE without base")
        init = base[0]
        for more in base[1:]:
            init = exp.Union(this=init, expression=more, distinct=True)
        start, step, internal, names = self._loop(cte, name, init, steps)
        for part, tree in zip(step.inputs() if isinstance(step, Union) else (step,), steps):
            self._check_recursive_step(part, internal, name, tree)
        return Recursive(internal, start, step), names

    def _check_recursive_step(self, step: Rel, internal: str, name: str, tree: exp.Expr) -> None:
        refs = [n for n in step.walk() if isinstance(n, LoopRef) and n.name == internal]
        if len(refs) != 1:
            raise self.err(UnsupportedError, "UNSUPPORTED_RECURSIVE_CTE",
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
            raise self.err(UnsupportedError, "UNSUPPORTED_RECURSIVE_CTE",
                           f"this part of WITH RECURSIVE {name} reads {name} through an aggregate, DISTINCT, "
                           "a negation or an outer join", tree,
                           f"read {name} through joins, filters and projections only", construct="non-monotone recursion")

    def _loop(self, cte: _Cte, name: str, init_node: exp.Expr,
              step_trees: list[exp.Expr]) -> tuple[Rel, Rel, str, list[str]]:
        """The start and step of a loop over ``name`` (their UNION if several step trees), with
        the loop's columns of one type each: the start's, widened (a few rounds at most) to hold
        what the step computes."""
        init, names = self.query(init_node, cte.ctes)
        names = self._cte_columns(cte, names, init_node)
        internal = self.unique_alias(name)
        types = [f.type for f in init.schema]
        where = step_trees[0]
        for _ in range(4):
            fields = tuple(Field(f"{internal}.{n}", t) for n, t in zip(names, types))
            ref = LoopRef(internal, fields)
            step_ctes = {**cte.ctes, name.lower(): _Cte(None, cte.ctes, bound=(ref, names))}
            steps = [self.query(tree, step_ctes)[0] for tree in step_trees]
            for step, tree in zip(steps, step_trees):
                if len(step.schema) != len(fields):
                    raise self.err(BindError, "ITERATION_WIDTH",
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
                        raise self.err(BindError, "TYPE_MISMATCH",
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
            raise self.err(BindError, "ITERATION_TYPES",
                           f"the step of {name} keeps changing the type of its columns ({'; '.join(changing)})",
                           where, "CAST the step's columns to fixed types, e.g. DOUBLE", columns=changing)
        out = [f.name for f in fields]
        start = self._conform(init, out, types)
        conformed = [self._conform(step, out, types) for step in steps]
        body = conformed[0] if len(conformed) == 1 else Union(tuple(conformed))
        return start, body, internal, names

    def union(self, node: exp.SetOperation, ctes: dict[str, _Cte],
              parent: Scope | None = None) -> tuple[Rel, list[str]]:
        """UNION [ALL], INTERSECT [ALL], EXCEPT [ALL]: both sides widened to common column types."""
        left, names = self.query(node.left, ctes, parent)
        right, _ = self.query(node.right, ctes, parent)
        if len(left.schema) != len(right.schema):
            raise self.err(BindError, "SET_OPERATION_WIDTH",
                           f"UNION sides have {len(left.schema)} and {len(right.schema)} columns", node,
                           "select the same number of columns on both sides",
                           left=len(left.schema), right=len(right.schema))
        types = []
        for lf, rf in zip(left.schema, right.schema):
            t = common_type(lf.type, rf.type)
            if t is None:
                raise self.err(BindError, "TYPE_MISMATCH",
                               f"UNION column `{lf.name}` is {lf.type} on one side and {rf.type} on the other",
                               node, "CAST one side", left=lf.type.sql(), right=rf.type.sql())
            types.append(t)
        sides = [self._conform(left, names, types), self._conform(right, names, types)]
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
        return self._order_limit(node, rel, names, ctes)

    def _conform(self, rel: Rel, names: list[str], types: list) -> Rel:
        exprs = []
        for name, f, t in zip(names, rel.schema, types):
            ref: Expr = f.ref()
            exprs.append((name, ref if f.type == t else Cast(ref, t)))
        return Project(rel, tuple(exprs))

    def _order_limit(self, node: exp.Expr, rel: Rel, names: list[str], ctes: dict[str, _Cte]) -> tuple[Rel, list[str]]:
        """ORDER BY / LIMIT attached to a set operation or a parenthesised query: output columns only."""
        order = node.args.get("order")
        if order:
            scope = Scope([ScopeEntry.of("", [(n, f) for n, f in zip(names, rel.schema)])], self.sql)
            keys = []
            for o in order.expressions:
                e = self._ordinal(o.this, [f.ref() for f in rel.schema]) or ExprBinder(scope, "ORDER BY").bind(o.this)
                keys.append(_sort_key(o, e))
            rel = Sort(rel, tuple(keys))
        return self._limit(node, rel), names

    # -- SELECT ----------------------------------------------------------------------------------
    def subquery_hook(self, ctes: dict[str, _Cte]) -> Callable[[exp.Expr, Scope], tuple[Rel, list[str]]]:
        """Binds subqueries of expressions: the current scope encloses them."""
        return lambda node, scope: self.query(node, ctes, scope)

    def select(self, node: exp.Select, ctes: dict[str, _Cte], parent: Scope | None = None) -> tuple[Rel, list[str]]:
        for clause, text in (("windows", "WINDOW"), ("qualify", "QUALIFY")):  # both name window functions
            if node.args.get(clause):
                found = node.args[clause]
                raise self.err(UnsupportedError, "UNSUPPORTED_WINDOW",
                               f"{text} (a clause of window functions) is not supported in a continuous query",
                               found[0] if isinstance(found, list) else found, WINDOW_HINT, construct=text)
        for unsupported in ("pivots", "connect", "sample"):
            if node.args.get(unsupported):
                raise self.err(UnsupportedError, "UNSUPPORTED_CLAUSE", f"{unsupported.upper()} is not supported yet",
                               node.args[unsupported] if not isinstance(node.args[unsupported], list)
                               else node.args[unsupported][0], "docs/sql.md lists what is supported",
                               construct=unsupported)
        for item in node.expressions:  # before aggregates are looked for: `sum(x) OVER (…)` is no aggregate
            window = next((w for w in item.find_all(exp.Window) if not _inside_subquery(w, item)), None)
            if window is not None:
                raise self.err(UnsupportedError, "UNSUPPORTED_WINDOW",
                               "window functions (OVER …) are not supported in a continuous query", window,
                               WINDOW_HINT, construct="window")
        if node.args.get("distinct") and node.args["distinct"].args.get("on"):
            raise self.err(UnsupportedError, "UNSUPPORTED_CLAUSE", "DISTINCT ON is not supported",
                           node.args["distinct"], construct="DISTINCT ON")
        rel, scope = self.from_clause(node, ctes, parent)
        where = node.args.get("where")
        if where is not None:
            rel = Filter(rel, ExprBinder(scope, "WHERE", subquery=self.subquery_hook(ctes)).boolean(where.this))
        rel, generated = self._select_generators(node, rel, scope)
        items = self._select_items(node, scope, generated)
        group = node.args.get("group")
        # `GROUP BY a WITH ROLLUP` is an argument of the clause; `GROUP BY GROUPING SETS (…)`,
        # `ROLLUP (…)` and `CUBE (…)` are items of it
        parts = [] if group is None else [*group.expressions, *(p for k in ("grouping_sets", "cube", "rollup")
                                                                  for p in group.args.get(k) or [])]
        grouping = next((p for p in parts if isinstance(p, (exp.GroupingSets, exp.Cube, exp.Rollup))), None)
        if grouping is not None:
            raise self.err(UnsupportedError, "UNSUPPORTED_CLAUSE", "GROUPING SETS, CUBE and ROLLUP are not supported",
                           grouping, "write one GROUP BY query per grouping, combined with UNION ALL",
                           construct="grouping sets")
        having = node.args.get("having")
        if group is not None or having is not None or self._has_agg(items, node):
            return self._aggregate_select(node, rel, scope, items, ctes)
        return self._plain_select(node, rel, scope, items, ctes)

    def _select_items(self, node: exp.Select, scope: Scope, generated: dict[int, list[tuple[str, Column]]]
                      ) -> list[tuple[str, exp.Expr, Column | None]]:
        """(output name, node, pre-resolved column for * and generators) per select item."""
        out: list[tuple[str, exp.Expr, Column | None]] = []
        for i, item in enumerate(node.expressions):
            if i in generated:
                out.extend((name, item, ref) for name, ref in generated[i])
                continue
            if isinstance(item, exp.Star) or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star)):
                table = item.table if isinstance(item, exp.Column) and item.table else None
                for name, ref in scope.star(table, span_of(item)):
                    out.append((name, item, ref))
                continue
            # a lateral column alias (Spark): an earlier item's alias names its expression
            item = _with_aliases(item, {n.lower(): i.this for n, i, ref in out
                                        if ref is None and isinstance(i, exp.Alias)}, scope)
            out.append((self._output_name(item, scope), item, None))
        return out

    def _output_name(self, item: exp.Expr, scope: Scope) -> str:
        if isinstance(item, exp.Alias):
            return item.alias
        if isinstance(item, exp.Column):
            parts = [p.name for p in item.parts]
            entry = scope.entry(parts[0]) if len(parts) == 2 else None
            if entry is not None and parts[-1].lower() in entry.names:
                return entry.names[parts[-1].lower()]
            for e in scope.entries:
                if parts[-1].lower() in e.names:
                    return e.names[parts[-1].lower()]
            return parts[-1]
        return _pretty(item)

    def _has_agg(self, items: list[tuple[str, exp.Expr, Column | None]], node: exp.Select) -> bool:
        agg_types = tuple(_AGG_NODE_TYPES)
        nodes = [it for _, it, ref in items if ref is None]
        order = node.args.get("order")
        if order:
            nodes += order.expressions
        for n in nodes:
            for sub in n.walk():
                if isinstance(sub, agg_types) and not _inside_subquery(sub, n):
                    return True
                if isinstance(sub, exp.Anonymous) and sub.name.lower() in _ANON_AGG_NAMES:
                    return True
        return False

    def _plain_select(self, node: exp.Select, rel: Rel, scope: Scope,
                      items: list[tuple[str, exp.Expr, Column | None]],
                      ctes: dict[str, _Cte]) -> tuple[Rel, list[str]]:
        binder = ExprBinder(scope, "SELECT", subquery=self.subquery_hook(ctes))
        exprs: list[tuple[str, Expr]] = []
        for i, (name, item, ref) in enumerate(items):
            e = ref if ref is not None else binder.bind(_unalias(item))
            exprs.append((_internal_name(name, i, exprs), e))
        names = [n for n, _, _ in items]
        distinct = node.args.get("distinct") is not None
        return self._finish(node, rel, scope, exprs, names, distinct, lambda n: ExprBinder(scope, "ORDER BY").bind(n))

    def _aggregate_select(self, node: exp.Select, rel: Rel, scope: Scope,
                          items: list[tuple[str, exp.Expr, Column | None]],
                          ctes: dict[str, _Cte]) -> tuple[Rel, list[str]]:
        aggs: dict[Agg, str] = {}

        def on_agg(agg: Agg, agg_node: exp.Expr) -> Expr:
            if agg not in aggs:
                aggs[agg] = self.fresh("_agg")
            return Column(aggs[agg], agg.type)

        # GROUP BY keys: expressions, select positions, or select aliases
        keys: list[tuple[str, Expr]] = []
        key_binder = ExprBinder(scope, "GROUP BY")
        group = node.args.get("group")
        for g in self._group_items(group, items):
            if isinstance(g, Column):  # a column of `*` under GROUP BY ALL
                e: Expr = g
            else:
                e = key_binder.bind(self._group_target(g, items, scope))
                if any(isinstance(k, Column) and k.name in aggs.values() for k in e.walk()):
                    raise self.err(BindError, "AGGREGATE_IN_GROUP_BY", "GROUP BY cannot refer to an aggregate", g)
            if all(e != k for _, k in keys):
                name = e.name if isinstance(e, Column) else self.fresh("_key")
                keys.append((name, e))

        lift = _Lifter(keys, self, scope, aggs)
        select_binder = ExprBinder(scope, "SELECT", on_agg, subquery=self.subquery_hook(ctes))
        exprs: list[tuple[str, Expr]] = []
        for i, (name, item, ref) in enumerate(items):
            bound = ref if ref is not None else select_binder.bind(_unalias(item))
            exprs.append((_internal_name(name, i, exprs), lift(bound, item)))
        having_node = node.args.get("having")
        having = None
        if having_node is not None:
            condition = self._having_aliases(having_node.this, items, scope)
            having = lift(ExprBinder(scope, "HAVING", on_agg, subquery=self.subquery_hook(ctes)).boolean(condition),
                          having_node.this, having=True)

        def order_bind(n: exp.Expr) -> Expr:
            return lift(ExprBinder(scope, "ORDER BY", on_agg).bind(n), n)

        # ORDER BY may add aggregates, so bind it before building the Aggregate node.
        order_exprs = self._bind_order(node, exprs, [n for n, _, _ in items], order_bind)
        agg_rel: Rel = Aggregate(rel, tuple(keys), tuple((n, a) for a, n in aggs.items()))
        if having is not None:
            agg_rel = Filter(agg_rel, having)
        names = [n for n, _, _ in items]
        distinct = node.args.get("distinct") is not None
        return self._finish(node, agg_rel, scope, exprs, names, distinct, None, order_exprs)

    @staticmethod
    def _group_items(group: exp.Group | None, items: list[tuple[str, exp.Expr, Column | None]]
                     ) -> list[exp.Expr | Column]:
        """The GROUP BY items; ``GROUP BY ALL`` (Spark) is every select item without an aggregate."""
        if group is None:
            return []
        if not group.args.get("all"):
            return list(group.expressions)
        agg_types = tuple(_AGG_NODE_TYPES)
        return [ref if ref is not None else _unalias(item) for _, item, ref in items if ref is not None or not any(
            (isinstance(sub, agg_types) or (isinstance(sub, exp.Anonymous) and sub.name.lower() in _ANON_AGG_NAMES))
            and not _inside_subquery(sub, item) for sub in item.walk())]

    def _having_aliases(self, condition: exp.Expr, items: list[tuple[str, exp.Expr, Column | None]],
                        scope: Scope) -> exp.Expr:
        """HAVING may name a select item by its alias, as in Spark (``SELECT a, sum(b) AS t … HAVING
        t > 1`` is ``HAVING sum(b) > 1``)."""
        return _with_aliases(condition, {name.lower(): item.this for name, item, _ in items
                                         if isinstance(item, exp.Alias)}, scope)

    def _group_target(self, g: exp.Expr, items: list[tuple[str, exp.Expr, Column | None]],
                      scope: Scope) -> exp.Expr:
        if isinstance(g, exp.Literal) and not g.is_string:
            pos = int(g.this)
            if not 1 <= pos <= len(items):
                raise self.err(BindError, "INVALID_ORDINAL", f"GROUP BY position {pos} is not in the select list",
                               g, f"the select list has {len(items)} items", position=pos)
            return _unalias(items[pos - 1][1])
        if isinstance(g, exp.Column) and not g.table:
            name = g.name.lower()
            visible = any(name in e.columns for e in scope.entries) or name in scope.merged
            if not visible:
                for out_name, item, _ in items:
                    if out_name.lower() == name and isinstance(item, exp.Alias):
                        return item.this
        return g

    def _bind_order(self, node: exp.Select, exprs: list[tuple[str, Expr]], names: list[str],
                    bind_fn: Callable[[exp.Expr], Expr]) -> list[tuple[SortKey, str | None]]:
        """Bind ORDER BY items: (key over the select output or the input, output column it names)."""
        order = node.args.get("order")
        out: list[tuple[SortKey, str | None]] = []
        for o in (order.expressions if order else []):
            target = o.this
            if isinstance(target, exp.Literal) and not target.is_string:
                pos = int(target.this)
                if not 1 <= pos <= len(exprs):
                    raise self.err(BindError, "INVALID_ORDINAL", f"ORDER BY position {pos} is not in the select list",
                                   target, f"the select list has {len(exprs)} items", position=pos)
                out.append((_sort_key(o, Column(exprs[pos - 1][0], exprs[pos - 1][1].type)), exprs[pos - 1][0]))
                continue
            if isinstance(target, exp.Column) and not target.table:
                match = [i for i, n in enumerate(names) if n.lower() == target.name.lower()]
                if len(match) == 1:
                    i = match[0]
                    out.append((_sort_key(o, Column(exprs[i][0], exprs[i][1].type)), exprs[i][0]))
                    continue
            e = bind_fn(target)
            same = [n for n, x in exprs if x == e]
            if same:
                out.append((_sort_key(o, Column(same[0], e.type)), same[0]))
            else:
                out.append((_sort_key(o, e), None))
        return out

    def _finish(self, node: exp.Select, rel: Rel, scope: Scope, exprs: list[tuple[str, Expr]], names: list[str],
                distinct: bool, order_bind: Callable[[exp.Expr], Expr] | None,
                order: list[tuple[SortKey, str | None]] | None = None) -> tuple[Rel, list[str]]:
        if order is None:
            assert order_bind is not None
            order = self._bind_order(node, exprs, names, order_bind)
        hidden: list[tuple[str, Expr]] = []
        keys: list[SortKey] = []
        for key, out_name in order:
            if out_name is not None:
                keys.append(key)
                continue
            if distinct:
                raise self.err(BindError, "ORDER_BY_NOT_SELECTED",
                               "with SELECT DISTINCT, ORDER BY may only use selected columns",
                               node.args["order"], "add the expression to the select list")
            hidden_name = self.fresh("_sort")
            hidden.append((hidden_name, key.expr))
            keys.append(SortKey(Column(hidden_name, key.expr.type), key.descending, key.nulls_first))
        out: Rel = Project(rel, tuple(exprs) + tuple(hidden))
        if distinct:
            out = Distinct(out)
        if keys:
            out = Sort(out, tuple(keys))
        out = self._limit(node, out)
        if hidden:
            out = Project(out, tuple((n, Column(n, e.type)) for n, e in exprs))
        return out, names

    def _limit(self, node: exp.Expr, rel: Rel) -> Rel:
        limit_node = node.args.get("limit")
        offset_node = node.args.get("offset")
        if limit_node is None and offset_node is None:
            return rel
        limit = self._count(limit_node.expression, "LIMIT") if limit_node is not None else None
        offset = self._count(offset_node.expression, "OFFSET") if offset_node is not None else 0
        return Limit(rel, limit, offset)

    def _count(self, node: exp.Expr, clause: str) -> int:
        if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
            return int(node.this)
        raise self.err(BindError, "INVALID_LIMIT", f"{clause} must be a non-negative whole number", node,
                       f"write {clause} n with a whole number n ≥ 0", clause=clause)

    def _ordinal(self, node: exp.Expr, refs: list[Column]) -> Expr | None:
        if isinstance(node, exp.Literal) and not node.is_string:
            pos = int(node.this)
            if not 1 <= pos <= len(refs):
                raise self.err(BindError, "INVALID_ORDINAL", f"ORDER BY position {pos} is out of range", node,
                               position=pos)
            return refs[pos - 1]
        return None

    # -- FROM ------------------------------------------------------------------------------------
    def from_clause(self, node: exp.Select, ctes: dict[str, _Cte], parent: Scope | None = None) -> tuple[Rel, Scope]:
        from_ = node.args.get("from_") or node.args.get("from")
        if from_ is None:
            raise self.err(UnsupportedError, "NO_FROM", "a continuous query must read at least one source", node,
                           "add FROM <source>")
        scope = Scope([], self.sql, parent=parent)
        rel = self.table_ref(from_.this, ctes, scope)
        for join in node.args.get("joins") or []:
            right = self.table_ref(join.this, ctes, scope)
            rel = self.join(join, rel, right, scope)
        for lateral in node.args.get("laterals") or []:
            rel = self.lateral_view(lateral, rel, scope)
        return rel, scope

    # -- LATERAL VIEW and generators -------------------------------------------------------------
    def lateral_view(self, node: exp.Lateral, rel: Rel, scope: Scope) -> Rel:
        """``LATERAL VIEW [OUTER] explode(arr) t AS v`` / ``posexplode(arr) t AS pos, v``."""
        gen = node.this
        if not node.args.get("view") or not isinstance(gen, exp.Explode):
            raise self.err(UnsupportedError, "UNSUPPORTED_CLAUSE",
                           f"`{node.sql(dialect='spark').strip()}` is not supported", node,
                           "use LATERAL VIEW [OUTER] explode(array) or posexplode(array)", construct="lateral")
        alias = node.args.get("alias")
        view = alias.name if alias is not None and alias.name else self.fresh("_gen")
        names = [c.name for c in alias.columns] if alias is not None and alias.columns else []
        outer = bool(node.args.get("outer")) or _outer_generator(gen)
        return self._explode(gen, rel, scope, view, names, outer, node)

    def _explode(self, gen: exp.Explode, rel: Rel, scope: Scope, view: str, names: list[str], outer: bool,
                 node: exp.Expr) -> Explode:
        with_position = isinstance(gen, exp.Posexplode)
        fn = type(gen).__name__.lower().lstrip("_").replace("outer", "_outer")
        defaults = ["pos", "col"] if with_position else ["col"]
        if not names:
            names = defaults
        if len(names) != len(defaults):
            raise self.err(BindError, "GENERATOR_COLUMNS",
                           f"`{fn}` makes {len(defaults)} column(s), but {len(names)} name(s) are given", node,
                           f"name them like `AS {', '.join(defaults)}`", function=fn, expected=len(defaults))
        if gen.expressions:
            raise self.err(BindError, "WRONG_ARGUMENTS", f"`{fn}` takes one array", gen, function=fn)
        array = ExprBinder(scope, "LATERAL VIEW").bind(gen.this)
        if array.type.name != "ARRAY":
            raise self.err(BindError, "TYPE_MISMATCH", f"`{fn}` needs an array, but its argument is {array.type}",
                           gen, "explode works on ARRAY columns (MAP columns are not supported)",
                           expected="ARRAY", actual=array.type.sql())
        self._check_alias(view, node, scope)
        internal = self.unique_alias(view)
        cols = [f"{internal}.{n}" for n in names]
        out = Explode(rel, array, cols[-1], cols[0] if with_position else None, outer)
        scope.entries.append(ScopeEntry.of(view, [(n, out.field(c)) for n, c in zip(names, cols)]))
        return out

    def _select_generators(self, node: exp.Select, rel: Rel,
                           scope: Scope) -> tuple[Rel, dict[int, list[tuple[str, Column]]]]:
        """``SELECT explode(arr) AS v …``: Spark's generator in the select list, which runs after
        WHERE. It becomes an Explode under the projection; the item reads its columns."""
        gens = [(i, item) for i, item in enumerate(node.expressions) if isinstance(_unalias_all(item), exp.Explode)]
        for item in node.expressions:
            for sub in item.walk():
                if isinstance(sub, (exp.Explode, exp.Inline)) and _unalias_all(item) is not sub:
                    raise self.err(UnsupportedError, "UNSUPPORTED_GENERATOR",
                                   "a generator must be a whole select item, not part of an expression", sub,
                                   "explode in a LATERAL VIEW and use its column", construct="generator")
        if not gens:
            return rel, {}
        if len(gens) > 1:
            raise self.err(UnsupportedError, "UNSUPPORTED_GENERATOR", "only one generator is allowed per SELECT",
                           gens[1][1], "use LATERAL VIEW for the others", construct="generator")
        has_group = node.args.get("group") is not None or node.args.get("having") is not None
        if has_group or self._has_agg([("", it, None) for it in node.expressions], node):
            raise self.err(UnsupportedError, "UNSUPPORTED_GENERATOR",
                           "a generator cannot be combined with GROUP BY or aggregates in one SELECT", gens[0][1],
                           "explode in a LATERAL VIEW (or a subquery) and aggregate over its column",
                           construct="generator")
        i, item = gens[0]
        gen = _unalias_all(item)
        assert isinstance(gen, exp.Explode)
        if isinstance(item, exp.Aliases):
            names = [a.name for a in item.expressions]
        elif isinstance(item, exp.Alias):
            names = [item.alias]
        else:
            names = []
        out = self._explode(gen, rel, scope, self.fresh("_gen"), names, _outer_generator(gen), item)
        entry = scope.entries.pop()  # its columns are select items, not names for the rest of the query
        return out, {i: [(entry.names[k], f.ref()) for k, f in entry.columns.items()]}

    def table_ref(self, node: exp.Expr, ctes: dict[str, _Cte], scope: Scope) -> Rel:
        self._table_clauses(node)
        if isinstance(node, exp.Table):
            if node.args.get("db") or node.args.get("catalog"):
                raise self.err(UnsupportedError, "UNSUPPORTED_TABLE_NAME",
                               f"qualified table name `{node.sql()}` is not supported", node,
                               "name sources with --source NAME=PATH and use NAME", construct="qualified table")
            name = node.name
            alias = node.alias or name
            self._check_alias(alias, node, scope)
            internal = self.unique_alias(alias)
            cte = ctes.get(name.lower())
            if cte is not None:
                if cte.bound is not None:
                    inner, names = cte.bound
                elif cte.loop is not None:
                    inner, names = self.iterate(cte, name, node)
                elif cte.recursive:
                    inner, names = self.recursive(cte, name)
                else:
                    assert cte.node is not None
                    inner, names = self.query(cte.node, cte.ctes)
                    names = self._cte_columns(cte, names, cte.node)
                return self._derived(inner, names, alias, internal, scope)
            if name.lower() not in {n.lower() for n in self.catalog}:
                raise self.err(BindError, "UNKNOWN_TABLE", f"unknown table `{name}`", node,
                               did_you_mean(name, list(self.catalog) + [c for c in ctes])
                               or f"known sources: {', '.join(self.catalog) or 'none'} (add --source {name}=PATH)",
                               table=name)
            source = self.catalog[name]
            fields = tuple(Field(f"{internal}.{c}", t) for c, t in source.columns)
            scan = Scan(source.name, internal, fields, tuple(c for c, _ in source.columns),
                        static=source.static, weighted=source.weighted)
            scope.entries.append(ScopeEntry.of(alias, [(c, f) for (c, _), f in zip(source.columns, fields)]))
            return scan
        if isinstance(node, exp.Subquery):
            try:
                inner, names = self.query(node.this, ctes)
            except BindError as e:
                self._outer_reference_in_derived_table(e, scope)
                raise
            table_alias = node.args.get("alias")
            if table_alias is not None and table_alias.columns:
                names = self._cte_columns(_Cte(None, {}, [c.name for c in table_alias.columns]), names, node)
            alias = node.alias
            if not alias:
                self._auto_alias += 1
                alias = f"_sub{self._auto_alias}"
            self._check_alias(alias, node, scope)
            return self._derived(inner, names, alias, self.unique_alias(alias), scope)
        raise self.err(UnsupportedError, "UNSUPPORTED_FROM", f"`{node.sql(dialect='spark')}` in FROM is not supported",
                       node, construct=node.key)

    def _table_clauses(self, node: exp.Expr) -> None:
        """Clauses on a table reference that change which rows it gives — refused, never ignored
        (``F TABLESAMPLE (10 PERCENT)`` read as all of ``F`` would be a wrong answer)."""
        clauses = {"pivots": ("PIVOT", "aggregate with GROUP BY and CASE (sum(CASE WHEN k = 'a' THEN v END))"),
                   "sample": ("TABLESAMPLE", "a continuous query keeps the answer over all rows; filter them "
                                             "with a condition in WHERE instead"),
                   "version": ("time travel (VERSION/TIMESTAMP AS OF)", "the inputs are the source directories"),
                   "hints": ("table hints", "remove the hint")}
        for arg, (construct, hint) in clauses.items():
            value = node.args.get(arg)
            if value and arg == "pivots" and value[0].args.get("unpivot"):
                construct, hint = "UNPIVOT", "write one SELECT per column, joined with UNION ALL"
            if value:
                raise self.err(UnsupportedError, "UNSUPPORTED_CLAUSE", f"{construct} is not supported",
                               value[0] if isinstance(value, list) else value, hint, construct=construct)

    def _outer_reference_in_derived_table(self, error: BindError, scope: Scope) -> None:
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
            code="UNSUPPORTED_SUBQUERY", sql=self.sql, span=error.span,
            params={"construct": "correlated derived table", "column": str(error.params["column"])},
            hint="select the column it compares with in the derived table, and write the condition "
                 "outside it (in the WHERE or ON around it)") from None

    def _derived(self, inner: Rel, names: list[str], alias: str, internal: str, scope: Scope) -> Rel:
        exprs = tuple((f"{internal}.{n}", f.ref()) for n, f in zip(names, inner.schema))
        rel = Project(inner, exprs)
        scope.entries.append(ScopeEntry.of(alias, [(n, f) for n, f in zip(names, rel.schema)]))
        return rel

    def _check_alias(self, alias: str, node: exp.Expr, scope: Scope) -> None:
        if scope.entry(alias) is not None:
            raise self.err(BindError, "DUPLICATE_ALIAS", f"`{alias}` names two tables in FROM", node,
                           "give each occurrence its own alias, e.g. `S a JOIN S b`", alias=alias)

    def join(self, join: exp.Join, left: Rel, right: Rel, scope: Scope) -> Rel:
        side = (join.side or "").lower()
        kind = (join.kind or "").lower()
        method = str(join.args.get("method") or "").upper()
        if method and method != "NATURAL":
            raise self.err(UnsupportedError, "UNSUPPORTED_JOIN", f"{method} JOIN is not supported", join,
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
        using = join.args.get("using") or (self._natural(join, scope) if method else None)
        condition: Expr | None = None
        if using:
            right_entry = scope.entries[-1]
            preds = []
            for ident in using:
                col = ident.name.lower()
                left_hits = [e for e in scope.entries[:-1] if col in e.columns]
                # after `A JOIN B USING (k)`, the left side of `… JOIN C USING (k)` has one k: the merged one
                merged = scope.merged.get(col)
                if (len(left_hits) != 1 and merged is None) or col not in right_entry.columns:
                    raise self.err(BindError, "UNKNOWN_COLUMN", f"USING column `{ident.name}` must be on both sides",
                                   ident, "name a column both sides have (once on the left)", column=ident.name)
                lf, rf = merged if merged is not None else left_hits[0].columns[col], right_entry.columns[col]
                preds.append(Call("=", (lf.ref(), rf.ref()), BOOLEAN))
                if jkind in ("inner", "left", "semi", "anti"):
                    scope.merged[col] = lf
                elif jkind == "right":
                    scope.merged[col] = rf
                else:
                    raise self.err(UnsupportedError, "UNSUPPORTED_JOIN", "FULL JOIN … USING is not supported", join,
                                   "write the condition with ON", construct="full join using")
            condition = and_all(preds)
        elif on is not None:
            condition = ExprBinder(scope, "ON").boolean(on)
        elif jkind not in ("cross", "inner"):
            raise self.err(BindError, "MISSING_JOIN_CONDITION", f"{jkind.upper()} JOIN needs an ON condition", join)
        if condition is None and jkind == "inner":
            jkind = "cross"
        if jkind in ("semi", "anti"):
            scope.entries.pop()  # the right side of a semi/anti join is not visible after it
        return Join(left, right, JoinKind(jkind), condition)

    def _natural(self, join: exp.Join, scope: Scope) -> list[exp.Identifier]:
        """A NATURAL join's USING columns: those the right side shares with the left, in the left's
        order (none: a cross join, as in Spark)."""
        right = scope.entries[-1].columns
        names = list(scope.merged) + [c for e in scope.entries[:-1] for c in e.columns]
        shared = [c for c in dict.fromkeys(names) if c in right]
        for col in shared:
            owners = [e.alias for e in scope.entries[:-1] if col in e.columns]
            if len(owners) > 1 and col not in scope.merged:
                raise self.err(BindError, "AMBIGUOUS_COLUMN",
                               f"NATURAL JOIN: column `{col}` is in {' and '.join(owners)} on its left", join,
                               "join with USING (col, …) or ON, naming which column to compare", column=col)
        return [exp.to_identifier(scope.entries[-1].names[c]) for c in shared]


# -- helpers ---------------------------------------------------------------------------------------
_AGG_NODE_TYPES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max, exp.Stddev, exp.StddevSamp, exp.StddevPop,
                   exp.Variance, exp.VariancePop, exp.AggFunc)
_ANON_AGG_NAMES = {"var_samp", "var_pop", "stddev_samp", "stddev_pop", "std", "mean"}


def _with_aliases(node: exp.Expr, aliases: dict[str, exp.Expr], scope: Scope) -> exp.Expr:
    """``node`` with each unqualified name of an alias in ``aliases`` (lower-case) replaced by the
    aliased expression: a name that is a column of the input stays that column, and names inside
    a subquery are the subquery's own (Spark's rule for lateral column aliases and HAVING)."""
    def aliased(n: exp.Expr) -> bool:
        return (isinstance(n, exp.Column) and not n.table and isinstance(n.this, exp.Identifier)
                and n.name.lower() in aliases and not _inside_subquery(n, node)
                and not any(n.name.lower() in e.columns for e in scope.entries) and n.name.lower() not in scope.merged)

    if not aliases or not any(aliased(n) for n in node.walk()):
        return node
    return node.transform(lambda n: aliases[n.name.lower()].copy() if aliased(n) else n, copy=True)


def _inside_subquery(sub: exp.Expr, root: exp.Expr) -> bool:
    if sub is root:
        return False
    p = sub.parent
    while p is not None and p is not root:
        if isinstance(p, (exp.Subquery, exp.Select)):
            return True
        p = p.parent
    return False


def _reads(node: exp.Expr, name: str) -> bool:
    """Whether a query tree reads a table called ``name`` (a recursive CTE reading itself)."""
    return any(t.name.lower() == name.lower() for t in node.find_all(exp.Table))


def _within(span: tuple[int, int] | None, outer: tuple[int, int]) -> bool:
    return span is not None and outer[0] <= span[0] and span[1] <= outer[1]


def _unalias(node: exp.Expr) -> exp.Expr:
    return node.this if isinstance(node, exp.Alias) else node


def _unalias_all(node: exp.Expr) -> exp.Expr:
    """A select item without its alias or aliases (``posexplode(a) AS (p, v)``)."""
    return node.this if isinstance(node, (exp.Alias, exp.Aliases)) else node


def _outer_generator(gen: exp.Expr) -> bool:
    """``explode_outer`` / ``posexplode_outer``."""
    return type(gen).__name__.lower().endswith("outer")


def _internal_name(name: str, index: int, taken: list[tuple[str, Expr]]) -> str:
    used = {n for n, _ in taken}
    return name if name not in used and not name.startswith(("_sort", "_agg", "_key")) else f"_col{index}"


def _sort_key(o: exp.Ordered, e: Expr) -> SortKey:
    desc = bool(o.args.get("desc"))
    nulls_first = o.args.get("nulls_first")
    explicit = _explicit_nulls(o)
    return SortKey(e, desc, nulls_first if explicit else None)


def _explicit_nulls(o: exp.Ordered) -> bool:
    text = o.sql(dialect="spark").upper()
    return "NULLS FIRST" in text or "NULLS LAST" in text


def _pretty(item: exp.Expr) -> str:
    """An approximation of the name Spark gives an unaliased select expression."""
    clone = item.copy()
    for col in clone.find_all(exp.Column):
        col.set("table", None)
    text = clone.sql(dialect="spark")
    if isinstance(item, exp.Func) and "(" in text:
        head, rest = text.split("(", 1)
        text = head.lower() + "(" + rest
    if text.lower().startswith("count(*)"):
        text = "count(1)" + text[8:]
    return text


class _Lifter:
    """Rewrites a bound select/HAVING/ORDER BY expression over the Aggregate's output.

    Group-key expressions become references to the key column (matched whole, top-down), so
    ``x.A + 1`` in SELECT matches ``GROUP BY x.A + 1``. A column left over that is neither a key
    nor inside an aggregate is the classic mistake, reported as ``NOT_AGGREGATED``.
    """

    def __init__(self, keys: list[tuple[str, Expr]], binder: _QueryBinder, scope: Scope,
                 aggs: dict[Agg, str]) -> None:
        self.keys = {e: Column(n, e.type) for n, e in keys}
        self.aggs = aggs
        self.binder = binder
        self.scope = scope

    def __call__(self, e: Expr, node: exp.Expr, having: bool = False) -> Expr:
        return self._lift(e, node, having)

    def _lift(self, e: Expr, node: exp.Expr, having: bool = False) -> Expr:
        if e in self.keys:
            return self.keys[e]
        if isinstance(e, SubqueryExpr):
            self._correlated(e, node, having)
            return e.with_children(tuple(self._lift(k, node, having) for k in e.children())) if e.children() else e
        if isinstance(e, Column):
            if e.name in self.aggs.values():
                return e
            raise self._not_aggregated(e, node)
        kids = e.children()
        if not kids:
            return e
        return e.with_children(tuple(self._lift(k, node, having) for k in kids))

    def _correlated(self, e: SubqueryExpr, node: exp.Expr, having: bool) -> None:
        """A subquery after GROUP BY may read this block's group keys, in HAVING (as Spark allows):
        the Aggregate outputs a column key under its own name."""
        own = {f.name for entry in self.scope.entries for f in entry.columns.values()}
        own |= {f.name for f in self.scope.merged.values()}
        read = outer_columns(e.rel) & own
        if not read:
            return
        if not having:
            raise self.binder.err(UnsupportedError, "UNSUPPORTED_SUBQUERY",
                                  "a correlated subquery in the select list or ORDER BY after GROUP BY is not "
                                  "supported", node, "correlate it in HAVING or WHERE (Spark refuses it here too)",
                                  construct="subquery")
        keys = {k.name for x, k in self.keys.items() if isinstance(x, Column) and x.name == k.name}
        missing = sorted(read - keys)
        if missing:
            raise self._not_aggregated(Column(missing[0], e.type), node)

    def _not_aggregated(self, col: Column, node: exp.Expr) -> SqlError:
        short = col.name.split(".", 1)[-1]
        spot = next((c for c in node.find_all(exp.Column) if c.name.lower() == short.lower()), node)
        return self.binder.err(
            BindError, "NOT_AGGREGATED",
            f"column `{col.name}` is neither in GROUP BY nor inside an aggregate", spot,
            f"add `{col.name}` to GROUP BY, or aggregate it (e.g. max({col.name}))", column=col.name,
        )
