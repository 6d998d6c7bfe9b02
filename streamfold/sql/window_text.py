"""``window(ts, …)`` in the query text: sqlglot reads ``window(`` as the start of a WINDOW clause.

So the parser sees each call renamed :data:`WINDOW_CALL` (:func:`mark_window_calls`: the same
length, so every position sqlglot reports still points into the user's text), the binder reads
that name (:mod:`.bind.time_windows`), and the text Spark analyses has ``window`` again
(:func:`unmark_window_calls`).
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

WINDOW_CALL = "_wind_"


def mark_window_calls(text: str) -> str:
    """``text`` with each call ``window(`` renamed :data:`WINDOW_CALL` (strings, comments and
    quoted names untouched: only the tokens are looked at)."""
    try:
        tokens = Spark().tokenize(text)
    except TokenError:
        return text  # the parser reports it
    out = list(text)
    for tok, nxt in zip(tokens, tokens[1:]):
        if tok.token_type == TokenType.WINDOW and nxt.token_type == TokenType.L_PAREN:
            out[tok.start:tok.end + 1] = list(WINDOW_CALL)
    return "".join(out)


def unmark_window_calls(tree: exp.Expr) -> exp.Expr:
    """``tree`` with each :data:`WINDOW_CALL` named ``window`` again (Spark's spelling), and
    ``max_event_time()`` (streamfold's event-time clock, docs/windows.md) read as Spark's
    ``current_timestamp()``, of its type: the text Spark analyses for the output columns. Changes ``tree``."""
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.lower() == WINDOW_CALL:
            call.set("this", "window")
        elif call.name.lower() == "max_event_time":
            call.replace(exp.CurrentTimestamp())
    return tree
