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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import BadInputError, BatchError, SqlError, StreamfoldError, UnsupportedError
from ..ir.rel import WEIGHT, DeltaScan, Rel, Scan, StateScan
from ..plan import IncrementalPlan, incrementalize
from ..plan.model import WEIGHT_COLUMN
from ..sql import Catalog, SourceSchema, bind
from . import files
from ..ir.printer import quote
from ..ir.rel import Limit, Sort
from ..ir.sqltext import rel_sql
from .checkpoint import Checkpoint, OutputDir, batch_name
from .lower import Resolve, Views, leaf_hint, to_sql
from .session import default_partitions, engine_session
from .sources import InputSpec, infer_schema, list_inputs, parquet_rows, read_files, table_paths
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
    timings: dict[str, float] = field(default_factory=dict)

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
        self.store = StateStore(self.spark, self.plan.states)
        self._tables: dict[str, DataFrame] = {}
        self._empty: dict[str, DataFrame] = {}
        self._timings: dict[str, float] = {}
        self._batch_frames: list[DataFrame] = []
        self._declare_states()
        self.recovery = self.checkpoint.recover(self.output, [s.name for s in self.plan.streams])
        self._restore_states()
        self.next_batch = self.recovery.last_committed + 1
        self.consumed = self.recovery.consumed

    @contextmanager
    def _phase(self, name: str) -> Iterator[None]:
        """Time a part of the batch (reported in BatchResult.timings and by ``bench``)."""
        t = time.monotonic()
        try:
            yield
        finally:
            self._timings[name] = self._timings.get(name, 0.0) + time.monotonic() - t

    # -- set-up ----------------------------------------------------------------------------------
    def _check_inputs_exist(self) -> None:
        for s in self.plan.sources:
            spec = self.specs[s.name.lower()]
            if not s.static:
                list_inputs(spec.path)  # raises SOURCE_NOT_FOUND / SOURCE_NOT_A_DIRECTORY now, not at the first poll
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
        views = Views(self.spark, "setup")
        try:
            frames = {s.name: self._empty_frame(s) for s in self.plan.streams}
            for step in self.plan.init:
                df = self.spark.sql(to_sql(step.program, self._resolver(frames, {}, {}), views))
                self.store.set_static(step.state, materialize(df))
            deltas: dict[str, DataFrame] = {}
            for step in self.plan.delta:
                df = self.spark.sql(to_sql(step.program, self._resolver(frames, deltas, {}), views))
                if step.temp:
                    deltas[step.state] = df
                else:
                    self.store.declare(step.state, df.schema)
                    deltas[step.state] = self.store.empty(step.state)
        finally:
            views.drop()

    def _restore_states(self) -> None:
        rec = self.recovery
        if rec.last_committed < 0:
            return
        self.progress(f"resuming after batch {batch_name(rec.last_committed)}: loading state")
        paths = [self.checkpoint.base_dir(rec.base)] if rec.base is not None else []
        paths += [self.checkpoint.delta_dir(b) for b in rec.deltas]
        views = Views(self.spark, "restore")
        try:
            self.store.restore(paths, views)
        finally:
            views.drop()

    # -- leaves ----------------------------------------------------------------------------------
    def _empty_frame(self, source: SourceSchema) -> DataFrame:
        """A source's rows when a batch has no file for it (made once, reused)."""
        if source.name not in self._empty:
            from pyspark.sql.types import IntegerType, LongType, StructField, StructType

            from .sources import _spark_type

            fields = [StructField(c, _spark_type(t)) for c, t in source.columns]  # type: ignore[arg-type]
            fields += [StructField(WEIGHT, LongType()), StructField("__bad", IntegerType())]
            self._empty[source.name] = self.spark.createDataFrame([], StructType(fields))
        return self._empty[source.name]

    def _table(self, name: str) -> DataFrame:
        if name not in self._tables:
            schema = self.catalog[name]
            spec = self.specs[name.lower()]
            self._tables[name] = read_files(self.spark, spec, schema, table_paths(spec.path))
        return self._tables[name]

    def _resolver(self, frames: dict[str, DataFrame], deltas: dict[str, DataFrame], new: dict[str, DataFrame],
                  old: dict[str, DataFrame] | None = None) -> Resolve:
        """Where a program's leaves come from: this batch's rows, tables, and state versions."""
        current = self.store.current if old is None else old

        def resolve(rel: Rel) -> DataFrame:
            if isinstance(rel, DeltaScan):
                return frames[self.catalog[rel.table].name]
            if isinstance(rel, Scan):
                return self._table(self.catalog[rel.table].name)
            if isinstance(rel, StateScan):
                if rel.version == "delta":
                    return deltas[rel.state]
                if rel.version == "new" and rel.state in new:
                    return new[rel.state]
                return current[rel.state]  # old, or a static state (one version)
            raise TypeError(f"no input for {type(rel).__name__}")

        return resolve

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
        self._timings = {}
        self._batch_frames: list[DataFrame] = []
        views = Views(self.spark, f"b{batch}")
        with self._phase("read"):
            frames, rows, cached = self._read_batch(batch, inputs)
        deltas: dict[str, DataFrame] = {}
        new: dict[str, DataFrame] = {}
        try:
            steps = self.plan.delta
            for k, step in enumerate(steps, 1):
                self.progress(f"batch {batch_name(batch)}: step {k}/{len(steps)} Δ{step.state}")
                try:
                    sql = to_sql(step.program, self._resolver(frames, deltas, new), views)
                    with self._phase(f"Δ{step.state}"):
                        if step.temp:
                            deltas[step.state] = materialize(self.spark.sql(sql))
                        else:
                            deltas[step.state] = self.store.materialize_delta(step.state, sql)
                    if not step.temp:
                        with self._phase(f"⊗{step.state}"):
                            new[step.state] = self.store.merge(step.state, self.store.current[step.state],
                                                               deltas[step.state], views)
                except StreamfoldError:
                    raise
                except Exception as e:  # noqa: BLE001 - Spark failures are chained into a BatchError
                    raise BatchError(f"batch {batch} failed computing Δ{step.state}: {_first_line(e)}",
                                     code="BATCH_FAILED", params={"batch": batch, "step": f"Δ{step.state}"}) from e
            self.progress(f"batch {batch_name(batch)}: answer")
            try:
                with self._phase("write state"):
                    self._write_state(batch, deltas, views)
                with self._phase("write snapshot"):
                    snapshot = self.spark.sql(self._snapshot_sql(new, views))
                    snap_rows = self._write(snapshot, self.output.snapshot_path(batch))
                with self._phase("write changes"):
                    changes = self.spark.sql(self._changes_sql(batch, deltas, new, views))
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
            views.drop()
            for df in list(deltas.values()) + self._batch_frames:
                release(df)
            for df in cached:
                df.unpersist()
        self.store.replace(new)
        with self._phase("compact"):
            self._after_commit(batch)
        duration = time.monotonic() - start
        state_rows = {n: r for n, r in self.store.rows.items() if r is not None and not self.store.defs[n].static}
        return BatchResult(batch, inputs, rows, duration, snap_rows, change_rows, state_rows, dict(self._timings))

    def _read_batch(self, batch: int, inputs: dict[str, list[str]]
                    ) -> tuple[dict[str, DataFrame], dict[str, int], list[DataFrame]]:
        """Each stream's new rows, their counts, and what was cached; refuses bad files.

        Parquet files are checked against the schema from their footers, which also give the
        row counts, so they cost no Spark job here. CSV and JSON values are only known to parse
        once read: those frames are cached and checked in one job for all of them.
        """
        from functools import reduce

        from pyspark.sql import functions as F

        frames: dict[str, DataFrame] = {}
        rows: dict[str, int] = {}
        to_check: dict[str, DataFrame] = {}
        for s in self.plan.streams:
            names = inputs.get(s.name, [])
            if not names:
                frames[s.name] = self._empty_frame(s)
                rows[s.name] = 0
                continue
            spec = self.specs[s.name.lower()]
            paths = [os.path.join(spec.path, n) for n in names]
            df = read_files(self.spark, spec, s, paths)
            if spec.format == "parquet":
                frames[s.name] = df
                rows[s.name] = sum(parquet_rows(p) for p in paths)
            else:
                frames[s.name] = to_check[s.name] = df.cache()
        cached = list(to_check.values())
        if not to_check:
            return frames, rows, cached
        checks = [df.agg(F.lit(name).alias("source"), F.count(F.lit(1)).alias("rows"),
                         F.coalesce(F.sum("__bad"), F.lit(0)).alias("bad")) for name, df in to_check.items()]
        try:
            stats = reduce(lambda a, b: a.union(b), checks).collect()
        except Exception as e:  # noqa: BLE001 - a file that does not parse fails the read
            for df in cached:
                df.unpersist()
            raise self._find_bad_file({k: v for k, v in inputs.items() if k in to_check}, e) from e
        bad = [r["source"] for r in stats if r["bad"]]
        if bad:
            for df in cached:
                df.unpersist()
            raise self._find_bad_file({k: v for k, v in inputs.items() if k in bad}, None)
        rows.update({r["source"]: int(r["rows"]) for r in stats})
        return frames, {s.name: rows[s.name] for s in self.plan.streams}, cached

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
    def _final_sql(self, inner: str, weight: bool = False) -> str:
        """The output columns with Spark's names and types (and ``_weight`` for changes)."""
        a = self.plan.answer
        cols = [f"CAST({quote(i)} AS {f.dataType.simpleString()}) AS {quote(f.name)}"
                for i, f in zip(a.output, self.output_schema.fields)]
        if weight:
            cols.append(f"CAST({WEIGHT} AS BIGINT) AS {WEIGHT}")
        return f"SELECT {', '.join(cols)}\nFROM (\n{_indent(inner)}\n) _answer"

    def _ordered_rows(self) -> Rel:
        """The answer's rows in ORDER BY order, cut by OFFSET and LIMIT."""
        a = self.plan.answer
        rel = a.rows
        if a.order:
            rel = Sort(rel, a.order)
        if a.limit is not None or a.offset:
            rel = Limit(rel, a.limit, a.offset)
        return rel

    def _snapshot_sql(self, new: dict[str, DataFrame], views: Views) -> str:
        return self._final_sql(to_sql(self._ordered_rows(), self._resolver({}, {}, new), views))

    def _changes_sql(self, batch: int, deltas: dict[str, DataFrame], new: dict[str, DataFrame],
                     views: Views) -> str:
        """Rows whose multiplicity changed. Before batch 0 there is no snapshot at all (not even a
        global aggregate's empty row), so replaying changes from batch 0 rebuilds every snapshot."""
        a = self.plan.answer
        if a.changes == "delta":
            view = views.name(deltas[a.change_states[0]], f"delta_{a.change_states[0]}")
            inner = f"SELECT *, {quote(WEIGHT_COLUMN)} AS {WEIGHT} FROM {view} WHERE {quote(WEIGHT_COLUMN)} <> 0"
            return _consolidate(self._final_sql(inner, weight=True), self.output_schema)
        if a.changes == "global":
            rows = self._ordered_rows()
            after = to_sql(rows, self._resolver({}, {}, new), views)
            before = to_sql(rows, self._resolver({}, {}, {}), views)
        else:
            touched = self._touched(deltas, views)
            after_states = {s: self._restrict(new[s], touched, views) for s in a.change_states}
            before_states = {s: self._restrict(self.store.current[s], touched, views) for s in a.change_states}
            after = to_sql(a.rows, self._resolver({}, {}, {**new, **after_states}), views)
            before = to_sql(a.rows, self._resolver({}, {}, {}, old={**self.store.current, **before_states}), views)
        signed = f"SELECT *, 1 AS {WEIGHT} FROM (\n{_indent(after)}\n) _after"
        if batch > 0:
            signed += f"\nUNION ALL\nSELECT *, -1 AS {WEIGHT} FROM (\n{_indent(before)}\n) _before"
        return _consolidate(self._final_sql(signed, weight=True), self.output_schema)

    def _touched(self, deltas: dict[str, DataFrame], views: Views) -> str:
        """A view of the keys this batch touched (from the deltas of the answer's states)."""
        a = self.plan.answer
        parts = []
        for s in a.change_states:
            cols = ", ".join(f"{quote(k)} AS __k{i}" for i, k in enumerate(a.touched_key))
            parts.append(f"SELECT {cols} FROM {views.name(deltas[s], f'delta_{s}')}")
        df = materialize(self.spark.sql("SELECT DISTINCT * FROM (" + " UNION ALL ".join(parts) + ") _t"))
        self._batch_frames.append(df)
        return views.name(df, "touched")

    def _restrict(self, state: DataFrame, touched: str, views: Views) -> DataFrame:
        """The rows of a state whose key this batch touched (NULL keys match NULL keys)."""
        keys = self.plan.answer.touched_key
        cond = " AND ".join(f"_s.{quote(k)} <=> _k.__k{i}" for i, k in enumerate(keys))
        # The touched keys are few: broadcast them, so the state is filtered where it lies.
        return self.spark.sql(f"SELECT /*+ BROADCAST(_k) */ _s.* FROM {views.name(state, 'state')} _s "
                              f"LEFT SEMI JOIN {touched} _k ON {cond}")

    # -- durable writes --------------------------------------------------------------------------
    def _write(self, df: DataFrame, final: str) -> int:
        tmp = files.temp_dir_for(final)
        df.coalesce(1).write.parquet(tmp)
        count = _parquet_rows(tmp)
        files.publish_dir(tmp, final)
        return count

    def _write_state(self, batch: int, deltas: dict[str, DataFrame], views: Views) -> None:
        """This batch's delta of every state, in one Parquet directory (one Spark job)."""
        if not self.store.durable():
            return
        final = self.checkpoint.delta_dir(batch)
        tmp = files.temp_dir_for(final)
        self.spark.sql(self.store.pack_sql(deltas, views)).write.parquet(tmp)
        files.publish_dir(tmp, final)

    def _after_commit(self, batch: int) -> None:
        every = self.config.compact_every
        if every and (batch + 1) % every == 0 and self.store.durable():
            final = self.checkpoint.base_dir(batch)
            tmp = files.temp_dir_for(final)
            views = Views(self.spark, "compact")
            try:
                self.spark.sql(self.store.pack_sql(self.store.current, views)).write.parquet(tmp)
            finally:
                views.drop()
            files.publish_dir(tmp, final)
            self.checkpoint.prune(batch)
        keep = self.config.keep_snapshots
        if keep:
            for b in range(0, batch - keep + 1):
                files.remove(self.output.snapshot_path(b))

    def close(self) -> None:
        self.store.close()
        self._tables.clear()
        self._empty.clear()


def _consolidate(inner: str, schema: StructType) -> str:
    """Sum the weights of equal rows and drop the rows whose weight is zero."""
    cols = ", ".join(quote(f.name) for f in schema.fields)
    return (f"SELECT {cols}, CAST(sum({WEIGHT}) AS BIGINT) AS {WEIGHT}\nFROM (\n{_indent(inner)}\n) _c\n"
            f"GROUP BY {cols}\nHAVING sum({WEIGHT}) <> 0")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.split("\n"))


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
