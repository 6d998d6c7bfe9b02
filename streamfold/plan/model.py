"""The incremental plan: states, the per-batch program h, the merge ⊗, and the answer a.

Seed 000 splits a query q into a homomorphism h and an answer function a, keeps
``state ← state ⊗ h(ΔS)`` and answers ``a(state)``. Here that is:

* ``states`` — each a bag keyed by its lineage ``key``; every value column names the monoid
  that merges it (``+``, ``min``, ``max``). ``_weight`` counts the rows behind a key (its
  multiplicity, as a delta's ``_weight`` is a change of it); a key whose ``_weight`` reaches
  zero leaves the state.
* ``delta`` — h, as ordered steps. Step k computes Δstate_k from the batch (``DeltaScan``) and
  from states: the old version of any state, and the delta and new version of any state
  stepped before it. The runtime merges Δstate_k into state_k (⊗) before the next step.
* ``answer`` — a, a program over the new states giving the snapshot rows, and how to derive the
  batch's changes.

``init`` steps fill states that come from static tables once, before batch 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any, Protocol

from ..ir.expr import Expr
from ..ir.rel import WEIGHT, DeltaScan, Field, LoopRef, Once, Rel, SortKey, Union
from ..ir.types import DataType
from ..sql.catalog import SourceSchema
from .matrix import DEFAULT_POLICY, MatrixPolicy

# The result of a state's merge (``StateScan(state, "merged")``) has, besides the state's
# columns, the old value of each non-key column (``OLD + column``; NULL for a key new in the
# batch) and ``TOUCHED``: 1 for the keys the batch had a delta row for.
OLD = "__old::"
TOUCHED = "__touched"


class Monoid(str, Enum):
    """How two partial values of a state column combine (⊗ per column)."""

    SUM = "+"
    MIN = "min"
    MAX = "max"

    @property
    def merge_sql(self) -> str:
        return {"+": "sum", "min": "min", "max": "max"}[self.value]


# A floating-point sum of a key no larger than this is zero when the key's other columns are: the
# residue of adding and removing the same values in another order (``State.leaves_when_zero``).
FLOAT_ZERO = 1e-9


class StateRole(StrEnum):
    """What a state holds (shown by ``explain``)."""

    JOIN_INPUT = "join input"  # a join side pre-aggregated on its lineage
    AGGREGATE = "aggregate"  # a GROUP BY's partial aggregates
    MULTISET = "multiset"  # the values behind a DISTINCT or a min/max that must survive deletions
    OUTPUT = "output"  # rows with their multiplicity (an answer, a loop's value)
    STATIC = "static"  # a static table's side of a join, computed once
    COUNTS = "counts"  # how many rows of a semi, anti or outer join's other side have each key
    LIVE = "live rows"  # the rows inside a time bound, each leaving when the batch time passes it


class ChangeMode(StrEnum):
    """How a batch's changes to the answer are found (see :class:`Answer`)."""

    DELTA = "delta"
    KEYED = "keyed"
    GLOBAL = "global"


@dataclass(frozen=True, slots=True)
class StateColumn:
    name: str
    type: DataType
    monoid: Monoid
    meaning: str = ""  # e.g. "sum of y.D over the rows of the key"


