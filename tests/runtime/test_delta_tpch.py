"""TPC-H Q3 and Q18 with ``orders`` and ``lineitem`` as Delta tables updated in place (issue 54).

SF 0.01 from ``tpchgen-cli``: the history is the tables' first version (written by delta-rs);
then one version per batch — an append of more orders with their line items; UPDATEs in place
(line items' quantities raised and discounts zeroed for some orders, which moves orders across
Q18's ``HAVING sum(l_quantity) > 300`` and changes Q3's revenue; some orders' ship priority,
Q3's GROUP BY key, changed); a DELETE of some orders with their line items and a second append;
and a MERGE. After every batch the snapshot equals DuckDB's answer over the tables' current
contents as delta-rs reads them (the static tables whole)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamfold.bench.tpch import data as tpch_data
from streamfold.bench.tpch import run as tpch
from streamfold.verify import DuckOracle, compare, order_of, python_value

pytestmark = [pytest.mark.spark]

STREAMS = ("orders", "lineitem")


@pytest.fixture(scope="module")
def tpch_dataset(tmp_path_factory):
    return tpch_data.ensure(str(tmp_path_factory.getbasetemp() / "tpch-data"), sf=0.01, batches=3,
                            log=lambda msg: None)


def _inserts(ds, table: str, batch: int) -> pa.Table:
    rows = pq.read_table(ds.batch_path(table, batch))
    return rows.drop_columns(["_weight"]) if "_weight" in rows.column_names else rows


def _versions(ds, paths: dict[str, str]):
    """Each step commits one or more Delta versions and yields what it did."""
    from deltalake import DeltaTable, write_deltalake

    for t in STREAMS:
        write_deltalake(paths[t], _inserts(ds, t, 0))
    yield "history"
    for t in STREAMS:
        write_deltalake(paths[t], _inserts(ds, t, 1), mode="append")
    yield "append"
    DeltaTable(paths["lineitem"]).update(
        updates={"l_quantity": "l_quantity + 45", "l_discount": "0.00"}, predicate="l_orderkey % 11 = 0")
    DeltaTable(paths["orders"]).update(updates={"o_shippriority": "1"}, predicate="o_orderkey % 5 = 0")
    yield "update"
    DeltaTable(paths["orders"]).delete("o_orderkey % 17 = 0")
    DeltaTable(paths["lineitem"]).delete("l_orderkey % 17 = 0")
    for t in STREAMS:
        write_deltalake(paths[t], _inserts(ds, t, 2), mode="append")
    yield "delete+append"
    orders = DeltaTable(paths["orders"]).to_pyarrow_table()
    changed = orders.filter(pa.compute.equal(pa.compute.bit_wise_and(orders["o_orderkey"], 7), 3))
    changed = changed.set_column(changed.schema.get_field_index("o_shippriority"), "o_shippriority",
                                 pa.array([2] * changed.num_rows, orders.schema.field("o_shippriority").type))
    (DeltaTable(paths["orders"]).merge(changed, predicate="t.o_orderkey = s.o_orderkey", source_alias="s",
                                       target_alias="t")
     .when_matched_update(updates={"o_shippriority": "s.o_shippriority"}).execute())
    yield "merge"


@pytest.mark.parametrize("name", ["q03", "q18"])
def test_tpch_over_delta_tables_updated_in_place(name, spark, tpch_dataset, tmp_path):
    import streamfold
    from deltalake import DeltaTable

    ds = tpch_dataset
    sql = tpch.load_query(name)
    statics = sorted(tpch.tables_read(sql) - set(STREAMS))
    paths = {t: str(tmp_path / t) for t in STREAMS}
    steps = _versions(ds, paths)
    next(steps)  # the tables exist before the query starts
    query = streamfold.start(sql, paths, str(tmp_path / "out"), formats={t: "delta" for t in STREAMS},
                             tables={t: ds.table_path(t) for t in statics},
                             schemas={t: tpch_data.schema_sql(t) for t in statics}, spark=spark,
                             background=False, partitions=2, endpoint=False)
    oracle = DuckOracle(sql)
    for t in statics:
        oracle.set_input(t, [ds.table_path(t)])
    done = ["history"]
    try:
        for batch in range(5):
            if batch > 0:
                done.append(next(steps))
            result = query.process_available()
            assert result is not None and result.batch == batch, done
            for t in STREAMS:
                oracle.set_input(t, [DeltaTable(paths[t]).to_pyarrow_table()])
            actual = [tuple(python_value(v) for v in r) for r in query.snapshot_pandas().itertuples(index=False, name=None)]
            check = compare(actual, oracle.answer(), order_of(sql))
            assert check.matches, f"{name} batch {batch} after {done}: {check.detail}"
            # Each source the batch moved is recorded at the table's current version.
            moved = query.commit(batch).get("positions", {})
            assert moved and all(moved[t]["version"] == DeltaTable(paths[t]).version() for t in moved), moved
    finally:
        query.stop()
        oracle.close()
