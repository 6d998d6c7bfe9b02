"""TPC-H data for streamfold: generated with ``tpchgen-cli``, split into batches with a deletion batch.

Layout of a generated data set (``ensure(root, sf, batches)`` makes it once and reuses it)::

    <root>/sf<SF>-b<BATCHES>/
        tables/<table>.parquet            the eight tables, whole (static inputs)
        streams/<table>/<batch>.parquet   lineitem, orders, partsupp in batches, with ``_weight``
        manifest.json                     written last: parameters, row counts, deleted keys

``lineitem`` and ``orders`` are split by order key into ``batches`` contiguous ranges of about
equal size — each batch holds its orders together with all their line items — and every row
carries ``_weight`` = +1. One more batch, the last, **deletes** orders from the earlier batches
with all their line items: it holds exactly those rows with ``_weight`` = −1 (a seeded sample of
``delete_fraction`` of the orders, plus the three orders with the largest total price so that
ORDER BY … LIMIT answers change). ``partsupp`` is split the same way by part key (deleting all
partsupp rows of a sample of parts); it is streamed only for the queries that read neither
``lineitem`` nor ``orders`` (Q2, Q11, Q16), which would otherwise read static tables only.

Types are those of the TPC-H specification as Spark reads them: identifiers BIGINT (INT for
``l_linenumber``, ``p_size``, ``ps_availqty``, ``o_shippriority``), money and quantities
DECIMAL(15,2), dates DATE, text STRING. ``tpchgen-cli`` writes these already except text, which
it writes as Arrow ``string_view``; every table is cast to the expected schema and checked.

Run as a script to generate: ``.venv/bin/python -m streamfold.bench.tpch.data --sf 0.01 --batches 4``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

WEIGHT = "_weight"
FORMAT_VERSION = 1

# The TPC-H schema, in Spark SQL types (the names streamfold's ``schemas=`` accepts).
SCHEMAS: dict[str, list[tuple[str, str]]] = {
    "region": [("r_regionkey", "BIGINT"), ("r_name", "STRING"), ("r_comment", "STRING")],
    "nation": [("n_nationkey", "BIGINT"), ("n_name", "STRING"), ("n_regionkey", "BIGINT"),
               ("n_comment", "STRING")],
    "supplier": [("s_suppkey", "BIGINT"), ("s_name", "STRING"), ("s_address", "STRING"),
                 ("s_nationkey", "BIGINT"), ("s_phone", "STRING"), ("s_acctbal", "DECIMAL(15,2)"),
                 ("s_comment", "STRING")],
    "customer": [("c_custkey", "BIGINT"), ("c_name", "STRING"), ("c_address", "STRING"),
                 ("c_nationkey", "BIGINT"), ("c_phone", "STRING"), ("c_acctbal", "DECIMAL(15,2)"),
                 ("c_mktsegment", "STRING"), ("c_comment", "STRING")],
    "part": [("p_partkey", "BIGINT"), ("p_name", "STRING"), ("p_mfgr", "STRING"), ("p_brand", "STRING"),
             ("p_type", "STRING"), ("p_size", "INT"), ("p_container", "STRING"),
             ("p_retailprice", "DECIMAL(15,2)"), ("p_comment", "STRING")],
    "partsupp": [("ps_partkey", "BIGINT"), ("ps_suppkey", "BIGINT"), ("ps_availqty", "INT"),
                 ("ps_supplycost", "DECIMAL(15,2)"), ("ps_comment", "STRING")],
    "orders": [("o_orderkey", "BIGINT"), ("o_custkey", "BIGINT"), ("o_orderstatus", "STRING"),
               ("o_totalprice", "DECIMAL(15,2)"), ("o_orderdate", "DATE"), ("o_orderpriority", "STRING"),
               ("o_clerk", "STRING"), ("o_shippriority", "INT"), ("o_comment", "STRING")],
    "lineitem": [("l_orderkey", "BIGINT"), ("l_partkey", "BIGINT"), ("l_suppkey", "BIGINT"),
                 ("l_linenumber", "INT"), ("l_quantity", "DECIMAL(15,2)"), ("l_extendedprice", "DECIMAL(15,2)"),
                 ("l_discount", "DECIMAL(15,2)"), ("l_tax", "DECIMAL(15,2)"), ("l_returnflag", "STRING"),
                 ("l_linestatus", "STRING"), ("l_shipdate", "DATE"), ("l_commitdate", "DATE"),
                 ("l_receiptdate", "DATE"), ("l_shipinstruct", "STRING"), ("l_shipmode", "STRING"),
                 ("l_comment", "STRING")],
}
TABLES = list(SCHEMAS)
# Streamed tables and the key their batches are split by (orders and lineitem share one split).
STREAM_KEYS = {"orders": "o_orderkey", "lineitem": "l_orderkey", "partsupp": "ps_partkey"}
DEFAULT_STREAMS = ("lineitem", "orders")
FALLBACK_STREAM = "partsupp"

_ARROW = {"BIGINT": pa.int64(), "INT": pa.int32(), "STRING": pa.string(), "DATE": pa.date32(),
          "DECIMAL(15,2)": pa.decimal128(15, 2)}
_SPARK = {"BIGINT": "bigint", "INT": "int", "STRING": "string", "DATE": "date", "DECIMAL(15,2)": "decimal(15,2)"}


def arrow_schema(table: str, weighted: bool = False) -> pa.Schema:
    fields = [pa.field(c, _ARROW[t]) for c, t in SCHEMAS[table]]
    if weighted:
        fields.append(pa.field(WEIGHT, pa.int64()))
    return pa.schema(fields)


def schema_sql(table: str, weighted: bool = False) -> str:
    """``"col TYPE, …"`` for streamfold's ``schemas=`` (with ``_weight BIGINT`` for a stream)."""
    cols = [f"{c} {t}" for c, t in SCHEMAS[table]]
    if weighted:
        cols.append(f"{WEIGHT} BIGINT")
    return ", ".join(cols)