@dataclass(frozen=True, slots=True)
class State:
    """A keyed bag the plan keeps from batch to batch; ``role`` says what it holds."""

    name: str
    role: StateRole
    key: tuple[Field, ...]
    columns: tuple[StateColumn, ...]
    note: str = ""
    keep_empty: bool = False  # a global aggregate keeps its one row even at _weight = 0
    static: bool = False
    # Key columns the state is hash-partitioned on (default: the whole key). A join input is
    # partitioned on its join key, so a delta joins it, and merges into it, without moving it.
    partition: tuple[str, ...] | None = None
    # An *appended* state (a time bound's live rows, ``rules_expiry.py``): a bag of weighted rows,
    # not one row per key, read only through its delta. A merge appends the delta and drops the
    # rows this condition no longer holds for at the batch's time, which leave as the state's
    # delta, instead of merging per key (``runtime/lowering/states.py``: :func:`appended`).
    kept_while: Expr | None = None  # over the state's columns

    def __post_init__(self) -> None:
        object.__setattr__(self, "role", StateRole(self.role))
        names = [f.name for f in self.key] + [c.name for c in self.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"state {self.name} has duplicate column names: {names}")
        if WEIGHT not in names:
            raise ValueError(f"state {self.name} lacks its {WEIGHT} column")
        if self.partition is not None and not set(self.partition) <= set(self.key_names):
            raise ValueError(f"state {self.name} is partitioned on {self.partition}, not part of its key")
        if self.kept_while is not None and [c.name for c in self.columns] != [WEIGHT]:
            raise ValueError(f"appended state {self.name} has columns besides {WEIGHT}")

    @property
    def fields(self) -> tuple[Field, ...]:
        return self.key + tuple(Field(c.name, c.type) for c in self.columns)

    @property
    def appended(self) -> bool:
        return self.kept_while is not None

    @property
    def key_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.key)

    @property
    def partition_names(self) -> tuple[str, ...]:
        return self.key_names if self.partition is None else self.partition

    @property
    def leaves_when_zero(self) -> tuple[str, ...]:
        """The columns that are all zero when a key leaves the state (none: its keys never leave):
        its row count ``_weight`` and the sums it keeps beside it (a group's partial aggregates, a
        join input's partials, a set operation's copies on the left).

        A source's deletions may come before the insertions they delete (the files of one poll, a
        topic's partitions), so a key's count may pass through zero while the rest of its rows add
        up to something the insertions still to come cancel: the key is kept — an aggregate's
        answer shows a group only while its count is not zero. A floating-point sum counts as
        zero within :data:`FLOAT_ZERO`: rows deleted in another order than they were added leave
        a rounding residue, which would otherwise keep a gone key for ever."""
        if self.keep_empty:
            return ()
        return (WEIGHT,) + tuple(c.name for c in self.columns if c.monoid == Monoid.SUM and c.name != WEIGHT)

    def zero_within(self, name: str) -> float:
        """How far from 0 column ``name`` of :attr:`leaves_when_zero` counts as 0: :data:`FLOAT_ZERO`
        for a floating-point sum, else exactly 0."""
        column = next(c for c in self.columns if c.name == name)
        return FLOAT_ZERO if column.type.name in ("FLOAT", "DOUBLE") else 0.0


# A recursive CTE whose step still finds new rows after this many rounds of one batch is stopped
# (``NO_FIXPOINT``): its step generates values without end (``SELECT n + 1 FROM r``), or a path
# is longer than this.
FIXPOINT_MAX_ROUNDS = 1000
NESTED_STEPS = 10  # at most this many steps of an exact iteration nested in one Spark statement


@dataclass(frozen=True, slots=True)
class Compiled:
    """How a relation changes: ``program`` gives a batch's rows of it with ``_weight`` — or, for a
    static relation, all its rows (it never changes)."""

    program: Rel
    static: bool
    weighted: bool  # its changes may remove rows

    @property
    def delta(self) -> Rel:
        """The batch's rows of it: a static relation's rows arrive once, with the first batch."""
        return Once(self.program) if self.static else self.program


# -- the steps of h: a tagged union, one class per kind ---------------------------------------------
@dataclass(frozen=True, slots=True)
class Merge:
    """``Δstate = program``, merged into the state (⊗) before the steps that read its new version.

    In ``init`` the program gives a static state's whole contents, computed once.
    """

    state: str
    program: Rel

    def reads(self) -> tuple[Rel, ...]:
        """Every program the step evaluates (for ordering steps by what they read)."""
        return (self.program,)


@dataclass(frozen=True, slots=True)
class Temp:
    """An intermediate result several later steps read (as ``StateScan(state, "delta")``):
    computed once per batch and never merged. ``state`` names it (states and temps share names)."""

    state: str
    program: Rel

    def reads(self) -> tuple[Rel, ...]:
        return (self.program,)


