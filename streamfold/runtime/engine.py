"""Run one compiled query batch by batch: read, apply h and ⊗, answer with a, commit.

One batch is one consistent cut across all the query's sources: the driver lists every source
once, records the files in ``offsets/<batch>.json`` before touching them, and applies them all
in the batch. The order of durable writes is: offsets → state deltas → snapshot and changes →
``commits/<batch>.json``; see :mod:`.checkpoint` for why that makes runs restartable.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import BadInputError, BatchError, SqlError, StreamfoldError, UnsupportedError
from ..ir.rel import WEIGHT, DeltaScan, Rel, Scan, StateScan
from ..plan import IncrementalPlan, incrementalize
from ..plan.model import WEIGHT_COLUMN
from ..sql import Catalog, SourceSchema, bind
from . import files
from .checkpoint import Checkpoint, OutputDir, batch_name
from .lower import col, lower, sort_column
from .session import default_partitions, engine_session
from .sources import InputSpec, infer_schema, list_inputs, read_files, table_paths
from .state import StateStore, materialize, release

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger("streamfold")


@dataclass
class QueryConfig:
    """Everything ``streamfold run`` (or :func:`streamfold.start`) is told."""

    sql: str
    sources: list[InputSpec]
    output: str
    tables: list[InputSpec] = field(default_factory=list)
    checkpoint: str | None = None
    trigger: float = 1.0
    until_idle: float | None = None
    partitions: int | None = None
    on_bad_file: str = "stop"  # or "quarantine"
    compact_every: int = 20
    keep_snapshots: int | None = None  # prune older snapshots, keeping this many

    @property
    def checkpoint_dir(self) -> str:
        return self.checkpoint or os.path.join(self.output, "_checkpoint")


@dataclass
class BatchResult:
    batch: int
    inputs: dict[str, list[str]]
    rows: dict[str, int]
    duration_s: float
    snapshot_rows: int
    change_rows: int
    state_rows: dict[str, int]

    def line(self) -> str:
        ins = "  ".join(f"{n} +{r}" for n, r in self.rows.items())
        states = " · ".join(f"{n} {r}" for n, r in self.state_rows.items())
        return (f"batch {batch_name(self.batch)}  {ins}  │ states {states} │ snapshot {self.snapshot_rows} rows, "
                f"{self.change_rows} changes │ {self.duration_s:.2f} s")


class Engine:
    """A compiled query bound to its inputs, output and checkpoint, on a Spark session."""

    def __init__(self, spark: SparkSession, config: QueryConfig,
                 progress: Callable[[str], None] | None = None) -> None:
        self.config = config
        self.progress = progress or (lambda msg: None)
        self.spark = engine_session(spark, config.partitions or default_partitions(spark))
        self.partitions = int(self.spark.conf.get("spark.sql.shuffle.partitions") or 4)
        self.specs = {s.name.lower(): s for s in config.sources + config.tables}
        schemas = [infer_schema(s, self.spark) for s in config.sources + config.tables]
        self.catalog = Catalog(schemas)
        self.plan: IncrementalPlan = incrementalize(bind(config.sql, self.catalog))
        self._check_inputs_exist()
        self.output_schema = self._spark_output_schema()
        self.output = OutputDir(config.output)
        self.checkpoint = Checkpoint(config.checkpoint_dir)
        self.checkpoint.claim(self._identity())
        self.store = StateStore(self.spark, self.plan.states, self.partitions)
        self._tables: dict[str, DataFrame] = {}
        self._declare_states()
        self.recovery = self.checkpoint.recover(self.output, [s.name for s in self.plan.streams])
        self._restore_states()
        self.next_batch = self.recovery.last_committed + 1
        self.consumed = self.recovery.consumed

    # -- set-up ----------------------------------------------------------------------------------
    def _check_inputs_exist(self) -> None:
        for s in self.plan.sources:
            spec = self.specs[s.name.lower()]
            if s.static != spec.static:
                kind = "--table" if s.static else "--source"
                raise StreamfoldError(f"{s.name} must be given with {kind}", code="INPUT_KIND")
        used = {s.name.lower() for s in self.plan.sources}
        for name, spec in self.specs.items():
            if name not in used:
                log.warning("input %s is not used by the query", spec.name)

    def _identity(self) -> dict[str, Any]:
        tables = {}
        for s in self.plan.tables:
            paths = table_paths(self.specs[s.name.lower()].path)
            tables[s.name] = [(os.path.basename(p), _size(p), int(os.path.getmtime(p))) for p in paths]
        return {
            "sql": self.plan.sql.strip(),
            "sources": {s.name: {"columns": [[c, t.sql()] for c, t in s.columns], "deletions": s.weighted,
                                 "static": s.static} for s in self.plan.sources},
            "tables": tables,
        }

    def _spark_output_schema(self) -> StructType:
        """The names and types Spark gives the batch query: the snapshot's columns."""
        from pyspark.sql.types import StructField, StructType

        from .sources import _spark_type

        for s in self.catalog.values():
            struct = StructType([StructField(c, _spark_type(t)) for c, t in s.columns])  # type: ignore[arg-type]
            self.spark.createDataFrame([], struct).createOrReplaceTempView(s.name)
        try:
            schema = self.spark.sql(self.plan.sql).schema
        except Exception as e:  # noqa: BLE001 - Spark's analysis error, shown to the user
            raise UnsupportedError(f"Spark cannot run this query: {_first_line(e)}", code="SPARK_REJECTED",
                                   sql=self.plan.sql, params={"error": _first_line(e)},
                                   hint="streamfold answers what the Spark batch query answers; fix it for Spark") from None
        if len(schema.fields) != len(self.plan.answer.output):
            raise StreamfoldError(
                f"internal: Spark sees {len(schema.fields)} output columns, the plan {len(self.plan.answer.output)}",
                code="INTERNAL")
        return schema

    def _declare_states(self) -> None:
        """Fix every state's schema by analysing its program over empty inputs; load static ones."""
        for step in self.plan.init:
            df = materialize(self.store._partitioned(step.state, lower(step.program, self._env({}, {}, {}))))
            self.store.schemas[step.state] = df.schema
            self.store.current[step.state] = df
        deltas: dict[str, DataFrame] = {}
        frames = {s.name: self._empty_frame(s) for s in self.plan.streams}
        for step in self.plan.delta:
            df = lower(step.program, self._env(frames, deltas, {}))
            if step.temp:
                deltas[step.state] = df
            else:
                self.store.declare(step.state, df.schema)
                deltas[step.state] = self.store.empty(step.state)

    def _restore_states(self) -> None:
        rec = self.recovery
        if rec.last_committed < 0:
            return
        self.progress(f"resuming after batch {batch_name(rec.last_committed)}: loading state")
        for st in self.plan.states:
            if st.static:
                continue
            paths = []
            if rec.base is not None:
                paths.append(os.path.join(self.checkpoint.base_dir(rec.base), st.name))
            paths += [os.path.join(self.checkpoint.delta_dir(b), st.name) for b in rec.deltas]
            self.store.replace({st.name: self.store.load(st.name, paths)})

    # -- leaves ----------------------------------------------------------------------------------
    def _empty_frame(self, source: SourceSchema) -> DataFrame:
        from pyspark.sql.types import LongType, StructField, StructType

        from .sources import _spark_type

        fields = [StructField(c, _spark_type(t)) for c, t in source.columns]  # type: ignore[arg-type]
        return self.spark.createDataFrame([], StructType(fields + [StructField(WEIGHT, LongType())]))

    def _table(self, name: str) -> DataFrame:
        if name not in self._tables:
            schema = self.catalog[name]
            spec = self.specs[name.lower()]
            df = read_files(self.spark, spec, schema, table_paths(spec.path)).drop("__bad")
            self._tables[name] = df
        return self._tables[name]

    def _env(self, frames: dict[str, DataFrame], deltas: dict[str, DataFrame], new: dict[str, DataFrame],
             old: dict[str, DataFrame] | None = None) -> Callable[[Rel], DataFrame]:
        current = self.store.current if old is None else old

        def env(rel: Rel) -> DataFrame:
            if isinstance(rel, DeltaScan):
                base = frames[self.catalog[rel.table].name]
                return base.select(*[col(c).alias(f.name) for c, f in zip(rel.columns, rel.fields)], col(WEIGHT))
            if isinstance(rel, Scan):
                base = self._table(self.catalog[rel.table].name)
                return base.select(*[col(c).alias(f.name) for c, f in zip(rel.columns, rel.fields)])
            if isinstance(rel, StateScan):
                pool = {"old": current, "new": new, "delta": deltas}[rel.version]
                if rel.version == "new" and rel.state not in pool:
                    pool = current  # a static state has one version
                return pool[rel.state]
            raise TypeError(f"no input for {type(rel).__name__}")

        return env

    # -- polling ---------------------------------------------------------------------------------
    def poll(self) -> dict[str, list[str]] | None:
        """The files that appeared since the last batch, per source; None if there are none."""
        if self.recovery.pending is not None:
            pending, self.recovery.pending = self.recovery.pending, None
            return pending
        found: dict[str, list[str]] = {}
        for s in self.plan.streams:
            spec = self.specs[s.name.lower()]
            seen = self.consumed.setdefault(s.name, set())
            new = [n for n in list_inputs(spec.path) if n not in seen]
            found[s.name] = new
        if not any(found.values()):
            return None
        return found

    # -- one batch -------------------------------------------------------------------------------
    def run_batch(self, inputs: dict[str, list[str]]) -> BatchResult | None:
        """Apply one batch; returns None if every file of it was quarantined."""
        batch = self.next_batch
        while True:
            self.checkpoint.write_offsets(batch, inputs)
            try:
                result = self._run(batch, inputs)
                break
            except BadInputError as e:
                if self.config.on_bad_file != "quarantine":
                    raise
                inputs = self._quarantine(e, inputs)
                if not any(inputs.values()):
                    files.remove(self.checkpoint.offsets_path(batch))
                    return None
        for name, names in inputs.items():
            self.consumed.setdefault(name, set()).update(names)
        self.next_batch = batch + 1
        return result

    def _run(self, batch: int, inputs: dict[str, list[str]]) -> BatchResult:
        start = time.monotonic()
        frames, rows = self._read_batch(batch, inputs)
        deltas: dict[str, DataFrame] = {}
        new: dict[str, DataFrame] = {}
        try:
            steps = self.plan.delta
            for k, step in enumerate(steps, 1):
                self.progress(f"batch {batch_name(batch)}: step {k}/{len(steps)} Δ{step.state}")
                try:
                    df = lower(step.program, self._env(frames, deltas, new))
                    if step.temp:
                        deltas[step.state] = materialize(df)
                    else:
                        d = self.store.materialize_delta(step.state, df)
                        deltas[step.state] = d
                        new[step.state] = self.store.merge(step.state, self.store.current[step.state], d)
                except StreamfoldError:
                    raise
                except Exception as e:  # noqa: BLE001 - Spark failures are chained into a BatchError
                    raise BatchError(f"batch {batch} failed computing Δ{step.state}: {_first_line(e)}",
                                     code="BATCH_FAILED", params={"batch": batch, "step": f"Δ{step.state}"}) from e
            for name, df in self.store.current.items():
                new.setdefault(name, df)
            self.progress(f"batch {batch_name(batch)}: answer")
            try:
                snapshot = self._snapshot(new)
                changes = self._changes(deltas, new)
                self._write_state(batch, deltas)
                snap_rows = self._write(snapshot, self.output.snapshot_path(batch))
                change_rows = self._write(changes, self.output.changes_path(batch))
            except StreamfoldError:
                raise
            except Exception as e:  # noqa: BLE001
                raise BatchError(f"batch {batch} failed writing its answer: {_first_line(e)}",
                                 code="BATCH_FAILED", params={"batch": batch, "step": "answer"}) from e
            duration = time.monotonic() - start
            self.output.commit(batch, {
                "batch": batch, "inputs": inputs, "duration_s": round(duration, 4), "rows": rows,
                "snapshot_rows": snap_rows, "change_rows": change_rows,
                "committed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            })
        except BaseException:
            for name, df in new.items():
                if df is not self.store.current.get(name):
                    release(df)
            raise
        finally:
            for df in deltas.values():
                release(df)
            for df in frames.values():
                df.unpersist()
        self.store.replace({k: v for k, v in new.items() if k in self.store.current})
        self._after_commit(batch)
        state_rows = self.store.row_counts()
        return BatchResult(batch, inputs, rows, time.monotonic() - start, snap_rows, change_rows, state_rows)

    def _read_batch(self, batch: int, inputs: dict[str, list[str]]) -> tuple[dict[str, DataFrame], dict[str, int]]:
        """Each stream's new rows (cached for the batch) and their counts; refuses bad files."""
        from functools import reduce

        from pyspark.sql import functions as F

        frames: dict[str, DataFrame] = {}
        for s in self.plan.streams:
            names = inputs.get(s.name, [])
            if names:
                spec = self.specs[s.name.lower()]
                paths = [os.path.join(spec.path, n) for n in names]
                frames[s.name] = read_files(self.spark, spec, s, paths).cache()
            else:
                frames[s.name] = self._empty_frame(s).withColumn("__bad", F.lit(0)).cache()
        checks = [df.agg(F.lit(name).alias("source"), F.count(F.lit(1)).alias("rows"),
                         F.coalesce(F.sum("__bad"), F.lit(0)).alias("bad"))
                  for name, df in frames.items()]
        try:
            stats = reduce(lambda a, b: a.union(b), checks).collect()
        except Exception as e:  # noqa: BLE001 - a file that does not parse fails the read
            for df in frames.values():
                df.unpersist()
            raise self._find_bad_file(inputs, e) from e
        bad = [r["source"] for r in stats if r["bad"]]
        if bad:
            for df in frames.values():
                df.unpersist()
            raise self._find_bad_file({k: v for k, v in inputs.items() if k in bad}, None)
        rows = {r["source"]: int(r["rows"]) for r in stats}
        return {n: df.drop("__bad") for n, df in frames.items()}, rows

    def _find_bad_file(self, inputs: dict[str, list[str]], cause: BaseException | None) -> BadInputError:
        """Check files one by one to name the one that fails (only on the error path)."""
        from pyspark.sql import functions as F

        for source, names in inputs.items():
            spec = self.specs[source.lower()]
            schema = self.catalog[source]
            for n in names:
                path = os.path.join(spec.path, n)
                try:
                    bad = read_files(self.spark, spec, schema, [path]).agg(F.sum("__bad")).collect()[0][0]
                except BadInputError as e:
                    e.params.setdefault("source", source)
                    e.params["name"] = n
                    return e
                except Exception as e:  # noqa: BLE001
                    return BadInputError(f"{path} does not parse as {spec.format}: {_first_line(e)}",
                                         code="UNPARSEABLE_FILE",
                                         params={"file": path, "name": n, "source": source, "format": spec.format},
                                         hint="fix or remove the file; with --on-bad-file quarantine it is set aside")
                if bad:
                    return BadInputError(f"{path}: {bad} value(s) do not parse as the column types of {source}",
                                         code="UNPARSEABLE_VALUES",
                                         params={"file": path, "name": n, "source": source, "count": int(bad)},
                                         hint="fix the file, or give --schema with the right types")
        return BadInputError(f"a file of this batch cannot be read: {_first_line(cause) if cause else 'unknown'}",
                             code="UNREADABLE_BATCH", params={"sources": list(inputs)})

    def _quarantine(self, error: BadInputError, inputs: dict[str, list[str]]) -> dict[str, list[str]]:
        source, name = error.params.get("source"), error.params.get("name")
        if source is None or name is None:
            raise error
        spec = self.specs[source.lower()]
        target_dir = os.path.join(self.output.root, "quarantine", source)
        os.makedirs(target_dir, exist_ok=True)
        shutil.move(os.path.join(spec.path, name), os.path.join(target_dir, name))
        with open(os.path.join(target_dir, name + ".error.txt"), "w", encoding="utf-8") as fh:
            fh.write(str(error) + "\n")
        log.warning("quarantined %s/%s: %s", source, name, error.message)
        self.progress(f"quarantined {source}/{name}: {error.message}")
        return {k: [n for n in v if not (k == source and n == name)] for k, v in inputs.items()}

    # -- answer ----------------------------------------------------------------------------------
    def _finish(self, df: DataFrame, weight: bool = False) -> DataFrame:
        """Select the output columns, with Spark's names and types (and ``_weight`` for changes)."""
        a = self.plan.answer
        cols = [col(i).cast(f.dataType).alias(f.name) for i, f in zip(a.output, self.output_schema.fields)]
        if weight:
            cols.append(col(WEIGHT).cast("bigint").alias(WEIGHT))
        return df.select(*cols)

    def _ordered(self, rows: DataFrame) -> DataFrame:
        """The answer's rows in ORDER BY order, cut by OFFSET and LIMIT."""
        a = self.plan.answer
        if a.order:
            rows = rows.orderBy(*[sort_column(k) for k in a.order])
        if a.offset:
            rows = rows.offset(a.offset)
        if a.limit is not None:
            rows = rows.limit(a.limit)
        return rows

    def _snapshot(self, new: dict[str, DataFrame]) -> DataFrame:
        rows = lower(self.plan.answer.rows, self._env({}, {}, new))
        return self._finish(self._ordered(rows))

    def _changes(self, deltas: dict[str, DataFrame], new: dict[str, DataFrame]) -> DataFrame:
        from pyspark.sql import functions as F

        a = self.plan.answer
        if a.changes == "delta":
            d = deltas[a.change_states[0]].filter(col(WEIGHT_COLUMN) != 0)
            return _consolidate(self._finish(d.withColumnRenamed(WEIGHT_COLUMN, WEIGHT), weight=True))
        if a.changes == "global":
            after = self._ordered(lower(a.rows, self._env({}, {}, new)))
            before = self._ordered(lower(a.rows, self._env({}, {}, {})))
        else:
            touched = self._touched(deltas)
            restricted_new = {k: self._restrict(v, touched) for k, v in new.items() if k in a.change_states}
            restricted_old = {k: self._restrict(self.store.current[k], touched) for k in a.change_states}
            after = lower(a.rows, self._env({}, {}, {**new, **restricted_new}))
            before = lower(a.rows, self._env({}, {}, {}, old={**self.store.current, **restricted_old}))
        plus = self._finish(after.withColumn(WEIGHT, F.lit(1)), weight=True)
        minus = self._finish(before.withColumn(WEIGHT, F.lit(-1)), weight=True)
        return _consolidate(plus.unionByName(minus))

    def _touched(self, deltas: dict[str, DataFrame]) -> DataFrame:
        from functools import reduce

        a = self.plan.answer
        keys = [deltas[s].select(*[col(k).alias(f"__k{i}") for i, k in enumerate(a.touched_key)])
                for s in a.change_states]
        return materialize(reduce(lambda x, y: x.union(y), keys).distinct())

    def _restrict(self, df: DataFrame, touched: DataFrame) -> DataFrame:
        from functools import reduce

        keys = self.plan.answer.touched_key
        cond = reduce(lambda x, y: x & y, [col(k).eqNullSafe(col(f"__k{i}")) for i, k in enumerate(keys)])
        return df.join(touched, on=cond, how="left_semi")

    # -- durable writes --------------------------------------------------------------------------
    def _write(self, df: DataFrame, final: str) -> int:
        tmp = files.temp_dir_for(final)
        df.coalesce(1).write.parquet(tmp)
        count = _parquet_rows(tmp)
        files.publish_dir(tmp, final)
        return count

    def _write_state(self, batch: int, deltas: dict[str, DataFrame]) -> None:
        final = self.checkpoint.delta_dir(batch)
        tmp = files.temp_dir_for(final)
        os.makedirs(tmp)
        for st in self.plan.states:
            if not st.static:
                deltas[st.name].write.parquet(os.path.join(tmp, st.name))
        files.publish_dir(tmp, final)

    def _after_commit(self, batch: int) -> None:
        every = self.config.compact_every
        if every and (batch + 1) % every == 0:
            final = self.checkpoint.base_dir(batch)
            tmp = files.temp_dir_for(final)
            os.makedirs(tmp)
            for st in self.plan.states:
                if not st.static:
                    self.store.current[st.name].write.parquet(os.path.join(tmp, st.name))
            files.publish_dir(tmp, final)
            self.checkpoint.prune(batch)
        keep = self.config.keep_snapshots
        if keep:
            for b in range(0, batch - keep + 1):
                files.remove(self.output.snapshot_path(b))

    def close(self) -> None:
        self.store.close()
        self._tables.clear()


def _consolidate(df: DataFrame) -> DataFrame:
    """Sum the weights of equal rows and drop the rows whose weight is zero."""
    from pyspark.sql import functions as F

    cols = [c for c in df.columns if c != WEIGHT]
    return (df.groupBy(*[col(c) for c in cols]).agg(F.sum(col(WEIGHT)).alias(WEIGHT))
            .filter(col(WEIGHT) != 0).select(*[col(c) for c in df.columns]))


def _parquet_rows(directory: str) -> int:
    import pyarrow.parquet as pq

    total = 0
    for n in os.listdir(directory):
        if n.endswith(".parquet") and not n.startswith((".", "_")):
            total += pq.ParquetFile(os.path.join(directory, n)).metadata.num_rows
    return total


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)
    return os.path.getsize(path)


def _first_line(e: BaseException | None) -> str:
    if e is None:
        return ""
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


__all__ = ["BatchResult", "Engine", "QueryConfig", "SqlError"]
