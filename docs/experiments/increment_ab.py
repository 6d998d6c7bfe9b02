"""The seed's groupBy in process, 1M-row history then N increments of 40K rows: the median time of
a warm increment (increments 11–N), for A/B runs of a change in separate JVMs (docs/benchmarks.md,
"Stop 41"). CONF passes Spark settings; JIT=1 prints, per increment, the CPU seconds of the JVM's
threads by group (the JIT compilers, the executor's task, …) read from /proc; PROFILE=1 prints the
waterfall of the last increment (as `streamfold run --profile` writes it).

    .venv/bin/python docs/experiments/increment_ab.py                                              # as it is
    CONF=spark.task.maxDirectResultSize=1m .venv/bin/python docs/experiments/increment_ab.py       # a setting
    git stash && .venv/bin/python docs/experiments/increment_ab.py; git stash pop                   # the code before
"""
import glob
import os
import shutil
import statistics
import time

import streamfold
from streamfold.bench.data import write_pairs
from streamfold.bench.workloads import GROUPBY_SQL
from streamfold.runtime.session import get_spark

N = int(os.environ.get("N", "30"))
data = f"/tmp/streamfold-increment-ab-{N}"
if not os.path.isdir(data):
    os.makedirs(data)
    write_pairs(f"{data}/000000-000.parquet", ("x", "y"), 1_000_000, 1)
    for k in range(1, N + 1):
        write_pairs(f"{data}/{k:06d}-000.parquet", ("x", "y"), 40_000, 1000 + k)
files = sorted(os.listdir(data))
root = f"/tmp/streamfold-increment-ab-run-{os.getpid()}"
shutil.rmtree(root, ignore_errors=True)
os.makedirs(f"{root}/S")
settings = dict(kv.split("=", 1) for kv in os.environ.get("CONF", "").split(",") if kv)
spark = get_spark(None, settings=settings or None)


def jvm_threads() -> dict[str, float]:
    """CPU seconds so far of this process's JVM's threads, by group."""
    out: dict[str, float] = {}
    for cmd in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            if b"pyspark-shell" not in open(cmd, "rb").read():
                continue
        except OSError:
            continue
        for t in glob.glob(cmd.replace("cmdline", "task/*")):
            try:
                name = open(f"{t}/comm").read().strip()
                fields = open(f"{t}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            group = "JIT" if "Compiler" in name else "GC" if "G1" in name or "GC" in name else name[:12]
            out[group] = out.get(group, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


os.link(f"{data}/{files[0]}", f"{root}/S/{files[0]}")
q = streamfold.start(GROUPBY_SQL, {"S": f"{root}/S"}, f"{root}/out", spark=spark, background=False,
                     profile=bool(os.environ.get("PROFILE")))
q.process_available()
times = []
for k, name in enumerate(files[1:N + 1], 1):
    before = jvm_threads() if os.environ.get("JIT") else {}
    os.link(f"{data}/{name}", f"{root}/S/{name}")
    t0 = time.monotonic()
    q.process_available()
    times.append(time.monotonic() - t0)
    if before:
        after = jvm_threads()
        spent = sorted(((g, after[g] - before.get(g, 0.0)) for g in after), key=lambda gv: -gv[1])[:4]
        print(k, f"{times[-1] * 1000:.0f} ms", " ".join(f"{g}={v:.2f}" for g, v in spent))
if os.environ.get("PROFILE"):
    print("\n".join(q.results[-1].waterfall().lines()))
q.stop()
shutil.rmtree(root, ignore_errors=True)
warm = times[10:]
print(f"median of increments 11-{N}: {statistics.median(warm) * 1000:.1f} ms (mean {statistics.mean(warm) * 1000:.1f}, "
      f"min {min(warm) * 1000:.1f})")