@dataclass(frozen=True, slots=True)
class Fixpoint:
    """How the runtime finds a recursive CTE's change (``WITH RECURSIVE``): a loop, not one
    statement. ``base`` gives the starting rows and ``step`` the rows derived from the rows of
    ``LoopRef(loop)``, both over the inputs' states after the merge.

    ``incremental`` (every input insert-only): semi-naive from the old fixpoint — the new rows
    ``seeds`` derive (the base's new rows, and the step with one input's new rows over the old
    fixpoint), then the step over each round's new rows until none is new. Otherwise the
    fixpoint is computed again, semi-naively from ``base``, and the change is new − old.
    """

    state: str
    loop: str
    fields: tuple[Field, ...]
    base: Rel
    step: Rel
    seeds: tuple[Rel, ...]
    incremental: bool

    @property
    def program(self) -> Rel:
        """Every state the loop reads, as one relation (for ordering)."""
        return Union((self.base, self.step) + self.seeds)

    def reads(self) -> tuple[Rel, ...]:
        return (self.program,)


@dataclass(frozen=True, slots=True)
class ExactIteration:
    """How the runtime finds an iteration's change in mode ``EXACT`` (``WITH ITERATIVE … TIMES
    n``): a loop of ``times`` statements, not a plan of n copies of the step.

    The streams the iteration reads are kept as states by ordinary delta rules — the start
    query's rows, and each largest part of the step that does not read the loop (in PageRank:
    the nodes with N, the edges with their source's out-degree). A batch evaluates
    ``X₀ = start`` and ``Xᵢ = step(Xᵢ₋₁)`` over those states after the merge — a step that reads
    ``LoopRef(loop)`` (with ``fields``) once is nested up to ``NESTED_STEPS`` deep in one Spark statement,
    any other step is a statement of its own, each over the last statement's checkpoint — and
    the change is ``Xₙ`` minus the value kept from the batch before. A batch that changes none
    of the streams it reads (``streams``) changes nothing, and runs no step.
    """

    state: str
    loop: str
    fields: tuple[Field, ...]
    times: int
    start: Rel
    step: Rel
    streams: tuple[str, ...]  # the sources it reads: a batch with no rows for any skips the loop

    @property
    def nested(self) -> int:
        """How many steps one statement runs: NESTED_STEPS if the step reads the loop once (its
        text grows by one step per step), else 1 (nesting would double the text per step)."""
        reads = sum(isinstance(n, LoopRef) and n.name == self.loop for n in self.step.walk())
        return NESTED_STEPS if reads == 1 else 1

    @property
    def program(self) -> Rel:
        return Union((self.start, self.step))

    def reads(self) -> tuple[Rel, ...]:
        return (self.program,)


@dataclass(frozen=True, slots=True)
class Diffusion:
    """How the runtime updates an iteration in diffusion mode (``MODE DIFFUSION``; seed 000 §2,
    Algorithm 1, and §10's ``Incr`` with ``repeat``) — approximate by design.

    The step is compiled once, reading the iteration's previous value as a stream named
    ``loop`` (``DeltaScan(loop)``): ``steps`` keep its states T (over the iteration's current
    value and the sources) and ``output`` is its change. A batch runs::

        ΔX ← the starting query's rows for keys the iteration does not have yet   (g(ΔS))
        repeat times:  ΔY ← the step's change for ΔX and ΔS, against T as it was  (T ⊗̂ h(ΔX, ΔS))
                       ΔX ← ΔY's new rows, replacing the current rows of their keys (a(ΔT))
        T ← T ⊗ (ΔX, ΔS);  the iteration's value ← current ⊕ ΔX                   (after the loop)

    Every round is evaluated against the states as the batch found them; only the last is
    merged. Keys the changes never reach keep their value, which is where the answer departs
    from the exact one: it is ``times`` more steps warm-started from the previous answer.
    """

    state: str
    loop: str
    fields: tuple[Field, ...]
    key: tuple[str, ...]
    times: int
    start: Rel  # the starting query's change, over the states stepped before it
    output: Rel  # the step's change, over ``steps`` and DeltaScan(loop)
    steps: tuple[Step, ...]

    @property
    def key_names(self) -> tuple[str, ...]:
        """The KEY columns as the query names them (``ranks#1.node`` → ``node``)."""
        return tuple(k.split(".", 1)[-1] for k in self.key)

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns of ``DeltaScan(loop)``'s rows (besides ``_weight``)."""
        return tuple(f"c{i}" for i in range(len(self.fields)))

    @property
    def program(self) -> Rel:
        return self.start

    def reads(self) -> tuple[Rel, ...]:
        return (self.start, self.output) + tuple(r for s in self.steps for r in s.reads())


