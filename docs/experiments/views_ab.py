"""A/B of temp views registered directly against the public API (docs/benchmarks.md, "Temp views").

    STREAMFOLD_DIRECT_VIEWS=0 .venv/bin/python docs/experiments/views_ab.py a1
    STREAMFOLD_DIRECT_VIEWS=1 .venv/bin/python docs/experiments/views_ab.py b1

Each run: a 1M-row history, then forty 40K-row increments of a groupBy through streamfold.start;
prints the median wall and CPU (driver + its JVM, from /proc) of increments 10-39.
"""
import os, sys, time, statistics, shutil
import numpy as np, pyarrow as pa, pyarrow.parquet as pq
import streamfold
from streamfold.runtime.session import get_spark
spark = get_spark()
jvm = spark._jvm
pid = jvm.java.lang.ProcessHandle.current().pid()
def cpu():
    f = open(f"/proc/{pid}/stat").read().split(")")[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK") + sum(os.times()[:2])
base = f"/tmp/streamfold-views-ab/{sys.argv[1]}"
shutil.rmtree(base, ignore_errors=True)
src = f"{base}/S"; os.makedirs(src)
rng = np.random.default_rng(7)
def put(name, n):
    t = pa.table({"x": rng.integers(0, 10000, n), "y": rng.integers(0, 1000, n)})
    pq.write_table(t, f"{src}/.{name}"); os.rename(f"{src}/.{name}", f"{src}/{name}")
put("h.parquet", 1_000_000)
q = streamfold.start("SELECT x, avg(y) AS a, count(*) AS n FROM S GROUP BY x", {"S": src}, f"{base}/out", spark=spark, background=False)
q.process_available()
cpus, walls = [], []
for i in range(40):
    put(f"i{i:03d}.parquet", 40000)
    c, a = cpu(), time.perf_counter()
    r = q.process_available()
    walls.append(time.perf_counter() - a); cpus.append(cpu() - c)
q.stop()
print(sys.argv[1], "DIRECT", os.environ.get("STREAMFOLD_DIRECT_VIEWS", "1"), "median wall %.3f cpu %.3f (batches 10-39)" % (statistics.median(walls[10:]), statistics.median(cpus[10:])))
