"""Time bounds: a filter that reads the batch time (``WHERE ts > current_timestamp() - INTERVAL 1
HOUR``, ``sql/bind/expiry.py``) changes without any new row, as the clock moves.

Its rows are kept as a state, the *live rows*: the rows of its input that passed the bound at the
last batch. Since the bound only rises with the batch time, a batch changes the filter's output by

    Δ = σ_now(Δinput)  −  σ_¬now(live)

the batch's rows inside the bound now (deletions included: a row deleted while live leaves with
its deletion; one deleted after it expired is outside the bound and ignored, as it already left),
minus the live rows the clock has just passed, which leave as deletions. Merged into the live
rows, Δ removes exactly those, so the state holds only rows inside the bound: it stays as large as
the bound, not the history.

The live rows are an *appended* state (``State.kept_while``): read only through Δ, they need
not be one row per distinct row. So h computes only ``σ_now(Δinput)``, and the state's merge
(``runtime/lowering/states.py``, ``appended``) does the rest in one pass over the live rows: it
appends those, and the rows the bound no longer passes leave — the state's delta (new − old)
has them as deletions, the ``− σ_¬now(live)`` above. No grouping of the live rows with the batch's
(a hash aggregate over every live row, each batch), no shuffle: a copy. A row and its deletion
may both sit in the state until they expire together, and leave as a +1 and a −1 that the
operators above add up. Everything above sees an ordinary weighted change — a GROUP BY drops
a group when its last row expires, a join input drops the expired rows from its state.

A row that arrives already outside the bound (its event time older than the batch time minus
the interval: late) never enters; the plan keeps the program giving a batch's late rows
(``IncrementalPlan.late``) so the runtime counts them in the commit.

The other conjuncts of the filter do not read the clock: they run before, as a plain filter (and
have been pushed to their inputs by ``push_filters`` already).
"""

from __future__ import annotations

from ..errors import UnsupportedError
from ..ir.expr import Agg, Call, Column, Expr, Literal, and_all, clock_kind, conjuncts, reads_clock
from ..ir.rel import WEIGHT, Aggregate, DeltaScan, Field, Filter, Project, Rel, StateScan, StateVersion
from ..ir.types import BIGINT, BOOLEAN, TIMESTAMP
from .context import PlanContext
from .model import Compiled, Monoid, State, StateColumn, StateRole
from .rules_joins import body
from .terms import weight


def time_filter(ctx: PlanContext, rel: Rel) -> Compiled:
    """A filter: the body rule, or — when it reads the batch time — the live rows (module docstring)."""
    assert isinstance(rel, Filter)
    parts = conjuncts(rel.condition)
    bounds = [c for c in parts if reads_clock(c)]
    if not bounds:
        return body(ctx, rel)
    rest = and_all([c for c in parts if not reads_clock(c)])
    child = ctx.compile(Filter(rel.input, rest) if rest is not None else rel.input)
    if child.static:
        raise UnsupportedError("a time bound on a static table is not supported", code="UNSUPPORTED_TIME_BOUND",
                               params={"construct": "time bound"},
                               hint="bound the stream's event time; a static table's rows do not arrive over time")
    bound = and_all(bounds)
    assert bound is not None
    _clock(ctx, bounds, child.program)
    key = tuple(Field(f.name, f.type) for f in rel.schema)
    name = ctx.plan.name("live")
    fields = key + (Field(WEIGHT, BIGINT),)
    cols = tuple((f.name, f.ref()) for f in key)
    fresh = Project(Filter(child.program, bound), cols + ((WEIGHT, weight()),))
    passed = Filter(StateScan(name, StateVersion.OLD, fields), Call("NOT", (bound,), BOOLEAN))
    ctx.plan.add_state(
        State(name, StateRole.LIVE, key, (StateColumn(WEIGHT, BIGINT, Monoid.SUM, "multiplicity of the row"),),
              note="the rows inside the time bound at the last batch, appended batch by batch; its merge "
                   "removes the rows the batch time passes, which leave as deletions", kept_while=bound),
        fresh)
    arrived = Call(">", (weight(), Literal(0, BIGINT)), BOOLEAN)
    ctx.plan.late.append((name, Filter(child.program, Call("AND", (Call("NOT", (bound,), BOOLEAN), arrived), BOOLEAN))))
    ctx.plan.expiring.append((name, passed))
    ctx.plan.note("a time bound (current_timestamp()) reads the batch's recorded time: rows it passes leave the "
                  "answer as deletions and leave the live rows' state")
    delta = StateScan(name, StateVersion.DELTA, fields)
    return Compiled(Project(delta, tuple((f.name, Column(f.name, f.type)) for f in fields)), static=False,
                    weighted=True)


