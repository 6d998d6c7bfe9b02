"""Relational nodes: the logical plan of a query, and the programs of an incremental plan.

Every node derives its output schema once, in ``__post_init__``, and checks its invariants
there: field names are unique within a relation and expressions only read columns their input
has. A relation's fields are named so that names never clash across a join: a table's columns
are ``alias.column``; computed columns get the name the query gives them.

Leaves: :class:`Scan` (a source or static table, as the batch query sees it), :class:`DeltaScan`
(the rows a batch adds to a source, with their ``_weight``) and :class:`StateScan` (a state of
an incremental plan, before or after this batch's merge).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from .expr import Agg, Column, Expr
from .types import BIGINT, BOOLEAN, INT, DataType

WEIGHT = "_weight"  # multiplicity of a row in a delta: +n inserts n copies, -n deletes n


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: DataType
    nullable: bool = True

    def ref(self) -> Column:
        return Column(self.name, self.type)


class JoinKind(StrEnum):
    INNER = "inner"
    LEFT = "left"
    RIGHT = "right"
    FULL = "full"
    SEMI = "semi"
    ANTI = "anti"
    # ``x NOT IN (subquery)``: no row passes if the subquery has a NULL, and every row passes if
    # it is empty (SQL's three-valued NOT IN), condition ``x = y`` only.
    NULL_AWARE_ANTI = "null_aware_anti"
    CROSS = "cross"


class StateVersion(StrEnum):
    """Which version of a state a :class:`StateScan` reads."""

    OLD = "old"  # before this batch's merge
    NEW = "new"  # after it
    DELTA = "delta"  # the change this batch merges into it
    MERGED = "merged"  # the merge itself: new and old columns per key, and whether the batch touched it


class IterationMode(StrEnum):
    """How a batch updates an :class:`Iterate` (``MODE …`` in ``WITH ITERATIVE``)."""

    EXACT = "exact"
    DIFFERENTIAL = "differential"
    DIFFUSION = "diffusion"


class SetKind(StrEnum):
    INTERSECT = "intersect"
    EXCEPT = "except"
    INTERSECT_ALL = "intersect_all"
    EXCEPT_ALL = "except_all"


def written_name(name: str) -> str:
    """A CTE's or loop's name as the query wrote it: the binder makes names unique with a
    ``#n`` suffix (``ranks#1`` → ``ranks``)."""
    return name.split("#")[0]


def _coerce(node: Rel, attr: str, kind: type[StrEnum], what: str) -> None:
    """Store field ``attr`` of a frozen node as its enum (strings are accepted), or refuse it."""
    try:
        object.__setattr__(node, attr, kind(getattr(node, attr)))
    except ValueError:
        raise ValueError(f"unknown {what} {getattr(node, attr)!r}") from None


class Rel:
    """Base of relational nodes.

    A plan is a DAG: unnesting reads one relation in several places (a subquery's outer rows,
    and their distinct values). Hashing it as a tree would take time exponential in how deep
    such sharing nests, so each node keeps its hash once computed (``_hash``)."""

    __slots__ = ("_hash",)

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        generated = cls.__dict__.get("__hash__")
        if generated is None or getattr(generated, "cached", False):
            return

        def cached_hash(self: Rel) -> int:
            try:
                return self._hash  # type: ignore[attr-defined, no-any-return]
            except AttributeError:
                value: int = generated(self)
                object.__setattr__(self, "_hash", value)
                return value

        cached_hash.cached = True  # type: ignore[attr-defined]
        cls.__hash__ = cached_hash  # type: ignore[method-assign, assignment]

    @property
    def schema(self) -> tuple[Field, ...]:
        return self._schema  # type: ignore[attr-defined, no-any-return]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.schema)

    def field(self, name: str) -> Field:
        for f in self.schema:
            if f.name == name:
                return f
        raise KeyError(f"{type(self).__name__} has no field {name!r}; it has {list(self.names)}")

    def inputs(self) -> tuple[Rel, ...]:
        return ()

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        assert not inputs
        return self

    def walk(self) -> Iterator[Rel]:
        yield self
        for child in self.inputs():
            yield from child.walk()

    def transform(self, fn: Callable[[Rel], Rel | None]) -> Rel:
        """Rewrite bottom-up: ``fn`` returns a replacement node or None to keep it."""
        kids = self.inputs()
        node = self
        if kids:
            new = tuple(k.transform(fn) for k in kids)
            if new != kids:
                node = self.with_inputs(new)
        out = fn(node)
        return node if out is None else out

    def _set_schema(self, fields: tuple[Field, ...]) -> None:
        seen: set[str] = set()
        for f in fields:
            if f.name in seen:
                raise ValueError(f"{type(self).__name__}: duplicate field {f.name!r}")
            seen.add(f.name)
        object.__setattr__(self, "_schema", fields)


