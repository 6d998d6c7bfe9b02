"""A state's merge ⊗ as today (UNION ALL + GROUP BY over the whole state) against a merge that
carries the untouched rows over (a full outer hash join of the state with the batch's delta,
co-partitioned on the join key), and against copying the state alone, for join-groupby's `in_x`
at 500K rows with a 40K-row delta, 4 partitions (docs/benchmarks.md, stop 33).

    .venv/bin/python docs/experiments/merge_by_join.py [STATE_ROWS]
"""
import statistics
import sys
import time

from streamfold.runtime.session import engine_session, get_spark

spark = engine_session(get_spark(), 4)
spark.conf.set("spark.sql.requireAllClusterKeysForCoPartition", "false")
N = int(sys.argv[1]) if len(sys.argv) > 1 else 500000
spark.range(0, N).selectExpr("CAST(rand(1)*10001 AS INT) AS B", "CAST(rand(2)*10001 AS INT) AS A", "1L AS w", "CAST(NULL AS BIGINT) AS ow", "0 AS t") \
    .repartition(4, "B").localCheckpoint(eager=True).createOrReplaceTempView("old0")
spark.sql("SELECT * FROM old0 WHERE w <> 0").createOrReplaceTempView("old")
spark.range(0, 40000).selectExpr("CAST(rand(3)*10001 AS INT) AS B", "CAST(rand(4)*10001 AS INT) AS A", "1L AS w").localCheckpoint(eager=True).createOrReplaceTempView("d")
AGG = """SELECT __g0 AS B, __g1 AS A, sum(w) AS w, max(CASE WHEN src=0 THEN w END) AS ow, max(src) AS t FROM (
    SELECT B AS __g0, A AS __g1, w, 0 AS src FROM old UNION ALL SELECT B AS __g0, A AS __g1, w, 1 AS src FROM (SELECT * FROM d DISTRIBUTE BY B)) GROUP BY __g0, __g1"""
FO = """SELECT /*+ SHUFFLE_HASH(dd) */ CASE WHEN o.B IS NULL THEN dd.B ELSE o.B END AS B, CASE WHEN o.B IS NULL THEN dd.A ELSE o.A END AS A,
    CASE WHEN o.w IS NULL THEN dd.w WHEN dd.w IS NULL THEN o.w ELSE o.w + dd.w END AS w, o.w AS ow, CASE WHEN dd.B IS NULL THEN 0 ELSE 1 END AS t
    FROM old o FULL OUTER JOIN (SELECT B, A, sum(w) AS w FROM (SELECT * FROM d DISTRIBUTE BY B) GROUP BY B, A) dd ON o.B = dd.B AND o.A <=> dd.A"""
V = {
 "agg-merge": (AGG, {}),
 "agg-merge-cap18": (AGG, {"spark.sql.codegen.aggregate.fastHashMap.capacityBit": "18"}),
 "agg-merge-1level": (AGG, {"spark.sql.codegen.aggregate.map.twolevel.enabled": "false"}),
 "fo-join": (FO, {}),
 "copy": ("SELECT * FROM old", {}),
}
def run(k, first=False):
    q, conf = V[k]
    for a, b in conf.items(): spark.conf.set(a, b)
    try:
        df = spark.sql(q)
        if first:
            print(k); df.explain()
        t = time.time(); c = df.localCheckpoint(eager=True); el = time.time() - t
        if first: print(k, "rows", c.count())
        c.unpersist()
        return el
    finally:
        for a in conf: spark.conf.unset(a)
ts = {k: [] for k in V}
for k in V: run(k, first=k in ("fo-join",))
for i in range(20):
    for k in V: ts[k].append(run(k))
for k, v in ts.items():
    print(k, "median", f"{statistics.median(v):.3f}", "min", f"{min(v):.3f}")
