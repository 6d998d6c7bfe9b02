"""The loops' statements: a fixpoint's rounds, an exact iteration's change, a diffusion's deltas."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...ir.printer import quote
from ...ir.rel import WEIGHT
from .text import names


def weighted(sign: int) -> str:
    """The weight column of a loop's change rows: every row counted ``sign`` times."""
    return f"{sign}L AS {WEIGHT}"


def fixpoint_rows(columns: Sequence[str], inner: str) -> str:
    """A fixpoint's rows as a set (a round's rows, the base's)."""
    return f"SELECT DISTINCT {names(columns)} FROM (\n{inner}\n) _r"


def fixpoint_old(columns: Sequence[str], relation: str) -> str:
    """The fixpoint kept from the batch before, without its count."""
    return f"SELECT {names(columns)} FROM {relation} _o"


def fixpoint_found(columns: Sequence[str], relation: str) -> str:
    """The rows an incremental fixpoint found in a batch, each +1."""
    return f"SELECT {names(columns)}, {weighted(1)} FROM {relation} _d"


def exact_change(columns: Sequence[str], value: str, old: str) -> str:
    """An exact iteration's change: its value after the batch (each row +1) minus the value kept
    (each row −``_weight``), summed per row, rows whose sum is 0 left out."""
    cols = names(columns)
    return (f"SELECT {cols}, sum(_c) AS {WEIGHT} FROM (\n"
            f"SELECT {cols}, 1L AS _c FROM {value}\nUNION ALL\n"
            f"SELECT {cols}, -{WEIGHT} AS _c FROM {old} _o\n) _v "
            f"GROUP BY {cols} HAVING sum(_c) <> 0")


DIFFUSION_KEY = "DIFFUSION_KEY"  # the marker of the error a diffusion loop raises in Spark


@dataclass(frozen=True)
class DiffusionLowering:
    """The statements of a diffusion loop (see :class:`~streamfold.plan.model.Diffusion`) over the
    iteration's value before the batch, ``old`` (a FROM item).

    Its change rows ``ΔX`` have columns ``c0, c1, …`` (the fields renamed) and ``_weight``; each
    new row's weight checks that the KEY names one row (Spark raises ``DIFFUSION_KEY`` if not).
    """

    loop: str
    fields: tuple[str, ...]
    columns: tuple[str, ...]
    key: tuple[str, ...]
    old: str

    def _check(self) -> str:
        key = ", ".join(quote(k) for k in self.key)
        return (f"CASE WHEN __w = 1 AND count(*) OVER (PARTITION BY {key}) = 1 THEN 1L "
                f"ELSE raise_error('{DIFFUSION_KEY}: two rows of {self.loop} have the same KEY') END")

    def _consolidated(self, rows: str) -> str:
        """A change's rows, each with its net count."""
        fields = names(self.fields)
        return (f"SELECT {fields}, sum({WEIGHT}) AS __w FROM (\n{rows}\n) _d "
                f"GROUP BY {fields} HAVING sum({WEIGHT}) <> 0")

    def start(self, rows: str) -> str:
        """ΔX₀: the start's rows for keys the iteration does not have."""
        fields = [quote(f) for f in self.fields]
        on = " AND ".join(f"_o.{quote(k)} <=> _n.{quote(k)}" for k in self.key)
        return (f"SELECT {', '.join(f'_n.{f} AS {quote(c)}' for f, c in zip(fields, self.columns))}, "
                f"{self._check()} AS {WEIGHT} "
                f"FROM ({self._consolidated(rows)}) _n LEFT ANTI JOIN {self.old} _o ON {on} WHERE _n.__w > 0")

    def change(self, rows: str) -> str:
        """ΔX: the new rows of the keys ΔY touches, replacing their old rows."""
        fields = [quote(f) for f in self.fields]
        key = [quote(k) for k in self.key]
        on = " AND ".join(f"_o.{k} <=> _k.{k}" for k in key)
        return (f"WITH _c AS ({self._consolidated(rows)})\n"
                f"SELECT {', '.join(f'{f} AS {quote(c)}' for f, c in zip(fields, self.columns))}, "
                f"{self._check()} AS {WEIGHT} FROM _c WHERE __w > 0\nUNION ALL\n"
                f"SELECT {', '.join(f'_o.{f} AS {quote(c)}' for f, c in zip(fields, self.columns))}, "
                f"-1L AS {WEIGHT} FROM {self.old} _o LEFT SEMI JOIN (SELECT DISTINCT {', '.join(key)} FROM _c) _k "
                f"ON {on}")

    def merged(self, delta: str) -> str:
        """The last ΔX as the iteration state's delta (its fields, ``_weight``)."""
        return (f"SELECT {', '.join(f'{quote(c)} AS {quote(f)}' for c, f in zip(self.columns, self.fields))}, "
                f"{WEIGHT} AS {WEIGHT} FROM {delta}")
