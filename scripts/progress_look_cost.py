"""What one look of the progress poller (streamfold/runtime/progress.py) costs while a Spark job
runs: the active jobs, their stages from the status tracker, rows read from the status store.
Median and maximum of 30 looks, 0.2 s apart. Run from the repository's root:

    PYTHONPATH=. .venv/bin/python scripts/progress_look_cost.py
"""

import statistics
import threading
import time

from streamfold.runtime.progress import spark_look
from streamfold.runtime.session import get_spark


def main() -> None:
    spark = get_spark("local[2]")
    sc = spark.sparkContext
    done = threading.Event()

    def job() -> None:
        spark.range(0, 400_000_000, numPartitions=64).selectExpr("id % 1000 AS k").groupBy("k").count().collect()
        done.set()

    threading.Thread(target=job, daemon=True).start()
    while not sc.statusTracker().getActiveJobsIds():
        time.sleep(0.05)
    costs, looks = [], {}
    for _ in range(30):
        if done.is_set():
            break
        start = time.perf_counter()
        looks = spark_look(sc, list(sc.statusTracker().getActiveJobsIds()))
        costs.append(time.perf_counter() - start)
        time.sleep(0.2)
    stages = sum(len(v) for v in looks.values())
    print(f"looks={len(costs)} stages_per_look={stages} median_ms={statistics.median(costs) * 1000:.1f} "
          f"max_ms={max(costs) * 1000:.1f}")
    spark.stop()


if __name__ == "__main__":
    main()
