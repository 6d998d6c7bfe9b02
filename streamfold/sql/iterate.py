"""Iterations in SQL: ``WITH ITERATIVE``, streamfold's form of the seed's ``repeat … step … limit n``.

::

    WITH ITERATIVE ranks (node, rank) AS (
        SELECT …                     -- the starting value (seed 000 §2: X ← g(S))
      STEP
        SELECT … FROM ranks …        -- the next value, from the previous one (X ← f(X, S))
      TIMES 10                       -- how many steps
      [MODE EXACT                    -- how a batch updates it (exact is the default)
       | MODE DIFFERENTIAL           -- exact too: each step's change from the step before's
       | MODE DIFFUSION KEY (node)]  -- approximate (seed 000 Algorithm 1); KEY names a row
    )
    SELECT node, rank FROM ranks

Its value is ``f`` applied ``n`` times to the starting value: exactly the query that nests ``n``
copies of the step (:func:`unrolled_sql` writes that query out, and it is what the tests'
oracle and the ``recompute`` baseline run). ``ITERATIVE`` is one element of a ``WITH`` list, so
ordinary CTEs may come before it and be read by both parts.

sqlglot does not know this syntax, so :func:`extract` takes it out of the text before parsing:
the starting query stays in place as an ordinary CTE and everything else is blanked with spaces
(newlines kept), so every position sqlglot reports still points into the user's text. The step
is parsed on its own from a copy of the text blanked everywhere but the step, for the same
reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import Token, TokenType

from ..errors import ParseError
from .batch_text import SparkText, spark_spellings
from .window_text import unmark_window_calls

MODES = ("exact", "differential", "diffusion")


@dataclass(frozen=True)
class Iterative:
    """One ``ITERATIVE`` element of a WITH list."""

    name: str
    step_sql: str  # the whole query text blanked except the step (positions match the original)
    step_span: tuple[int, int]
    times: int
    mode: str  # "exact", "differential" or "diffusion"
    init_span: tuple[int, int]
    key: tuple[str, ...] = ()  # MODE DIFFUSION KEY (…): the columns naming a row


def extract(sql: str) -> tuple[str, dict[str, Iterative]]:
    """The text with every ``ITERATIVE`` element turned into an ordinary CTE of its starting
    query, and the elements by lower-cased name. Text without ``ITERATIVE`` comes back as is."""
    if not re.search(r"\bITERATIVE\b", sql, flags=re.IGNORECASE):
        return sql, {}
    try:
        tokens = Spark().tokenize(sql)
    except TokenError:
        return sql, {}  # the parser reports it
    found: dict[str, Iterative] = {}
    blank: list[tuple[int, int]] = []
    for k, tok in enumerate(tokens):
        if not (tok.token_type == TokenType.VAR and tok.text.upper() == "ITERATIVE"):
            continue
        if k == 0 or tokens[k - 1].token_type not in (TokenType.WITH, TokenType.COMMA):
            continue
        it, cut = _element(sql, tokens, k)
        if it.name.lower() in found:
            raise _error(sql, tok, f"two iterations are called `{it.name}`", "DUPLICATE_ALIAS")
        found[it.name.lower()] = it
        blank += cut
    out = list(sql)
    for start, end in blank:
        for i in range(start, end + 1):
            if out[i] not in "\n":
                out[i] = " "
    return "".join(out), found


def _element(sql: str, tokens: list[Token], k: int) -> tuple[Iterative, list[tuple[int, int]]]:
    """Read ``ITERATIVE name [(cols)] AS ( init STEP step TIMES n [MODE m] )`` from token k."""
    head = tokens[k]
    i = k + 1
    if i >= len(tokens) or tokens[i].token_type not in (TokenType.VAR, TokenType.IDENTIFIER):
        raise _error(sql, head, "ITERATIVE needs a name, as in `WITH ITERATIVE ranks AS (…)`")
    name = tokens[i].text
    i += 1
    if i < len(tokens) and tokens[i].token_type == TokenType.L_PAREN:
        i = _close(sql, tokens, i) + 1
    if i >= len(tokens) or tokens[i].token_type != TokenType.ALIAS:
        raise _error(sql, tokens[min(i, len(tokens) - 1)], f"expected AS after ITERATIVE {name}")
    i += 1
    if i >= len(tokens) or tokens[i].token_type != TokenType.L_PAREN:
        raise _error(sql, tokens[min(i, len(tokens) - 1)], f"expected `(` after ITERATIVE {name} … AS")
    open_, close = i, _close(sql, tokens, i)
    body = list(range(open_ + 1, close))
    depth = 0
    step_at = None
    for j in body:
        t = tokens[j]
        if t.token_type == TokenType.L_PAREN:
            depth += 1
        elif t.token_type == TokenType.R_PAREN:
            depth -= 1
        elif (depth == 0 and t.token_type == TokenType.VAR and t.text.upper() == "STEP" and j + 1 < close
              and tokens[j + 1].token_type in (TokenType.SELECT, TokenType.WITH, TokenType.L_PAREN)):
            step_at = j
            break
    hint = "write ITERATIVE name AS (starting query STEP next query TIMES n)"
    if step_at is None:
        raise ParseError(f"ITERATIVE {name} has no STEP", code="PARSE_ERROR", sql=sql,
                         span=(head.start, tokens[close].end), hint=hint, params={"description": "no STEP"})
    # the tail: TIMES n [MODE m]
    tail = [j for j in range(step_at + 1, close)]
    times_at = None
    for j in reversed(tail):
        if tokens[j].token_type == TokenType.VAR and tokens[j].text.upper() == "TIMES":
            times_at = j
            break
    if times_at is None or times_at + 1 >= close or tokens[times_at + 1].token_type != TokenType.NUMBER:
        raise ParseError(f"ITERATIVE {name} needs `TIMES n` after its step", code="PARSE_ERROR", sql=sql,
                         span=(tokens[step_at].start, tokens[close].end), hint=hint,
                         params={"description": "no TIMES"})
    count_tok = tokens[times_at + 1]
    if not count_tok.text.isdigit() or int(count_tok.text) < 1:
        raise _error(sql, count_tok, "TIMES needs a whole number of steps, at least 1", "INVALID_ITERATIONS")
    mode = "exact"
    key: tuple[str, ...] = ()
    rest = list(range(times_at + 2, close))
    if rest:
        words = [tokens[j].text.upper() for j in rest]
        if len(rest) < 2 or words[0] != "MODE" or words[1].lower() not in MODES:
            raise _error(sql, tokens[rest[0]], "expected MODE EXACT, MODE DIFFERENTIAL or MODE DIFFUSION after "
                         f"TIMES {count_tok.text}", "PARSE_ERROR")
        mode = words[1].lower()
        mode_tok = tokens[rest[1]]
        if mode != "diffusion" and len(rest) > 2:
            raise _error(sql, tokens[rest[2]], f"nothing may follow MODE {mode.upper()}")
        if mode == "diffusion":
            key = _key(sql, tokens, rest[2:], mode_tok)
    step_start, step_end = tokens[step_at + 1].start, tokens[times_at - 1].end
    step_sql = "".join(c if (step_start <= p <= step_end or c == "\n") else " " for p, c in enumerate(sql))
    init_span = (tokens[open_ + 1].start, tokens[step_at - 1].end)
    cut = [(head.start, head.end), (tokens[step_at].start, tokens[close - 1].end)]
    return Iterative(name, step_sql, (step_start, step_end), int(count_tok.text), mode, init_span, key), cut


def _key(sql: str, tokens: list[Token], rest: list[int], mode_tok: Token) -> tuple[str, ...]:
    """``KEY (col, …)`` after MODE DIFFUSION: the columns that name a row of the iteration."""
    hint = ("write MODE DIFFUSION KEY (col, …): the columns that tell the iteration's rows apart "
            "from step to step, e.g. KEY (node) for PageRank")
    if not rest or tokens[rest[0]].text.upper() != "KEY":
        at = tokens[rest[0]] if rest else mode_tok
        raise ParseError("MODE DIFFUSION needs KEY (col, …): the columns that identify a row of the iteration",
                         code="DIFFUSION_KEY", sql=sql, span=(at.start, at.end), hint=hint,
                         params={"description": "no KEY"})
    inner = rest[1:]
    if (len(inner) < 3 or tokens[inner[0]].token_type != TokenType.L_PAREN
            or tokens[inner[-1]].token_type != TokenType.R_PAREN):
        raise ParseError("expected KEY (col, …) after MODE DIFFUSION", code="DIFFUSION_KEY", sql=sql,
                         span=(tokens[rest[0]].start, tokens[rest[-1]].end), hint=hint,
                         params={"description": "bad KEY"})
    names = []
    for pos, j in enumerate(inner[1:-1]):
        t = tokens[j]
        if pos % 2 == 1:
            if t.token_type != TokenType.COMMA:
                raise _error(sql, t, "expected `,` between the KEY columns", "DIFFUSION_KEY")
        elif t.token_type in (TokenType.VAR, TokenType.IDENTIFIER) or t.text.isidentifier():
            names.append(t.text)
        else:
            raise _error(sql, t, "expected a column name in KEY (…)", "DIFFUSION_KEY")
    if len(inner) % 2 == 0 or not names:
        raise _error(sql, tokens[inner[-1]], "expected a column name in KEY (…)", "DIFFUSION_KEY")
    return tuple(names)


def _close(sql: str, tokens: list[Token], i: int) -> int:
    depth = 0
    for j in range(i, len(tokens)):
        if tokens[j].token_type == TokenType.L_PAREN:
            depth += 1
        elif tokens[j].token_type == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                return j
    raise _error(sql, tokens[i], "this `(` is never closed")


def _error(sql: str, tok: Token, message: str, code: str = "PARSE_ERROR") -> ParseError:
    return ParseError(message, code=code, sql=sql, span=(tok.start, tok.end), params={"description": message},
                      hint="see docs/sql.md, Iterations")


def unrolled_sql(sql: str) -> str:
    """The same query in plain Spark SQL: each ``ITERATIVE x`` becomes ``n + 1`` CTEs, ``x_0`` the
    starting query and ``x_i`` the step reading ``x_{i−1}``, the last one named ``x``. This is
    the definition of an iteration's value; DuckDB and Spark run it as the oracle and baseline."""
    text, loops = extract(sql)
    if not loops:
        return sql
    tree, steps = _parse_parts(text, loops)
    return unroll(tree, loops, steps).sql(dialect="spark", pretty=True)