# A step of h (or of ``init``): which kind it is says how the runtime computes its delta.
Step = Merge | Temp | Fixpoint | ExactIteration | Diffusion
LOOPS = (Fixpoint, ExactIteration, Diffusion)  # the kinds whose delta a loop in the runtime finds


@dataclass(frozen=True, slots=True)
class Answer:
    """a: how to read the answer out of the states.

    ``rows`` gives the answer's rows (a bag) from ``StateScan(…, "new")`` leaves; the snapshot is
    ``rows`` sorted by ``order``, cut by ``offset``/``limit``, keeping the columns ``output``.

    ``changes`` says how a batch's changes are found:

    * ``delta`` — they are the delta of state ``change_states[0]`` itself (``_weight`` ≠ 0);
    * ``keyed`` — ``rows`` depends on each key of ``touched_key`` separately, so the changes are
      ``rows`` over the touched keys after the merge minus the same before it; the touched keys
      are the keys of the deltas of ``change_states``;
    * ``global`` — the whole answer before and after are compared (small answers: LIMIT, or a
      global aggregate's single row).
    """

    rows: Rel
    output: tuple[str, ...]
    output_names: tuple[str, ...]
    order: tuple[SortKey, ...] = ()
    limit: int | None = None
    offset: int = 0
    changes: ChangeMode = ChangeMode.KEYED
    change_states: tuple[str, ...] = ()
    touched_key: tuple[str, ...] = ()
    # ``rows`` as projections and filters over one state row each, when a is row-wise (every
    # key gives at most one answer row from its own state row): the changes of a batch then
    # compare a over a touched key's new and old rows, with no join and no shuffle.
    per_key: Rel | None = None
    # for ``delta``: the changes as projections and filters (carrying ``_weight``) over the
    # delta of ``change_states[0]``, whose rows ``rows`` reads the same way (None: that delta,
    # the answer's rows being the state's)
    change_rows: Rel | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "changes", ChangeMode(self.changes))
        if len(self.output) != len(self.output_names):
            raise ValueError("answer output and output names differ in length")


@dataclass(frozen=True, slots=True)
class DeltaJoin:
    """A join of three or more inputs whose delta terms' join order the runtime may re-plan
    (``runtime/features/join_order.py``): its inputs' states, the pairs of them an equality
    joins, and per stream input (its state) the order its delta term joins the others in.
    ``step``: the state whose delta program holds the terms (None: not one merge of its own —
    the terms' row counts are then not read, and the order stays the compile-time one)."""

    inputs: tuple[str, ...]
    edges: tuple[tuple[str, str], ...]
    terms: tuple[tuple[str, tuple[str, ...]], ...]
    step: str | None = None


@dataclass(frozen=True, slots=True)
class JoinMatrix:
    """A theta join laid out as a join matrix (:mod:`.matrix`): the states of its two inputs,
    kept in the cells of an (n, m) mapping, which the runtime may change between batches."""

    left: str  # the state of the rows split in n row groups (it names the matrix)
    right: str  # the state of the rows split in m column groups
    n: int
    m: int
    # a hybrid equi-join (§4.4.4): its key's column in the left and in the right state, and the
    # keys laid over the matrix (the others are hashed to one cell each)
    hybrid: tuple[str, str] | None = None
    heavy: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        if self.n < 1 or self.m < 1 or (self.n * self.m) & (self.n * self.m - 1):
            raise ValueError(f"join matrix {self.left}: ({self.n}, {self.m}) is not a mapping of 2^k cells")

    @property
    def cells(self) -> int:
        return self.n * self.m