def _clock(ctx: PlanContext, bounds: list[Expr], rows: Rel) -> None:
    """Note which clock the bounds read; an event-time bound gives the plan its clock's program
    (the largest event time among a batch's inserted rows). The event-time bounds of a query read
    one stream's column, and none is beside a processing-time one: a batch has one time."""
    kinds = {clock_kind(b) for b in bounds}
    ctx.plan.clocks |= {k for k in kinds if k is not None}
    program = _event_time(bounds, rows) if "event" in kinds else None
    if len(ctx.plan.clocks) > 1 or ("event" in kinds and (ctx.plan.event_time not in (None, program) or len(bounds) > 1)):
        raise UnsupportedError("a query reads one clock: max_event_time() bounds of one stream's column (over its "
                               "scan), or current_timestamp() bounds",
                               code="UNSUPPORTED_TIME_BOUND", params={"construct": "time bound"},
                               hint="a batch evaluates at one time; bound the other inputs by the same column")
    if "event" in kinds:
        if any(isinstance(n, StateScan) for n in rows.walk()):
            raise UnsupportedError("max_event_time() bounds a stream's own rows only", code="UNSUPPORTED_TIME_BOUND",
                                   params={"construct": "time bound"},
                                   hint="put the bound in the WHERE of the block that reads the stream")
        ctx.plan.note("the batch time is the largest event time its stream has brought (max_event_time())")
        ctx.plan.event_time = program
        widths = [_width(b) for b in bounds]
        ctx.plan.late_margin = min(widths + ([ctx.plan.late_margin] if ctx.plan.late_margin is not None else []))


def _width(bound: Expr) -> int:
    """A time bound's interval in microseconds (``ts > clock - width``, ``sql/bind/expiry.py``)."""
    assert isinstance(bound, Call) and isinstance(bound.args[2], Literal)
    return int(bound.args[2].value)  # type: ignore[call-overload]


def _event_time(bounds: list[Expr], rows: Rel) -> Rel:
    """The event-time clock's program: the largest event time among a batch's inserted ``rows``
    (``now``), and the earliest (``first``: a batch whose earliest is inside every bound at its
    time drops no row as late, and the runtime counts none, ``IncrementalPlan.late_margin``).
    A bound straight over a stream's scan reads the clock of the stream's column, whatever the
    scan's alias and other columns: two such bounds of one column (Linear Road's last minute and
    last 15 seconds of the same reports) read one clock and are one program."""
    first = bounds[0]
    assert isinstance(first, Call)  # a time bound (sql/bind/expiry.py): (ts, clock)
    rows, ts = _stream_rows(rows, first.args[0])
    names = [f.name for f in rows.fields] if isinstance(rows, DeltaScan) else []
    if isinstance(rows, DeltaScan) and isinstance(ts, Column) and ts.name in names:
        column = rows.columns[names.index(ts.name)]
        ts = Column(f"{rows.table}.{column}", ts.type)
        rows = DeltaScan(rows.table, rows.table, (Field(ts.name, ts.type),), (column,), rows.weighted)
    arrived = Filter(rows, Call(">", (Column(WEIGHT, BIGINT), Literal(0, BIGINT)), BOOLEAN))
    return Aggregate(arrived, (), (("now", Agg("max", (ts,), False, TIMESTAMP)),
                                   ("first", Agg("min", (ts,), False, TIMESTAMP))))


def _stream_rows(rows: Rel, ts: Expr) -> tuple[Rel, Expr]:
    """The stream's rows under the filters beside the bound (``WHERE ts > max_event_time() - … AND
    k = 20``), and ``ts`` as they name it: the clock is the largest event time the stream has
    brought, not the largest among the rows another conjunct keeps. Projections that pass ``ts``
    on as a column are looked through, so a bound over the stream's own column reaches its scan."""
    if isinstance(rows, Filter):
        return _stream_rows(rows.input, ts)
    if isinstance(rows, Project):
        below = dict(rows.exprs).get(ts.name) if isinstance(ts, Column) else None
        if isinstance(below, Column):
            return _stream_rows(rows.input, below)
        return Project(_unfiltered(rows.input), rows.exprs), ts
    return rows, ts


def _unfiltered(rows: Rel) -> Rel:
    if isinstance(rows, Filter):
        return _unfiltered(rows.input)
    if isinstance(rows, Project):
        return Project(_unfiltered(rows.input), rows.exprs)
    return rows


def check_answer(rows: Rel) -> None:
    """Refuse a time bound left in the answer a (a bound over the last GROUP BY's groups, or in
    HAVING): a reads the states after the merge, and a batch's changes are a over the keys it
    touched, so a group the clock passed without a new row would leave the snapshot but not the
    changes. Bounds belong on the rows before the GROUP BY."""
    for node in rows.walk():
        exprs = [getattr(node, "condition", None)] + [e for _, e in getattr(node, "exprs", ()) or ()]
        if any(e is not None and reads_clock(e) for e in exprs):
            raise UnsupportedError(
                "a time bound over the groups of the last GROUP BY (or in HAVING) is not supported",
                code="UNSUPPORTED_TIME_BOUND", params={"construct": "time bound"},
                hint="bound the rows' event time in the WHERE of the block that groups them")
