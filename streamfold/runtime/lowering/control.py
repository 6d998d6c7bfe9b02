"""What a controller (``streamfold.control``) has the runtime read: a breakpoint's rows."""

from __future__ import annotations

from collections.abc import Sequence

from .text import names


def breakpoint_rows(relation: str, columns: Sequence[str], condition: str, limit: int, files: bool = False) -> str:
    """The rows of ``relation`` that meet a breakpoint's condition — a Spark SQL boolean expression
    the user wrote, parsed by streamfold.control as one expression without subqueries — at most
    ``limit`` of them; with ``files``, the file each came from (``_file``: a source's rows)."""
    cols = names(columns) + (", input_file_name() AS _file" if files else "")
    return f"SELECT {cols} FROM {relation} WHERE ({condition}) LIMIT {limit}"

