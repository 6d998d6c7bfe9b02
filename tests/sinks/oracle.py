"""What a sink holds, as rows to compare with DuckDB's answer: ``streamfold.bench.sink_check``
(the bench checks its sinks the same way), and what a Delta sink's logs and changes table say."""

from __future__ import annotations

import json
import os
from collections import Counter

from streamfold.bench.sink_check import delta_rows, plain, postgres_rows, sinks_difference

__all__ = ["delta_app_ids", "delta_batch_files", "delta_changes_netted", "delta_rows", "plain", "postgres_rows",
           "sinks_difference"]


def delta_changes_netted(path: str) -> Counter:
    """The Delta changes table at ``path`` (rows …, _weight, _batch) netted: each row with the sum
    of its weights (a row deleted more often than inserted keeps its negative count)."""
    net: Counter = Counter()
    for r in delta_rows(path):
        net[r[:-2]] += r[-2]
    return net


def delta_app_ids(path: str) -> set[str]:
    """The application ids in the transaction (``txn``) actions of the Delta table at ``path``."""
    log = os.path.join(path, "_delta_log")
    return {json.loads(line)["txn"]["appId"] for name in os.listdir(log) if name.endswith(".json")
            for line in open(os.path.join(log, name)) if '"txn"' in line}


def delta_batch_files(path: str) -> Counter:
    """How many of the Delta table's current files each batch wrote (the sink names them
    ``part-<batch>-…``)."""
    from deltalake import DeltaTable

    return Counter(os.path.basename(uri).split("-")[1] for uri in DeltaTable(path).file_uris())
