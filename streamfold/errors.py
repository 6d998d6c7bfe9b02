"""Every error streamfold shows a user: a stable code, parameters, a message and a hint.

Tests assert ``code`` and ``params``; the prose may change. SQL errors carry the query text
and the character span they are about, and render the query with that spot marked::

    [UNKNOWN_COLUMN] unknown column `amout` in table `orders`
      1 | SELECT amout FROM orders
        |        ^^^^^
    hint: did you mean `amount`?
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Span = tuple[int, int]  # inclusive character offsets into the query text


class StreamfoldError(Exception):
    """Root of all errors streamfold raises for a user to act on."""

    default_code = "STREAMFOLD_ERROR"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        hint: str | None = None,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code or self.default_code
        self.message = message
        self.hint = hint
        self.params = dict(params or {})

    def __str__(self) -> str:
        text = f"[{self.code}] {self.message}"
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class SinkError(StreamfoldError):
    """A sink that cannot take a committed batch (down, refusing, another schema): the batch stays
    committed in streamfold's output and is delivered when the sink can take it."""

    default_code = "SINK_ERROR"


class SqlError(StreamfoldError):
    """An error about the query text; shows the query with the offending spot marked."""

    default_code = "SQL_ERROR"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        hint: str | None = None,
        params: Mapping[str, Any] | None = None,
        sql: str | None = None,
        span: Span | None = None,
    ) -> None:
        super().__init__(message, code=code, hint=hint, params=params)
        self.sql = sql
        self.span = span

    def with_sql(self, sql: str) -> SqlError:
        """Attach the query text if the raiser did not know it."""
        if self.sql is None:
            self.sql = sql
        return self

    @property
    def line(self) -> int | None:
        if self.sql is None or self.span is None:
            return None
        return self.sql.count("\n", 0, self.span[0]) + 1

    @property
    def column(self) -> int | None:
        if self.sql is None or self.span is None:
            return None
        return self.span[0] - (self.sql.rfind("\n", 0, self.span[0]) + 1) + 1

    def __str__(self) -> str:
        text = f"[{self.code}] {self.message}"
        if self.sql is not None:
            text += "\n" + highlight_sql(self.sql, self.span)
        if self.hint:
            text += f"\nhint: {self.hint}"
        return text


class ParseError(SqlError):
    default_code = "PARSE_ERROR"


class BindError(SqlError):
    """Names and types: unknown table or column, ambiguity, type mismatch, misuse of aggregates."""

    default_code = "BIND_ERROR"


class UnsupportedError(SqlError):
    """A construct streamfold refuses at compile time rather than answer inexactly."""

    default_code = "UNSUPPORTED"


class UsageError(StreamfoldError):
    """Bad command-line or API arguments."""

    default_code = "USAGE_ERROR"


class SourceError(StreamfoldError):
    """A source or table cannot be read: missing directory, bad format, unreadable schema."""

    default_code = "SOURCE_ERROR"


class BadInputError(SourceError):
    """A new input file does not parse or does not match its source's schema."""

    default_code = "BAD_INPUT"


class CheckpointError(StreamfoldError):
    """The checkpoint directory belongs to another query or is damaged."""

    default_code = "CHECKPOINT_ERROR"


class LinalgError(StreamfoldError):
    """A matrix program that cannot be compiled or maintained exactly: mismatched dimensions, an
    operation its semiring lacks (inverse, subtraction), a deletion a semiring cannot undo."""

    default_code = "LINALG_ERROR"


@dataclass(frozen=True)
class Cause:
    """One link of a failure's chain of causes: an exception's class and message.

    ``language`` is ``"java"`` for a throwable of Spark's JVM (``name`` is its class, fully
    qualified: ``java.lang.OutOfMemoryError``), ``"python"`` otherwise; ``trace`` holds the first
    frames of a Java throwable's stack.
    """

    language: str
    name: str
    message: str
    trace: tuple[str, ...] = ()

    @property
    def summary(self) -> str:
        """``name: first line of the message`` (at most 300 characters of it)."""
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        if len(first) > 300:
            first = first[:299] + "…"
        return f"{self.name}: {first}" if first else self.name


