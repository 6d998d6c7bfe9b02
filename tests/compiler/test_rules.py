"""The planner's rule registry: every kind of relational node is handled by a rule or refused by
name, and a node no rule knows is refused with a coded error naming it. No Spark needed."""

from __future__ import annotations

from dataclasses import dataclass, field

from streamfold.errors import UnsupportedError
from streamfold.ir import rel as ir_rel
from streamfold.ir.rel import Field, Limit, Rel, Scan
from streamfold.ir.types import INT
from streamfold.plan.incrementalize import REFUSED, RULES, refusal


def _node_classes() -> set[type[Rel]]:
    return {c for c in vars(ir_rel).values() if isinstance(c, type) and issubclass(c, Rel) and c is not Rel}


def test_every_node_class_has_a_rule_or_a_refusal() -> None:
    nodes = _node_classes()
    assert nodes <= set(RULES) | set(REFUSED), f"neither a rule nor a refusal: {nodes - set(RULES) - set(REFUSED)}"
    assert not set(RULES) & set(REFUSED)


def test_a_limit_that_reaches_the_rules_is_internal() -> None:
    # normalization leaves the query's own LIMIT to the answer and makes every other a row number
    scan = Scan("S", "S", (Field("S.x", INT),), ("x",))
    assert refusal(Limit(scan, 1)).code == "INTERNAL"


def test_a_node_without_a_rule_is_refused_by_name() -> None:
    @dataclass(frozen=True, slots=True)
    class Mystery(Rel):
        _schema: tuple[Field, ...] = field(default=(), repr=False, compare=False)

    error = refusal(Mystery())
    assert isinstance(error, UnsupportedError)
    assert error.code == "UNSUPPORTED" and error.params == {"construct": "Mystery"}
    assert "no incremental rule for Mystery" in error.message


def test_each_rule_lives_in_a_rule_family_module() -> None:
    modules = {rule.__module__ for rule in RULES.values()}
    assert all(m.startswith("streamfold.plan.rules_") for m in modules), modules


def test_a_correlation_by_one_not_equal_is_counted_per_key_and_value_and_others_say_why_not() -> None:
    """semi_not_equal: equalities and one ``<>`` get a (key, value) count state; a condition the
    rule does not fit (two ``<>``, a ``<``) keeps the general recount, and the plan's notes say why."""
    import streamfold

    schemas = {"R": "a INT, b INT, c INT", "S": "k INT, v INT, w INT"}
    one = streamfold.compile("SELECT a FROM R WHERE EXISTS (SELECT 1 FROM S WHERE S.k = R.a AND S.v <> R.b)", schemas)
    assert [s.key_names for s in one.states if s.name.startswith("pairs")] == [("pairs.k0", "pairs.v")]
    assert any("N(k) − C(k, a)" in n for n in one.notes)
    two = streamfold.compile(
        "SELECT a FROM R WHERE EXISTS (SELECT 1 FROM S WHERE S.k = R.a AND S.v <> R.b AND S.w <> R.c)", schemas)
    assert any("2 conditions compare the two sides other than by equality" in n for n in two.notes)
    less = streamfold.compile("SELECT a FROM R WHERE NOT EXISTS (SELECT 1 FROM S WHERE S.k = R.a AND S.v < R.b)",
                              schemas)
    assert any("the comparison of the two sides is not <>" in n for n in less.notes)


def test_each_subquery_correlated_by_an_inequality_adds_the_same_states_however_many_come_before() -> None:
    """decorrelate: a subquery's D (the distinct outer values) reads the outer rows without the
    parts earlier subqueries joined on, so n such subqueries make a plan linear in n. (D read a
    copy of everything before it: the states grew with each one more than the one before, and
    compiling four pairs of them took 96 s.)"""
    import time

    import streamfold

    schemas = {"F": "cid INT, odate DATE, _weight BIGINT", "C": "cid INT, since DATE, _weight BIGINT"}

    def states(n: int) -> int:
        items = ", ".join(f"(SELECT count(*) FROM C c WHERE c.cid = f.cid AND c.since < f.odate + INTERVAL {i} DAY) AS n{i}"
                          for i in range(n))
        where = " OR ".join(f"EXISTS (SELECT 1 FROM C c WHERE c.since > f.odate + INTERVAL {i} DAY)" for i in range(n))
        return len(streamfold.compile(f"SELECT f.cid, {items} FROM F f WHERE {where}", schemas).states)

    started = time.monotonic()
    counts = [states(n) for n in (2, 3, 4, 8)]  # (one EXISTS alone is a semi join: from two on, an OR)
    assert counts[2] - counts[1] == counts[1] - counts[0]
    assert counts[3] - counts[2] == 4 * (counts[1] - counts[0])
    assert time.monotonic() - started < 30  # (four took 96 s before; all four take 1–3 s now)
