"""The join order's decisions, table-tested (no Spark): the cost of an order, the orders without
a cross product, the moving average, the hysteresis (a margin held for k consecutive batches),
how a batch's executed joins are read as each term's steps, and the plans a re-plan compiles
(same states, other programs) — issue 56 item 3."""

from __future__ import annotations

import pytest

from streamfold.plan.compilation import Compilation, replanned
from streamfold.plan.model import DeltaJoin
from streamfold.runtime.features.join_order import Term, Tuning, connected_orders, cost, decide, measured, smoothed
from streamfold.sql import Catalog

STAR = (("a", "b"), ("a", "c"))  # b and c each join a, not each other
YZ, ZY = ("b", "c"), ("c", "b")


def test_cost_is_the_rows_each_step_but_the_last_builds_per_delta_row():
    assert cost(YZ, {"b": 4.0, "c": 0.5}) == 4.0  # the last step's 2.0 is every order's
    assert cost(ZY, {"b": 4.0, "c": 0.5}) == 0.5
    assert cost(("b", "c", "d"), {"b": 2.0, "c": 3.0, "d": 0.1}) == 2.0 + 6.0
    assert cost((), {}) == 0.0


@pytest.mark.parametrize("start,others,edges,expected", [
    ("a", ("b", "c"), STAR, [YZ, ZY]),  # a star from its centre: either order
    ("b", ("a", "c"), STAR, [("a", "c")]),  # from a leaf: the centre first (c alone would be a cross product)
    ("a", ("b", "c", "d"), (("a", "b"), ("b", "c"), ("c", "d")), [("b", "c", "d")]),  # a chain: one way
    ("b", ("a", "c"), (("a", "b"), ("b", "c")), [("a", "c"), ("c", "a")]),
])
def test_connected_orders_never_make_a_cross_product(start, others, edges, expected):
    assert connected_orders(start, others, edges) == expected


def test_the_moving_average_starts_at_the_first_measure_and_keeps_the_unmeasured():
    assert smoothed({}, {"b": 2.0}, 0.5) == {"b": 2.0}
    assert smoothed({"b": 2.0, "c": 1.0}, {"b": 4.0}, 0.5) == {"b": 3.0, "c": 1.0}
    assert smoothed({"b": 2.0}, {"b": 4.0}, 1.0) == {"b": 4.0}


T = Tuning(margin=0.25, batches=2, smoothing=1.0)


# (current order, candidate, streak, fanout) → (next order, candidate, streak, changed)
@pytest.mark.parametrize("order,candidate,streak,fanout,expected", [
    # not every input measured yet: nothing decided
    (YZ, None, 0, {"b": 5.0}, (YZ, None, 0, False)),
    # the other order cheaper by more than the margin: a streak starts
    (YZ, None, 0, {"b": 5.0, "c": 1.0}, (YZ, ZY, 1, False)),
    # … and at k = 2 consecutive batches the order changes
    (YZ, ZY, 1, {"b": 5.0, "c": 1.0}, (ZY, None, 0, True)),
    # cheaper, but within the margin (1 against 1.2: 17 % < 25 %): no streak, one broken
    (YZ, ZY, 1, {"b": 1.2, "c": 1.0}, (YZ, None, 0, False)),
    # the current order is the cheapest: nothing
    (ZY, None, 0, {"b": 5.0, "c": 1.0}, (ZY, None, 0, False)),
    # a tie stays
    (YZ, None, 0, {"b": 1.0, "c": 1.0}, (YZ, None, 0, False)),
])
def test_decide_changes_an_order_only_past_the_margin_for_k_batches(order, candidate, streak, fanout, expected):
    term, why = decide(Term(order, fanout, candidate, streak), "a", STAR, T, batch=7)
    assert (term.order, term.candidate, term.streak, why is not None) == expected
    if why is not None:
        assert term.since == 7 and "selectivities" in why and term.why == why


def test_a_leaf_term_has_one_order_and_never_changes():
    term, why = decide(Term(("a", "c"), {"a": 100.0, "c": 0.01}), "b", STAR, Tuning(0.0, 1, 1.0), 3)
    assert term.order == ("a", "c") and why is None


