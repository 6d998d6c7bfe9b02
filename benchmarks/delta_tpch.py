"""TPC-H Q3 and Q18 with ``orders`` and ``lineitem`` as Delta tables, 1 % of their rows updated in
place per version: each batch maintained vs recomputed over the tables' current version (issue 54).

    PYTHONPATH=. .venv/bin/python benchmarks/delta_tpch.py [--sf 1] [--queries q03,q18] [--versions 3]
                                                           [--layout spread|clustered] [--change-feed]

The tables are written by delta-rs from ``tpchgen-cli``'s data (the first version: all of it);
each later version UPDATEs 1 % of the orders (their ship priority, Q3's GROUP BY key) and the
line items of 1 % of the orders (quantity and discount): ``spread`` picks ``orderkey % 100 = i``
(every data file rewritten), ``clustered`` a contiguous range of order keys (a few files). Two
queries run side by side in one Spark session (``local[2]``): streamfold incremental and
streamfold recomputing the query every batch over the staged history; after every batch both
snapshots must be equal. Prints wall seconds per batch (staging the versions included) and the
ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sf", type=float, default=1.0)
    ap.add_argument("--queries", default="q03,q18")
    ap.add_argument("--versions", type=int, default=3)
    ap.add_argument("--layout", choices=("spread", "clustered"), default="spread")
    ap.add_argument("--change-feed", action="store_true",
                    help="tables written with delta.enableChangeDataFeed, read with STREAMFOLD_DELTA_CHANGE_FEED=1")
    ap.add_argument("--dir", default="bench-out/delta-tpch")
    args = ap.parse_args()

    import pyarrow.parquet as pq
    from deltalake import DeltaTable, write_deltalake

    import streamfold
    from streamfold.bench.tpch import data as tpch_data
    from streamfold.bench.tpch import run as tpch
    from streamfold.runtime.session import get_spark
    from streamfold.verify import compare, python_value

    if args.change_feed:
        os.environ["STREAMFOLD_DELTA_CHANGE_FEED"] = "1"  # read by each query as it starts
    ds = tpch_data.ensure(os.path.join(args.dir, "tpch-data"), sf=args.sf, batches=1, log=print)
    spark = get_spark("local[2]", app_name="bench-delta-tpch")
    orders_n = pq.ParquetFile(ds.batch_path("orders", 0)).metadata.num_rows
    for name in args.queries.split(","):
        root = os.path.join(args.dir, name)
        shutil.rmtree(root, ignore_errors=True)
        paths = {t: os.path.join(root, t) for t in ("orders", "lineitem")}
        for t, p in paths.items():
            rows = pq.read_table(ds.batch_path(t, 0))
            write_deltalake(p, rows.drop_columns(["_weight"]) if "_weight" in rows.column_names else rows,
                            configuration={"delta.enableChangeDataFeed": "true"} if args.change_feed else None)
        sql = tpch.load_query(name)
        statics = sorted(tpch.tables_read(sql) - set(paths))
        qs = {s: streamfold.start(sql, paths, os.path.join(root, s), formats={t: "delta" for t in paths},
                                  tables={t: ds.table_path(t) for t in statics},
                                  schemas={t: tpch_data.schema_sql(t) for t in statics}, spark=spark,
                                  background=False, partitions=2, endpoint=False, strategy=s)
              for s in ("incremental", "recompute")}
        times: dict[str, list[float]] = {s: [] for s in qs}
        try:
            for s, q in qs.items():
                t0 = time.monotonic()
                q.process_available()
                print(f"{name} history: {s} {time.monotonic() - t0:.2f} s", flush=True)
            for i in range(args.versions):
                if args.layout == "spread":
                    pred = f"% 100 = {i}"
                    o_pred, l_pred = f"o_orderkey {pred}", f"l_orderkey {pred}"
                else:  # order keys are dense-ish and ascending: a range of 1 % of them
                    lo, hi = i * orders_n * 4 // 100, (i + 1) * orders_n * 4 // 100
                    o_pred, l_pred = (f"o_orderkey >= {lo} AND o_orderkey < {hi}",
                                      f"l_orderkey >= {lo} AND l_orderkey < {hi}")
                DeltaTable(paths["orders"]).update(updates={"o_shippriority": f"{i + 1}"}, predicate=o_pred)
                DeltaTable(paths["lineitem"]).update(updates={"l_quantity": "l_quantity + 1", "l_discount": "0.00"},
                                                     predicate=l_pred)
                answers = {}
                for s, q in qs.items():
                    t0 = time.monotonic()
                    q.process_available()
                    times[s].append(time.monotonic() - t0)
                    answers[s] = [tuple(python_value(v) for v in r)
                                  for r in q.snapshot_pandas().itertuples(index=False, name=None)]
                check = compare(answers["incremental"], answers["recompute"])
                assert check.matches, f"{name} version {i + 1}: {check.detail}"
        finally:
            for q in qs.values():
                q.stop()
        inc, rec = statistics.median(times["incremental"]), statistics.median(times["recompute"])
        print(f"{name} sf={args.sf:g} layout={args.layout} change feed={'on' if args.change_feed else 'off'}: maintained {inc:.2f} s/batch, recomputed {rec:.2f} "
              f"s/batch, ratio {inc / rec:.2f} ({[round(x, 2) for x in times['incremental']]} vs "
              f"{[round(x, 2) for x in times['recompute']]}); load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