def _check_reads(node: Rel, exprs: tuple[Expr, ...], available: tuple[str, ...]) -> None:
    names = set(available)
    for e in exprs:
        missing = e.columns() - names
        if missing:
            raise ValueError(
                f"{type(node).__name__} reads {sorted(missing)} which its input lacks ({sorted(names)})"
            )


@dataclass(frozen=True, slots=True)
class Scan(Rel):
    """All rows of a source or static table. ``columns[i]`` is the source column behind ``fields[i]``."""

    table: str
    alias: str
    fields: tuple[Field, ...]
    columns: tuple[str, ...]
    static: bool = False
    weighted: bool = False  # the source has a _weight column (it may delete rows)
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.fields) != len(self.columns):
            raise ValueError("Scan: fields and columns differ in length")
        self._set_schema(self.fields)


@dataclass(frozen=True, slots=True)
class DeltaScan(Rel):
    """The rows one batch adds to a stream source, each with its ``_weight`` (BIGINT)."""

    table: str
    alias: str
    fields: tuple[Field, ...]
    columns: tuple[str, ...]
    weighted: bool = False
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._set_schema(self.fields + (Field(WEIGHT, BIGINT, False),))


@dataclass(frozen=True, slots=True)
class StateScan(Rel):
    """A state of the incremental plan: ``old`` before this batch's merge, ``new`` after it,
    ``delta`` the change this batch merges into it, and ``merged`` the merge itself: every key
    with its new columns, its old ones (``__old::<column>``) and ``__touched`` (1 if the batch
    had a delta row for it). ``fields`` are the state's columns (for ``merged``, all of those)."""

    state: str
    version: StateVersion
    fields: tuple[Field, ...]
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _coerce(self, "version", StateVersion, "StateScan version")
        self._set_schema(self.fields)


