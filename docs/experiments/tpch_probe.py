"""One TPC-H query's first N batches over `streamfold bench tpch`'s data, `strategy="incremental"`,
with the waterfall of the batches named (stop 44, docs/benchmarks.md). DUMP=1 also prints the
prepared plans' physical operators with their metrics after the last batch (rows, pipeline time).
Each batch's line also says how many classes of generated code it compiled (stop 47: a warm
batch should compile none).

usage: STREAMFOLD_DRIVER_MEMORY=12g .venv/bin/python docs/experiments/tpch_probe.py QUERY N [BATCH ...]
(from the checkout to measure; TPCH_DATA: the data set's directory, by default the bench's SF 1
one under bench-out, e.g. bench-out/tpch-data/sf1-b10-i0.01)"""
import os, sys, shutil, time
sys.path.insert(0, os.getcwd())
import streamfold
from streamfold.bench.tpch import data as tpch_data
from streamfold.bench.tpch.run import load_query, tables_read
D = os.environ.get("TPCH_DATA", "bench-out/tpch-data/sf1-b10-i0.01")
name, n = sys.argv[1], int(sys.argv[2])
prof = {int(x) for x in sys.argv[3:]}
sql = load_query(name)
read = tables_read(sql)
streams = [t for t in ("lineitem", "orders", "partsupp") if t in read and os.path.isdir(f"{D}/streams/{t}")]
statics = sorted(read - set(streams))
run = os.path.abspath(f"bench-out/probe-{name}")
shutil.rmtree(run, ignore_errors=True)
dirs = {t: f"{run}/in/{t}" for t in streams}
for d in dirs.values(): os.makedirs(d)
schemas = {t: tpch_data.schema_sql(t, t in streams) for t in streams + statics}
q = streamfold.start(sql, dirs, f"{run}/out", tables={t: f"{D}/tables/{t}.parquet" for t in statics}, schemas=schemas,
                     background=False, strategy="incremental", profile=bool(prof))
for b in range(n):
    for t in streams:
        os.link(f"{D}/streams/{t}/{b:06d}.parquet", f"{dirs[t]}/{b:06d}.parquet")
    compiled = q.engine.spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    before = compiled.getCount()
    r = q.process_available()
    print(f"batch {b}: {r.commit_s:.2f}s (+{r.duration_s - r.commit_s:.2f}) {q.commit(b).get('prepared')} runs={sorted(q.engine.store.bases)} lookups={getattr(q.engine.prepared, 'lookups', None)} indexes={list(q.engine.spark._jvm.streamfold.jvm.Plans.indexes())} compiled={compiled.getCount() - before}", flush=True)
    if b in prof and r.profile is not None:
        w = r.profile() if callable(r.profile) else r.profile
        print("\n".join(w.lines(top=12)), flush=True)
if os.environ.get("DUMP"):
    def seq(x): return [x.apply(i) for i in range(x.size())]
    def metrics(node):
        out = {}
        it = node.metrics().iterator()
        while it.hasNext():
            kv = it.next(); out[kv._1()] = kv._2().value()
        return out
    def walk(node, depth, acc):
        m = metrics(node)
        rows = m.get("numOutputRows")
        times = {k: v for k, v in m.items() if "time" in k.lower() and v}
        name = node.nodeName()
        extra = ""
        if name in ("Exchange", "ShuffleExchange"):
            extra = " " + str(node.outputPartitioning().toString())[:60]
        if name.startswith("Scan") or "RDD" in name:
            extra = " " + node.simpleString(3)[:100] + " " + str(node.outputPartitioning().toString())[:80]
        if name in ("HashAggregate", "ShuffledHashJoin", "SortMergeJoin", "BroadcastHashJoin", "Project", "Filter", "Union"):
            extra = " " + node.simpleString(2)[:150]
        if name != "WholeStageCodegen" and name != "InputAdapter":
            acc.append("  " * depth + f"{name} rows={rows} {times}{extra}")
        for c in seq(node.children()):
            walk(c, depth + (0 if name in ("WholeStageCodegen", "InputAdapter") else 1), acc)
    for i, plan in enumerate(q.engine.prepared._plans):
        acc = []
        walk(plan, 0, acc)
        print(f"===== plan {i}"); print("\n".join(acc))
q.stop()
