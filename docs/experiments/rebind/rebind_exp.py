"""Experiment (issue 18): a warm merge planned once and re-bound to each batch's leaves.

    .venv/bin/python docs/experiments/rebind/rebind_exp.py plain    # spark.sql + lazy localCheckpoint per batch
    .venv/bin/python docs/experiments/rebind/rebind_exp.py rebind   # the physical plan of batch 2, leaves swapped

Not part of the product; see docs/benchmarks.md, "Design tried: physical plans re-bound".
"""
import time, os, statistics, sys
import pyarrow as pa, pyarrow.parquet as pq, numpy as np
from streamfold.runtime.session import get_spark, engine_session
base = get_spark()
spark = engine_session(base, 4)
jvm = spark._jvm
src = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "Rebind.java")).read()
comp = jvm.org.codehaus.janino.SimpleCompiler()
comp.setParentClassLoader(jvm.java.lang.Thread.currentThread().getContextClassLoader())
comp.cook(src)
Rebind = comp.getClassLoader().loadClass("Rebind")
rebind_m = None
for m in Rebind.getMethods():
    if m.getName() == "rebind": rebind_m = m
d = "/tmp/rebind-exp-data"
os.makedirs(d, exist_ok=True)
rng = np.random.default_rng(1)
for i in range(40):
    if not os.path.exists(f"{d}/b{i}.parquet"):
        pq.write_table(pa.table({"k": rng.integers(0, 10000, 40000), "v": rng.integers(0, 100, 40000)}), f"{d}/b{i}.parquet")
MODE = sys.argv[1]
def mk(i):
    return spark.read.schema("k bigint, v bigint").parquet(f"{d}/b{i}.parquet")
state = spark.sql("SELECT id % 10000 AS k, 1L AS _weight, id AS s FROM range(1000000)").groupBy("k").agg({"_weight": "sum", "s": "sum"}).toDF("k", "_weight", "s").repartition(4, "k").localCheckpoint()
T = {}
def t(name, f):
    a = time.perf_counter(); r = f(); T.setdefault(name, []).append(time.perf_counter() - a); return r
MERGE = """SELECT __g0 AS k, CAST(sum(_weight) AS bigint) AS _weight, CAST(sum(s) AS bigint) AS s,
 CAST(max(CASE WHEN __src = 0 THEN _weight END) AS bigint) AS `__old::_weight`, max(__src) AS __touched
FROM (SELECT k AS __g0, _weight, s, 0 AS __src FROM st UNION ALL
      SELECT k AS __g0, _weight, s, 1 AS __src FROM (SELECT k, count(*) AS _weight, sum(v) AS s FROM delta GROUP BY k) x) _m GROUP BY __g0"""
from pyspark.sql import DataFrame
Dataset = jvm.org.apache.spark.sql.classic.Dataset
rdds_m = [m for m in Rebind.getMethods() if m.getName() == "rdds"][0]
def leaf_rdd(df):
    a = spark.sparkContext._gateway.new_array(jvm.java.lang.Object, 1); a[0] = df._jdf.queryExecution().analyzed()
    r = rdds_m.invoke(None, a)
    assert len(r) == 1, len(r)
    return r[0]
cached = None
tot = []
pid = jvm.java.lang.ProcessHandle.current().pid()
def cpu():
    f = open(f"/proc/{pid}/stat").read().split(")")[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK") + sum(os.times()[:2])
cpus = []
for i in range(40):
    a0 = time.perf_counter(); c0 = cpu()
    # delta as an RDD leaf: the file scan's rdd
    delta_df = mk(i)
    delta = delta_df
    if MODE == "plain" or cached is None or i < 3:
        t("views", lambda: (state.createOrReplaceTempView("st"), delta.createOrReplaceTempView("delta")))
        df = t("sql merge", lambda: spark.sql(MERGE))
        m = t("localCheckpoint(lazy)", lambda: df.localCheckpoint(eager=False))
        if MODE != "plain":
            cached = (df._jdf.queryExecution().executedPlan(), leaf_rdd(state), leaf_rdd(delta))
    else:
        plan, s_old, d_old = cached
        gw = spark.sparkContext._gateway
        olds = gw.new_array(jvm.java.lang.Object, 2); olds[0] = s_old; olds[1] = d_old
        news = gw.new_array(jvm.java.lang.Object, 2); news[0] = leaf_rdd(state); news[1] = leaf_rdd(delta)
        args = gw.new_array(jvm.java.lang.Object, 3); args[0] = plan; args[1] = olds; args[2] = news
        p = t("rebind", lambda: rebind_m.invoke(None, args))
        def wrap():
            rdd = p.execute()
            lr = jvm.org.apache.spark.sql.execution.LogicalRDD(p.output(), rdd, p.outputPartitioning(), p.outputOrdering(), False, jvm.scala.Option.empty(), spark._jsparkSession, jvm.scala.Option.empty(), jvm.scala.Option.empty(), False)
            return DataFrame(Dataset.ofRows(spark._jsparkSession, lr), spark)
        df = t("execute+wrap", wrap)
        m = t("localCheckpoint(lazy)", lambda: df.localCheckpoint(eager=False))
        cached = (plan, s_old, d_old)  # keep the template with its original leaves
    t("view merged", lambda: m.createOrReplaceTempView("merged"))
    out = t("sql out", lambda: spark.sql("SELECT k, _weight, s FROM merged WHERE __touched = 1"))
    rows = t("collect arrow", lambda: out._collect_as_arrow())
    state = spark.sql("SELECT k, _weight, s FROM merged WHERE _weight <> 0")
    tot.append(time.perf_counter() - a0); cpus.append(cpu() - c0)
    if i % 10 == 9:
        st = spark.sparkContext.statusTracker(); j = max(st.getJobIdsForGroup()); info = st.getJobInfo(j)
        print("last job", j, "tasks per stage", [st.getStageInfo(x).numTasks for x in info.stageIds if st.getStageInfo(x)])
    if i == 39:
        print("checksum", spark.sql("SELECT sum(_weight), sum(s), count(*) FROM merged WHERE _weight <> 0").collect())
for k, v in T.items():
    print(f"{k:24s} median {statistics.median(v[-20:])*1000:7.1f} ms")
print("total median", statistics.median(tot[10:]), "cpu median", statistics.median(cpus[10:]))
