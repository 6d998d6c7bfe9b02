"""Name resolution: which relation in the FROM clause a column reference belongs to."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import BindError, Span, UnsupportedError, did_you_mean
from ..ir.expr import Column, Expr, OuterColumn
from ..ir.rel import Field


@dataclass
class ScopeEntry:
    """One relation visible in a FROM clause, under ``alias``."""

    alias: str
    columns: dict[str, Field]  # lower-cased column name -> field of the bound relation
    names: dict[str, str]  # lower-cased column name -> the column's own spelling

    @classmethod
    def of(cls, alias: str, pairs: list[tuple[str, Field]]) -> ScopeEntry:
        return cls(alias, {c.lower(): f for c, f in pairs}, {c.lower(): c for c, _ in pairs})


@dataclass(frozen=True)
class TimeWindow:
    """The block's time window (``window(ts, …)``, :mod:`.bind.time_windows`): the name it is read by
    and its value, a STRUCT of the start and end columns the block computes."""

    name: str
    value: Expr


@dataclass
class Scope:
    entries: list[ScopeEntry]
    sql: str
    # USING columns: an unqualified reference picks the left side and is not ambiguous
    merged: dict[str, Field] = field(default_factory=dict)
    parent: Scope | None = None  # the enclosing query's scope, for correlated subqueries
    time_window: TimeWindow | None = None  # GROUP BY window(ts, …): read as `window`

    def entry(self, alias: str) -> ScopeEntry | None:
        for e in self.entries:
            if e.alias.lower() == alias.lower():
                return e
        return None

    def resolve(self, table: str | None, column: str, span: Span | None) -> Column | OuterColumn:
        """The column a name refers to — here, or (as an outer reference) in an enclosing query."""
        try:
            return self._resolve_here(table, column, span)
        except BindError as e:
            if self.parent is None or e.code not in ("UNKNOWN_COLUMN", "UNKNOWN_TABLE_ALIAS"):
                raise
            try:
                found = self.parent.resolve(table, column, span)
            except BindError:
                raise e from None
            return self._outer(found, span)

    def resolve_path(self, parts: list[str], span: Span | None) -> tuple[Column | OuterColumn, list[str]]:
        """``a.b.c…`` as (a column, the struct fields still to read): here ``a`` is a table alias
        (``b`` its column) or else a STRUCT column (``b`` its field); only when it is neither here
        is it looked up in the enclosing query — Spark's order, so ``s.k`` in a subquery over a
        table with a column ``s`` is that column's field even if the outer query has a table ``s``."""
        try:
            return self._resolve_here(parts[0], parts[1], span), parts[2:]
        except BindError as qualified:
            if qualified.code != "UNKNOWN_TABLE_ALIAS":
                raise
            try:
                return self._resolve_here(None, parts[0], span), parts[1:]
            except BindError as plain:
                if self.parent is None or plain.code != "UNKNOWN_COLUMN":
                    raise qualified from None
                try:
                    found, rest = self.parent.resolve_path(parts, span)
                except BindError:
                    raise qualified from None
                return self._outer(found, span), rest

    def _outer(self, found: Column | OuterColumn, span: Span | None) -> OuterColumn:
        """A column the enclosing query resolved, as this query's outer reference; refused when
        the enclosing query itself found it further out (unnesting joins a subquery with the
        query right around it only, and Spark does not resolve most of these either)."""
        if isinstance(found, OuterColumn):
            raise UnsupportedError(
                f"`{found.name}` is a column of a query two or more levels out; a subquery may read "
                "only the query right around it", code="UNSUPPORTED_SUBQUERY", sql=self.sql, span=span,
                params={"construct": "subquery", "column": found.name},
                hint="join the column into the query around the subquery (or correlate there)")
        return OuterColumn(found.name, found.type)

    def _resolve_here(self, table: str | None, column: str, span: Span | None) -> Column:
        key = column.lower()
        if table is not None:
            entry = self.entry(table)
            if entry is None:
                raise BindError(
                    f"unknown table or alias `{table}` in `{table}.{column}`", code="UNKNOWN_TABLE_ALIAS",
                    sql=self.sql, span=span, params={"alias": table, "column": column},
                    hint=did_you_mean(table, [e.alias for e in self.entries])
                    or f"tables in scope: {', '.join(e.alias for e in self.entries) or 'none'}",
                )
            f = entry.columns.get(key)
            if f is None:
                raise BindError(
                    f"unknown column `{column}` in `{entry.alias}`", code="UNKNOWN_COLUMN",
                    sql=self.sql, span=span, params={"column": column, "table": entry.alias},
                    hint=did_you_mean(column, entry.names.values())
                    or f"`{entry.alias}` has columns {', '.join(entry.names.values())}",
                )
            return f.ref()
        if key in self.merged:
            return self.merged[key].ref()
        found = [(e, e.columns[key]) for e in self.entries if key in e.columns]
        if len(found) > 1:
            options = ", ".join(f"`{e.alias}.{e.names[key]}`" for e, _ in found)
            raise BindError(
                f"column `{column}` is ambiguous: it is in {options}", code="AMBIGUOUS_COLUMN",
                sql=self.sql, span=span, params={"column": column, "candidates": [e.alias for e, _ in found]},
                hint=f"qualify it, e.g. `{found[0][0].alias}.{column}`",
            )
        if not found:
            everything = [n for e in self.entries for n in e.names.values()]
            where = ", ".join(f"`{e.alias}`" for e in self.entries)
            raise BindError(
                f"unknown column `{column}`" + (f" (looked in {where})" if where else ""),
                code="UNKNOWN_COLUMN", sql=self.sql, span=span, params={"column": column, "table": None},
                hint=did_you_mean(column, everything) or f"available columns: {', '.join(everything)}",
            )
        return found[0][1].ref()

    def star(self, table: str | None, span: Span | None) -> list[tuple[str, Column]]:
        """The columns ``*`` or ``t.*`` expands to, as (output name, reference)."""
        if table is not None:
            entry = self.entry(table)
            if entry is None:
                raise BindError(
                    f"unknown table or alias `{table}` in `{table}.*`", code="UNKNOWN_TABLE_ALIAS",
                    sql=self.sql, span=span, params={"alias": table, "column": "*"},
                    hint=did_you_mean(table, [e.alias for e in self.entries]),
                )
            return [(entry.names[k], f.ref()) for k, f in entry.columns.items()]
        out: list[tuple[str, Column]] = []
        for key, f in self.merged.items():
            owner = next(e for e in self.entries if key in e.columns)
            out.append((owner.names[key], f.ref()))
        for e in self.entries:
            for k, f in e.columns.items():
                if k in self.merged:
                    continue
                out.append((e.names[k], f.ref()))
        return out
