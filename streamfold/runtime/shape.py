"""How a batch runs, decided from its facts: one pure function, no Spark, no engine.

The engine gathers a batch's facts (its rows, the states' rows, whether a plan was just
installed, the strategy chosen, what the prepared plans hold) and asks :func:`decide` for the
batch's :class:`Shape`; it then does what the shape says. Two choices are made before the facts
are all known and have functions of their own: whether the batch reads its files at all
(:func:`read_shape`: an answer-only reconfiguration reads nothing; prepared plans need only the
rows' counts) and, after a history's commit, how the plans captured ahead are laid out
(:func:`ahead_single`).

The thresholds are module constants, read when a function runs (tests set them to force a path):

* ``ONE_TASK_ROWS`` — a batch whose states and rows hold at most this many rows in all runs in one
  partition: one stage of one task, no shuffle (``state.py``).
* ``SMALL_ROWS`` — outputs expected to hold at most this many rows are collected and written on the
  driver, and the batch's merges are lazy (computed by the job that writes the outputs); above it
  each merge is a job of its own and the outputs are written by Spark. ``SMALL_BYTES`` bounds the
  same outputs' bytes as the one Arrow table they are collected as, or ``1 / HEAP_SHARE`` of a
  larger local heap (:func:`collects`).
* ``AHEAD_MIN_ROWS``, ``AHEAD_ROOM``, ``WARM_ROWS``, ``WARM_RUNS`` — the capture of batch 1's plans after the
  history's commit (``features/prepared.py``).
* ``PREPARED_MAX_STATES`` — plans that merge more states per batch are planned batch by batch.
"""

from __future__ import annotations

from dataclasses import dataclass

# A batch reading at most this many rows in all (its rows and the states it merges) runs in one task.
# Every task pays a fixed cost (its plan deserialised, generated code instantiated), and every
# exchange between stages a shuffle: for a small batch over a 10,000-key state those costs were
# most of the job, and on two cores one task stays as fast as the hash-partitioned stages up to
# states of a few hundred thousand rows (docs/benchmarks.md, "The measurements behind the defaults").
ONE_TASK_ROWS = 250_000
# Results up to this many rows are collected and written on the driver.
SMALL_ROWS = 1_000_000
# … and up to this many bytes as Arrow: outputs stacked into one relation carry every part's
# columns in every row, and the tasks that convert them hold their share whole until it is sent.
# That is a sixteenth of the default 2 GB driver. Whether a batch's merges are lazy (its outputs
# collected) is decided on two counts (:func:`decide`): what the driver can hold, the outputs'
# estimate with its margin against a sixteenth of a local run's heap (driver and executors one
# JVM), never below SMALL_BYTES; and what is cheaper, the last batch's outputs scaled to this
# batch's rows, without the margin, against SMALL_BYTES: wider than that, Spark writing them in
# parallel beats one Arrow table through the driver (TPC-DS Q78's 1,700-byte stacked rows). With
# SMALL_BYTES for both, TPC-H Q21's outputs (57 MB held, estimated at 214 MB with the margin) made
# each of its merges a job of its own, under a 12 GB heap (docs/journal.md, "Stop 90").
SMALL_BYTES = 128 << 20
HEAP_SHARE = 16
# Batch 1's plans are captured ahead of it only after a history of at least this many rows: after a
# small one the capture costs more than it saves where batch 1 then lacks a stream's rows (the plans
# are given up and the first batch that fits captures again), common where sources trickle in.
AHEAD_MIN_ROWS = 100_000
# The plans captured ahead are over one partition only if the history's states leave this share of
# ONE_TASK_ROWS free for batch 1's rows, which are not known yet: plans over one partition cannot run
# a batch that does not fit one task, while hash-partitioned plans run a small batch too.
AHEAD_ROOM = 0.5
# … and run over at most this many of each stream's history rows, the result discarded, so the
# JVM has compiled the paths rows take through the plans before batch 1 runs them …
WARM_ROWS = 10_000
# … this many times: one run leaves most hot paths interpreted or in the JIT's first tier (its
# compile thresholds are counted per method across runs); the next two runs bring batch 1's job
# and the first increments after it close to a later one's (docs/journal.md, "Stop 96").
WARM_RUNS = 3
# Prepared plans are tried for plans of at most this many merged states (static states do not
# count): a capture plans the whole batch as one physical plan, and for plans of tens of states
# (an unrolled PageRank's 32) that plan was refused and left Spark's SQL listener far behind.
# Fifteen TPC-DS queries merge 9 to 16 states: replayed, they run several times faster than
# planned batch by batch, a job per merge, and Spark's listener keeps up (docs/journal.md, "Stop 91").
PREPARED_MAX_STATES = 16


