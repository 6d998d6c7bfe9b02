"""The join matrix for theta joins of two streams (seed 001 §2.1, thesis Ch. 4).

A join of R and S whose condition has no equality between them (a band ``abs(r.t - s.t) <= w``,
an inequality ``r.t < s.t``, ``r.x <> s.x``) is the matrix R × S, each cell of which is one
output pair or none. An (n, m) *mapping* splits R into n row groups and S into m column groups,
over J = n·m cells: a row of R in row group i is kept in the m cells (i, 0) … (i, m−1), a row of
S in column group j in the n cells (0, j) … (n−1, j), so every pair (r, s) meets in exactly one
cell, (i(r), j(s)) — complete, without duplicates, and content-insensitive: however the values
are skewed, a cell holds about |R|/n + |S|/m rows (the *input-load factor*, ILF).

Groups are a hash of a row's lineage (``pmod(xxhash64(side, lineage…), n)``), so a row, its
later deletion and a restart's replay all go to the same cells. The states of both inputs are
kept replicated that way, keyed by lineage and cell and partitioned on the cell; a batch's delta
terms ΔR ⋈ S and R' ⋈ ΔS replicate the batch's rows the same way and meet the states cell by
cell, so the states do not move.

Inside a cell Spark runs a hash join on the cell. For a *band* — the difference ``x − y`` of
an integral (or DATE) column of each side bounded below and above by constants — the join is
also an equi-join on a value bucket: with bucket width W = hi − lo (at least 1) and
``b(v) = floor(v / W)``, ``x − y ∈ [lo, hi]`` implies ``b(x) − b(y) ∈ [⌊lo/W⌋, ⌊hi/W⌋ + 1]``,
so the delta side is exploded into those few bucket offsets and joined on ``(cell, bucket)``;
the band itself is checked on the pairs that meet. Any other condition (``<``, ``<>``, a band
over floating-point values) is evaluated on every pair of a cell: a nested loop per cell, which
for an inequality is within a factor two of the pairs it outputs anyway.

:func:`best_mapping` and :func:`decide` are the thesis's choice of mapping (Theorem 4.2.3, the
grid layout) and its migration trigger (Algorithm 2 with ε).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from ..ir.expr import Call, Case, Cast, Column, Expr, Literal
from ..ir.types import BIGINT, BOOLEAN, DATE, STRING, array
from .body import Body

# J: the cells of a theta join's matrix. The mapping starts square, (√J, √J) — the thesis's
# STATICMID — since the planner knows no sizes before the first batch.
MATRIX_CELLS = 4
EPSILON = 1.0  # Algorithm 2's trigger: re-map when a relation grew by this fraction



@dataclass(frozen=True, slots=True)
class Mapping:
    """An (n, m) mapping: R in n row groups, S in m column groups, n·m cells."""

    n: int
    m: int

    def __post_init__(self) -> None:
        if self.n < 1 or self.m < 1:
            raise ValueError(f"a mapping needs n, m ≥ 1, not ({self.n}, {self.m})")

    @property
    def cells(self) -> int:
        return self.n * self.m

    def ilf(self, r: int, s: int) -> Fraction:
        """The input-load factor: the rows one cell holds, |R|/n + |S|/m."""
        return Fraction(r, self.n) + Fraction(s, self.m)

    def __str__(self) -> str:
        return f"({self.n}, {self.m})"


def mappings(cells: int) -> list[Mapping]:
    """The grid mappings of ``cells`` (a power of two): (1, J), (2, J/2), … (J, 1)."""
    if cells < 1 or cells & (cells - 1):
        raise ValueError(f"the cells of a join matrix must be a power of two, not {cells}")
    out, n = [], 1
    while n <= cells:
        out.append(Mapping(n, cells // n))
        n *= 2
    return out


def square(cells: int) -> Mapping:
    """The squarest mapping (STATICMID): (√J, √J), or (2√(J/2), √(J/2)) for odd powers."""
    return min(mappings(cells), key=lambda mp: (abs(mp.n - mp.m), -mp.n))


def best_mapping(r: int, s: int, cells: int) -> Mapping:
    """The mapping with the least ILF for sizes |R| = r, |S| = s (ties: the squarer one)."""
    return min(mappings(cells), key=lambda mp: (mp.ilf(r, s), abs(mp.n - mp.m), -mp.n))


def decide(current: Mapping, last: tuple[int, int], now: tuple[int, int],
           epsilon: float = EPSILON) -> Mapping | None:
    """Algorithm 2 with the ε trigger: once R or S has grown by ε of its size at the last
    decision (``last``), the mapping minimising the ILF at the sizes ``now``; None before that,
    or when the best mapping is the current one."""
    (r0, s0), (r, s) = last, now
    if not (r - r0 >= epsilon * r0 or s - s0 >= epsilon * s0):
        return None
    best = best_mapping(r, s, current.cells)
    return None if best == current else best


EQUI_PARTITIONINGS = ("hash", "matrix", "hybrid", "auto")


@dataclass(frozen=True, slots=True)
class MatrixPolicy:
    """What the planner lays over a join matrix, and how: ``cells`` J; ``equi``, how an equi-join of
    two streams is partitioned — ``hash`` on its key (the default; the thesis's SHJ, which a skewed
    key collapses onto one partition), ``matrix`` (every key's rows spread over a join matrix) or
    ``hybrid`` (§4.4.4: the heavy keys over the matrix, the others hashed over the same J cells;
    the runtime picks the heavy keys from their frequencies) or ``auto`` (hashed, until the
    runtime sees a key above a joiner's fair share: then that join becomes a hybrid, see
    :mod:`..runtime.matrices`); ``start``: the mapping matrices start with, instead of the square
    one (the thesis's STATICOPT, with a static mapping)."""

    cells: int = MATRIX_CELLS
    equi: str = "hash"
    start: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        mappings(self.cells)  # a power of two
        if self.equi not in EQUI_PARTITIONINGS:
            raise ValueError(f"equi-joins are partitioned by one of {', '.join(EQUI_PARTITIONINGS)}, not {self.equi!r}")
        if self.start is not None and self.start[0] * self.start[1] != self.cells:
            raise ValueError(f"a starting mapping {self.start} of {self.cells} cells needs n·m = {self.cells}")

    @property
    def first(self) -> Mapping:
        """The mapping a matrix starts with."""
        return Mapping(*self.start) if self.start is not None else square(self.cells)


DEFAULT_POLICY = MatrixPolicy()  # theta joins over 4 cells, equi-joins hashed


def heavy_keys(frequencies: dict[Any, tuple[int, int]], r: int, s: int, cells: int) -> tuple[Any, ...]:
    """The keys a hybrid join lays over its matrix (§4.4.4): those whose rows (``frequencies``:
    left and right rows per key) are more than one joiner's fair share of the input,
    (|R| + |S|) / J — hashed, such a key alone would overload its cell. Sorted, for a stable plan."""
    limit = (r + s) / cells
    return tuple(sorted((k for k, (a, b) in frequencies.items() if a + b > limit), key=repr))


# -- the condition ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Band:
    """``left − right ∈ [lo, hi]``, ``left`` over input 0 and ``right`` over input 1, both
    integral (a DATE counts its days since 1970-01-01)."""

    left: Expr
    right: Expr
    lo: int
    hi: int

    @property
    def width(self) -> int:
        """W: the bucket width."""
        return max(self.hi - self.lo, 1)

    @property
    def offsets(self) -> tuple[int, int]:
        """The range of ``b(left) − b(right)`` over the pairs in the band."""
        return self.lo // self.width, self.hi // self.width + 1

    def bucket(self, side: int) -> Expr:
        """``floor(v / W)`` of one side's value, exactly, in integers."""
        v = _as_integer(self.left if side == 0 else self.right)
        w = Literal(self.width, BIGINT)
        return Call("div", (Call("-", (v, Call("pmod", (v, w), BIGINT)), BIGINT), w), BIGINT)


@dataclass(frozen=True, slots=True)
class Matrix:
    """How a theta join of two streams is laid out: its mapping, and its band if it has one."""

    mapping: Mapping
    kind: str  # "equi", "hybrid", "band", "inequality", "not-equal" or "theta"
    band: Band | None = None
    keys: tuple[Expr, Expr] | None = None  # a hybrid's join key over input 0 and over input 1
    heavy: tuple[Any, ...] = ()  # a hybrid's keys laid over the matrix

    def _heavy(self, side: int) -> Expr:
        assert self.keys is not None
        key = self.keys[side]
        if not self.heavy:
            return Literal(False, BOOLEAN)
        return Call("IN", (key, *(Literal(v, key.type) for v in self.heavy)), BOOLEAN)

    def hashed_cell(self, side: int) -> Expr:
        """A hybrid's light key's one cell: a hash of the key, equal on both sides."""
        assert self.keys is not None
        key = self.keys[side]
        value = Cast(key, BIGINT) if key.type.is_integral else Cast(key, STRING)
        return Call("pmod", (Call("xxhash64", (value,), BIGINT), Literal(self.mapping.cells, BIGINT)), BIGINT)

    def group(self, side: int, lineage: tuple[Expr, ...]) -> Expr:
        """A row's row group (side 0) or column group (side 1), from its lineage."""
        groups = self.mapping.n if side == 0 else self.mapping.m
        salt = Literal("R" if side == 0 else "S", STRING)
        return Call("pmod", (Call("xxhash64", (salt, *lineage), BIGINT), Literal(groups, BIGINT)), BIGINT)

    def replicas(self, side: int) -> Expr:
        """The other coordinate of the cells a row is kept in: 0 … m−1 for R, 0 … n−1 for S."""
        count = self.mapping.m if side == 0 else self.mapping.n
        if self.kind == "hybrid":  # a light key's row is kept once
            last = Case(((self._heavy(side), Literal(count - 1, BIGINT)),), Literal(0, BIGINT), BIGINT)
            return Call("sequence", (Literal(0, BIGINT), last), array(BIGINT))
        return _sequence(0, count - 1)

    def cell(self, side: int, group: Expr, replica: Expr) -> Expr:
        """The cell ``i·m + j`` of a row's group and one of its replicas."""
        i, j = (group, replica) if side == 0 else (replica, group)
        cell = Call("+", (Call("*", (i, Literal(self.mapping.m, BIGINT)), BIGINT), j), BIGINT)
        if self.kind == "hybrid":
            return Case(((self._heavy(side), cell),), self.hashed_cell(side), BIGINT)
        return cell

    def offsets(self) -> Expr:
        assert self.band is not None
        lo, hi = self.band.offsets
        return _sequence(lo, hi)

    def describe(self) -> str:
        mp = self.mapping
        text = (f"{'equi-join' if self.kind in ('equi', 'hybrid') else 'theta join'} over a join matrix: mapping (n, m) = {mp}, {mp.cells} cells; a left row is "
                f"kept in the {mp.m} cells of its row group, a right row in the {mp.n} cells of its column "
                "group (groups hash the row's lineage), so each pair meets in one cell")
        if self.kind == "equi":
            text += ("; equi-join: inside a cell a hash join on (key, cell), so a key's rows are spread over "
                     "the cells of their groups however many they are")
        elif self.kind == "hybrid":
            heavy = ", ".join(_show(Literal(v, self.keys[0].type)) for v in self.heavy) if self.keys else ""
            text = (f"skewed equi-join, hybrid (§4.4.4): the heavy keys ({heavy or 'none yet'}) over a join matrix, "
                    f"mapping (n, m) = {mp}, {mp.cells} cells — a left row of a heavy key kept in the {mp.m} cells of "
                    f"its row group, a right row in the {mp.n} cells of its column group — and every other key's "
                    f"rows in the one cell its hash names; inside a cell a hash join on (key, cell)")
        elif self.band is not None:
            b = self.band
            lo, hi = b.offsets
            text += (f"; band {_show(b.left)} − {_show(b.right)} ∈ [{b.lo}, {b.hi}]: inside a cell an "
                     f"equi-join on the value bucket floor(v / {b.width}), the batch's rows tried at "
                     f"bucket offsets {lo}…{hi}")
        else:
            text += f"; {self.kind} condition: a nested loop over the pairs of each cell"
        return text


def auto_note(keys: tuple[Expr, Expr], cells: int) -> str:
    """What explain says of an equi-join hashed under ``matrix_equi="auto"``, and why."""
    return (f"equi-join {_show(keys[0])} = {_show(keys[1])} hashed on its key (matrix_equi=auto): no key is known "
            f"to hold more than a joiner's fair share of both inputs, (|R| + |S|) / {cells}, so the hash join is "
            "kept — it replicates nothing. Whenever R or S has grown by ε since the last check, the runtime "
            "counts the rows per key (one small job); a key above the share switches this join to the hybrid "
            "(§4.4.4: heavy keys over a join matrix, the others hashed) inside that batch's commit")


def _sequence(lo: int, hi: int) -> Expr:
    return Call("sequence", (Literal(lo, BIGINT), Literal(hi, BIGINT)), array(BIGINT))


def _show(e: Expr) -> str:
    from ..ir.printer import sql

    return sql(e)


def _as_integer(e: Expr) -> Expr:
    if e.type == DATE:
        return Cast(Call("unix_date", (e,), BIGINT), BIGINT)
    return e if e.type == BIGINT else Cast(e, BIGINT)


def hybrid_keys(body: Body) -> tuple[Expr, Expr] | None:
    """The join key over input 0 and over input 1 of a body a hybrid can lay out: two stream
    inputs joined by one equality (not null-safe), integral or string on both sides."""
    if len(body.inputs) != 2 or any(i.static or i.single for i in body.inputs) or len(body.edges) != 1:
        return None
    e = body.edges[0]
    if e.null_safe:
        return None
    keys = (e.left_expr, e.right_expr) if e.left == 0 else (e.right_expr, e.left_expr)
    if all(k.type.is_integral for k in keys) or all(k.type.is_string for k in keys):
        return keys
    return None


def plan_matrix(body: Body, mapping: Mapping | None = None, policy: MatrixPolicy = DEFAULT_POLICY,
                heavy: tuple[Any, ...] | None = None) -> Matrix | None:
    """The join matrix of a body that is a theta join of two streams, or None.

    It applies to two stream inputs with no equality between them and at least one predicate
    reading both — or, under ``policy.equi``, with an equality (then the cells split each key's
    rows) —, neither of at most one row (a scalar subquery's global aggregate: a filtered cross
    product with that row broadcast needs no cells); anything else keeps the plan of :mod:`.joins` (hashed on equi-keys, or a filtered
    cross product with a static side). ``mapping`` replaces the one the policy starts with.
    A hybrid equi-join (one key, integral or string on both sides; others go over the matrix
    whole) lays the ``heavy`` keys over the matrix and hashes the others. Under ``auto`` an
    equi-join is hashed (None) until the runtime switched it, which it says by giving its
    ``heavy`` keys (not None); one a hybrid cannot lay out stays hashed.
    """
    if len(body.inputs) != 2 or any(i.static or i.single for i in body.inputs):
        return None
    mapping = mapping or policy.first
    if body.edges:
        keys = hybrid_keys(body)
        if policy.equi == "auto":
            return Matrix(mapping, "hybrid", keys=keys, heavy=heavy) if keys is not None and heavy is not None else None
        if policy.equi == "hybrid" and keys is not None:
            return Matrix(mapping, "hybrid", keys=keys, heavy=heavy or ())
        return Matrix(mapping, "equi") if policy.equi != "hash" else None
    mixed = [p for p in body.residual if len(body.inputs_of(p)) == 2]
    if not mixed:
        return None
    band = _band(body, mixed)
    if band is not None:
        return Matrix(mapping, "band", band)
    ops = {p.op for p in mixed if isinstance(p, Call)}
    if ops and ops <= {"<", "<=", ">", ">="}:
        return Matrix(mapping, "inequality")
    if ops == {"<>"}:
        return Matrix(mapping, "not-equal")
    return Matrix(mapping, "theta")


# -- recognising a band ---------------------------------------------------------------------------------
Linear = tuple[dict[Expr, int], Fraction]  # Σ coefficient·variable + constant
_WIDTH = {"TINYINT": 1, "SMALLINT": 2, "INT": 4, "BIGINT": 8}


def _band(body: Body, preds: list[Expr]) -> Band | None:
    """The tightest band implied by the predicates, on the first pair of columns bounded both ways."""
    bounds: dict[tuple[Expr, Expr], list[Fraction | None]] = {}
    for p in preds:
        for (x, y), lo, hi in _bounds(body, p):
            cur = bounds.setdefault((x, y), [None, None])
            if lo is not None:
                cur[0] = lo if cur[0] is None else max(cur[0], lo)
            if hi is not None:
                cur[1] = hi if cur[1] is None else min(cur[1], hi)
    for (x, y), (lo, hi) in bounds.items():
        if lo is not None and hi is not None and lo <= hi:
            return Band(x, y, int(lo), int(hi))
    return None


def _bounds(body: Body, p: Expr) -> list[tuple[tuple[Expr, Expr], Fraction | None, Fraction | None]]:
    """Bounds ``lo ≤ x − y ≤ hi`` (x over input 0, y over input 1) a predicate states."""
    if not isinstance(p, Call) or p.op not in ("<", "<=", ">", ">=") or len(p.args) != 2:
        return []
    a, b = p.args
    op = p.op
    if op in (">", ">="):  # a > b  ⇔  b < a
        a, b, op = b, a, "<" if op == ">" else "<="
    strict = op == "<"
    # abs(d) <= c  ⇔  -c <= d <= c
    if isinstance(a, Call) and a.op == "abs" and len(a.args) == 1:
        d, c = _linear(a.args[0]), _linear(b)
        if d is None or c is None or c[0]:
            return []
        diff = _difference(body, d)
        if diff is None:
            return []
        pair, sign, k = diff  # sign·(x − y) + k
        limit = c[1] - 1 if strict else c[1]
        if limit != int(limit):
            return []
        # −limit ≤ sign·(x−y) + k ≤ limit
        lo, hi = -limit - k, limit - k
        if sign < 0:
            lo, hi = -hi, -lo
        return [(pair, lo, hi)]
    la, lb = _linear(a), _linear(b)
    if la is None or lb is None:
        return []
    terms = dict(la[0])
    for v, coef in lb[0].items():
        terms[v] = terms.get(v, 0) - coef
    diff = _difference(body, ({v: c for v, c in terms.items() if c}, la[1] - lb[1]))
    if diff is None:
        return []
    pair, sign, k = diff
    # sign·(x − y) + k < 0 (or ≤)
    limit = -k - 1 if strict else -k
    if sign > 0:
        return [(pair, None, Fraction(limit))]
    return [(pair, Fraction(-limit), None)]


def _difference(body: Body, lin: Linear) -> tuple[tuple[Expr, Expr], int, Fraction] | None:
    """``lin`` as ``sign·(x − y) + k``: x a column of input 0, y one of input 1, k an integer."""
    terms, k = lin
    if len(terms) != 2 or k != int(k):
        return None
    (v1, c1), (v2, c2) = terms.items()
    if c1 + c2 != 0 or abs(c1) != 1:
        return None
    s1, s2 = body.inputs_of(v1), body.inputs_of(v2)
    if s1 == frozenset({0}) and s2 == frozenset({1}):
        return (v1, v2), c1, k
    if s1 == frozenset({1}) and s2 == frozenset({0}):
        return (v2, v1), c2, k
    return None


def _linear(e: Expr) -> Linear | None:
    """``e`` as a sum of integral (or DATE) columns times integers, plus an integer; or None."""
    if isinstance(e, Literal):
        if e.value is None or isinstance(e.value, bool) or not (e.type.is_integral or e.type.is_decimal):
            return None
        value = Fraction(str(e.value))
        return ({}, value) if value == int(value) else None
    if isinstance(e, Column):
        return ({e: 1}, Fraction(0)) if (e.type.is_integral or e.type == DATE) else None
    if isinstance(e, Cast) and e.type.is_integral and (isinstance(e.expr, Literal) or (
            e.expr.type.is_integral and _WIDTH[e.expr.type.name] <= _WIDTH[e.type.name])):
        return _linear(e.expr)  # a widening cast keeps the value (a narrowing one may not)
    if isinstance(e, Call):
        args = [_linear(x) for x in e.args]
        if any(x is None for x in args):
            return None
        if e.op in ("+", "-", "date_add", "date_sub") and len(args) == 2:
            (ta, ka), (tb, kb) = args  # type: ignore[misc]
            sign = 1 if e.op in ("+", "date_add") else -1
            terms = dict(ta)
            for v, c in tb.items():
                terms[v] = terms.get(v, 0) + sign * c
            return {v: c for v, c in terms.items() if c}, ka + sign * kb
        if e.op == "datediff" and len(args) == 2:
            (ta, ka), (tb, kb) = args  # type: ignore[misc]
            terms = dict(ta)
            for v, c in tb.items():
                terms[v] = terms.get(v, 0) - c
            return {v: c for v, c in terms.items() if c}, ka - kb
        if e.op == "*" and len(args) == 2:
            (ta, ka), (tb, kb) = args  # type: ignore[misc]
            if ta and tb:
                return None
            terms, factor = (tb, ka) if not ta else (ta, kb)
            return {v: int(c * factor) for v, c in terms.items() if c * factor}, ka * kb
        if e.op == "to_date" and len(args) == 1 and e.args[0].type == DATE:
            return args[0]
        if e.op == "neg" and len(args) == 1:
            (ta, ka), = args  # type: ignore[misc]
            return {v: -c for v, c in ta.items()}, -ka
    return None
