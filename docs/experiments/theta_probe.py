"""One Table 4.1 join of `streamfold bench theta --skew` under one partitioning, with the waterfall
of each increment (stop 48, docs/benchmarks.md): first a run over a small warm-up data set, then
a history and three increments, each batch's line saying how many classes of generated code it
compiled.

usage: .venv/bin/python docs/experiments/theta_probe.py QUERY SYSTEM PARTITIONS [CELLS]
(from the checkout to measure; QUERY eq5|eq7|bci|bnci, SYSTEM DYNAMIC|STATICOPT|STATICMID|SHJ|HYBRID;
SF the data's scale factor, default 0.05 (at 0.2 BCI needs STREAMFOLD_DRIVER_MEMORY=8g); DUMP=1
also prints the plan's explain)"""
import os, shutil, sys
sys.path.insert(0, os.getcwd())
import streamfold
from streamfold.bench import theta_tpch, zipf_tpch
from streamfold.runtime.session import get_spark

query, system, parts = sys.argv[1], sys.argv[2].upper(), int(sys.argv[3])
cells = int(sys.argv[4]) if len(sys.argv) > 4 else 64
sf = float(os.environ.get("SF", "0.05"))
work = os.path.abspath("bench-out/theta-probe")
spark = get_spark("local[*]", app_name="theta-probe")
manifest = zipf_tpch.write(os.path.join(work, f"data-{sf}"), sf, 1.0 if query.startswith("eq") else 0.0, 0.5, 3)
warm = zipf_tpch.write(os.path.join(work, "warm"), 0.002, 1.0, 0.5, 1)
sql, sources = theta_tpch.QUERIES[query]
start = (1, cells) if system == "STATICOPT" else None
for label, man, prof in (("warm", warm, False), ("run", manifest, True)):
    base = os.path.join(work, f"{label}-{query}-{system}")
    shutil.rmtree(base, ignore_errors=True)
    dirs = {s: os.path.join(base, "in", s) for s in sources}
    for d in dirs.values():
        os.makedirs(d)
    q = streamfold.start(sql, dirs, os.path.join(base, "out"), spark=spark, background=False,
                         schemas={s: theta_tpch.SCHEMAS[s] for s in sources}, profile=prof,
                         **theta_tpch.options(system, cells, start, parts))
    if prof and os.environ.get("DUMP"):
        print(q.explain())
    for b in range(len(man["files"][sources[0]])):
        for s in sources:
            p = man["files"][s][b]
            shutil.copy(p, os.path.join(dirs[s], os.path.basename(p)))
        compiled = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
        before = compiled.getCount()
        r = q.process_available()
        print(f"{label} batch {b}: {r.duration_s:.2f} s {q.commit(b).get('prepared')} "
              f"compiled={compiled.getCount() - before}", flush=True)
        if prof and b >= 1:
            print("\n".join(r.waterfall().lines()), flush=True)
    q.stop()
