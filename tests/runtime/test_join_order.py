"""Join order re-planned from the measured selectivities (issue 56 item 3, seed 004 §3.4 (c)).

Three streams joined on one key, as seed 004's Fig. 7: y's keys sit low, z's high, and x's keys
move from y's range to z's halfway through. The delta term of x joins y first at compile time;
while x meets y, the measured selectivity of y is high and of z low, so the order switches to z
first, and back when x moves. After every batch — deletions included — the snapshot equals
DuckDB's answer, so the switches change no answer; the commit records show them."""

from __future__ import annotations

import random

import pytest

from streamfold.settings import Settings

from ..streams import Source, check_stream

pytestmark = [pytest.mark.spark]

X = Source("X", (("k", "INT"), ("v", "INT")), weighted=True)
Y = Source("Y", (("k", "INT"), ("v", "INT")), weighted=True)
Z = Source("Z", (("k", "INT"), ("v", "INT")), weighted=True)

SQL = ("SELECT x.k, count(*) AS n, sum(y.v * 10 + z.v) AS s FROM X x JOIN Y y ON x.k = y.k "
       "JOIN Z z ON x.k = z.k GROUP BY x.k")


def switching(rng: random.Random, batches: int, switch: int) -> list[dict[str, list[tuple]]]:
    """Keys drawn around 3 for y, around 8 for z (sd 2, as seed 004's Gaussians), and for x
    around y's before batch ``switch`` and around z's after; every source deletes a row it
    inserted before now and then."""
    live: dict[str, list[tuple]] = {"X": [], "Y": [], "Z": []}
    out = []
    for b in range(batches):
        batch: dict[str, list[tuple]] = {}
        for name, mean in (("X", 3 if b < switch else 8), ("Y", 3), ("Z", 8)):
            rows = [(round(rng.gauss(mean, 2)), rng.randint(0, 9), 1) for _ in range(6)]
            if live[name] and rng.random() < 0.6:
                gone = live[name].pop(rng.randrange(len(live[name])))
                rows.append((gone[0], gone[1], -1))
            live[name] += [r for r in rows if r[2] == 1]
            batch[name] = rows
        out.append(batch)
    return out


def orders_of(out: str, batches: int) -> list[tuple[list[str], list[str]]]:
    """Per batch, the order Δin_x ran and the next batch's, from the commit records."""
    from streamfold.runtime.checkpoint import OutputDir

    records = [OutputDir(out).read_commit(b)["join_order"]["in_x"] for b in range(batches)]
    return [(e["order"], e["next"]) for e in records]


def test_join_order_switches_with_the_data_and_the_answers_stay_exact(spark, tmp_path):
    rng = random.Random("join-order")
    settings = Settings.from_environ().replace(join_order_batches=1, join_order_margin=0.2, join_order_smoothing=1.0)
    run = check_stream(spark, str(tmp_path), SQL, [X, Y, Z], switching(rng, 6, 3), settings=settings)
    assert run.batches == 6 and all(run.snapshots[2:]), "the join should have rows: the test would prove nothing"
    orders = orders_of(str(tmp_path / "out"), 6)
    ran = [o for o, _ in orders]
    assert ran[0] == ["in_y", "in_z"], "the first batch runs the compile-time order"
    assert ["in_z", "in_y"] in ran[1:4], f"x's keys met y's: the order should have moved to z first: {orders}"
    assert ["in_y", "in_z"] in ran[4:], f"x's keys moved to z's: the order should be back to y first: {orders}"
    for b in range(1, 6):
        assert ran[b] == orders[b - 1][1], "a batch runs the order the one before decided"
    from streamfold.runtime.checkpoint import OutputDir

    first = next(b for b in range(6) if orders[b][0] != orders[b][1])
    e = OutputDir(str(tmp_path / "out")).read_commit(first)["join_order"]["in_x"]
    assert e["changed_after"] == first and "selectivities" in e["why"] and e["fanout"]["in_y"] > e["fanout"]["in_z"]
