"""A Delta source with 1 % of rows updated per version: each batch vs recomputing (issue 54)."""
import os, shutil, sys, time
import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
import streamfold
from streamfold.runtime.session import get_spark

N, FILES = int(sys.argv[1]) if len(sys.argv) > 1 else 400_000, 8
SQL = "SELECT k, count(*) AS n, sum(v) AS t FROM T GROUP BY k"
spark = get_spark("local[2]", app_name="bench")
root = os.environ.get("BENCH_DIR", "/tmp/streamfold-delta-bench")
for cdf in (False, True):
    for layout in ("spread", "clustered"):
        shutil.rmtree(root, ignore_errors=True)
        path = f"{root}/t"
        per = N // FILES
        for f in range(FILES):
            ids = pa.array(range(f * per, (f + 1) * per), pa.int64())
            t = pa.table({"id": ids, "k": pa.compute.cast(pa.compute.divide(ids, 400), pa.int32()), "v": ids})
            write_deltalake(path, t, mode="append",
                            configuration={"delta.enableChangeDataFeed": "true"} if cdf and f == 0 else None)
        qs = {s: streamfold.start(SQL, {"T": path + ":delta"}, f"{root}/{s}", spark=spark, background=False,
                                  partitions=2, endpoint=False, strategy=s,
                                  settings=streamfold.Settings(delta_change_feed=cdf))
              for s in ("incremental", "recompute")}
        for q in qs.values():
            q.process_available()
        times = {s: [] for s in qs}
        for i in range(3):
            pred = f"id % 100 = {i}" if layout == "spread" else f"id >= {i * N // 100} AND id < {(i + 1) * N // 100}"
            DeltaTable(path).update(updates={"v": "v + 1"}, predicate=pred)
            for s, q in qs.items():
                t0 = time.monotonic(); r = q.process_available(); times[s].append(time.monotonic() - t0)
        for q in qs.values():
            q.stop()
        inc, rec = sum(times["incremental"]) / 3, sum(times["recompute"]) / 3
        print(f"cdf={cdf} layout={layout} rows={N}: incremental {inc:.2f} s/batch, recompute {rec:.2f} s/batch, "
              f"ratio {inc / rec:.2f}  ({[round(x, 2) for x in times['incremental']]} vs "
              f"{[round(x, 2) for x in times['recompute']]})", flush=True)
