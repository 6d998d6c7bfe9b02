"""The shape of a batch (runtime/shape.py): one pure function over the batch's facts, table by table.
No Spark: every row is a batch's facts and the shape the engine must give it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from streamfold.runtime import shape
from streamfold.runtime.shape import Facts, PreparedFacts, Shape, decide, outputs_estimate, read_shape

WARM = Facts(batch=5, rows=1_000, held=20_000, states_counted=True, strategy="incremental",
             outputs_seen=(5_000, 2_000, 1_000))
READY = PreparedFacts(ready=True, single=True)
FRESH = PreparedFacts()

# (what differs from a warm small batch, the shape it gets)
CASES = [
    ("a warm small batch, no prepared plans",
     {}, Shape(eager=False, single=True, whole=False, estimate=5_000 + 2_000 + 4_000)),
    ("batch 0 builds the states: eager, planned",
     {"batch": 0, "prepared": READY}, Shape(eager=True, single=False, whole=False, estimate=11_000, afresh=True)),
    ("a state whose rows are not known: eager",
     {"states_counted": False}, Shape(eager=True, single=False, whole=False, estimate=11_000)),
    ("outputs expected above SMALL_ROWS: eager",
     {"outputs_seen": (2_000_000, 0, 1_000)}, Shape(eager=True, single=False, whole=False, estimate=2_004_000)),
    ("outputs expected above SMALL_BYTES as one Arrow table (wide stacked rows): eager",
     {"output_row_bytes": 20_000}, Shape(eager=True, single=False, whole=False, estimate=11_000)),
    ("outputs whose estimate with its margin is above SMALL_BYTES: eager",
     {"output_row_bytes": 15_000}, Shape(eager=True, single=False, whole=False, estimate=11_000)),
    ("the same under a 12 GB local heap, a sixteenth of which bounds the estimate, the last outputs scaled "
     "without the margin within SMALL_BYTES: collected",
     {"output_row_bytes": 15_000, "heap": 12 << 30}, Shape(eager=False, single=True, whole=False, estimate=11_000)),
    ("the last outputs scaled past SMALL_BYTES, whatever the heap: eager, Spark writes them",
     {"output_row_bytes": 20_000, "heap": 12 << 30}, Shape(eager=True, single=False, whole=False, estimate=11_000)),
    ("narrow stacked rows of the same outputs: collected",
     {"output_row_bytes": 200}, Shape(eager=False, single=True, whole=False, estimate=11_000)),
    ("states and rows past one task: hash-partitioned",
     {"held": 300_000}, Shape(eager=False, single=False, whole=False, estimate=11_000)),
    ("one partition turned off",
     {"one_partition": False}, Shape(eager=False, single=False, whole=False, estimate=11_000)),
    ("plans ready over one partition: replayed, warm",
     {"prepared": READY}, Shape(eager=False, single=True, whole=False, estimate=11_000, mode="replay", warm=True)),
    ("plans captured ahead, run once: replayed, not warm",
     {"prepared": replace(READY, ahead=True)},
     Shape(eager=False, single=True, whole=False, estimate=11_000, mode="replay")),
    ("plans captured ahead, a stream brought nothing: given up",
     {"prepared": replace(READY, ahead=True), "every_stream": False},
     Shape(eager=False, single=True, whole=False, estimate=11_000, afresh=True)),
    ("plans over one partition, the batch does not fit one: given up",
     {"prepared": READY, "held": 300_000}, Shape(eager=False, single=False, whole=False, estimate=11_000, afresh=True)),
    ("plans over hashed states replay a batch that would fit one partition",
     {"prepared": replace(READY, single=False)},
     Shape(eager=False, single=True, whole=False, estimate=11_000, mode="replay", warm=True)),
    ("no plans yet, every stream brought rows: the capture",
     {"prepared": FRESH}, Shape(eager=False, single=True, whole=False, estimate=11_000, mode="capture")),
    ("no plans yet, a stream brought nothing: planned as before",
     {"prepared": FRESH, "every_stream": False}, Shape(eager=False, single=True, whole=False, estimate=11_000)),
    ("no plans yet, a state is not a merge's rows: planned",
     {"prepared": replace(FRESH, capturable=False)}, Shape(eager=False, single=True, whole=False, estimate=11_000)),
    ("a refused capture is never tried again",
     {"prepared": replace(FRESH, refused=True)}, Shape(eager=False, single=True, whole=False, estimate=11_000)),
    ("a batch too large for a slot: planned, the plans' states handed over",
     {"prepared": replace(READY, single=False), "rows": 260_000, "held": 0},
     Shape(eager=True, single=False, whole=False, estimate=5_000 + 520_000 + 1_040_000, afresh=True)),
    ("the first batch of an installed plan that writes its states whole",
     {"installing": True, "install_whole": True, "prepared": READY},
     Shape(eager=False, single=True, whole=True, estimate=24_000, afresh=True)),
    ("a rebuild writes its states whole",
     {"strategy": "rebuild"}, Shape(eager=False, single=True, whole=True, estimate=24_000)),
    ("a join switched to a hybrid: whole, planned",
     {"restate": True, "prepared": FRESH}, Shape(eager=False, single=True, whole=True, estimate=24_000)),
    ("a hybrid join matrix counts before the outputs: whole",
     {"counts_matrices": True}, Shape(eager=False, single=True, whole=True, estimate=24_000)),
    ("runs started by a restart: planned, plans handed over",
     {"reshaped": True, "prepared": READY}, Shape(eager=False, single=True, whole=False, estimate=11_000, afresh=True)),
    ("an answer-only reconfiguration reads nothing: planned",
     {"answer_only": True, "installing": True, "prepared": READY},
     Shape(eager=False, single=True, whole=False, estimate=11_000, afresh=True)),
]


@pytest.mark.parametrize("facts, expected", [(replace(WARM, **d), s) for _, d, s in CASES],
                         ids=[name for name, _, _ in CASES])
def test_the_shape_of_a_batch(facts: Facts, expected: Shape) -> None:
    assert decide(facts) == expected


def test_thresholds_are_read_when_deciding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shape, "ONE_TASK_ROWS", 0)
    assert not decide(WARM).single
    monkeypatch.setattr(shape, "SMALL_ROWS", 100)
    assert decide(WARM).eager


def test_a_stacked_row_carries_every_slot_of_every_part() -> None:
    """Outputs stacked into one relation share columns by type, so a row's width is every type's
    most columns in any part (NULLs take their width in Arrow too), plus the part's tag."""
    from streamfold.runtime.lowering import stacked_width

    snapshot = [("k", "bigint"), ("s", "string"), ("t", "decimal(38,2)")]
    changes = [*snapshot, ("_weight", "bigint")]
    log = [("k", "bigint"), ("a", "bigint"), ("b", "bigint"), ("d", "date"), ("_weight", "bigint")]
    # bigint slots: 4 (the log's), string 1, decimal 1, date 1
    assert stacked_width([snapshot, changes, log]) == 4 + 4 * 8 + 32 + 16 + 4
    assert shape.collects(1_000, 1_000) and not shape.collects(1_000_000, 1_000)
    assert not shape.collects(shape.SMALL_ROWS + 1, 1)
    # a local run's heap past 2 GB raises the bytes bound to a sixteenth of it; a smaller one keeps SMALL_BYTES
    assert not shape.collects(200_000, 1_000) and shape.collects(200_000, 1_000, heap=12 << 30)
    assert shape.collects(100_000, 1_000, heap=1 << 30)
    assert not shape.collects(shape.SMALL_ROWS + 1, 1, heap=64 << 30)


def test_outputs_are_estimated_from_the_last_batch_scaled_to_this_ones_rows() -> None:
    assert outputs_estimate(700_000, 40_000, False, (10_000, 80_000, 40_000)) == 10_000 + 80_000 + 160_000
    assert outputs_estimate(700_000, 40_000, True, (10_000, 80_000, 40_000)) == 700_000 + 160_000
    assert outputs_estimate(700_000, 40_000, False, None) == 700_000 + 160_000


@pytest.mark.parametrize("installing, answer_only, files, ready, expected", [
    (False, False, True, False, (False, False)),
    (False, False, True, True, (False, True)),  # the prepared plans' scans read the files
    (True, True, False, True, (True, False)),  # an answer-only plan and no file: nothing is read
    (True, True, True, True, (False, False)),  # … a file came: read, and h runs
    (True, False, False, True, (False, False)),
])
def test_what_a_batch_reads(installing: bool, answer_only: bool, files: bool, ready: bool,
                            expected: tuple[bool, bool]) -> None:
    got = read_shape(installing, answer_only, files, ready)
    assert (got.answer_only, got.light) == expected
