# Stop 39: the bench's recompute at SF 1 batch 10 with the netting split (runtime/netting.py) against
# netting every row, alternated in one process. Needs the SF 1 data of `bench tpch --sf 1 --increments 10`
# at /tmp/exp/tp1 (edit the path). Run: STREAMFOLD_DRIVER_MEMORY=12g .venv/bin/python docs/experiments/net_ab.py q01,q18
import sys, os, time
from streamfold.bench.tpch import data as tpch_data
from streamfold.bench.tpch.run import spark_recompute, load_query, tables_read
from streamfold.runtime import netting
from streamfold.runtime.session import get_spark
ds = tpch_data.ensure("/tmp/exp/tp1/tpch-data", 1, 10, delete_fraction=0.01, increment=0.01)
spark = get_spark(None)
real = netting.split
for q in sys.argv[1].split(","):
    sql = load_query(q); read = tables_read(sql)
    streams = list(tpch_data.streams_for(read)); statics = sorted(read - set(streams))
    for rep in range(2):
        for mode in ("split", "whole"):
            netting.split = real if mode == "split" else (lambda *a, **k: None)
            rows, s = spark_recompute(spark, ds, sql, streams, statics, 10)
            rows9, s9 = spark_recompute(spark, ds, sql, streams, statics, 9) if rep == 0 and mode == "split" else (None, 0)
            print(q, mode, "b10 %.2f s" % s, "(b9 %.2f s)" % s9 if s9 else "", len(rows), hash(tuple(sorted(map(repr, rows)))), flush=True)
