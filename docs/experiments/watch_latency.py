"""`streamfold run` at its default trigger (1 s): latency from a file's rename to its commit, 8 increments
of 20K rows after a 200K-row history (docs/benchmarks.md, "Stop 40"). `STREAMFOLD_WATCH=0` for polling only.

    .venv/bin/python docs/experiments/watch_latency.py LABEL
"""
import os, sys, time, json, subprocess, shutil, numpy as np, pyarrow as pa, pyarrow.parquet as pq
root = f"/tmp/streamfold-watch-{sys.argv[1]}"; shutil.rmtree(root, ignore_errors=True)
src = f"{root}/in"; os.makedirs(src); out = f"{root}/out"
rng = np.random.default_rng(1)
def put(i, n):
    t = pa.table({"x": rng.integers(0, 10001, n, dtype=np.int32), "y": rng.integers(0, 10001, n, dtype=np.int32)})
    pq.write_table(t, f"{src}/.t"); os.rename(f"{src}/.t", f"{src}/{i:04d}.parquet"); return time.monotonic()
put(0, 200_000)
p = subprocess.Popen([sys.executable, "-m", "streamfold", "run", "SELECT x, avg(y) AS a FROM S GROUP BY x", "--source", f"S={src}", "--output", out, "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def wait(b):
    while not os.path.exists(f"{out}/commits/{b:06d}.json"): time.sleep(0.002)
    return time.monotonic()
wait(0)
lat = []
for i in range(1, 9):
    time.sleep(0.3 + 0.137 * i % 0.7)  # arrive at different points of the poll interval
    t = put(i, 20_000); lat.append(round(wait(i) - t, 3))
p.terminate(); p.wait()
print(sys.argv[1], "latency", lat, "median", sorted(lat)[4])
