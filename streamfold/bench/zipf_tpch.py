"""A Zipf-skewed TPC-H-like generator (thesis §4.5, after Chaudhuri and Narasayya's skewed dbgen).

The tables the thesis's join experiments read — REGION, NATION, SUPPLIER, LINEITEM — with the
TPC-H cardinalities at scale factor ``sf`` (10,000·sf suppliers, 1,500,000·sf orders of 1–7
lines each, so about 6,000,000·sf line items) and TPC-H's value domains, except that every
foreign key is drawn from a Zipf distribution of parameter ``z`` over its domain: the key of
rank r (key r itself) has probability ∝ 1 / r^z. z = 0 is uniform; z = 1 gives the heaviest of
500 suppliers about 15 % of all line items. The foreign keys are ``s_nationkey`` (over the 25
nations), ``l_suppkey`` (over the suppliers) and ``l_orderkey`` (over the orders; at z = 0 each
order keeps TPC-H's 1–7 lines in a row).

The thesis materialises its queries' intermediate results before the online run, and so does
this: ``RNS`` is REGION ⋈ NATION ⋈ SUPPLIER (EQ5's left side), ``SN`` is SUPPLIER ⋈ NATION
(EQ7's). Money is DOUBLE (TPC-H's DECIMAL(15,2) rounded to cents), dates DATE.

Streams: the rows of each streamed table are put in a seeded random order (arrival order) and
split into a history, ``history`` of them, and ``increments`` equal increments of the rest, one
Parquet file per batch: ``<root>/<TABLE>/<batch>.parquet``. Everything is vectorised NumPy and
Arrow and deterministic in ``seed``.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pyarrow as pa

from .data import write_table

REGIONS = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")
NATIONS = (  # (name, region) in TPC-H's order: nation key = position
    ("ALGERIA", 0), ("ARGENTINA", 1), ("BRAZIL", 1), ("CANADA", 1), ("EGYPT", 4), ("ETHIOPIA", 0),
    ("FRANCE", 3), ("GERMANY", 3), ("INDIA", 2), ("INDONESIA", 2), ("IRAN", 4), ("IRAQ", 4), ("JAPAN", 2),
    ("JORDAN", 4), ("KENYA", 0), ("MOROCCO", 0), ("MOZAMBIQUE", 0), ("PERU", 1), ("CHINA", 2),
    ("ROMANIA", 3), ("SAUDI ARABIA", 4), ("VIETNAM", 2), ("RUSSIA", 3), ("UNITED KINGDOM", 3),
    ("UNITED STATES", 1),
)
SHIPMODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")
SHIPINSTRUCTS = ("DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN")
STREAMS = ("RNS", "SN", "LINEITEM")
_START = np.datetime64("1992-01-01")
_ORDER_DAYS = int((np.datetime64("1998-08-02") - _START).astype(int))  # TPC-H's last order date


def zipf(rng: np.random.Generator, domain: int, size: int, z: float) -> np.ndarray:
    """``size`` keys in 1 … ``domain``, key r drawn with probability ∝ 1 / r^z."""
    weights = 1.0 / np.arange(1, domain + 1, dtype=np.float64) ** z
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    return np.minimum(np.searchsorted(cdf, rng.random(size), side="right"), domain - 1) + 1


def top_share(domain: int, z: float) -> float:
    """The probability of the heaviest key under :func:`zipf`."""
    return float(1.0 / np.sum(1.0 / np.arange(1, domain + 1, dtype=np.float64) ** z))


def generate(sf: float, z: float, seed: int = 20) -> dict[str, pa.Table]:
    """RNS, SN and LINEITEM (see the module docstring), rows in TPC-H's order."""
    rng = np.random.default_rng([seed, int(round(z * 100)), int(round(sf * 10_000))])
    suppliers = max(int(10_000 * sf), 10)
    orders = max(int(1_500_000 * sf), 10)
    nationkey = zipf(rng, len(NATIONS), suppliers, z) - 1
    acctbal = np.round(rng.uniform(-999.99, 9999.99, suppliers), 2)
    suppkey = np.arange(1, suppliers + 1, dtype=np.int64)
    n_name = np.array([n for n, _ in NATIONS], dtype=object)
    n_region = np.array([r for _, r in NATIONS])
    r_name = np.array(REGIONS, dtype=object)
    rns = pa.table({"r_name": r_name[n_region[nationkey]], "n_name": n_name[nationkey],
                    "s_suppkey": suppkey, "s_nationkey": nationkey.astype(np.int64), "s_acctbal": acctbal})
    sn = pa.table({"s_suppkey": suppkey, "s_acctbal": acctbal, "n_name": n_name[nationkey],
                   "s_nationkey": nationkey.astype(np.int64)})

    lines_per_order = rng.integers(1, 8, orders)
    n = int(lines_per_order.sum())
    if z == 0:  # TPC-H: each order's 1–7 lines together
        orderkey = np.repeat(np.arange(1, orders + 1, dtype=np.int64), lines_per_order)
    else:
        orderkey = np.sort(zipf(rng, orders, n, z)).astype(np.int64)
    starts = np.concatenate(([0], np.flatnonzero(np.diff(orderkey)) + 1))
    linenumber = (np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n))) + 1).astype(np.int32)
    orderdate = rng.integers(0, _ORDER_DAYS - 151, orders)[orderkey - 1]  # per order, as in TPC-H
    quantity = rng.integers(1, 51, n).astype(np.float64)
    retail = np.round(900 + rng.integers(0, 110_100, n) / 100, 2)  # p_retailprice's range
    lineitem = pa.table({
        "l_orderkey": orderkey,
        "l_linenumber": linenumber,
        "l_suppkey": zipf(rng, suppliers, n, z).astype(np.int64),
        "l_quantity": quantity,
        "l_extendedprice": np.round(quantity * retail, 2),
        "l_discount": rng.integers(0, 11, n) / 100,
        "l_shipdate": pa.array((_START + (orderdate + rng.integers(1, 122, n))).astype("datetime64[D]")),
        "l_shipmode": np.array(SHIPMODES, dtype=object)[rng.integers(0, len(SHIPMODES), n)],
        "l_shipinstruct": np.array(SHIPINSTRUCTS, dtype=object)[rng.integers(0, len(SHIPINSTRUCTS), n)],
    })
    return {"RNS": rns, "SN": sn, "LINEITEM": lineitem}


