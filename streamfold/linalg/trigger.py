"""The trigger program: what one batch of input changes costs to apply (§5.3.5, phase 4).

A batch changes some inputs, each by a factored delta ``ΔX = U_X·V_X`` of rank k (a batch of
row updates: ``U_X`` is the selector of the k rows touched, ``V_X`` their changes). The
trigger program computes, with the *old* views, named thin matrices (``let`` statements) and
then updates every changed view at once: ``x ⊕= U_x·V_x`` (or ``x ⊕= D_x`` for a delta kept
dense because its rank is not low). Its cost is compared with re-evaluating the views.
"""

from __future__ import annotations

from dataclasses import dataclass

from .meta import DENSE, SELECTOR, SELECTOR_T, Meta
from .simplify import Statement


@dataclass(frozen=True, slots=True)
class Change:
    """How a batch changes an input: ``rank`` and the structure of its factors (``selector``:
    U selects rows, the batch updates whole rows; ``selector_t``: V selects columns; ``dense``)."""

    input: str
    rank: int
    structure: str = SELECTOR

    def factor_metas(self, m: Meta) -> tuple[Meta, Meta]:
        k = self.rank
        u = Meta(m.rows, k, structure=SELECTOR if self.structure == SELECTOR else DENSE)
        v = Meta(k, m.cols, structure=SELECTOR_T if self.structure == SELECTOR_T else DENSE)
        return u, v


def u_name(view: str) -> str:
    return f"U_{view}"


def v_name(view: str) -> str:
    return f"V_{view}"


def d_name(view: str) -> str:
    return f"D_{view}"


@dataclass(frozen=True)
class Factored:
    """The delta of one view: ``U·V`` of rank ``rank``, or dense (``v`` is None, ``u`` names it)."""

    view: str
    u: str
    v: str | None
    rank: int
    rules: tuple[str, ...]  # the equivalence rules the chosen form uses
    cost: int  # operations computing its lets
    update_cost: int  # operations of ``view ⊕= U·V``
    reeval_cost: int  # operations of recomputing the view from its operands

    @property
    def dense(self) -> bool:
        return self.v is None


@dataclass(frozen=True)
class Trigger:
    changes: tuple[Change, ...]
    lets: tuple[Statement, ...]  # in evaluation order, reading old views
    factored: tuple[Factored, ...]  # every changed view (inputs first), updated after the lets
    metas: dict[str, Meta]  # of the lets' names
    cost: int  # the lets and the updates
    reeval_cost: int  # re-evaluating every view after the inputs are updated

    def of(self, view: str) -> Factored | None:
        for f in self.factored:
            if f.view == view:
                return f
        return None

    @property
    def gain(self) -> float:
        return self.reeval_cost / max(1, self.cost)