def unroll(tree: exp.Expr, loops: Mapping[str, Iterative], steps: Mapping[str, exp.Expr]) -> exp.Expr:
    """A copy of ``tree`` (the query text without its iterations, :func:`extract`) with each of
    ``loops`` unrolled (see :func:`unrolled_sql`); ``steps`` are their steps' trees, by name.
    The trees given are not changed."""
    tree = tree.copy()
    if not loops:
        return tree
    with_ = tree.args.get("with_") or tree.args.get("with")
    assert with_ is not None
    ctes = []
    for cte in with_.expressions:
        loop = loops.get(cte.alias.lower())
        if loop is None:
            ctes.append(cte)
            continue
        columns = cte.args["alias"].columns
        step = steps[cte.alias.lower()]
        prev = f"{cte.alias}__0"
        ctes.append(_cte(prev, columns, cte.this))
        for i in range(1, loop.times + 1):
            name = cte.alias if i == loop.times else f"{cte.alias}__{i}"
            ctes.append(_cte(name, columns, _rename_table(step, cte.alias, prev)))
            prev = name
    with_.set("expressions", ctes)
    return tree


def _parse_parts(text: str, loops: Mapping[str, Iterative]) -> tuple[exp.Expr, dict[str, exp.Expr]]:
    import sqlglot

    return (sqlglot.parse_one(text, read="spark"),
            {name: sqlglot.parse_one(loop.step_sql, read="spark") for name, loop in loops.items()})


