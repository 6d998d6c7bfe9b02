"""The checkpoint directory and the output directory: what is durable, and how a run resumes.

Output (the public contract, DESIGN §5)::

    DIR/snapshots/<batch>/      the answer after the batch (Parquet)
    DIR/changes/<batch>/        rows whose multiplicity changed, with _weight (Parquet)
    DIR/commits/<batch>.json    written last, atomically: the batch exists once this does

Checkpoint (``DIR/_checkpoint`` unless given)::

    query.json                  what made this checkpoint: the query, source schemas, tables
    offsets/<batch>.json        the files a batch consumes, written before it runs
    offsets/consumed-<batch>.json  every file consumed up to that batch: replaces its offsets files
    state/<batch>/<state>/      each state's delta of that batch (Parquet)
    state/base-<batch>/<state>/ every state as of that batch (compaction), replaces older files

A batch is committed exactly when ``commits/<batch>.json`` exists. Everything of a batch is
written before that file, under hidden names renamed into place; a restart deletes whatever
belongs to batches after the last commit and redoes the next batch with the files its offsets
name. So no input is lost or counted twice, whenever the process dies.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import CheckpointError
from . import files

# 2: a state's row count is named _weight in the changelog (was _w), so a checkpoint of format 1 is refused
# 3: states keep only the columns read above them (passes/prune_columns.py): a state of a format 2
#    checkpoint may be keyed by more columns than the plan's, so one is refused
# 4: a join input that only inner joins read logs its deltas, restored by adding them up (runs.py):
#    a format 3 changelog of such a state holds its latest rows, so one is refused
# 5: so do aggregates, counts and outputs read only through joins, deltas and the touched keys of
#    their merge (plan/runs.py): a format 4 changelog of such a state holds its latest rows
# 6: so do the counts per key and value of a semi or anti join on equalities and one <> (plan/
#    semi_not_equal.py, now read only by look-ups and their delta): a format 5 changelog of such a
#    state holds its latest rows
FORMAT_VERSION = 6
_BATCH = re.compile(r"^(\d{6,})$")
_COMMIT = re.compile(r"^(\d{6,})\.json$")
_BASE = re.compile(r"^base-(\d{6,})$")
_OFFSETS = re.compile(r"^(\d{6,})\.json$")
_CONSUMED = re.compile(r"^consumed-(\d{6,})\.json$")


def batch_name(batch: int) -> str:
    return f"{batch:06d}"


@dataclass
class Recovery:
    """Where a run resumes: the last committed batch, the files consumed, the states to load."""

    last_committed: int  # -1 for a fresh run
    consumed: dict[str, set[str]] = field(default_factory=dict)
    pending: dict[str, list[str]] | None = None  # inputs of the interrupted next batch, if planned
    base: int | None = None  # compacted state to start from
    deltas: list[int] = field(default_factory=list)  # state deltas to merge after the base
    stale: bool = False  # a batch since the base recomputed its answer: the states are not restorable


class OutputDir:
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.snapshots = os.path.join(self.root, "snapshots")
        self.changes = os.path.join(self.root, "changes")
        self.commits = os.path.join(self.root, "commits")

    def snapshot_path(self, batch: int) -> str:
        return os.path.join(self.snapshots, batch_name(batch))

    def changes_path(self, batch: int) -> str:
        return os.path.join(self.changes, batch_name(batch))

    def commit_path(self, batch: int) -> str:
        return os.path.join(self.commits, batch_name(batch) + ".json")

    def committed(self) -> list[int]:
        if not os.path.isdir(self.commits):
            return []
        return sorted(int(m.group(1)) for n in os.listdir(self.commits) if (m := _COMMIT.match(n)))

    def last_committed(self) -> int:
        done = self.committed()
        for expected, b in enumerate(done):
            if b != expected:
                raise CheckpointError(
                    f"commits in {self.commits} have a gap before batch {b}", code="OUTPUT_DAMAGED",
                    params={"missing": expected}, hint="the output directory was edited; start a new one",
                )
        return done[-1] if done else -1

    def commit(self, batch: int, record: dict[str, Any]) -> None:
        files.write_json(self.commit_path(batch), record)

    def read_commit(self, batch: int) -> dict[str, Any]:
        return files.read_json(self.commit_path(batch))  # type: ignore[no-any-return]

    def prune_snapshots(self, before: int) -> None:
        """Delete the snapshots of batches before ``before``: those there are, so a batch's
        pruning costs what is left to prune, not a look for every batch since the first."""
        if os.path.isdir(self.snapshots):
            for n in os.listdir(self.snapshots):
                if _BATCH.match(n) and int(n) < before:
                    files.remove(os.path.join(self.snapshots, n))

    def discard_after(self, batch: int) -> None:
        """Remove outputs of batches after ``batch`` (never committed) and interrupted writes."""
        for directory in (self.snapshots, self.changes):
            files.remove_temps(directory)
            if os.path.isdir(directory):
                for n in os.listdir(directory):
                    if _BATCH.match(n) and int(n) > batch:
                        files.remove(os.path.join(directory, n))
        files.remove_temps(self.commits)


class Checkpoint:
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.query_file = os.path.join(self.root, "query.json")
        self.offsets = os.path.join(self.root, "offsets")
        self.state = os.path.join(self.root, "state")

    # -- identity --------------------------------------------------------------------------------
    def claim(self, identity: dict[str, Any]) -> None:
        """Make this checkpoint ours, or refuse one made by a different query."""
        identity = {"format": FORMAT_VERSION, **identity}
        digest = fingerprint(identity)
        if os.path.exists(self.query_file):
            try:
                stored = files.read_json(self.query_file)
            except (OSError, ValueError) as e:
                raise CheckpointError(f"cannot read {self.query_file}: {e}", code="CHECKPOINT_DAMAGED",
                                      params={"path": self.query_file}) from None
            if stored.get("fingerprint") != digest:
                raise CheckpointError(
                    f"checkpoint {self.root} was made by a different query or different inputs",
                    code="CHECKPOINT_MISMATCH",
                    params={"path": self.root, "differences": _differences(stored.get("identity", {}), identity)},
                    hint="use a new --output (or --checkpoint) for a changed query, or delete the old one "
                         "to start over; differences: " + ", ".join(_differences(stored.get("identity", {}), identity)),
                )
            return
        files.write_json(self.query_file, {"fingerprint": digest, "identity": identity})

    # -- offsets ---------------------------------------------------------------------------------
    def offsets_path(self, batch: int) -> str:
        return os.path.join(self.offsets, batch_name(batch) + ".json")

    def write_offsets(self, batch: int, inputs: dict[str, list[str]]) -> None:
        files.write_json(self.offsets_path(batch), {"batch": batch, "inputs": inputs})

    def read_offsets(self, batch: int) -> dict[str, list[str]] | None:
        path = self.offsets_path(batch)
        if not os.path.exists(path):
            return None
        return files.read_json(path)["inputs"]  # type: ignore[no-any-return]

    # -- state files -----------------------------------------------------------------------------
    def delta_dir(self, batch: int) -> str:
        return os.path.join(self.state, batch_name(batch))

    def base_dir(self, batch: int) -> str:
        return os.path.join(self.state, f"base-{batch_name(batch)}")

    def _entries(self) -> tuple[list[int], list[int]]:
        deltas, bases = [], []
        if os.path.isdir(self.state):
            for n in os.listdir(self.state):
                if m := _BATCH.match(n):
                    deltas.append(int(m.group(1)))
                elif m := _BASE.match(n):
                    bases.append(int(m.group(1)))
        return sorted(deltas), sorted(bases)

    def prune(self, base: int) -> None:
        """After ``base-<base>`` is durable, drop the deltas and bases it replaces, and fold the
        offsets of the batches up to it into one file (:meth:`fold_offsets`)."""
        deltas, bases = self._entries()
        for b in deltas:
            if b <= base:
                files.remove(self.delta_dir(b))
        for b in bases:
            if b < base:
                files.remove(self.base_dir(b))
        self.fold_offsets(base)

    # -- the files consumed, folded ------------------------------------------------------------
    def consumed_path(self, batch: int) -> str:
        return os.path.join(self.offsets, f"consumed-{batch_name(batch)}.json")

    def _folded(self, upto: int) -> int | None:
        """The last batch, up to ``upto``, whose consumed files are folded into one file."""
        names = os.listdir(self.offsets) if os.path.isdir(self.offsets) else []
        return max((int(m.group(1)) for n in names if (m := _CONSUMED.match(n)) and int(m.group(1)) <= upto),
                   default=None)

    def _consumed_upto(self, last: int) -> dict[str, set[str]]:
        """Every file the batches up to ``last`` (committed) consumed: the last fold, then the
        offsets of each batch after it."""
        consumed: dict[str, set[str]] = {}
        folded = self._folded(last)
        if folded is not None:
            for name, names in files.read_json(self.consumed_path(folded))["inputs"].items():
                consumed[name] = set(names)
        for b in range((folded if folded is not None else -1) + 1, last + 1):
            inputs = self.read_offsets(b)
            if inputs is None:
                raise CheckpointError(f"batch {b} is committed but its offsets are missing from {self.offsets}",
                                      code="CHECKPOINT_DAMAGED", params={"batch": b},
                                      hint="the checkpoint does not belong to this output; start a new one")
            for name, names in inputs.items():
                consumed.setdefault(name, set()).update(names)
        return consumed

    def fold_offsets(self, batch: int) -> None:
        """Write every file consumed up to ``batch`` (committed) as one file, then drop the offsets
        files it replaces. A restart reads that and the offsets of at most the batches since,
        where it read one file per batch of the whole run (a cost growing with the run)."""
        consumed = self._consumed_upto(batch)
        files.write_json(self.consumed_path(batch),
                         {"batch": batch, "inputs": {name: sorted(names) for name, names in consumed.items()}})
        for n in os.listdir(self.offsets):
            m = _OFFSETS.match(n) or _CONSUMED.match(n)
            if m and (int(m.group(1)) < batch or (_OFFSETS.match(n) and int(m.group(1)) == batch)):
                files.remove(os.path.join(self.offsets, n))

    # -- recovery --------------------------------------------------------------------------------
    def recover(self, output: OutputDir, sources: list[str]) -> Recovery:
        """Clean up after an interrupted run and say where to resume."""
        last = output.last_committed()
        output.discard_after(last)
        files.remove_temps(self.state)
        files.remove_temps(self.offsets)
        deltas, bases = self._entries()
        for b in deltas:
            if b > last:
                files.remove(self.delta_dir(b))
        for b in bases:
            if b > last:
                files.remove(self.base_dir(b))
        deltas, bases = self._entries()
        rec = Recovery(last, {s: set() for s in sources})
        for name, names in self._consumed_upto(last).items():
            rec.consumed.setdefault(name, set()).update(names)
        if last >= 0:
            rec.base = max((b for b in bases if b <= last), default=None)
            start = rec.base if rec.base is not None else -1
            rec.deltas = [b for b in deltas if start < b <= last]
            missing = [b for b in range(start + 1, last + 1) if b not in rec.deltas]
            # A batch the cost model recomputed wrote no state (and every later one, until a
            # rebuild wrote a base): the states are rebuilt from the sources' files, not restored.
            rec.stale = bool(missing) and output.read_commit(missing[0]).get("strategy") == "recompute"
            if missing and not rec.stale:
                raise CheckpointError(f"state of batch {missing[0]} is missing from {self.state}",
                                      code="CHECKPOINT_DAMAGED", params={"batch": missing[0]},
                                      hint="the checkpoint was edited or belongs to another output; start a new one")
        rec.pending = self.read_offsets(last + 1)
        for path in os.listdir(self.offsets) if os.path.isdir(self.offsets) else []:
            m = _OFFSETS.match(path)
            if m and int(m.group(1)) > last + 1:
                files.remove(os.path.join(self.offsets, path))
        return rec


def fingerprint(identity: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


def _differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    keys = sorted(set(old) | set(new))
    return [k for k in keys if old.get(k) != new.get(k)] or ["format"]