def test_a_term_survives_its_commit_record():
    t = Term(ZY, {"b": 1.5, "c": 0.25}, YZ, 1, 4, "because")
    back = Term.from_record(t.record(YZ))
    assert back == t
    assert t.record(YZ)["order"] == list(YZ) and t.record(YZ)["next"] == list(ZY)


D = DeltaJoin(("a", "b", "c"), STAR, (("a", YZ), ("b", ("a", "c")), ("c", ("a", "b"))), "out")


def test_the_executed_joins_are_read_term_by_term_last_join_first():
    # pre-order: term a's outer join (in 8, out 2) then its inner one (in 4, out 8), then b's, then c's
    joins = [(8, 2), (4, 8), (3, 3), (3, 3), (0, 0), (2, 0)]
    got = measured(D, joins)
    assert got == {"a": {"b": 2.0, "c": 0.25}, "b": {"a": 1.0, "c": 1.0}, "c": {"a": 0.0}}  # c's 2nd step: no rows in


@pytest.mark.parametrize("joins", [None, [(8, 2), (4, 8)], [(8, 2), (4, 7), (3, 3), (3, 3), (2, 0), (2, 0)]])
def test_joins_of_another_shape_are_not_read(joins):
    assert measured(D, joins) is None  # none read, too few, or a step's input that is not the one before's output


def test_a_replan_compiles_the_orders_over_the_same_states():
    cat = Catalog.from_mapping({n: [("k", "INT"), ("v", "INT")] for n in ("x", "y", "z")})
    plan = Compilation("SELECT x.k, y.v AS yv, z.v AS zv FROM x JOIN y ON x.k = y.k JOIN z ON x.k = z.k", cat).plan
    (d,) = plan.delta_joins
    assert d.step == "out" and dict(d.terms)["in_x"] == ("in_y", "in_z") and plan.orders == ()
    again = replanned(plan, {}, None, {"in_x": ("in_z", "in_y"), "in_y": ("in_z", "in_x")})
    assert again.states == plan.states and again.answer == plan.answer and again.delta != plan.delta
    assert dict(again.delta_joins[0].terms)["in_x"] == ("in_z", "in_y")
    assert dict(again.delta_joins[0].terms)["in_y"] == ("in_x", "in_z"), "a cross-product order is not taken"
    assert again.orders == (("in_x", ("in_z", "in_y")),)
    assert replanned(again, {}).orders == again.orders, "a re-plan for a join matrix keeps the orders"


def test_explain_analyze_shows_the_current_order_when_it_changed_and_why():
    from streamfold.runtime.analyze import order_text

    record = {"join_order": {
        "in_x": Term(ZY, {"b": 3.0, "c": 0.5}, None, 0, 4, "b is 3, c 0.5").record(YZ),
        "in_y": Term(("a", "c"), {"a": 1.0}).record(("a", "c")),
    }}
    text = order_text(record, 5)
    assert "current join order of Δin_x after batch 5: Δin_x ⋈ c ⋈ b (changed after batch 4: b is 3, c 0.5)" in text
    assert "Δin_y ⋈ a ⋈ c (the compile-time order)" in text
    assert order_text({}, 5) == ""


def test_a_restart_takes_the_orders_of_the_last_commit_that_recorded_them():
    """A recompute batch records no join order: the restart looks back past it."""
    from types import SimpleNamespace

    from streamfold.runtime.features.join_order import _last_entries

    entry = Term(ZY, {"b": 3.0, "c": 0.5}).record(YZ)
    commits = {0: {"batch": 0}, 1: {"batch": 1, "join_order": {"in_x": entry}}, 2: {"batch": 2}, 3: {"batch": 3}}
    ctx = SimpleNamespace(output=SimpleNamespace(read_commit=lambda b: commits[b]))
    assert _last_entries(ctx, commits[3]) == {"in_x": entry}
    assert Term.from_record(_last_entries(ctx, commits[3])["in_x"]).order == ZY
    assert _last_entries(ctx, commits[0]) == {} and _last_entries(ctx, None) == {}


def test_a_restart_after_commits_pruned_away_starts_afresh():
    from types import SimpleNamespace

    from streamfold.runtime.features.join_order import _last_entries

    def gone(b):
        raise FileNotFoundError(b)

    assert _last_entries(SimpleNamespace(output=SimpleNamespace(read_commit=gone)), {"batch": 5}) == {}
