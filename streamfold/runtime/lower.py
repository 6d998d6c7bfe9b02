"""Lower IR programs to Spark DataFrame operators; expressions become Spark SQL expressions.

Leaves (scans of sources, batch rows and states) come from an ``env`` callback, so the same
lowering runs h over a batch, a over the merged states, and a over the states restricted to the
keys a batch touched. Nothing here runs per row in Python.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..ir.expr import Expr
from ..ir.printer import quote, sql
from ..ir.rel import (
    Aggregate, DeltaScan, Distinct, Expand, Filter, Join, Limit, Project, Rel, Scan, Sort, SortKey, StateScan,
    Union,
)

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn
    from pyspark.sql import DataFrame

Env = Callable[[Rel], "DataFrame"]

_HOW = {"inner": "inner", "left": "left_outer", "right": "right_outer", "full": "full_outer",
        "semi": "left_semi", "anti": "left_anti"}


def col(name: str) -> SparkColumn:
    from pyspark.sql import functions as F

    return F.col(quote(name))


def expr(e: Expr) -> SparkColumn:
    from pyspark.sql import functions as F

    return F.expr(sql(e, spark=True))


def lower(rel: Rel, env: Env) -> DataFrame:
    """The DataFrame computing ``rel``; leaves are resolved by ``env``."""
    return _Lowering(env).df(rel)


def is_delta_side(rel: Rel) -> bool:
    """Whether ``rel`` is computed from this batch's changes (so it is small next to a state)."""
    return any(isinstance(n, DeltaScan) or (isinstance(n, StateScan) and n.version == "delta") for n in rel.walk())


class _Lowering:
    def __init__(self, env: Env) -> None:
        self.env = env

    def df(self, rel: Rel) -> DataFrame:  # noqa: C901 - one case per node kind
        if isinstance(rel, (Scan, DeltaScan, StateScan)):
            return self.env(rel)
        if isinstance(rel, Filter):
            return self.df(rel.input).filter(expr(rel.condition))
        if isinstance(rel, Project):
            return self.df(rel.input).select(*[expr(e).alias(n) for n, e in rel.exprs])
        if isinstance(rel, Aggregate):
            child = self.df(rel.input)
            keys = [expr(e).alias(n) for n, e in rel.keys]
            aggs = [expr(a).alias(n) for n, a in rel.aggs]
            if not aggs:
                return child.select(*keys).distinct()
            return child.groupBy(*keys).agg(*aggs)
        if isinstance(rel, Join):
            return self._join(rel)
        if isinstance(rel, Union):
            dfs = [self.df(item) for item in rel.items]
            names = list(rel.names)
            out = dfs[0].toDF(*names)
            for d in dfs[1:]:
                out = out.union(d.toDF(*names))
            return out
        if isinstance(rel, Distinct):
            return self.df(rel.input).distinct()
        if isinstance(rel, Sort):
            return self.df(rel.input).orderBy(*[sort_column(k) for k in rel.keys])
        if isinstance(rel, Limit):
            out = self.df(rel.input)
            if rel.offset:
                out = out.offset(rel.offset)
            if rel.limit is not None:
                out = out.limit(rel.limit)
            return out
        if isinstance(rel, Expand):
            from pyspark.sql import functions as F

            child = self.df(rel.input)
            names = [f.name for f in rel.schema]
            copies = F.explode(F.array_repeat(F.lit(0), col(rel.weight).cast("int")))
            return child.select(*[col(n) for n in names], copies.alias("__copy")).select(*[col(n) for n in names])
        raise TypeError(f"no Spark lowering for {type(rel).__name__}")

    def _join(self, rel: Join) -> DataFrame:
        left, right = self.df(rel.left), self.df(rel.right)
        if rel.condition is None:
            return left.crossJoin(right)
        # A batch's delta joins a whole state: hash the (small) delta side, stream the state,
        # which keeps its partitioning and is never sorted or shuffled.
        if rel.kind == "inner" and is_delta_side(rel.left) and not is_delta_side(rel.right):
            left = left.hint("shuffle_hash")
        elif rel.kind in ("inner", "left", "semi", "anti") and is_delta_side(rel.right) and not is_delta_side(rel.left):
            right = right.hint("shuffle_hash")
        return left.join(right, on=expr(rel.condition), how=_HOW[rel.kind])


def sort_column(k: SortKey) -> SparkColumn:
    c = expr(k.expr)
    nulls_first = k.effective_nulls_first
    if k.descending:
        return c.desc_nulls_first() if nulls_first else c.desc_nulls_last()
    return c.asc_nulls_first() if nulls_first else c.asc_nulls_last()
