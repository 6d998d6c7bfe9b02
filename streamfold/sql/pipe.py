"""Spark's SQL pipe syntax (``FROM t |> WHERE x > 1 |> AGGREGATE sum(v) AS s GROUP BY k``),
written as the standard query it means before the query is parsed.

Each ``|>`` operator applies to the rows of everything before it. An operator is folded into the
query built so far where SQL's clause order gives the same rows, and the query so far becomes a
derived table under it where not::

    FROM t |> WHERE x > 1 |> AGGREGATE sum(v) AS s GROUP BY k |> WHERE s > 10
      → SELECT * FROM (SELECT k, sum(v) AS s FROM t WHERE x > 1 GROUP BY k) AS t WHERE s > 10

``WHERE``, ``SELECT``, ``EXTEND``, ``DROP`` (``* EXCEPT (…)``), ``AGGREGATE`` and a ``JOIN`` fold
into a query that is still ``SELECT * FROM …`` (with a ``WHERE``, but a join only without one: a
filter before an outer join is not one after it); ``ORDER BY`` folds in unless the query has one or a limit, ``LIMIT`` and
``OFFSET`` unless it has them. A derived table takes the name of the query's one table (or the
``|> AS`` name), so ``t.x`` still reads ``x`` after it, as in Spark. Operators nested in
parentheses (a subquery written with pipes) are written out first. ``PIVOT`` and ``UNPIVOT``
apply to the query so far as a derived table (``SELECT * FROM (…) AS t PIVOT (…)``).

sqlglot reads pipe syntax too, but not as Spark does (it drops ``SELECT DISTINCT`` and moves a
``WHERE`` after an aggregate query into it), so the text is rewritten here and sqlglot reads
the result. What Spark refuses or this cannot write without the input's columns is
``UNSUPPORTED_PIPE``: ``SET`` (which keeps a column in its place), ``TABLESAMPLE``, an aggregate
in ``SELECT``/``EXTEND``/``WHERE`` (Spark's ``|> AGGREGATE`` computes them), and ``GROUP BY`` positions in ``AGGREGATE``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError as SqlglotParseError
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from ..errors import UnsupportedError

_OPEN = (TokenType.L_PAREN, TokenType.L_BRACKET, TokenType.L_BRACE)
_CLOSE = (TokenType.R_PAREN, TokenType.R_BRACKET, TokenType.R_BRACE)
_JOINS = {"JOIN", "INNER", "LEFT", "RIGHT", "FULL", "CROSS", "SEMI", "ANTI", "NATURAL"}
_SET_OPS = {"UNION", "INTERSECT", "EXCEPT", "MINUS"}
_REFUSED = {"SET": "write |> SELECT with the columns and the new values (|> SELECT * EXCEPT (x), … AS x moves x last)",
            "TABLESAMPLE": "TABLESAMPLE is not maintained (its rows are random)"}


def unpipe(sql: str) -> str:
    """``sql`` with every pipe operator written out as standard SQL; text without ``|>`` as is."""
    if "|>" not in sql:
        return sql
    try:
        tokens = Spark().tokenize(sql)
    except TokenError:
        return sql  # the parser reports it
    if not any(t.token_type == TokenType.PIPE_GT for t in tokens):
        return sql  # `|>` in a string or a comment
    # the tokens alone, one space where there was any (a comment would swallow what follows it)
    clean = "".join((" " if k and tokens[k - 1].end + 1 < t.start else "") + sql[t.start:t.end + 1]
                    for k, t in enumerate(tokens))
    tokens = Spark().tokenize(clean)
    return _rewrite(sql, clean, tokens, 0, len(tokens))


def _rewrite(original: str, sql: str, tokens: list[Token], lo: int, hi: int) -> str:
    """The text of tokens[lo:hi], its parenthesised parts rewritten first, then its pipes
    (``original``: the query as written, for errors)."""
    pieces: list[str] = []  # the text, with each top-level pipe marked by None
    marks: list[int] = []
    i, start = lo, tokens[lo].start if lo < hi else 0
    while i < hi:
        tok = tokens[i]
        if tok.token_type in _OPEN:
            close = _matching(tokens, i, hi)
            inner = _rewrite(original, sql, tokens, i + 1, close) if any(
                t.token_type == TokenType.PIPE_GT for t in tokens[i + 1:close]) else None
            if inner is not None:
                pieces.append(sql[start:tok.end + 1] + inner)
                start = tokens[close].start
            i = close
        elif tok.token_type == TokenType.PIPE_GT:
            pieces.append(sql[start:tok.start])
            marks.append(len(pieces))
            start = tok.end + 1
        i += 1
    end = tokens[hi - 1].end + 1 if hi > lo else start
    pieces.append(sql[start:end])
    if not marks:
        return "".join(pieces)
    stages, last = [], 0
    for m in marks:
        stages.append("".join(pieces[last:m]))
        last = m
    stages.append("".join(pieces[last:]))
    return _compose(original, stages)


def _matching(tokens: list[Token], i: int, hi: int) -> int:
    depth = 0
    for k in range(i, hi):
        if tokens[k].token_type in _OPEN:
            depth += 1
        elif tokens[k].token_type in _CLOSE:
            depth -= 1
            if depth == 0:
                return k
    return hi - 1  # unbalanced: the parser reports it


@dataclass(frozen=True)
class _Query:
    """The query built so far: ``SELECT select FROM source [WHERE …] [GROUP BY …] [ORDER BY …]
    [LIMIT …] [OFFSET …]``, or (``text`` set) a query to read as a derived table."""

    source: str = ""
    name: str | None = None  # the one table's name in FROM, read as the derived table's name
    select: str | None = None  # None: `*`
    distinct: bool = False
    where: tuple[str, ...] = field(default=())
    group: str | None = None
    order: str | None = None
    limit: str | None = None
    offset: str | None = None
    text: str | None = None

    @property
    def bare(self) -> bool:
        """Still ``SELECT * FROM … [WHERE …]``: a clause before SELECT's folds in."""
        return self.text is None and self.select is None and self.group is None and self.order is None \
            and self.limit is None and self.offset is None

    def sql(self) -> str:
        if self.text is not None:
            return self.text
        out = f"SELECT {'DISTINCT ' if self.distinct else ''}{self.select or '*'} FROM {self.source}"
        out += "".join(f" {'WHERE' if k == 0 else 'AND'} ({w})" for k, w in enumerate(self.where))
        for clause, value in (("GROUP BY", self.group), ("ORDER BY", self.order), ("LIMIT", self.limit),
                              ("OFFSET", self.offset)):
            if value is not None:
                out += f" {clause} {value}"
        return out

    def wrapped(self, name: str | None = None) -> _Query:
        """A query over this one as a derived table, named ``name`` (or as its table was)."""
        alias = name or self.name or "_piped"
        return _Query(source=f"({self.sql()}) AS {alias}", name=alias)


