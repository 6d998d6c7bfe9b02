"""A state's blocks lost with a worker: read the states back from the checkpoint and run the batch again.

States live in Spark's block managers, on the executors that computed them (``SlotRDD`` reads
each partition's kept block). A worker that dies — preempted, a spot instance reclaimed, a disk
gone — takes its executors' blocks with it, and the next job that reads a state fails with
``block rdd_N_P of a state is gone`` (or, for a state kept by ``localCheckpoint``, Spark's
``CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND``). Spark cannot recompute such a block: a state is the fold of
every batch so far, not a lineage it could replay.

Every committed batch has already written its states' changelog (or a base) to the checkpoint, so
the states as of the last commit are on durable storage: the engine reads them back there, as a
restart does, and runs the failed batch again over the same offsets. Nothing of the failed
attempt was committed (the commit is the last durable write), so nothing is applied twice. The
commit records each recovery under ``recovered``. A batch that keeps losing its states (the
cluster has no executors left that keep their blocks) fails after :data:`ATTEMPTS` tries with
the lost block's error.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import BatchError

# what Spark says when a kept block is gone: a state read through prepared plans' slots
# (``SlotRDD``), or one kept by ``localCheckpoint`` (Spark's error class)
LOST_STATE = ("of a state is gone", "CHECKPOINT_RDD_BLOCK_ID_NOT_FOUND", "Checkpoint block rdd_")
ATTEMPTS = 3  # recoveries of one batch before its failure is the run's


def lost_state(error: BatchError) -> bool:
    """Whether ``error`` is a state's block gone from Spark's block managers."""
    texts = [str(error)] + [c.message for c in error.causes]
    return any(mark in text for text in texts for mark in LOST_STATE)


@dataclass(frozen=True)
class Recovered:
    """One recovery of a batch: which attempt failed, what was lost, how long reading back took."""

    attempt: int
    lost: str  # the failure's innermost message: which block
    reload_s: float

    def record(self) -> dict[str, object]:
        return {"attempt": self.attempt, "lost": self.lost, "reload_s": round(self.reload_s, 4)}


def lost_what(error: BatchError) -> str:
    """The lost block's message, for the commit and the progress line."""
    for cause in reversed(error.causes):
        if any(mark in cause.message for mark in LOST_STATE):
            return cause.message.strip().splitlines()[0]
    return str(error).splitlines()[0]
