"""``streamfold bench custom --query FILE --source NAME=DIR``: a user's query over a user's files.

The files of each source directory, in name order, are replayed: the last ``--increments`` of
them (one per increment) are the increments, all earlier ones the history. Only Parquet is
supported here, because the Spark streaming system needs the schema up front and DuckDB reads
the same files for the check.
"""

from __future__ import annotations

import os

from ..errors import UsageError
from ..runtime.sources import InputSpec, list_inputs
from .workloads import Source, Workload


def custom_workload(sql: str, specs: list[InputSpec], increments: int) -> Workload:
    """The workload replaying ``specs``' files: history = all but the last ``increments`` per source."""
    if not specs:
        raise UsageError("custom needs at least one --source", code="NO_SOURCE",
                         hint="streamfold bench custom --query q.sql --source S=DIR")
    files: dict[str, list[str]] = {}
    for spec in specs:
        if spec.format != "parquet":
            raise UsageError(f"bench reads Parquet sources only, not {spec.format} ({spec.name})",
                             code="BAD_FORMAT", params={"format": spec.format},
                             hint="convert the files to Parquet, or use `streamfold run` for CSV/JSON")
        names = list_inputs(spec.path)
        files[spec.name] = [os.path.join(spec.path, n) for n in names]
    fewest = min(len(f) for f in files.values())
    k = min(increments, fewest - 1)
    if k < 1:
        raise UsageError("each --source needs at least two files: a history and an increment",
                         code="TOO_FEW_FILES", params={"files": fewest},
                         hint="split the data into several files; the last ones become the increments")
    sources = tuple(Source(s.name, ()) for s in specs)
    return Workload("custom", sql, sources, history=0, increment=0, increments=k, keys=answer_keys(sql),
                    generator="files", files=files, description="a user's query over a user's files")


def answer_keys(sql: str) -> tuple[str, ...] | None:
    """The output columns that are GROUP BY keys (how to rebuild an answer from upserts).

    ``()`` for a global aggregate (one row, the last wins), ``None`` without aggregation (the
    answer is the union of everything emitted).
    """
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="spark")
    except sqlglot.errors.ParseError as e:
        raise UsageError(f"cannot parse the query: {e}", code="PARSE_ERROR") from None
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    if select is None:
        return None
    group = select.args.get("group")
    if group is None:
        has_agg = any(item.find(exp.AggFunc) for item in select.expressions)
        return () if has_agg else None
    grouped = {g.sql(dialect="spark").lower() for g in group.expressions}
    keys = []
    for item in select.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if inner.sql(dialect="spark").lower() in grouped:
            keys.append(item.alias_or_name)
    return tuple(keys)
