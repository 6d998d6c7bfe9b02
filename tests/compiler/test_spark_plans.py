"""A query that compiles must run: every golden explain fixture's plan passes Spark's analyzer.

Each fixture's query is started over empty inputs (an empty Parquet file per source and table),
which analyses the query and every state's program over empty inputs; then the statements that
write a batch's answer — the snapshot and the changes, of the first batch and of a later one —
are analysed over the empty states, without running anything. A name the binder got wrong (say
a derived table's column list), a type Spark will not coerce, or a statement Spark cannot
resolve fails here rather than in a user's first batch. (Running batch 0 would check more and
take minutes for all fixtures; the differential tests run plans.)
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

import streamfold
from streamfold.ir.rel import WEIGHT
from streamfold.runtime.views import Views
from streamfold.sql import Catalog

from ..golden import fixtures, load
from ..streams import Source

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("path", fixtures("explain"), ids=lambda p: p.stem)
def test_golden_plan_runs_on_spark_over_empty_inputs(spark, tmp_path: Path, path: Path) -> None:
    fx = load(path)
    catalog = Catalog.from_mapping(fx.schemas, static=fx.tables)
    streams, tables = {}, {}
    for schema in catalog.values():
        source = Source(schema.name, tuple((c, t.sql()) for c, t in schema.columns), weighted=schema.weighted)
        folder = tmp_path / "in" / schema.name
        folder.mkdir(parents=True)
        pq.write_table(source.table([]), folder / "0000.parquet")
        (tables if schema.static else streams)[schema.name] = str(folder)
    query = streamfold.start(fx.sql, streams, str(tmp_path / "out"), tables=tables, spark=spark,
                             schemas={n: fx.schemas[n] for n in fx.schemas}, background=False, partitions=1)
    engine = query.engine
    session = engine.spark  # the query runs in a session of its own (its temp views are there)
    views = Views(session, "analyse")
    try:
        states = dict(engine.store.current)
        merged = {name: engine.store.merged_shape(name, views) for name in engine.store.durable()}
        names = list(engine.output_schema.names)
        assert session.sql(engine.answer.snapshot(states, views)).columns == names
        for first in (True, False):
            assert session.sql(engine.answer.changes(first, merged, states, states, views)).columns == names + [WEIGHT]
    finally:
        views.drop()
        query.stop()
