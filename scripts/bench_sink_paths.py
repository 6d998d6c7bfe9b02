"""Two ways of moving a batch's changes into PostgreSQL, timed side by side (issue 55):

* ``driver``: the sink as it ships — the driver reads the batch's changes (Arrow), keeps the new
  rows and the gone keys, streams them with ``COPY`` into a temporary staging table and applies
  them with one ``MERGE`` on the key in the same transaction; ``delete-insert`` the same,
  applying them as a table without the key's unique index gets them (deleting every changed
  key's row, inserting the new rows);
* ``executors``: Spark's executors write the changes through JDBC (Debian's PostgreSQL JDBC
  driver, ``/usr/share/java/postgresql.jar``) into an unlogged staging table, then the driver
  applies them in one transaction — the new rows and gone keys picked by the server, then the
  shipped sink's ``MERGE``.

    PYTHONPATH=. .venv/bin/python scripts/bench_sink_paths.py [--sizes 2000,20000,200000,2000000] [--reps 3]

A keyed answer (``k, n, total``) of ``--keys`` rows is loaded first; each batch updates
``size / 2`` keys (a deletion and an insertion each: ``size`` change rows). The server is a
throw-away one on loopback with fsync on (``streamfold.bench.pgserver``). Prints the median of
``--reps`` batches per size and path, and the rows per second.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

JAR = "/usr/share/java/postgresql.jar"


def changes_dir(root: str, batch: int, size: int, keys: int) -> str:
    """A batch's changes as the output directory holds them: ``size / 2`` keys each deleted with
    their old row and inserted with a new one."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(batch)
    k = rng.choice(keys, size // 2, replace=False).astype(np.int64)
    old_n, new_n = np.full(k.size, batch, np.int64), np.full(k.size, batch + 1, np.int64)
    table = pa.table({"k": np.concatenate([k, k]), "n": np.concatenate([old_n, new_n]),
                      "total": np.concatenate([k * batch, k * (batch + 1)]),
                      "_weight": np.concatenate([-np.ones(k.size, np.int64), np.ones(k.size, np.int64)])})
    path = os.path.join(root, f"changes-{batch}")
    os.makedirs(path)
    pq.write_table(table, os.path.join(path, "part-0.parquet"))
    return path


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="2000,20000,200000,2000000")
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()

    import pyarrow as pa
    import pyarrow.parquet as pq

    from streamfold.bench.pgserver import throwaway_postgres
    from streamfold.connectors import parse_endpoint
    from streamfold.connectors.committed import AnswerShape, CommittedBatch
    from streamfold.connectors.postgres_sink import PostgresSink
    from streamfold.runtime.session import get_spark

    if not os.path.exists(JAR):
        raise SystemExit(f"{JAR} is missing: apt-get install libpostgresql-jdbc-java")
    spark = get_spark("local[*]", app_name="bench-sink-paths", conf={"spark.jars": JAR})
    root = tempfile.mkdtemp(prefix="sink-paths-")
    shape = AnswerShape((("k", "bigint"), ("n", "bigint"), ("total", "bigint")), ("k",), "bench")
    with throwaway_postgres(durable=True) as pg:
        jdbc = f"jdbc:postgresql://{pg.host}:{pg.port}/{pg.dbname}"
        props = {"user": pg.user, "password": pg.password, "driver": "org.postgresql.Driver"}
        print(f"{'change rows':>12} {'path':>14} {'median s':>9} {'rows/s':>10}", flush=True)
        for size in (int(s) for s in args.sizes.split(",")):
            for path in ("driver", "delete-insert", "executors"):
                table = f"t_{path}_{size}_{os.urandom(3).hex()}"
                sink = PostgresSink(parse_endpoint(pg.url(table), role="sink"), shape)
                sink.upsert = sink.upsert and path != "delete-insert"
                initial = os.path.join(root, f"init-{table}")
                os.makedirs(initial)
                pq.write_table(pa.table({"k": pa.array(range(args.keys), pa.int64()), "n": pa.repeat(0, args.keys),
                                         "total": pa.repeat(0, args.keys), "_weight": pa.repeat(1, args.keys)}),
                               os.path.join(initial, "part-0.parquet"))
                sink.write(CommittedBatch(0, "", initial, shape))
                times = []
                for rep in range(1, args.reps + 1):
                    changes = changes_dir(os.path.join(root, table), rep, size, args.keys)
                    committed = CommittedBatch(rep, "", changes, shape)
                    started = time.perf_counter()
                    if path != "executors":
                        sink.write(committed)
                    else:
                        spark.read.parquet(changes).write.jdbc(jdbc, f"stage_{table}", mode="overwrite",
                                                               properties={**props, "truncate": "true"})
                        with sink.conn.transaction():
                            sink.conn.execute(
                                f"CREATE TEMPORARY VIEW _stage AS SELECT k, n, total, false AS _gone FROM stage_{table} "
                                f"WHERE _weight > 0 UNION ALL SELECT k, NULL, NULL, true FROM stage_{table} GROUP BY k "
                                "HAVING sum(_weight) < 0")
                            sink._merge(False)
                            sink.conn.execute("DROP VIEW _stage")
                            sink.conn.execute("UPDATE streamfold_sink_progress SET batch = %s WHERE query_id = %s "
                                              "AND target = %s", (rep, "bench", table))
                    times.append(time.perf_counter() - started)
                sink.close()
                median = statistics.median(times)
                print(f"{size:>12} {path:>14} {median:>9.3f} {size / median:>10.0f}", flush=True)


if __name__ == "__main__":
    main()