def split(table: pa.Table, history: float, increments: int, rng: np.random.Generator) -> list[pa.Table]:
    """The rows in a random arrival order: the first ``history`` of them, then equal increments."""
    order = rng.permutation(table.num_rows)
    first = int(round(history * table.num_rows))
    bounds = [0, first] + [first + (table.num_rows - first) * (i + 1) // increments for i in range(increments)]
    return [table.take(order[a:b]) for a, b in zip(bounds, bounds[1:])]


def write(root: str, sf: float, z: float, history: float, increments: int, seed: int = 20) -> dict[str, Any]:
    """Generate and write one data set under ``root`` (reused when its manifest says the same
    parameters); returns the manifest: parameters, the files per table and batch, row counts."""
    params = {"sf": sf, "z": z, "history": history, "increments": increments, "seed": seed}
    manifest_path = os.path.join(root, "manifest.json")
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as fh:
            manifest: dict[str, Any] = json.load(fh)
        if manifest["params"] == params:
            return manifest
    tables = generate(sf, z, seed)
    rng = np.random.default_rng([seed, 1])
    files: dict[str, list[str]] = {}
    rows: dict[str, list[int]] = {}
    for name in STREAMS:
        os.makedirs(os.path.join(root, name), exist_ok=True)
        parts = split(tables[name], history, increments, rng)
        files[name], rows[name] = [], []
        for b, part in enumerate(parts):
            path = os.path.join(root, name, f"{b:06d}.parquet")
            write_table(path, part)
            files[name].append(path)
            rows[name].append(part.num_rows)
    manifest = {"params": params, "files": files, "rows": rows,
                "top_supplier_share": top_share(tables["SN"].num_rows, z)}
    with open(manifest_path, "w", encoding="utf-8") as fh:
        json.dump(manifest, fh, indent=2)
    return manifest
