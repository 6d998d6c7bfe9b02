"""Helpers for the control tests: files that appear whole, and the check of every committed batch
against DuckDB under the query version it was committed under (read from the control log)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

import pyarrow as pa
import pyarrow.parquet as pq

from streamfold.verify import changes_difference, compare, duckdb_answer

SCHEMA = pa.schema([pa.field("k", pa.int32()), pa.field("v", pa.int64())])


class Feed:
    """Numbered Parquet files in a source directory, each written hidden and renamed."""

    def __init__(self, directory: str, schema: pa.Schema = SCHEMA) -> None:
        self.directory = directory
        self.schema = schema
        self.tables: dict[str, pa.Table] = {}
        os.makedirs(directory, exist_ok=True)

    def put(self, rows: list[tuple]) -> str:
        name = f"{len(self.tables):04d}.parquet"
        table = pa.Table.from_pylist([dict(zip(self.schema.names, r)) for r in rows], schema=self.schema)
        tmp = os.path.join(self.directory, "." + name)
        pq.write_table(table, tmp)
        os.rename(tmp, os.path.join(self.directory, name))
        self.tables[name] = table
        return name


def versions(out: str, original: str) -> dict[int, str]:
    """Query version → its SQL, from the control log in OUT's checkpoint."""
    found = {1: original}
    path = os.path.join(out, "_checkpoint", "control.log")
    if os.path.exists(path):
        for line in open(path, encoding="utf-8"):
            try:
                r = json.loads(line)
            except ValueError:
                break
            if r["action"] == "reconfigure":
                found[r["version"]] = r["sql"]
    return found


def commits(out: str) -> list[dict]:
    names = sorted(os.listdir(os.path.join(out, "commits")))
    assert names == [f"{b:06d}.json" for b in range(len(names))], "batches are numbered without gaps"
    return [json.load(open(os.path.join(out, "commits", n))) for n in names]


def read_dir(path: str) -> list[tuple]:
    return [tuple(r.values()) for r in pq.read_table(path).to_pylist()]


Oracle = Callable[[int, int, list[str]], list[tuple]]  # (batch, version, files consumed so far) -> answer


def check_every_commit(out: str, feed: Feed, original: str, source: str = "S",
                       oracle: Oracle | None = None) -> list[dict]:
    """Each committed snapshot equals the answer of its commit's query version over the files
    the commits list up to it, and snapshot(b) = snapshot(b − 1) + changes(b) (from empty at a
    reset). Returns the commit records."""
    sqls = versions(out, original)
    records = commits(out)
    consumed: list[str] = []
    previous: list[tuple] = []
    for b, record in enumerate(records):
        consumed += record["inputs"].get(source, [])
        version = record.get("query_version", 1)
        if oracle is not None:
            expected = oracle(b, version, list(consumed))
        else:
            expected = duckdb_answer(sqls[version], {source: [feed.tables[n] for n in consumed]})
        snapshot = read_dir(os.path.join(out, "snapshots", f"{b:06d}"))
        check = compare(snapshot, expected)
        assert check.matches, f"batch {b} (query version {version}): {check.detail}"
        changes = read_dir(os.path.join(out, "changes", f"{b:06d}"))
        problem = changes_difference([] if record.get("reset") else previous, snapshot, changes)
        assert problem is None, f"batch {b}: snapshot ≠ previous snapshot + changes: {problem}"
        previous = snapshot
    assert sorted(n for r in records for n in r["inputs"].get(source, [])) == sorted(
        set(n for r in records for n in r["inputs"].get(source, []))), "no file is applied twice"
    return records


def wait_for(predicate: Callable[[], object], timeout: float = 120.0, what: str = "condition") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
