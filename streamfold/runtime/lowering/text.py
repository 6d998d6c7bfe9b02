"""Small pieces of text the other lowering modules share: FROM items, indentation, column lists."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ...ir.printer import quote
from ...ir.rel import Rel

Columns = Sequence[tuple[str, str]]  # (name, Spark type) pairs
Leaf = Callable[[Rel], str]  # a program's leaf → its FROM item


def subquery(text: str) -> str:
    """A statement as a FROM item."""
    return f"(\n{text}\n)"


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.split("\n"))


def names(columns: Sequence[str]) -> str:
    """Columns as a select list, each quoted."""
    return ", ".join(quote(c) for c in columns)


def select_all(relation: str) -> str:
    return f"SELECT * FROM {relation}"


def union_all(statements: Sequence[str]) -> str:
    """Statements of the same columns as one relation, their rows in order."""
    return "\nUNION ALL\n".join(statements)