@dataclass(frozen=True)
class Dataset:
    """A generated data set: the whole tables and the streamed tables' batches."""

    root: str
    sf: float
    batches: int  # insert batches; the deletion batch comes after them
    manifest: dict

    @property
    def total_batches(self) -> int:
        return self.batches + 1

    @property
    def deletion_batch(self) -> int:
        return self.batches

    def table_path(self, table: str) -> str:
        return os.path.join(self.root, "tables", f"{table}.parquet")

    def batch_path(self, table: str, batch: int) -> str:
        return os.path.join(self.root, "streams", table, f"{batch:06d}.parquet")

    def prefix_paths(self, table: str, last_batch: int) -> list[str]:
        """The batch files of ``table`` for batches 0..``last_batch``."""
        return [self.batch_path(table, b) for b in range(last_batch + 1)]

    def has_deletions(self, last_batch: int) -> bool:
        return last_batch >= self.deletion_batch


def streams_for(tables_read: set[str], requested: tuple[str, ...] = DEFAULT_STREAMS) -> tuple[str, ...]:
    """The tables streamed for a query that reads ``tables_read``: the requested ones it reads, or
    ``partsupp`` when it reads none of them (its answer would otherwise never change)."""
    streams = tuple(t for t in requested if t in tables_read)
    if not streams and FALLBACK_STREAM in tables_read:
        streams = (FALLBACK_STREAM,)
    return streams


def tpchgen_cli() -> str:
    """The ``tpchgen-cli`` executable (installed by pip next to this Python)."""
    here = os.path.join(os.path.dirname(sys.executable), "tpchgen-cli")
    if os.path.exists(here):
        return here
    found = shutil.which("tpchgen-cli")
    if found is None:
        raise RuntimeError("tpchgen-cli is not installed: .venv/bin/pip install -r requirements.lock")
    return found


def _dir_name(sf: float, batches: int, increment: float | None = None) -> str:
    return f"sf{sf:g}-b{batches}" + (f"-i{increment:g}" if increment else "")


