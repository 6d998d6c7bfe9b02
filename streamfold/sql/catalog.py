"""What the binder knows of the query's inputs: each source's name, columns and kind."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from ..errors import UsageError
from ..ir.rel import WEIGHT
from ..ir.types import DataType, parse_type, split_top


@dataclass(frozen=True, slots=True)
class SourceSchema:
    """A stream source or static table.

    ``columns`` excludes ``_weight``; ``weighted`` says the source has it, so its rows may carry
    negative weights (deletions). A source without it is insert-only.
    """

    name: str
    columns: tuple[tuple[str, DataType], ...]
    static: bool = False
    weighted: bool = False

    @classmethod
    def of(cls, name: str, columns: Iterable[tuple[str, DataType | str]], static: bool = False) -> SourceSchema:
        """Build from (name, type) pairs; a ``_weight`` column marks the source as weighted."""
        cols: list[tuple[str, DataType]] = []
        weighted = False
        for col, t in columns:
            dtype = parse_type(t) if isinstance(t, str) else t
            if col.lower() == WEIGHT:
                if not dtype.is_integral:
                    raise UsageError(
                        f"column _weight of {name} has type {dtype}; it must be an integer",
                        code="BAD_WEIGHT_TYPE", params={"source": name, "type": dtype.sql()},
                        hint="_weight is the row's multiplicity: +n inserts n copies, -n deletes n",
                    )
                weighted = True
                continue
            cols.append((col, dtype))
        if not cols:
            raise UsageError(f"source {name} has no columns", code="EMPTY_SCHEMA", params={"source": name})
        return cls(name, tuple(cols), static=static, weighted=weighted and not static)

    def describe(self) -> str:
        cols = ", ".join(f"{c} {t.sql()}" for c, t in self.columns)
        return f"{self.name}({cols})"


def parse_schema(text: str) -> list[tuple[str, DataType]]:
    """Parse ``"a INT, b DECIMAL(10,2), c STRING"`` into (name, type) pairs."""
    columns = []
    for part in split_top(text):
        bits = _name_and_type(part.strip())
        if len(bits) != 2:
            raise UsageError(
                f"cannot read column definition {part.strip()!r}", code="BAD_SCHEMA",
                params={"definition": part.strip()},
                hint='write it as "name TYPE, name TYPE, ..." (backquote a name with spaces, dots or commas: '
                     '`order id` INT)',
            )
        name, type_text = bits
        try:
            columns.append((name, parse_type(type_text)))
        except ValueError as e:
            raise UsageError(f"{e} in column definition {part.strip()!r}", code="BAD_SCHEMA",
                             params={"definition": part.strip()},
                             hint="Spark's type names: INT, BIGINT, DOUBLE, DECIMAL(p,s), STRING, DATE, TIMESTAMP, "
                                  "BOOLEAN, ARRAY<T>, STRUCT<name: T, …>; backquote a name with spaces "
                                  "(`order id` INT)") from None
    return columns


def _name_and_type(definition: str) -> list[str]:
    """``name TYPE`` or ```a name` TYPE`` (backquoted, ```` a backtick in it) as [name, type]."""
    if not definition.startswith("`"):
        return definition.split(None, 1)
    i, name = 1, ""
    while i < len(definition):
        if definition[i] == "`":
            if definition[i + 1:i + 2] == "`":
                name, i = name + "`", i + 2
                continue
            rest = definition[i + 1:].strip()
            return [name, rest] if rest and definition[i + 1:i + 2].isspace() else [definition]
        name, i = name + definition[i], i + 1
    return [definition]  # no closing backtick


class Catalog(Mapping[str, SourceSchema]):
    """Sources by name, looked up case-insensitively as Spark does."""

    def __init__(self, sources: Iterable[SourceSchema] = ()) -> None:
        self._by_lower: dict[str, SourceSchema] = {}
        for s in sources:
            key = s.name.lower()
            if key in self._by_lower:
                raise UsageError(f"source {s.name} is given twice", code="DUPLICATE_SOURCE", params={"source": s.name})
            self._by_lower[key] = s

    def __getitem__(self, name: str) -> SourceSchema:
        return self._by_lower[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return (s.name for s in self._by_lower.values())

    def __len__(self) -> int:
        return len(self._by_lower)

    @classmethod
    def from_mapping(
        cls, schemas: Mapping[str, Iterable[tuple[str, DataType | str]] | SourceSchema | str],
        static: Iterable[str] = (),
    ) -> Catalog:
        """Build from ``{"S": [("x", "INT"), ...]}`` or ``{"S": "x INT, y INT"}``."""
        static_set = {s.lower() for s in static}
        out = []
        for name, cols in schemas.items():
            if isinstance(cols, SourceSchema):
                out.append(cols)
                continue
            pairs = parse_schema(cols) if isinstance(cols, str) else list(cols)
            out.append(SourceSchema.of(name, pairs, static=name.lower() in static_set))
        return cls(out)
