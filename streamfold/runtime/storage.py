"""What each state holds in Spark's block stores: its bytes in memory and on disk, as Spark counts them.

A state's rows are kept as RDD blocks on the executors — a ``localCheckpoint`` of its merge
(:func:`.state.materialize`), or the blocks a prepared plan's kept merge stored (``KeepRDD``,
read by a ``SlotRDD``: :mod:`.prepared`), and for a state kept as a base and a tail (:mod:`.runs`)
both runs. Its bytes are those blocks' sizes as the block manager master records them (what
Spark's UI shows under Storage): the memory size of a deserialized block is Spark's own size
estimate of its objects, the disk size the file's. They include what the merge keeps beside the
state's rows for the batch that made it (the old values of the touched keys, their flags), which
is what the state costs while it is current.

Asking costs no Spark job: one py4j call for the figures of every stored RDD
(``java/Storage.java``), and one per state whose blocks changed since the last measure (the id
of its blocks). Without the helper jar (a session streamfold did not start), Spark's public
``getRDDStorageInfo`` is asked instead: it knows only registered RDDs (no prepared plans then)
and is fed by the listener bus, so a figure may lag a batch behind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .state import StateStore


def size_text(n: int) -> str:
    """Bytes as a person reads them: ``912 B``, ``40.1 KB``, ``10.2 MB``, ``3.4 GB`` (powers of 1024)."""
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def states_line(batch: str, rows: Mapping[str, int], sizes: Mapping[str, int]) -> str:
    """One line of every state's rows and bytes after ``batch``, the largest first (by bytes;
    by rows for the states with none measured): what ``streamfold run`` prints every
    ``state_report_every`` batches."""
    names = sorted(rows, key=lambda n: (-sizes.get(n, -1), -rows[n], n))
    parts = [f"{n} {rows[n]:,} rows" + (f" {size_text(sizes[n])}" if n in sizes else "") for n in names]
    total = f" │ {size_text(sum(sizes.values()))} in all" if sizes else ""
    return f"states after batch {batch}: " + " · ".join(parts) + total


def parse_rdd_bytes(text: str) -> dict[int, int]:
    """``Storage.rddBytes()``'s answer ("id memory disk;…") as {rdd id: memory + disk bytes}."""
    out: dict[int, int] = {}
    for item in text.split(";"):
        if item.strip():
            rdd, memory, disk = item.split()
            out[int(rdd)] = int(memory) + int(disk)
    return out


class StateBytes:
    """Measures a batch's states at its commit. The blocks of a plain merge are its checkpoint's
    RDD's, looked up once per frame (a frame's id never changes); a prepared plan's kept merge
    goes into fresh blocks each job, whose id the prepared plans remember (``Prepared.keeping``)."""

    def __init__(self, spark: SparkSession) -> None:
        self.spark = spark
        self._ids: dict[str, tuple[DataFrame, int]] = {}  # frame role -> the last frame, its block id
        try:
            from .jvm import loaded

            self._helpers = spark._jvm.streamfold.jvm.Storage if loaded(spark) else None  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - without the helpers, Spark's public figures
            self._helpers = None

    def measure(self, store: StateStore, merged: Mapping[str, DataFrame],
                kept: Mapping[str, int]) -> dict[str, int]:
        """Each durable state's bytes after the batch, largest first: ``kept`` holds the block ids
        of the merges a prepared job kept, ``merged`` the batch's other merges; a state the batch
        did not merge is measured where the store holds it (with its base, for one kept in runs)."""
        try:
            ids: dict[str, list[int]] = {}
            for n in store.durable():
                if n in kept:
                    own = [kept[n]]
                elif n in merged:
                    own = [self._block_id(f"{n}/merged", merged[n])]
                else:
                    backing = store.backing(n)
                    own = [self._block_id(n, backing)] if backing is not None else []
                base = store.bases.get(n)
                ids[n] = own + ([self._block_id(f"{n}/base", base[1])] if base is not None else [])
            stored = self._stored()
        except Exception:  # noqa: BLE001 - a figure to show; never a reason to fail a batch
            return {}
        sizes = {n: sum(stored.get(i, 0) for i in set(blocks)) for n, blocks in ids.items()}
        return dict(sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0])))

    def _block_id(self, role: str, df: DataFrame) -> int:
        known = self._ids.get(role)
        if known is not None and known[0] is df:
            return known[1]
        if self._helpers is not None:
            block = int(self._helpers.blocksOf(df._jdf))
        else:
            plan = df._jdf.queryExecution().logical()
            block = int(plan.rdd().id()) if plan.getClass().getSimpleName() == "LogicalRDD" else -1
        self._ids[role] = (df, block)
        return block

    def _stored(self) -> dict[int, int]:
        if self._helpers is not None:
            return parse_rdd_bytes(str(self._helpers.rddBytes()))
        infos = self.spark.sparkContext._jsc.sc().getRDDStorageInfo()  # type: ignore[union-attr]
        return {int(i.id()): int(i.memSize()) + int(i.diskSize()) for i in infos}


def peak_heap_mb(spark: SparkSession) -> float | None:
    """The JVM heap's peak use since it started, in MB: the sum of its memory pools' peaks (each
    pool's own maximum, so at most that: an upper bound of the heap's peak at one instant)."""
    try:
        from .jvm import loaded

        if not loaded(spark):
            return None
        jvm: Any = spark._jvm
        return round(int(jvm.streamfold.jvm.Storage.peakHeap()) / 1024 / 1024, 1)
    except Exception:  # noqa: BLE001 - no JVM reachable
        return None
