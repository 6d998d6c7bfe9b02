"""TPC-DS as a coverage yardstick (issue 59): the 99 queries with the qualification parameters,
the tables' columns, which tables are streamed, and each query's text in Spark's dialect.

The texts are DuckDB's (``queries/qNN.sql``, written by ``scripts/tpcds_extract.py`` from DuckDB's
``tpcds`` extension); :func:`spark_text` translates one to Spark SQL only where the dialects differ
(sqlglot: quoted names, ``SUBSTRING``, date arithmetic), keeping its meaning, and DuckDB runs the
original as the oracle. The seven fact tables are streamed, the dimensions static.
"""

from __future__ import annotations

import os
from functools import cache

from .schemas import SCHEMAS

QUERIES_DIR = os.path.join(os.path.dirname(__file__), "queries")
STREAMED = ("store_sales", "store_returns", "catalog_sales", "catalog_returns", "web_sales", "web_returns",
            "inventory")
ALL_QUERIES = tuple(range(1, 100))


@cache
def duckdb_text(nr: int) -> str:
    """Query ``nr`` as DuckDB's extension has it."""
    with open(os.path.join(QUERIES_DIR, f"q{nr:02d}.sql"), encoding="utf-8") as fh:
        return fh.read()


@cache
def spark_text(nr: int) -> str:
    """Query ``nr`` in Spark's dialect."""
    import sqlglot

    return sqlglot.transpile(duckdb_text(nr), read="duckdb", write="spark")[0]


def schemas(weighted: bool = True) -> dict[str, str]:
    """Each table's columns; a streamed table has ``_weight`` (it may delete rows)."""
    return {t: cols + (", _weight BIGINT" if weighted and t in STREAMED else "") for t, cols in SCHEMAS.items()}


def statics() -> tuple[str, ...]:
    return tuple(t for t in SCHEMAS if t not in STREAMED)