@dataclass(frozen=True, slots=True)
class ReadShape:
    """Whether the batch reads its files: ``answer_only`` reads nothing (a newly installed plan
    that changes only the answer, and no file came); ``light`` counts the rows only (the prepared
    plans' scans read the files themselves); else the batch's frames are read."""

    answer_only: bool
    light: bool


def read_shape(installing: bool, installs_answer_only: bool, has_files: bool, prepared_ready: bool) -> ReadShape:
    answer_only = installing and installs_answer_only and not has_files
    return ReadShape(answer_only, prepared_ready and not answer_only and not installing)


@dataclass(frozen=True, slots=True)
class PreparedFacts:
    """What the prepared plans hold before the batch (``None`` facts: the plan cannot have them)."""

    refused: bool = False  # a capture was refused: every batch is planned
    ready: bool = False  # plans are captured and can run
    single: bool = False  # … over one partition
    ahead: bool = False  # … captured ahead of their first batch, not run yet
    keeps: bool = False  # the last batch's merges are held by the plans' jobs
    capturable: bool = True  # every state is held as a merge's rows (a capture reads them through slots)


@dataclass(frozen=True, slots=True)
class Facts:
    """What a batch's shape is decided from."""

    batch: int
    rows: int  # the batch's rows, all streams
    held: int  # the states' rows before the batch
    states_counted: bool  # every state's rows are known
    strategy: str  # incremental or rebuild (a recompute batch has no shape)
    answer_only: bool = False  # (read_shape)
    installing: bool = False  # the first batch of a newly installed plan
    install_whole: bool = False  # … which writes its states whole
    restate: bool = False  # a join was switched to a hybrid before the batch: its states are written whole
    reshaped: bool = False  # states started their runs before this batch (a restart)
    counts_matrices: bool = False  # a hybrid join matrix is decided on before the outputs
    outputs_seen: tuple[int, int, int] | None = None  # the last batch's (snapshot, changes + logs, input rows)
    one_partition: bool = True  # small batches may run in one partition
    every_stream: bool = True  # every stream brought rows
    prepared: PreparedFacts | None = None  # None: no prepared plans for this plan
    output_row_bytes: int = 0  # one row of the batch's outputs stacked, as Arrow (outputs.output_row_bytes)
    heap: int = 0  # a local run's JVM heap in bytes (collects), 0 if not known


@dataclass(frozen=True, slots=True)
class Shape:
    """How the batch runs.

    ``eager``: each merge is a job of its own and large outputs are written by Spark (else the
    merges are lazy and computed by the job that writes the outputs, which are collected).
    ``single``: the batch's rows and its merges are one partition. ``mode``: ``"replay"`` (the
    prepared plans run the batch), ``"capture"`` (the batch is planned so later ones can replay)
    or ``None``. ``afresh``: the prepared plans are given up first (their states handed over).
    ``warm``: a replay of plans that already ran (what the cost model takes for a warm batch).
    ``whole``: the batch may write its states whole (its outputs are bounded by all their rows).
    """

    eager: bool
    single: bool
    whole: bool
    estimate: int
    mode: str | None = None
    afresh: bool = False
    warm: bool = False


def outputs_estimate(held: int, rows: int, whole: bool, seen: tuple[int, int, int] | None) -> int:
    """The rows a batch's outputs (snapshot, changes, changelog) are expected to hold: the last
    batch's snapshot, its changes and changelog scaled by the ratio of input rows, plus four rows
    per input row; without a last batch to go by, or when the batch may write its states
    ``whole``, all the states' rows (``held``). The states' own size is not what the outputs hold:
    a 700K-row join input touched by 40K rows logs 40K rows."""
    if seen is None or whole:
        return held + 4 * rows
    return _scaled(seen, rows) + 4 * rows