@dataclass(frozen=True, slots=True)
class Filter(Rel):
    input: Rel
    condition: Expr
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.condition.type not in (BOOLEAN,) and not self.condition.type.is_null:
            raise ValueError(f"Filter condition has type {self.condition.type}, not BOOLEAN")
        _check_reads(self, (self.condition,), self.input.names)
        self._set_schema(self.input.schema)

    def inputs(self) -> tuple[Rel, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Filter(inputs[0], self.condition)


@dataclass(frozen=True, slots=True)
class Project(Rel):
    input: Rel
    exprs: tuple[tuple[str, Expr], ...]
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_reads(self, tuple(e for _, e in self.exprs), self.input.names)
        nullable = {f.name: f.nullable for f in self.input.schema}
        fields = []
        for name, e in self.exprs:
            if isinstance(e, Agg):
                raise ValueError("Project cannot hold an aggregate")
            fields.append(Field(name, e.type, nullable.get(e.name, True) if isinstance(e, Column) else True))
        self._set_schema(tuple(fields))

    def inputs(self) -> tuple[Rel, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Project(inputs[0], self.exprs)


@dataclass(frozen=True, slots=True)
class Join(Rel):
    """A join; ``condition`` None means a cross product. Semi/anti joins output the left side only."""

    left: Rel
    right: Rel
    kind: JoinKind
    condition: Expr | None
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _coerce(self, "kind", JoinKind, "join kind")
        if self.condition is not None:
            _check_reads(self, (self.condition,), self.left.names + self.right.names)
        left = self.left.schema
        right = self.right.schema
        if self.kind in (JoinKind.SEMI, JoinKind.ANTI, JoinKind.NULL_AWARE_ANTI):
            self._set_schema(left)
            return
        if self.kind in (JoinKind.RIGHT, JoinKind.FULL):
            left = tuple(Field(f.name, f.type, True) for f in left)
        if self.kind in (JoinKind.LEFT, JoinKind.FULL):
            right = tuple(Field(f.name, f.type, True) for f in right)
        self._set_schema(left + right)

    def inputs(self) -> tuple[Rel, ...]:
        return (self.left, self.right)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Join(inputs[0], inputs[1], self.kind, self.condition)


@dataclass(frozen=True, slots=True)
class Aggregate(Rel):
    """GROUP BY ``keys`` computing ``aggs``; output is the keys, then the aggregates.

    With no keys it is a global aggregate: exactly one output row, even over no input.
    """

    input: Rel
    keys: tuple[tuple[str, Expr], ...]
    aggs: tuple[tuple[str, Agg], ...]
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        exprs = tuple(e for _, e in self.keys) + tuple(a for _, a in self.aggs)
        _check_reads(self, exprs, self.input.names)
        for name, a in self.aggs:
            if not isinstance(a, Agg):
                raise ValueError(f"Aggregate output {name} is not an aggregate call")
        fields = [Field(n, e.type) for n, e in self.keys]
        fields += [Field(n, a.type, not (a.fn == "count")) for n, a in self.aggs]
        self._set_schema(tuple(fields))

    def inputs(self) -> tuple[Rel, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Aggregate(inputs[0], self.keys, self.aggs)


@dataclass(frozen=True, slots=True)
class SortKey:
    expr: Expr
    descending: bool = False
    nulls_first: bool | None = None  # None: Spark's default (first when ascending)

    @property
    def effective_nulls_first(self) -> bool:
        return (not self.descending) if self.nulls_first is None else self.nulls_first


@dataclass(frozen=True, slots=True)
class Sort(Rel):
    input: Rel
    keys: tuple[SortKey, ...]
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_reads(self, tuple(k.expr for k in self.keys), self.input.names)
        self._set_schema(self.input.schema)

    def inputs(self) -> tuple[Rel, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Sort(inputs[0], self.keys)


@dataclass(frozen=True, slots=True)
class Limit(Rel):
    input: Rel
    limit: int | None
    offset: int = 0
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.limit is not None and self.limit < 0 or self.offset < 0:
            raise ValueError("LIMIT and OFFSET must not be negative")
        self._set_schema(self.input.schema)

    def inputs(self) -> tuple[Rel, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Limit(inputs[0], self.limit, self.offset)


@dataclass(frozen=True, slots=True)
class Distinct(Rel):
    input: Rel
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._set_schema(self.input.schema)

    def inputs(self) -> tuple[Rel, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Distinct(inputs[0])


@dataclass(frozen=True, slots=True)
class Union(Rel):
    """Bag union (UNION ALL) of inputs with the same column types; the first input names the columns."""

    items: tuple[Rel, ...]
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if len(self.items) < 2:
            raise ValueError("Union needs at least two inputs")
        width = len(self.items[0].schema)
        for item in self.items[1:]:
            if len(item.schema) != width:
                raise ValueError("Union inputs differ in width")
        nullable = [any(item.schema[i].nullable for item in self.items) for i in range(width)]
        first = self.items[0].schema
        self._set_schema(tuple(Field(f.name, f.type, n) for f, n in zip(first, nullable)))

    def inputs(self) -> tuple[Rel, ...]:
        return self.items

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Union(inputs)


@dataclass(frozen=True, slots=True)
class Expand(Rel):
    """Each input row repeated ``weight`` times, without the weight column: a bag from its counts."""

    input: Rel
    weight: str
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.input.field(self.weight).type.is_integral:
            raise ValueError("Expand weight must be an integer column")
        self._set_schema(tuple(f for f in self.input.schema if f.name != self.weight))

    def inputs(self) -> tuple[Rel, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Expand(inputs[0], self.weight)


@dataclass(frozen=True, slots=True)
class Once(Rel):
    """A static relation as a delta: its rows (``_weight`` 1) in the first batch, none after.

    With ``later`` it is the opposite — the rows in every batch but the first: the static
    relation as it was *before* a batch (it arrived with batch 0).
    """

    input: Rel
    later: bool = False
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._set_schema(self.input.schema + (Field(WEIGHT, BIGINT, False),))

    def inputs(self) -> tuple[Rel, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Once(inputs[0], self.later)


@dataclass(frozen=True, slots=True)
class Explode(Rel):
    """``LATERAL VIEW [OUTER] [pos]explode(expr)``: each input row once per element of the array
    ``expr``, with the element in column ``element`` and, if ``position`` names one, its index
    (from 0). ``outer`` keeps a row whose array is NULL or empty, once, with NULLs.

    It maps each row to rows of its own, so a delta explodes to the delta of the result:
    a deleted row takes back exactly the rows it gave.
    """

    input: Rel
    expr: Expr
    element: str
    position: str | None = None
    outer: bool = False
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.expr.type.name != "ARRAY":
            raise ValueError(f"Explode needs an ARRAY, not {self.expr.type}")
        _check_reads(self, (self.expr,), self.input.names)
        added = ((Field(self.position, INT),) if self.position is not None else ()) + (
            Field(self.element, self.expr.type.element),)
        self._set_schema(self.input.schema + added)

    def inputs(self) -> tuple[Rel, ...]:
        return (self.input,)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Explode(inputs[0], self.expr, self.element, self.position, self.outer)


@dataclass(frozen=True, slots=True)
class LoopRef(Rel):
    """Inside the step of an :class:`Iterate`, the previous value of the iteration ``name``."""

    name: str
    fields: tuple[Field, ...]
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._set_schema(self.fields)


@dataclass(frozen=True, slots=True)
class Iterate(Rel):
    """``X ← init; repeat times: X ← step(X)`` (``WITH ITERATIVE``): ``step`` reads the previous
    value through ``LoopRef(name)`` leaves; its value is ``step`` applied ``times`` times.

    ``init`` and ``step`` have the iteration's fields, by name and type. ``mode`` is how a batch
    updates it: ``exact`` (each step's result kept and updated by its delta) or ``diffusion``
    (seed 000 Algorithm 1: approximate), which needs ``key``: the fields (by name) that tell the
    iteration's rows apart from one step to the next (a node, a cluster's lineage).
    """

    name: str
    init: Rel
    step: Rel
    times: int
    mode: IterationMode = IterationMode.EXACT
    key: tuple[str, ...] = ()
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _coerce(self, "mode", IterationMode, "iteration mode")
        if self.times < 1:
            raise ValueError("an iteration needs at least one step")
        if (self.mode == IterationMode.DIFFUSION) != bool(self.key):
            raise ValueError("an iteration has a key exactly when it is in diffusion mode")
        if not set(self.key) <= {f.name for f in self.init.schema}:
            raise ValueError(f"Iterate {self.name}: key {self.key} is not among its fields")
        if [(f.name, f.type) for f in self.init.schema] != [(f.name, f.type) for f in self.step.schema]:
            raise ValueError(f"Iterate {self.name}: init and step fields differ: {self.init.schema} vs {self.step.schema}")
        self._set_schema(tuple(Field(f.name, f.type) for f in self.init.schema))

    def inputs(self) -> tuple[Rel, ...]:
        return (self.init, self.step)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Iterate(self.name, inputs[0], inputs[1], self.times, self.mode, self.key)


@dataclass(frozen=True, slots=True)
class Recursive(Rel):
    """``WITH RECURSIVE name AS (base UNION step)``: the least set ``R`` with ``R = base ∪
    step(R)`` — ``step`` reads ``R`` through one ``LoopRef(name)`` leaf, by joins, filters and
    projections only (linear and monotone), so the fixpoint exists and semi-naive evaluation
    reaches it. Set semantics: each row once."""

    name: str
    base: Rel
    step: Rel
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if [(f.name, f.type) for f in self.base.schema] != [(f.name, f.type) for f in self.step.schema]:
            raise ValueError(f"Recursive {self.name}: base and step fields differ")
        self._set_schema(tuple(Field(f.name, f.type) for f in self.base.schema))

    def inputs(self) -> tuple[Rel, ...]:
        return (self.base, self.step)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return Recursive(self.name, inputs[0], inputs[1])


@dataclass(frozen=True, slots=True)
class SetOp(Rel):
    """INTERSECT / EXCEPT of two inputs of the same width; the left input names the columns.

    A row appears ``f(l, r)`` times for ``l`` and ``r`` copies on each side: INTERSECT
    ``[l > 0 and r > 0]``, EXCEPT ``[l > 0 and r = 0]``, INTERSECT ALL ``min(l, r)``, EXCEPT ALL
    ``max(l − r, 0)``. Rows compare with NULL equal to NULL, as in every set operation.
    """

    kind: SetKind
    left: Rel
    right: Rel
    _schema: tuple[Field, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _coerce(self, "kind", SetKind, "set operation")
        if len(self.left.schema) != len(self.right.schema):
            raise ValueError("set operation inputs differ in width")
        self._set_schema(tuple(Field(f.name, f.type, f.nullable or g.nullable)
                               for f, g in zip(self.left.schema, self.right.schema)))

    def inputs(self) -> tuple[Rel, ...]:
        return (self.left, self.right)

    def with_inputs(self, inputs: tuple[Rel, ...]) -> Rel:
        return SetOp(self.kind, inputs[0], inputs[1])