def _compose(sql: str, stages: list[str]) -> str:
    first = stages[0].strip()
    if _words(first)[:1] == ["FROM"]:
        query = _from_first(first[4:].strip())
    else:
        query = _Query(text=first)
    for stage in stages[1:]:
        query = _apply(sql, query, stage.strip())
    return query.sql()


def _apply(sql: str, q: _Query, op: str) -> _Query:
    words = _words(op)
    head = words[0] if words else ""
    if head in _REFUSED:
        raise _refuse(sql, f"|> {head} is not supported", _REFUSED[head])
    if head == "WHERE":
        cond = op[5:].strip()
        _no_aggregate(sql, "WHERE", f"SELECT 1 WHERE {cond}")
        q = q if q.bare else q.wrapped()
        return replace(q, where=q.where + (cond,))
    if head in ("SELECT", "EXTEND"):
        distinct = words[1:2] == ["DISTINCT"]
        items = op[len(head):].strip()
        if distinct:
            items = items[len("DISTINCT"):].strip()
        _no_aggregate(sql, head, f"SELECT {items}")
        q = q if q.bare else q.wrapped()
        return replace(q, select=items if head == "SELECT" else f"*, {items}", distinct=distinct)
    if head == "DROP":  # the star without the columns, in their place
        q = q if q.bare else q.wrapped()
        return replace(q, select=f"* EXCEPT ({op[4:].strip()})")
    if head == "AGGREGATE":
        return _aggregate(sql, q if q.bare else q.wrapped(), op[len(head):].strip())
    if head == "AS":
        return q.wrapped(op[2:].strip())
    if head in ("PIVOT", "UNPIVOT"):  # on the rows so far, as a derived table: FROM (…) AS t PIVOT (…)
        w = q.wrapped()
        return replace(w, source=f"{w.source} {op}")
    if head == "ORDER":
        q = q if q.text is None and q.order is None and q.limit is None and q.offset is None else q.wrapped()
        return replace(q, order=op.split(None, 2)[2] if len(words) > 2 else "")
    if head in ("LIMIT", "OFFSET"):
        limit, offset = _limit(op)
        q = q if q.text is None and q.limit is None and q.offset is None else q.wrapped()
        return replace(q, limit=limit, offset=offset)
    if head in _JOINS:
        q = q if q.bare and not q.where else q.wrapped()
        return replace(q, source=f"{q.source} {op}", name=None)
    if head in _SET_OPS:
        return _Query(text=f"({q.sql()}) {op}")
    raise _refuse(sql, f"`|> {head or op}` is not a pipe operator Spark has",
                  "Spark's operators: SELECT, EXTEND, WHERE, AGGREGATE, JOIN, ORDER BY, LIMIT, AS, UNION, "
                  "PIVOT, UNPIVOT")