@dataclass(frozen=True, slots=True)
class SkewWatch:
    """An equi-join of two streams hashed on its key under ``matrix_equi="auto"``: the runtime
    watches its key frequencies and, once a key holds more than a joiner's fair share of both
    inputs, re-plans it as a hybrid join matrix (:class:`JoinMatrix` with ``hybrid``)."""

    left: str  # the left input's state (the join matrix's name, once it is one)
    right: str
    keys: tuple[str, str]  # the key's column in the left and in the right state
    cells: int  # J: a joiner's fair share is (|R| + |S|) / J


class Origin(Protocol):
    """What a plan was compiled from (a :class:`~.compilation.Compilation`): it re-plans the query
    with other join matrix mappings without parsing or binding it again, and has the query's
    text for Spark."""

    @property
    def spark_sql(self) -> str: ...

    def replanned(self, mappings: dict[str, tuple[int, int]],
                  heavy: dict[str, tuple[Any, ...]] | None = None,
                  orders: dict[str, tuple[str, ...]] | None = None) -> IncrementalPlan: ...


@dataclass(frozen=True, slots=True)
class IncrementalPlan:
    sql: str
    sources: tuple[SourceSchema, ...]
    logical: Rel  # the normalized batch query
    states: tuple[State, ...]
    init: tuple[Step, ...]
    delta: tuple[Step, ...]
    answer: Answer
    notes: tuple[str, ...] = ()
    matrices: tuple[JoinMatrix, ...] = ()
    policy: MatrixPolicy = DEFAULT_POLICY  # what it was planned with: a re-plan keeps it
    watched: tuple[SkewWatch, ...] = ()  # hashed equi-joins that may become hybrids (policy "auto")
    # per time bound (its live rows' state): the batch's rows that arrive outside it, dropped (rules_expiry)
    late: tuple[tuple[str, Rel], ...] = ()
    # per time bound: its live rows the bound no longer passes at the batch time (those a batch would
    # remove); between batches the runtime asks whether the clock has passed one (features/batch_time.py)
    expiring: tuple[tuple[str, Rel], ...] = ()
    # an event-time bound: one row, `now`, the batch's largest event time, and `first`, its earliest
    event_time: Rel | None = None
    # the narrowest event-time bound's interval (µs): a batch whose earliest event time is later than
    # its time minus this drops no row as late (its late rows need no job)
    late_margin: int | None = None
    delta_joins: tuple[DeltaJoin, ...] = ()  # joins of 3+ inputs whose delta terms' order may be re-planned
    # the join order each delta term was planned with, other than the compile-time one (by its
    # start state; runtime/features/join_order.py): a re-plan keeps it
    orders: tuple[tuple[str, tuple[str, ...]], ...] = ()
    # the compilation it came from (None for a plan made by incrementalize() alone); not part of its value
    compilation: Origin | None = field(default=None, compare=False, repr=False)

    def state(self, name: str) -> State:
        for s in self.states:
            if s.name == name:
                return s
        raise KeyError(name)

    @property
    def streams(self) -> tuple[SourceSchema, ...]:
        return tuple(s for s in self.sources if not s.static)

    @property
    def tables(self) -> tuple[SourceSchema, ...]:
        return tuple(s for s in self.sources if s.static)

    @property
    def clocked(self) -> bool:
        """Whether a batch reads its batch time (a time bound keeps live rows, ``rules_expiry.py``)."""
        return any(s.role == StateRole.LIVE for s in self.states)

    @property
    def reads_rows_for_time(self) -> bool:
        """Whether a batch reads its rows for its time bounds beside its plan's job: the largest
        event time, the rows dropped as late (``runtime/features/batch_time.py``)."""
        return self.event_time is not None or bool(self.late)

    def stream_columns(self) -> dict[str, tuple[str, ...]]:
        """Per stream, the columns its batches' rows are read for (its ``DeltaScan``s'), in the
        source's order: what a batch needs of its files."""
        read: dict[str, set[str]] = {s.name.lower(): set() for s in self.streams}
        seen: set[int] = set()
        todo = [r for step in self.init + self.delta for r in step.reads()]
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, DeltaScan) and node.table.lower() in read:
                read[node.table.lower()].update(node.columns)
            todo.extend(node.inputs())
        return {s.name: tuple(c for c, _ in s.columns if c in read[s.name.lower()]) for s in self.streams}