def ensure(root: str, sf: float = 0.01, batches: int = 4, delete_fraction: float = 0.05, seed: int = 20240101,
           log=print, increment: float | None = None) -> Dataset:
    """The data set for (``sf``, ``batches``) under ``root``, generated unless it is there already.

    With ``increment`` (a fraction of the orders, e.g. 0.01), batch 0 is the history and each
    later insert batch holds ``increment`` of the orders (the last ones by key), as a warehouse
    table streamed into streamfold grows; without it, the batches are of equal size."""
    params = {"format": FORMAT_VERSION, "sf": sf, "batches": batches, "delete_fraction": delete_fraction,
              "seed": seed}
    if increment:
        params["increment"] = increment
    path = os.path.join(root, _dir_name(sf, batches, increment))
    manifest_path = os.path.join(path, "manifest.json")
    if os.path.exists(manifest_path):
        with open(manifest_path) as f:
            manifest = json.load(f)
        if manifest.get("params") == params:
            return Dataset(path, sf, batches, manifest)
    if os.path.exists(path):
        shutil.rmtree(path)
    log(f"generating TPC-H SF {sf:g} with tpchgen-cli into {path} ({batches} batches + 1 deletion batch)")
    manifest = _generate(path, params)
    with open(manifest_path + ".tmp", "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(manifest_path + ".tmp", manifest_path)
    return Dataset(path, sf, batches, manifest)


def _generate(path: str, params: dict) -> dict:
    sf, batches = params["sf"], params["batches"]
    os.makedirs(os.path.join(path, "tables"))
    with tempfile.TemporaryDirectory(dir=path) as raw:
        subprocess.run([tpchgen_cli(), "parquet", "-s", f"{sf:g}", "-o", raw, "-q"], check=True)
        tables = {}
        for t in TABLES:
            table = pq.read_table(os.path.join(raw, f"{t}.parquet"))
            tables[t] = _conform(t, table)
            pq.write_table(tables[t], os.path.join(path, "tables", f"{t}.parquet"))
    rng = np.random.default_rng(params["seed"])

    # orders and lineitem, split by order key; deleted: a sample plus the three largest orders
    orders, lineitem = tables["orders"], tables["lineitem"]
    order_keys = np.sort(orders["o_orderkey"].to_numpy())
    ranges = _ranges(order_keys, batches, params.get("increment"))
    n_delete = max(1, int(len(order_keys) * params["delete_fraction"]))
    deleted = set(rng.choice(order_keys, size=n_delete, replace=False).tolist())
    by_price = orders.sort_by([("o_totalprice", "descending")])["o_orderkey"].to_pylist()
    deleted.update(by_price[:3])
    deleted_orders = sorted(int(k) for k in deleted)
    _write_stream(path, "orders", orders, "o_orderkey", ranges, deleted_orders)
    _write_stream(path, "lineitem", lineitem, "l_orderkey", ranges, deleted_orders)

    # partsupp, split by part key; deleted: all partsupp rows of a sample of parts
    partsupp = tables["partsupp"]
    part_keys = np.unique(partsupp["ps_partkey"].to_numpy())
    part_ranges = _ranges(part_keys, batches, params.get("increment"))
    n_parts = max(1, int(len(part_keys) * params["delete_fraction"]))
    deleted_parts = sorted(int(k) for k in rng.choice(part_keys, size=n_parts, replace=False))
    _write_stream(path, "partsupp", partsupp, "ps_partkey", part_ranges, deleted_parts)

    return {
        "params": params,
        "rows": {t: tables[t].num_rows for t in TABLES},
        "order_key_ranges": ranges,
        "part_key_ranges": part_ranges,
        "deleted_orders": deleted_orders,
        "deleted_lineitems": int(pc.sum(pc.is_in(lineitem["l_orderkey"], pa.array(deleted_orders))).as_py()),
        "deleted_parts": deleted_parts,
        "generator": _generator_version(),
    }


def _ranges(keys: np.ndarray, batches: int, increment: float | None) -> list[tuple[int, int]]:
    """Contiguous key ranges, one per insert batch: of equal size, or the history then
    ``batches − 1`` increments of ``increment`` of the keys each."""
    if not increment or batches < 2:
        parts = np.array_split(keys, batches)
    else:
        step = max(1, int(len(keys) * increment))
        history = len(keys) - step * (batches - 1)
        if history < step:
            raise ValueError(f"{batches - 1} increments of {increment:g} leave no history")
        parts = [keys[:history]] + [keys[history + i * step: history + (i + 1) * step] for i in range(batches - 1)]
    return [(int(r[0]), int(r[-1])) for r in parts]


def _generator_version() -> str:
    out = subprocess.run([tpchgen_cli(), "--version"], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def _conform(name: str, table: pa.Table) -> pa.Table:
    """``table`` cast to the TPC-H schema (text from ``string_view`` to ``string``); refuses other
    differences (a missing column, prices not DECIMAL(15,2), dates not DATE)."""
    want = arrow_schema(name)
    if table.column_names != want.names:
        raise ValueError(f"tpchgen-cli wrote {name} with columns {table.column_names}, expected {want.names}")
    columns = []
    for field, column in zip(want, table.columns):
        have = column.type
        same_kind = (have == field.type or (pa.types.is_string(field.type) and
                                            (pa.types.is_string_view(have) or pa.types.is_large_string(have))))
        if not same_kind:
            raise ValueError(f"tpchgen-cli wrote {name}.{field.name} as {have}, expected {field.type}")
        columns.append(column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=want)


def _write_stream(path: str, name: str, table: pa.Table, key: str, ranges: list[tuple[int, int]],
                  deleted: list[int]) -> None:
    out = os.path.join(path, "streams", name)
    os.makedirs(out)
    keys = table[key]
    schema = arrow_schema(name, weighted=True)
    for b, (lo, hi) in enumerate(ranges):
        part = table.filter(pc.and_(pc.greater_equal(keys, lo), pc.less_equal(keys, hi)))
        part = part.sort_by(key).append_column(WEIGHT, pa.array(np.ones(part.num_rows, dtype=np.int64)))
        pq.write_table(part.cast(schema), os.path.join(out, f"{b:06d}.parquet"))
    gone = table.filter(pc.is_in(keys, pa.array(deleted, type=pa.int64()))).sort_by(key)
    gone = gone.append_column(WEIGHT, pa.array(-np.ones(gone.num_rows, dtype=np.int64)))
    pq.write_table(gone.cast(schema), os.path.join(out, f"{len(ranges):06d}.parquet"))


def check_spark_types(spark, ds: Dataset) -> None:
    """Check that Spark reads every table and batch file with the TPC-H types (raises if not)."""
    for t in TABLES:
        paths = [ds.table_path(t)] + ([ds.batch_path(t, 0), ds.batch_path(t, ds.deletion_batch)]
                                      if t in STREAM_KEYS else [])
        for p in paths:
            got = [(f.name, f.dataType.simpleString()) for f in spark.read.parquet(p).schema.fields]
            want = [(c, _SPARK[ty]) for c, ty in SCHEMAS[t]]
            if p != ds.table_path(t):
                want.append((WEIGHT, "bigint"))
            if got != want:
                raise ValueError(f"Spark reads {p} as {got}, expected {want}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sf", type=float, default=0.01, help="scale factor (default 0.01)")
    ap.add_argument("--batches", type=int, default=4, help="insert batches before the deletion batch (default 4)")
    ap.add_argument("--root", default="bench-out/tpch/data", help="where data sets are kept")
    args = ap.parse_args(argv)
    ds = ensure(args.root, args.sf, args.batches)
    m = ds.manifest
    print(f"{ds.root}: {m['rows']['lineitem']} line items, {m['rows']['orders']} orders; "
          f"{ds.batches} batches + deletion of {len(m['deleted_orders'])} orders "
          f"({m['deleted_lineitems']} line items) and of partsupp rows of {len(m['deleted_parts'])} parts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