def _aggregate(sql: str, q: _Query, rest: str) -> _Query:
    """``|> AGGREGATE aggs [GROUP BY keys]``: the keys, then the aggregates, as Spark lists them."""
    tokens = Spark().tokenize(rest)
    cut, depth = None, 0
    for k, t in enumerate(tokens):
        if t.token_type == TokenType.GROUP_BY and depth == 0:
            cut = k
            break
        depth += 1 if t.token_type in _OPEN else -1 if t.token_type in _CLOSE else 0
    aggs = rest[:tokens[cut].start].strip() if cut is not None else rest
    keys_text = rest[tokens[cut].end + 1:].strip() if cut is not None else ""
    keys: list[tuple[str, str]] = []  # (expression, its output text)
    if keys_text:
        for key in sqlglot.parse_one(f"SELECT {keys_text}", read="spark").expressions:
            expr = key.this if isinstance(key, exp.Alias) else key
            if isinstance(expr, exp.Literal) and not expr.is_string:
                raise _refuse(sql, "|> AGGREGATE … GROUP BY a position is not supported",
                              "name the column: GROUP BY k")
            keys.append((expr.sql(dialect="spark"), key.sql(dialect="spark")))
    listed = ", ".join([out for _, out in keys] + ([aggs] if aggs else []))
    return replace(q, select=listed or "*", group=", ".join(e for e, _ in keys) or None)


def _limit(op: str) -> tuple[str | None, str | None]:
    words = op.split()
    limit = offset = None
    for k in range(0, len(words) - 1, 2):
        if words[k].upper() == "LIMIT":
            limit = words[k + 1]
        elif words[k].upper() == "OFFSET":
            offset = words[k + 1]
    return limit, offset


def _no_aggregate(sql: str, operator: str, select: str) -> None:
    """Spark computes aggregates in ``|> AGGREGATE`` only; in SELECT, EXTEND or WHERE they are its error."""
    try:
        tree = sqlglot.parse_one(select, read="spark")
    except SqlglotParseError:
        return  # the parser reports it on the whole text
    for agg in tree.find_all(exp.AggFunc):
        over = isinstance(agg.parent, exp.Window) and agg.parent.this is agg  # sum(v) OVER (…)
        if not over and agg.find_ancestor(exp.Select) is tree:
            raise _refuse(sql, f"an aggregate in |> {operator}: Spark computes aggregates in |> AGGREGATE",
                          f"write |> AGGREGATE {agg.sql(dialect='spark')} [GROUP BY …]")


def _words(text: str) -> list[str]:
    return [w.upper() for w in text.split()[:3]]


def _from_first(source: str) -> _Query:
    """The query ``FROM source`` starts: still bare, named by its one table (``t``, ``t AS a``) if it
    has one, unless its text goes on past the FROM (``FROM t WHERE …``)."""
    text = f"SELECT * FROM {source}"
    try:
        tree = sqlglot.parse_one(text, read="spark")
    except SqlglotParseError:
        return _Query(text=text)  # the parser reports it on the whole query
    if any(tree.args.get(k) for k in ("where", "group", "having", "order", "limit", "offset", "qualify")):
        return _Query(text=text)
    from_ = tree.args.get("from_") or tree.args.get("from")
    table = from_.this if isinstance(from_, exp.From) else None
    single = isinstance(table, exp.Table) and not tree.args.get("joins") and not tree.args.get("laterals")
    return _Query(source=source, name=table.alias_or_name if single and table is not None else None)


def _refuse(sql: str, message: str, hint: str) -> UnsupportedError:
    return UnsupportedError(message, code="UNSUPPORTED_PIPE", sql=sql, hint=hint)
