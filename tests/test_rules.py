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


def test_a_nested_limit_is_refused_with_its_own_code() -> None:
    scan = Scan("S", "S", (Field("S.x", INT),), ("x",))
    assert refusal(Limit(scan, 1)).code == "UNSUPPORTED_NESTED_LIMIT"


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