class BatchError(StreamfoldError):
    """A batch failed while running; names the batch and the step, and chains the cause.

    ``causes`` is the failure's chain, outermost first (see ``streamfold.runtime.failures``):
    the message names the innermost, and :meth:`chain` shows them all (``streamfold run
    --verbose``).
    """

    default_code = "BATCH_FAILED"

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        hint: str | None = None,
        params: Mapping[str, Any] | None = None,
        causes: Sequence[Cause] = (),
    ) -> None:
        super().__init__(message, code=code, hint=hint, params=params)
        self.causes = tuple(causes)

    def chain(self) -> str:
        """Every cause with its whole message, outermost first, and the innermost Java one's stack."""
        lines = []
        for i, cause in enumerate(self.causes):
            text = f"{cause.name}: {cause.message.strip()}" if cause.message.strip() else cause.name
            lines.append(f"{'caused by' if i else 'because of'} ({cause.language}) {text}")
        java = [c for c in self.causes if c.language == "java" and c.trace]
        if java:
            lines.append(f"stack of {java[-1].name}:")
            lines += [f"    at {frame}" for frame in java[-1].trace]
        return "\n".join(lines)


class ControlError(StreamfoldError):
    """A control action that cannot be done now (resume when not paused, a second reconfiguration
    before the first applies) or on something that does not exist; ``status`` is its HTTP status."""

    default_code = "CONTROL_ERROR"

    def __init__(self, message: str, *, code: str | None = None, hint: str | None = None,
                 params: Mapping[str, Any] | None = None, status: int = 409) -> None:
        super().__init__(message, code=code, hint=hint, params=params)
        self.status = status


def interrupted(e: BaseException | None) -> bool:
    """Whether ``e`` is Ctrl-C, or an error raised while Ctrl-C unwound (a py4j call in a
    ``finally`` finding the connection the interrupt broke)."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, KeyboardInterrupt):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


def highlight_sql(sql: str, span: Span | None, context: int = 2) -> str:
    """Render ``sql`` with line numbers, marking ``span`` with carets under the text.

    Only the lines around the span are shown (``context`` lines either side); a query without
    a span is shown whole, up to 12 lines.
    """
    lines = sql.splitlines() or [""]
    width = len(str(len(lines)))
    if span is None:
        shown = lines[:12]
        out = [f"  {i + 1:>{width}} | {line}" for i, line in enumerate(shown)]
        if len(lines) > 12:
            out.append(f"  {'':>{width}} | ...")
        return "\n".join(out)
    start, end = span
    start = max(0, min(start, len(sql)))
    end = max(start, min(end, max(len(sql) - 1, start)))
    first = sql.count("\n", 0, start)
    last = sql.count("\n", 0, end)
    out = []
    offset = 0
    for i, line in enumerate(lines):
        line_start, line_end = offset, offset + len(line)  # line_end is exclusive
        offset = line_end + 1
        if i < first - context or i > last + context:
            continue
        out.append(f"  {i + 1:>{width}} | {line}")
        if first <= i <= last:
            lo = max(start, line_start) - line_start
            hi = min(end, line_end - 1) - line_start
            if hi >= lo:
                out.append(f"  {'':>{width}} | " + " " * lo + "^" * (hi - lo + 1))
    return "\n".join(out)


def did_you_mean(name: str, candidates: Iterable[str]) -> str | None:
    """A hint naming the closest candidate(s) to a misspelt ``name``, or None."""
    pool = sorted(set(candidates))
    lowered = {c.lower(): c for c in pool}
    matches = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)
    if not matches:
        return None
    names = " or ".join(f"`{lowered[m]}`" for m in matches)
    return f"did you mean {names}?"