def _cte(name: str, columns: list, body: exp.Expr) -> exp.CTE:
    alias = exp.TableAlias(this=exp.to_identifier(name), columns=[c.copy() for c in columns])
    return exp.CTE(this=body.copy(), alias=alias)


def _rename_table(tree: exp.Expr, old: str, new: str) -> exp.Expr:
    """``tree`` reading table ``new`` wherever it read ``old`` (keeping what it was called)."""

    def swap(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Table) and node.name.lower() == old.lower() and not node.args.get("db"):
            alias = node.alias or node.name
            return exp.Table(this=exp.to_identifier(new), alias=exp.TableAlias(this=exp.to_identifier(alias)))
        return node

    return tree.copy().transform(swap)


def spark_schema_sql(sql: str) -> str:
    """A query Spark can analyse for the output columns of ``sql`` (:func:`spark_schema_text`);
    a compiled query has it already (``Compilation.spark_sql``), from the trees it parsed."""
    text, loops = extract(sql)
    tree, steps = _parse_parts(text, loops)
    return spark_schema_text(tree, loops, steps)


def spark_schema_text(tree: exp.Expr, loops: Mapping[str, Iterative], steps: Mapping[str, exp.Expr]) -> str:
    """A query Spark can analyse for the output columns of the query ``tree`` (with ``loops`` and
    their ``steps``, as :func:`unroll` takes them): iterations unrolled, and a recursive CTE's
    ``UNION`` written ``UNION ALL`` (Spark 4.3 accepts only that in a recursive CTE; the columns
    are the same, and streamfold keeps the CTE as a set itself). The trees are not changed."""
    out = unroll(tree, loops, steps)
    for with_ in out.find_all(exp.With):
        if not with_.args.get("recursive"):
            continue
        for cte in with_.expressions:
            node = cte.this
            while isinstance(node, exp.Union):
                node.set("distinct", False)
                node = node.left
    return spark_spellings(unmark_window_calls(out)).sql(dialect=SparkText)
