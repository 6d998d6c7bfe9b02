"""Incremental plans: the model (states, h, ⊗, a), how a query becomes one, and ``explain``."""

from .explain import explain_dict, explain_json, explain_text
from .incrementalize import incrementalize
from .model import Answer, IncrementalPlan, Monoid, State, StateColumn, Step

__all__ = [
    "Answer", "IncrementalPlan", "Monoid", "State", "StateColumn", "Step",
    "explain_dict", "explain_json", "explain_text", "incrementalize",
]
