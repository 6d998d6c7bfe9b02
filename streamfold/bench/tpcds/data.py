"""TPC-DS data for streamfold: generated with ``tpcgen-cli`` (pinned in requirements.lock), the
dimensions as static tables, the seven fact tables streamed.

Each fact table's rows are dealt at random (seeded) into ``batches`` insert batches, the first
the history (about half the rows, or all but ``increment`` of them per later batch when
``increment`` is given: ``streamfold bench tpcds``'s 1 % increments) and the others increments,
then one batch deleting ``delete_fraction`` of the rows inserted before (``_weight`` −1): every
snapshot must equal DuckDB's answer over what is left.
Columns are conformed to :data:`.schemas.SCHEMAS` (DuckDB's types for TPC-DS: keys BIGINT, money
DECIMAL(7,2), text STRING). A data set is generated once per parameters under ``root`` and kept.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from . import STREAMED
from .schemas import SCHEMAS

WEIGHT = "_weight"


def arrow_schema(table: str, weighted: bool = False) -> pa.Schema:
    from ...ir.types import parse_type

    def arrow(text: str) -> pa.DataType:
        t = parse_type(text)
        if t.is_decimal:
            return pa.decimal128(t.precision, t.scale)
        return {"BIGINT": pa.int64(), "INT": pa.int32(), "STRING": pa.string(), "DATE": pa.date32(),
                "DOUBLE": pa.float64()}[t.sql()]

    fields = []
    for col in SCHEMAS[table].split(", "):
        name, _, text = col.partition(" ")
        fields.append(pa.field(name, arrow(text)))
    if weighted:
        fields.append(pa.field(WEIGHT, pa.int64()))
    return pa.schema(fields)


@dataclass(frozen=True)
class Dataset:
    path: str
    batches: int  # insert batches; the deletion batch follows

    @property
    def total_batches(self) -> int:
        return self.batches + 1

    def table(self, name: str) -> str:
        """A dimension's Parquet file."""
        return os.path.join(self.path, "tables", f"{name}.parquet")

    def stream(self, name: str) -> str:
        """A fact table's directory of batches (``0000.parquet`` …)."""
        return os.path.join(self.path, "streams", name)

    def batch_file(self, name: str, batch: int) -> str:
        return os.path.join(self.stream(name), f"{batch:04d}.parquet")


def tpcgen_cli() -> str:
    here = os.path.join(os.path.dirname(sys.executable), "tpcgen-cli")
    found = here if os.path.exists(here) else shutil.which("tpcgen-cli")
    if not found:
        raise RuntimeError("tpcgen-cli is not installed: .venv/bin/pip install -r requirements.lock")
    return found


def ensure(root: str, sf: float = 0.01, batches: int = 2, delete_fraction: float = 0.03,
           seed: int = 20260559, increment: float | None = None, log: Any = None) -> Dataset:
    """The data set for these parameters under ``root``, generated if it is not there yet."""
    path = os.path.join(root, f"tpcds-sf{sf:g}-b{batches}-d{delete_fraction:g}-s{seed}"
                        + (f"-i{increment:g}" if increment else ""))
    done = os.path.join(path, "manifest.json")
    if not os.path.exists(done):
        raw = os.path.join(path, "raw")
        shutil.rmtree(path, ignore_errors=True)
        if log is not None:
            log(f"generating TPC-DS SF {sf:g} with tpcgen-cli into {path} (once per parameters)")
        subprocess.run([tpcgen_cli(), "tpcds", "parquet", "-s", f"{sf:g}", f"--output-dir={raw}"], check=True,
                       stdout=subprocess.DEVNULL)
        rng = np.random.default_rng(seed)
        counts: dict[str, list[int]] = {}
        for name in SCHEMAS:
            # by position: the generator spells store's s_tax_precentage as the specification does
            table = pq.read_table(os.path.join(raw, f"{name}.parquet"))
            table = table.rename_columns(arrow_schema(name).names).cast(arrow_schema(name))
            if name not in STREAMED:
                os.makedirs(os.path.join(path, "tables"), exist_ok=True)
                pq.write_table(table, os.path.join(path, "tables", f"{name}.parquet"))
                continue
            counts[name] = _write_stream(os.path.join(path, "streams", name), name, table, batches, delete_fraction,
                                         rng, increment)
        shutil.rmtree(raw)
        with open(done, "w", encoding="utf-8") as fh:
            json.dump({"sf": sf, "batches": batches, "delete_fraction": delete_fraction, "seed": seed,
                       "increment": increment, "rows": counts}, fh)
    return Dataset(path, batches)


def _write_stream(directory: str, name: str, table: pa.Table, batches: int, delete_fraction: float,
                  rng: np.random.Generator, increment: float | None = None) -> list[int]:
    """``batches`` insert batches (the first about half the rows, or all but ``increment`` of
    them per later batch) and a deletion batch."""
    os.makedirs(directory, exist_ok=True)
    n = table.num_rows
    which = dealt(rng, n, batches, increment)
    rows = []
    schema = arrow_schema(name, weighted=True)
    for b in range(batches):
        part = table.filter(pa.array(which == b))
        pq.write_table(part.append_column(WEIGHT, pa.array(np.ones(part.num_rows, np.int64))).cast(schema),
                       os.path.join(directory, f"{b:04d}.parquet"))
        rows.append(part.num_rows)
    doomed = table.filter(pa.array(rng.random(n) < delete_fraction))
    pq.write_table(doomed.append_column(WEIGHT, pa.array(-np.ones(doomed.num_rows, np.int64))).cast(schema),
                   os.path.join(directory, f"{batches:04d}.parquet"))
    rows.append(-doomed.num_rows)
    return rows


def dealt(rng: np.random.Generator, n: int, batches: int, increment: float | None) -> np.ndarray:
    """Each of ``n`` rows' insert batch: 0 (the history) or an increment."""
    if batches < 2:
        return np.zeros(n, int)
    if increment:
        if (batches - 1) * increment >= 1:
            raise ValueError(f"{batches - 1} increments of {increment:g} leave no history")
        later = rng.random(n) < (batches - 1) * increment
        return np.where(later, rng.integers(1, batches, n), 0)
    return np.where(rng.random(n) < 0.5, 0, rng.integers(1, batches, n))
