"""A batch's input: each stream's new files read as rows with ``_weight``, checked whole.

Parquet files are checked against the source's schema from their footers, which also give
their row counts, so they cost no Spark job here. CSV and JSON values are only known to parse
once read: those frames are cached and checked in one job for all of them. A file that fails
is named in a :class:`BadInputError`; with ``--on-bad-file quarantine`` it is moved aside.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable
from functools import reduce
from typing import TYPE_CHECKING

from ..errors import BadInputError
from ..ir.rel import WEIGHT
from ..sql import Catalog, SourceSchema
from .sources import InputSpec, empty_frame, parquet_rows, read_files, read_first_rows, spark_struct

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger("streamfold")


class BatchReader:
    def __init__(self, spark: SparkSession, streams: tuple[SourceSchema, ...], specs: dict[str, InputSpec],
                 catalog: Catalog, columns: dict[str, tuple[str, ...]] | None = None) -> None:
        """``columns``: per stream, the columns to read of its files (every file is still checked
        against the whole schema); by default all of them."""
        self.spark = spark
        self.streams = streams
        self.specs = specs
        self.catalog = catalog
        self._columns = columns
        self._empty: dict[str, DataFrame] = {}

    def empty_frame(self, source: SourceSchema) -> DataFrame:
        """A source's rows when a batch has no file for it (made once, reused)."""
        if source.name not in self._empty:
            wanted = set(self._read_columns(source))
            struct = spark_struct([c for c in source.columns if c[0] in wanted] + [(WEIGHT, "BIGINT"), ("__bad", "INT")])
            self._empty[source.name] = empty_frame(self.spark, struct)
        return self._empty[source.name]

    def _read_columns(self, source: SourceSchema) -> tuple[str, ...]:
        if self._columns is None or source.name not in self._columns:
            return tuple(c for c, _ in source.columns)
        return self._columns[source.name]

    def _projected(self, source: SourceSchema, df: DataFrame) -> DataFrame:
        """``df`` with only the columns the plan reads (then ``_weight`` and ``__bad``): a Parquet
        scan under it then decodes those alone — TPC-H's queries read 2–7 of lineitem's 16."""
        wanted = self._read_columns(source)
        if len(wanted) == len(source.columns):
            return df
        return df.select(*[f"`{c}`" for c in wanted], WEIGHT, "__bad")

    def sample(self, inputs: dict[str, list[str]], rows: int) -> dict[str, DataFrame] | None:
        """At most ``rows`` rows of each stream's first file in ``inputs`` (files a batch already
        read and checked), read as :meth:`read` reads them (:func:`.sources.read_first_rows`), one
        partition each. None where a stream's files are not Parquet."""
        frames = {}
        for s in self.streams:
            spec = self.specs[s.name.lower()]
            names = inputs.get(s.name, [])
            if not names:
                frames[s.name] = self.empty_frame(s)
            elif spec.format != "parquet":
                return None
            else:
                first = read_first_rows(self.spark, spec, s, os.path.join(spec.path, names[0]), rows)
                frames[s.name] = self._projected(s, first).coalesce(1)
        return frames

    def read(self, inputs: dict[str, list[str]], cache: bool) -> tuple[dict[str, DataFrame], dict[str, int], list]:
        """Frames per stream (cached when the plan reads them more than once, or to check them),
        row counts, and the frames to unpersist after the batch."""
        from pyspark.sql import functions as F

        frames: dict[str, DataFrame] = {}
        rows: dict[str, int] = {}
        to_check: dict[str, DataFrame] = {}
        cached: list[DataFrame] = []
        for s in self.streams:
            names = inputs.get(s.name, [])
            if not names:
                frames[s.name] = self.empty_frame(s)
                rows[s.name] = 0
                continue
            spec = self.specs[s.name.lower()]
            paths = [os.path.join(spec.path, n) for n in names]
            df = self._projected(s, read_files(self.spark, spec, s, paths))
            if spec.format == "parquet":
                rows[s.name] = sum(parquet_rows(p) for p in paths)
                if cache:
                    df = df.cache()
                    cached.append(df)
                frames[s.name] = df
            else:
                frames[s.name] = to_check[s.name] = df.cache()
                cached.append(frames[s.name])
        if not to_check:
            return frames, rows, cached
        checks = [df.agg(F.lit(name).alias("source"), F.count(F.lit(1)).alias("rows"),
                         F.coalesce(F.sum("__bad"), F.lit(0)).alias("bad")) for name, df in to_check.items()]
        try:
            stats = reduce(lambda a, b: a.union(b), checks).collect()
        except Exception as e:  # noqa: BLE001 - a file that does not parse fails the read
            _unpersist(cached)
            raise self.find_bad_file({k: v for k, v in inputs.items() if k in to_check}, e) from e
        bad = [r["source"] for r in stats if r["bad"]]
        if bad:
            _unpersist(cached)
            raise self.find_bad_file({k: v for k, v in inputs.items() if k in bad}, None)
        rows.update({r["source"]: int(r["rows"]) for r in stats})
        return frames, {s.name: rows[s.name] for s in self.streams}, cached

    def find_bad_file(self, inputs: dict[str, list[str]], cause: BaseException | None) -> BadInputError:
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
                    return e
                except Exception as e:  # noqa: BLE001
                    return BadInputError(f"{path} does not parse as {spec.format}: {first_line(e)}",
                                         code="UNPARSEABLE_FILE",
                                         params={"file": path, "name": n, "source": source, "format": spec.format},
                                         hint="fix or remove the file; with --on-bad-file quarantine it is set aside")
                if bad:
                    return BadInputError(f"{path}: {bad} value(s) do not parse as the column types of {source}",
                                         code="UNPARSEABLE_VALUES",
                                         params={"file": path, "name": n, "source": source, "count": int(bad)},
                                         hint="fix the file, or give --schema with the right types")
        return BadInputError(f"a file of this batch cannot be read: {first_line(cause) if cause else 'unknown'}",
                             code="UNREADABLE_BATCH", params={"sources": list(inputs)})

    @staticmethod
    def without(error: BadInputError, inputs: dict[str, list[str]]) -> dict[str, list[str]]:
        """The batch's inputs without the file ``error`` names (a file error names its source)."""
        source, name = error.params.get("source"), error.params.get("name")
        if source is None or name is None:
            raise error
        return {k: [n for n in v if not (k == source and n == name)] for k, v in inputs.items()}

    def quarantine(self, error: BadInputError, root: str, progress: Callable[[str], None]) -> None:
        """Move the file ``error`` names to ``root/quarantine/<source>/`` with the error beside it.

        The caller has durably taken it out of the batch's inputs first: a batch whose recorded
        inputs name a file already moved could never run again."""
        source, name = error.params["source"], error.params["name"]
        spec = self.specs[source.lower()]
        target_dir = os.path.join(root, "quarantine", source)
        os.makedirs(target_dir, exist_ok=True)
        path = os.path.join(spec.path, name)
        if os.path.exists(path):  # (else moved by a run killed before it wrote the error)
            shutil.move(path, os.path.join(target_dir, name))
        with open(os.path.join(target_dir, name + ".error.txt"), "w", encoding="utf-8") as fh:
            fh.write(str(error) + "\n")
        log.warning("quarantined %s/%s: %s", source, name, error.message)
        progress(f"quarantined {source}/{name}: {error.message}")


def _unpersist(frames: list) -> None:
    for df in frames:
        df.unpersist()


def first_line(e: BaseException | None) -> str:
    if e is None:
        return ""
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__
