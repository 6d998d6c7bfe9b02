"""Top-k per group over rows that may be deleted: each partition's first rows and a reserve.

``σ_{rank ≤ k} Window(R)`` (``row_number``, ``rank`` or ``dense_rank``; :mod:`.topk_shape`) over
an input that deletes. With inserts only, :mod:`.rules_topk` keeps k rows per partition, as a row
that falls out never comes back. A deletion brings one back, so the window's every row is kept —
but a batch need not read it. Besides that bag (``all``) and each partition's row count
(``n``), a third state ``top`` keeps a *prefix* of each partition: rows ordered before every row
it leaves out, ties included, at most ``L = 2k + 8`` ranks (Feldera's and RisingWave's top-k with
a reserve). As long as a partition's prefix holds k ranks, or all of the partition, its top k is
the prefix's — a batch reads the touched partitions' prefixes, not the partitions::

    inside   = the batch's rows (deletions too) ordered at or before a row of the prefix (peers
               included), or any of them where the prefix was the whole partition
    C        = prefix ⊎ inside, ranked, cut at rank L        (a prefix of the partition after it)
    refill   = the partitions whose C holds fewer than k ranks and not all of their n rows:
               their rows read from ``all``, ranked, cut at rank L
    top'     = C on the other partitions ⊎ refill
    Δ out    = σ_{rank ≤ k} Window(top'[touched]) − σ_{rank ≤ k} Window(top[touched])

A row of the batch outside the prefix is ordered after every row of it: an insertion there
leaves the top k alone, and a deletion there removes a row the prefix never held (a row tied
with one the prefix holds is in it: ties are kept whole). Deleting prefix rows eats the reserve;
only a partition left with fewer than k ranks is read whole, once, to refill its prefix to L
(``rank`` counts rows for ``row_number`` and ``rank``, ``dense_rank`` distinct values). A
partition is one hash partition of every state: the look-ups move no state, and prepared plans
read a large state's touched keys from an index of its base. What several parts read (the
prefixes before, the per-partition counts, C, the partitions to refill, the new prefixes) is a
temp result, computed once per batch; ``inside`` is a running max in the reverse order (a frame
to UNBOUNDED FOLLOWING Spark computes again for every row: quadratic in the partition).

A window without PARTITION BY is one partition, keyed by a constant. Left to the other rules:
inputs that only insert (:mod:`.rules_topk`), a window partitioned by an expression, and
partition columns that :func:`.window_keys.keyed` cannot make NULL-free.
"""

from __future__ import annotations

from ..ir.expr import Agg, Call, Cast, Column, Expr, Literal
from ..ir.printer import display_name
from ..ir.rel import (
    WEIGHT, Aggregate, Expand, Field, Filter, Join, JoinKind, Project, Rel, SortKey, StateScan, StateVersion, Union,
)
from ..ir.types import BIGINT, BOOLEAN, INT
from ..ir.window import Frame, FrameKind, Window, WindowCall
from .context import PlanContext
from .model import Compiled, Monoid, State, StateColumn, StateRole
from .rules_windows import keyed, look_up, once, over_keyed, refuse_ties, signed, touched_keys
from .terms import MINUS_ONE, ONE, ZERO, sum_weights
from .topk_shape import reserve_shape
from .window_keys import key_matches

# the columns the rule adds (a row: from the prefix, a prefix row at or after it, its rank; a
# partition: its prefix's rows before, the batch's net rows, its row count, the ranks and rows kept)
_FROM_TOP, _AFTER, _RANK = "_tk#top", "_tk#after", "_tk#rank"
_TOP, _DELTA, _COUNT, _RANKS, _ROWS = "_tk#old", "_tk#delta", "_tk#n", "_tk#ranks", "_tk#rows"
_ALL = "_tk#all"  # the key of a window without PARTITION BY: one partition (TRUE, not a number: GROUP BY 0 is a position)


def kept_ranks(k: int) -> int:
    """The ranks a partition's prefix keeps at most: k and a reserve."""
    return 2 * k + 8


