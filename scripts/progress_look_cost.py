"""What one look of the progress poller (streamfold/runtime/progress.py) costs while a Spark job
runs: the active jobs, their stages from the status tracker, rows read from the status store.
Median and maximum of 30 looks, 0.2 s apart. Run from the repository's root:

    PYTHONPATH=. .venv/bin/python scripts/progress_look_cost.py
"""
import statistics, threading, time
from streamfold.runtime.session import get_spark
from streamfold.runtime.progress import spark_look
s = get_spark("local[2]")
sc = s.sparkContext
done = threading.Event()
def job():
    s.range(0, 400_000_000, numPartitions=64).selectExpr("id % 1000 AS k").groupBy("k").count().collect()
    done.set()
threading.Thread(target=job, daemon=True).start()
while not sc.statusTracker().getActiveJobsIds():
    time.sleep(0.05)
costs = []
for _ in range(30):
    if done.is_set(): break
    t = time.perf_counter()
    jobs = list(sc.statusTracker().getActiveJobsIds())
    looks = spark_look(sc, jobs)
    costs.append(time.perf_counter() - t)
    time.sleep(0.2)
stages = sum(len(v) for v in looks.values())
print(f"looks={len(costs)} stages_per_look={stages} median_ms={statistics.median(costs)*1000:.1f} max_ms={max(costs)*1000:.1f}")
