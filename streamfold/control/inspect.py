"""Inspect a running or paused query: read-only SQL over its answer, its states and its last batch.

The relations a query may read (:func:`relations`)::

    snapshot      the answer after the last batch
    changes       that batch's changes, with _weight
    <state>       each state of the plan by its explain name (e.g. agg, in_x), with its key,
                  its monoid columns and _weight
    delta_<S>     that batch's new rows of stream S, with _weight

While the query is paused before a commit (at a breakpoint, or a pause there), "the last batch"
is that uncommitted batch: the answer it would commit and the states after it. Otherwise it is the
last committed batch.

The text is parsed with sqlglot (Spark dialect) and refused with ``INSPECT_NOT_A_QUERY`` unless it
is one query (SELECT, set operations, VALUES; CTEs allowed), ``INSPECT_UNKNOWN_TABLE`` if it reads
anything but the relations above, ``INSPECT_FORBIDDEN_FUNCTION`` for functions that reach outside
Spark SQL (``reflect``, ``java_method``). It runs on the query's Spark session and at most
``limit`` rows come back.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sqlglot
from sqlglot import exp

from ..errors import UsageError
from ..runtime.inputs import first_line

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORBIDDEN = {"reflect", "java_method", "try_reflect"}
MAX_LIMIT = 10_000
_QUERIES = (exp.Query, exp.Values)
_lock = threading.Lock()


def parse(sql: str, known: list[str]) -> Any:
    """The query's tree, or a coded refusal."""
    try:
        trees = [t for t in sqlglot.parse(sql, read="spark") if t is not None]
    except sqlglot.errors.SqlglotError as e:
        raise UsageError(f"cannot parse the inspect query: {first_line(e)}", code="INSPECT_PARSE",
                         params={"sql": sql}) from None
    tree: Any = trees[0] if len(trees) == 1 else None
    while isinstance(tree, exp.Subquery):
        tree = tree.this
    if tree is None or not isinstance(tree, _QUERIES):
        kind = type(trees[0]).__name__.upper() if len(trees) == 1 else f"{len(trees)} statements"
        raise UsageError(f"inspect runs one read-only query, not {kind}", code="INSPECT_NOT_A_QUERY",
                         params={"sql": sql, "statement": kind},
                         hint="write a SELECT over snapshot, changes, the states or delta_<source>")
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    names = {n.lower() for n in known}
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if table.args.get("db") or table.args.get("catalog") or (name not in names and name not in ctes):
            shown = table.sql(dialect="spark")
            raise UsageError(f"inspect cannot read {shown}", code="INSPECT_UNKNOWN_TABLE",
                             params={"table": shown, "tables": sorted(known)},
                             hint=f"the relations are {', '.join(sorted(known))}")
    for fn in tree.find_all(exp.Func):
        name = (fn.name if isinstance(fn, exp.Anonymous) else fn.sql_name()).lower()
        if name in FORBIDDEN:
            raise UsageError(f"inspect does not run {name}()", code="INSPECT_FORBIDDEN_FUNCTION",
                             params={"function": name}, hint="inspect is Spark SQL over the query's data only")
    return tree


def run(spark: SparkSession, tree: exp.Expression, relations: dict[str, Callable[[], DataFrame]],
        limit: int) -> dict[str, Any]:
    """Run the parsed query over ``relations`` (name → its rows); columns and up to ``limit`` rows."""
    import json

    limit = max(1, min(limit, MAX_LIMIT))
    by_lower = {n.lower(): n for n in relations}
    prefix = f"__inspect_{uuid.uuid4().hex[:8]}_"
    tree = tree.copy()
    used: dict[str, str] = {}
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        name = table.name.lower()
        if name in ctes or name not in by_lower:
            continue
        view = used.setdefault(name, prefix + name)
        if not table.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
        table.set("this", exp.to_identifier(view))
    text = tree.sql(dialect="spark")
    created = []
    try:
        with _lock:  # temp views of concurrent inspections are distinct; creation is serialised
            for name, view in used.items():
                relations[by_lower[name]]().createOrReplaceTempView(view)
                created.append(view)
        try:
            df = spark.sql(text)
            table = df.limit(limit + 1).toArrow()
        except Exception as e:  # noqa: BLE001 - the user's SQL error, returned coded
            raise UsageError(f"the inspect query failed: {first_line(e)}", code="INSPECT_FAILED",
                             params={"error": first_line(e)}) from None
    finally:
        for view in created:
            spark.catalog.dropTempView(view)
    rows = json.loads(json.dumps([list(r.values()) for r in table.slice(0, limit).to_pylist()], default=str))
    return {"columns": [{"name": f.name, "type": f.dataType.simpleString()} for f in df.schema.fields],
            "rows": rows, "truncated": table.num_rows > limit}
