"""Parsing with sqlglot (Spark dialect), and where a sqlglot node sits in the query text."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError

from ..errors import ParseError, Span
from .batch_text import deterministic_extremes, tolerant_division
from .iterate import Iterative, extract, spark_schema_text
from .pipe import unpipe
from .window_text import mark_window_calls


@dataclass(frozen=True, eq=False)
class ParsedQuery:
    """A query's text parsed once: the tree of its text with the iterations taken out
    (:func:`.iterate.extract`), the iterations, and each one's step parsed. The binder and the
    Spark text of the query (:meth:`spark_sql`) read these trees and never change them; outside
    this package the value is opaque (``plan.compilation`` keeps it between phases)."""

    sql: str
    tree: exp.Query
    loops: Mapping[str, Iterative]  # by lower-cased name
    steps: Mapping[str, exp.Query]  # each loop's step, by the loop's lower-cased name
    written: str  # the text parsed: ``sql``, pipe syntax written out (:func:`.pipe.unpipe`); errors mark it

    def spark_sql(self) -> str:
        """A query Spark can analyse for the query's output columns (:func:`.iterate.spark_schema_text`)."""
        return spark_schema_text(self.tree, self.loops, self.steps)

    def batch_sql(self) -> str:
        """The batch query as a recompute runs it: :meth:`spark_sql` with streamfold's division
        (NULL for a zero divisor, :func:`.batch_text.tolerant_division`) and ties of ``max_by``
        broken as the incremental plan breaks them (:func:`.batch_text.deterministic_extremes`);
        the same columns."""
        return spark_schema_text(tolerant_division(deterministic_extremes(self.tree)), self.loops, self.steps)


def parse_query(sql: str) -> ParsedQuery:
    """Parse ``sql``, iterations and all, pipe syntax written out (:func:`.pipe.unpipe`); coded
    errors as :func:`parse`."""
    written = unpipe(sql)
    text, loops = extract(written)
    return ParsedQuery(sql, _parse_marked(text), loops,
                       {name: _parse_marked(loop.step_sql) for name, loop in loops.items()}, written)


def _parse_marked(text: str) -> exp.Query:
    """:func:`parse` of ``text`` with its ``window(`` calls renamed (:mod:`.window_text`); an error
    shows the text as written (the renaming keeps every position)."""
    try:
        return parse(mark_window_calls(text))
    except ParseError as e:
        e.sql = text
        raise


def parse(sql: str) -> exp.Query:
    """Parse exactly one query; a syntax error becomes a ``PARSE_ERROR`` with the spot marked."""
    try:
        # (a comment after the last `;` is a Semicolon "statement" of sqlglot's, holding the comment)
        statements = [s for s in sqlglot.parse(sql, read="spark") if s is not None and not isinstance(s, exp.Semicolon)]
    except SqlglotParseError as e:
        first = e.errors[0] if e.errors else {}
        span = _span_from_position(sql, first.get("line"), first.get("col"), first.get("highlight") or "")
        description = _friendly(first.get("description") or str(e))
        raise ParseError(
            f"syntax error: {description}", code="PARSE_ERROR", sql=sql, span=span,
            params={"description": description},
            hint="streamfold reads Spark SQL; check the marked spot",
        ) from None
    except TokenError as e:
        raise ParseError(f"cannot read the query: {e}", code="PARSE_ERROR", sql=sql,
                         params={"description": str(e)}) from None
    if not statements:
        raise ParseError("the query is empty", code="EMPTY_QUERY", sql=sql,
                         hint="give the SELECT query as text or as the path of a .sql file")
    if len(statements) > 1:
        raise ParseError(
            f"expected one query, found {len(statements)} statements", code="MULTIPLE_STATEMENTS",
            sql=sql, params={"count": len(statements)}, hint="remove the extra statements",
        )
    stmt = statements[0]
    if not isinstance(stmt, exp.Query):
        raise ParseError(
            f"expected a query (SELECT …), found {stmt.key.upper()}", code="NOT_A_QUERY",
            sql=sql, span=span_of(stmt), params={"statement": stmt.key},
            hint="streamfold maintains the answer of a SELECT query",
        )

    return stmt


def _friendly(description: str) -> str:
    """sqlglot's parser messages in SQL words."""
    description = re.sub(r"<class 'sqlglot\.[\w.]*\.(\w+)'>", r"\1", description)
    m = re.match(r"Required keyword: '(\w+)' missing for (\w+)", description)
    if m:
        what = re.sub(r"(?<!^)(?=[A-Z])", " ", m.group(2)).upper()
        return f"{what} is incomplete: something is missing after it"
    return description


def _span_from_position(sql: str, line: int | None, col: int | None, token: str) -> Span | None:
    if not line or not col:
        return None
    lines = sql.split("\n")
    offset = sum(len(x) + 1 for x in lines[: line - 1])
    end = offset + col - 1
    start = max(offset, end - max(len(token), 1) + 1)
    return (start, end)


def span_of(node: exp.Expr | None) -> Span | None:
    """The stretch of query text a node covers, from the positions sqlglot keeps on its tokens."""
    if node is None:
        return None
    lo: int | None = None
    hi: int | None = None
    for n in node.walk():
        meta = getattr(n, "_meta", None)
        if not meta or "start" not in meta:
            continue
        s, e = meta["start"], meta["end"]
        lo = s if lo is None else min(lo, s)
        hi = e if hi is None else max(hi, e)
    if lo is None or hi is None:
        return None
    return (lo, hi)


def widen_to_call(sql: str, span: Span | None) -> Span | None:
    """Extend a span that ends inside a call to cover the closing parenthesis."""
    if span is None:
        return None
    lo, hi = span
    depth = 0
    i = lo
    while i <= hi and i < len(sql):
        if sql[i] == "(":
            depth += 1
        elif sql[i] == ")":
            depth -= 1
        i += 1
    while depth > 0 and i < len(sql):
        if sql[i] == "(":
            depth += 1
        elif sql[i] == ")":
            depth -= 1
            if depth == 0:
                return (lo, i)
        i += 1
    return span
