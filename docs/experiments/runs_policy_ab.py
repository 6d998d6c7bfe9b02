"""join-groupby's shape in process, 100K + 100K history then N increments of 40K + 40K: the engine's clock per
batch and the cycle with the fold after the commit (docs/benchmarks.md, "Stop 40").

    .venv/bin/python docs/experiments/runs_policy_ab.py LABEL 30                                   # this policy
    STREAMFOLD_RUNS_MIN_ROWS=100000000 .venv/bin/python docs/experiments/runs_policy_ab.py old 30  # whole states
"""
import os, sys, json, time, shutil, glob
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
import streamfold
tag, n = sys.argv[1], int(sys.argv[2])
root = f"/tmp/streamfold-runs-{tag}"
shutil.rmtree(root, ignore_errors=True)
dirs = {s: f"{root}/in/{s}" for s in ("S1", "S2")}
for d in dirs.values(): os.makedirs(d)
rng = np.random.default_rng(2016)
def put(i, rows):
    for s, cols in (("S1", ("A", "B")), ("S2", ("C", "D"))):
        t = pa.table({c: rng.integers(0, 10001, rows, dtype=np.int32) for c in cols})
        pq.write_table(t, f"{dirs[s]}/.tmp"); os.rename(f"{dirs[s]}/.tmp", f"{dirs[s]}/{i:06d}.parquet")
sql = "SELECT x.A, avg(y.D) AS avg_d FROM S1 x JOIN S2 y ON x.B = y.C GROUP BY x.A"
put(0, 100_000)
q = streamfold.start(sql, dirs, f"{root}/out")
q.process_available()
times = []
for i in range(1, n + 1):
    put(i, 40_000)
    t0 = time.monotonic(); q.process_available(); wall = time.monotonic() - t0
    rec = json.load(open(sorted(glob.glob(f"{root}/out/commits/*.json"))[-1]))
    times.append((round(rec["duration_s"], 3), round(wall, 3)))
q.stop()
eng = [t[0] for t in times]; cyc = [t[1] for t in times]
print("RESULT", tag, "engine", json.dumps(eng), "cycle", json.dumps(cyc))
import statistics as st
print("SUMMARY", tag, "median engine b6+", round(st.median(eng[5:]), 3), "median cycle b6+", round(st.median(cyc[5:]), 3), "mean cycle b6+", round(st.mean(cyc[5:]), 3))