def _scaled(seen: tuple[int, int, int], rows: int) -> int:
    """The last batch's outputs (its snapshot; its changes and changelog scaled by the ratio of
    input rows) for a batch of ``rows`` input rows, without a margin."""
    snapshot, changed, before = seen
    return snapshot + -(-changed * rows // max(before, 1))


def collects(rows: int, row_bytes: int, heap: int = 0) -> bool:
    """Whether outputs of ``rows`` rows of ``row_bytes`` bytes each (stacked, as Arrow) are
    collected and written on the driver rather than written by Spark. ``heap``: the bytes of a
    local run's JVM heap (0: not known, or not one JVM)."""
    return rows <= SMALL_ROWS and rows * row_bytes <= max(SMALL_BYTES, heap // HEAP_SHARE)


def tasks(reads: int, cores: int) -> int:
    """The tasks of the job that collects a batch's outputs, which reads ``reads`` rows."""
    return 1 if reads <= ONE_TASK_ROWS else cores


def ahead_single(held: int, one_partition: bool) -> bool:
    """Whether the plans captured ahead of batch 1 are over one partition: only if the history's
    states leave ``AHEAD_ROOM`` of one task's rows to batch 1; else hash-partitioned, which runs a
    batch of any size."""
    return one_partition and held <= (1 - AHEAD_ROOM) * ONE_TASK_ROWS


def captures_ahead(batch: int, strategy: str, recompute_only: bool, rows: int) -> bool:
    """Whether batch 1's plans are captured after this batch's commit: after a large history."""
    return batch == 0 and strategy == "incremental" and not recompute_only and rows >= AHEAD_MIN_ROWS


def decide(f: Facts) -> Shape:
    """The batch's shape (see :class:`Shape`)."""
    whole = f.restate or f.counts_matrices or f.strategy == "rebuild" or (f.installing and f.install_whole)
    estimate = outputs_estimate(f.held, f.rows, whole, f.outputs_seen)
    eager = (f.batch == 0 or not f.states_counted or not collects(estimate, f.output_row_bytes, f.heap)
             or _held_bytes(f) > SMALL_BYTES)
    single = not eager and f.one_partition and f.held + f.rows <= ONE_TASK_ROWS
    mode, afresh = _prepared_mode(f, eager, single)
    p = f.prepared
    return Shape(eager=eager, single=single, whole=whole, estimate=estimate, mode=mode, afresh=afresh,
                 warm=mode == "replay" and p is not None and not p.ahead)


def _held_bytes(f: Facts) -> int:
    """The bytes, stacked as Arrow, of the last batch's outputs scaled to this batch's rows (no
    margin: :func:`outputs_estimate` adds one); 0 without a last batch to go by."""
    return 0 if f.outputs_seen is None else _scaled(f.outputs_seen, f.rows) * f.output_row_bytes


def _prepared_mode(f: Facts, eager: bool, single: bool) -> tuple[str | None, bool]:
    """How the batch uses prepared plans, and whether they are given up first.

    A batch's streams are read as one partition each (a slot of one), so their rows must fit one
    task; the states may be one partition (``single``) or hash-partitioned. Plans over one
    partition run only batches that fit one task; plans over hash-partitioned states run any
    batch, so states that shrink, or a capture ahead that leaves room to grow, keep replaying.
    A capture merges every state, as every replay then does, while a state whose streams bring no
    rows is otherwise left as it is without a job; so a capture waits for a batch with rows from
    every stream (a dimension given as a source is then never merged again), and plans captured
    ahead are given up on the same grounds.
    """
    p = f.prepared
    if p is None or p.refused:
        return None, False
    if (f.batch == 0 or f.rows > ONE_TASK_ROWS or eager or f.answer_only or f.reshaped or f.installing
            or f.restate or f.strategy != "incremental" or (p.ready and p.single and not single)):
        return None, p.ready or p.keeps  # its states are handed over as frames: the next capture starts afresh
    if p.ready and p.ahead and not f.every_stream:
        return None, True
    if p.ready:
        return "replay", False
    if not f.every_stream or not p.capturable:
        return None, False
    return "capture", False