def top_k_reserve(ctx: PlanContext, rel: Rel) -> Compiled | None:
    """The change of ``σ_{rank ≤ k} Window(R)`` from each partition's prefix (module docstring), or
    None where :func:`reserve_shape` does not hold."""
    shape = reserve_shape(rel)
    if shape is None:
        return None
    assert isinstance(rel, Filter)
    window, k, part = shape
    name, call = window.calls[0]
    refuse_ties(window)
    base, key, _ = keyed(window.input, part)
    if not key:  # one partition: a constant key (so the states' look-ups are as for several)
        base = Project(base, tuple((f.name, f.ref()) for f in base.schema) + ((_ALL, Literal(True, BOOLEAN)),))
        key = (_ALL,)
    everything, fields = ctx.bag_state(base, "win", partition=key)
    by_name = {f.name: f for f in fields}
    key_fields = tuple(by_name[c] for c in key)
    keys = tuple((c, by_name[c].ref()) for c in key)
    cols = tuple((f.name, f.ref()) for f in fields if f.name != WEIGHT)
    w = Column(WEIGHT, BIGINT)
    delta = StateScan(everything, StateVersion.DELTA, fields)
    touched = touched_keys(delta, key)

    count = ctx.plan.name("topk_n")
    ctx.plan.add_state(
        State(count, StateRole.AGGREGATE, key_fields,
              (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "rows in the partition"),),
              note="each partition's row count", partition=key),
        Aggregate(delta, keys, ((WEIGHT, sum_weights()),)))
    top = ctx.plan.name("topk")
    # (what several parts read is computed once per batch, as a temp result)
    old = once(ctx, "topk_old", look_up(top, fields, key, (), StateVersion.OLD, touched))

    def ranked(fn: str, rows: Rel) -> Rel:
        """``rows`` (with their multiplicity) ranked by ``fn`` in the window's order, cut at L."""
        rank = WindowCall(fn, (), tuple(by_name[c].ref() for c in key), call.order, None, INT)
        return Filter(Window(Expand(rows, WEIGHT), ((_RANK, rank),)),
                      Call("<=", (Column(_RANK, INT), Literal(kept_ranks(k), INT)), BOOLEAN))

    def per_partition(parts: tuple[tuple[Rel, tuple[Expr, Expr, Expr]], ...], what: tuple[str, str, str],
                      agg: tuple[str, str, str]) -> Rel:
        """One row per partition of three figures added up (or their max) over ``parts``."""
        union = Union(tuple(Project(r, keys + tuple(zip(what, es))) for r, es in parts))
        return Aggregate(union, keys, tuple((n, _agg(a, n)) for n, a in zip(what, agg)))

    counted = look_up(count, key_fields + (Field(WEIGHT, BIGINT),), key, (), StateVersion.NEW, touched)
    # per touched partition: its prefix's rows before the batch, the batch's net rows, its row count after
    before = once(ctx, "topk_parts", per_partition(
        ((old, (w, ZERO, ZERO)), (delta, (ZERO, w, ZERO)), (counted, (ZERO, ZERO, w))),
        (_TOP, _DELTA, _COUNT), ("sum", "sum", "sum")))
    whole_before = Call("<=", (Call("-", (Column(_COUNT, BIGINT), Column(_DELTA, BIGINT)), BIGINT),
                               Column(_TOP, BIGINT)), BOOLEAN)
    # the batch's rows with a prefix row at or after them (peers included), and the prefix's rows
    flagged = Union((Project(old, cols + ((WEIGHT, w), (_FROM_TOP, Literal(1, INT)))),
                     Project(delta, cols + ((WEIGHT, w), (_FROM_TOP, Literal(0, INT))))))
    # (a running max in the reverse order: Spark computes a frame up to UNBOUNDED FOLLOWING again
    # for every row, quadratic in the partition)
    reverse = tuple(SortKey(o.expr, not o.descending, not o.effective_nulls_first) for o in call.order)
    after_flag = WindowCall("max", (Column(_FROM_TOP, INT),), tuple(by_name[c].ref() for c in key), reverse,
                            Frame(FrameKind.RANGE, None, 0), INT)
    seen = Join(Window(flagged, ((_AFTER, after_flag),)), _renamed(before, key, "s"), JoinKind.INNER, _key_on(key_fields, "s"))
    inside = Filter(seen, Call("OR", (Call("=", (Column(_AFTER, INT), Literal(1, INT)), BOOLEAN), whole_before),
                               BOOLEAN))
    merged = Aggregate(inside, cols, ((WEIGHT, sum_weights()),))
    fn = "dense_rank" if call.fn == "dense_rank" else "rank"
    cut = once(ctx, "topk_cut", ranked(fn, Filter(merged, Call(">", (w, ZERO), BOOLEAN))))
    # per touched partition: the ranks and rows C keeps, and the rows the partition has
    kept = per_partition(((cut, (Cast(Column(_RANK, INT), BIGINT), ONE, ZERO)), (before, (ZERO, ZERO, Column(_COUNT, BIGINT)))),
                         (_RANKS, _ROWS, _COUNT), ("max", "sum", "sum"))
    measure = Column(_RANKS, BIGINT) if fn == "dense_rank" else Column(_ROWS, BIGINT)
    short = Filter(kept, Call("AND", (Call("<", (measure, Literal(k, BIGINT)), BOOLEAN),
                                      Call(">", (Column(_COUNT, BIGINT), Column(_ROWS, BIGINT)), BOOLEAN)), BOOLEAN))
    refill_keys = once(ctx, "topk_refill", Project(short, tuple((f"{c}#t", Column(c, by_name[c].type)) for c in key)))
    refilled = ranked(fn, look_up(everything, fields, key, (), StateVersion.NEW, refill_keys))
    others = Join(cut, refill_keys, JoinKind.ANTI, _key_on(key_fields, "t"))
    new = once(ctx, "topk_new", Aggregate(Project(Union((others, refilled)), cols + ((WEIGHT, ONE),)), cols,
                                           ((WEIGHT, sum_weights()),)))
    gone = Project(old, cols + ((WEIGHT, Call("*", (w, MINUS_ONE), BIGINT)),))
    ctx.plan.add_state(
        State(top, StateRole.OUTPUT, tuple(f for f in fields if f.name != WEIGHT),
              (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "multiplicity of the row"),),
              note=f"each partition's first rows, ranked ≤ {kept_ranks(k)} (k = {k} and a reserve), ties kept whole",
              partition=key),
        Aggregate(Union((new, gone)), cols, ((WEIGHT, sum_weights()),)))

    out = tuple((f.name, f.ref()) for f in rel.schema)
    after_rows = Filter(Project(over_keyed(window, Expand(new, WEIGHT), base.names), out), rel.condition)
    before_rows = Filter(Project(over_keyed(window, Expand(old, WEIGHT), base.names), out), rel.condition)
    shown = ", ".join(display_name(p) for p in part) or "one partition"
    ctx.plan.note(f"OVER: top-{k} per partition ({shown}) of rows that may be deleted: {everything} keeps the "
                  f"window's rows, {count} each partition's count, {top} each partition's first rows ranked "
                  f"≤ {kept_ranks(k)}; each batch ranks the touched partitions' first rows with its changes, and "
                  f"reads a partition from {everything} only when deletions leave it fewer than {k} ({name})")
    return Compiled(signed(after_rows, before_rows), static=False, weighted=True)


def _agg(fn: str, column: str) -> Agg:
    return Agg(fn, (Column(column, BIGINT),), False, BIGINT)


def _renamed(rel: Rel, key: tuple[str, ...], tag: str) -> Rel:
    """``rel`` with its key columns renamed ``<k>#<tag>``."""
    return Project(rel, tuple((f"{f.name}#{tag}" if f.name in key else f.name, f.ref()) for f in rel.schema))


def _key_on(key: tuple[Field, ...], tag: str) -> Expr:
    """The key equal to its copy renamed ``<k>#<tag>`` (never NULL, never empty here)."""
    cond = key_matches(key, tag)
    assert cond is not None
    return cond
