"""Everything of a run that follows from its plan, built together and swapped whole.

A :class:`Bundle` is the plan with what it needs at run time: its catalog and output schema, the
state store with every state declared, the answer's SQL, the batch reader, the loop
interpreters, the steps of h grouped in levels, and the recompute of the batch query. A
reconfiguration, a rebuild or a join switched to a hybrid builds a new bundle; if the batch it
is for fails, the engine puts the old one back — one assignment, nothing half swapped.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING

from ..errors import StreamfoldError, UnsupportedError
from ..ir.rel import DeltaScan, StateScan
from ..plan.model import LOOPS, Diffusion, IncrementalPlan, Step, Temp
from ..sql import Catalog
from ..sql.bind import check_output_names
from ..plan.compilation import compilation_of
from .answer import AnswerSql
from .batch import BatchReads
from .context import RunContext
from .failures import batch_failure
from .inputs import BatchReader, first_line
from .loops import INTERPRETERS, LoopEnv, LoopInterpreter, declared_rows, loop_change_columns
from .recompute import Recomputer
from .runs import candidates
from .sources import empty_frame, spark_struct
from .state import StateStore, materialize
from .views import Views

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


@dataclass
class Bundle:
    plan: IncrementalPlan
    catalog: Catalog
    output_schema: StructType
    store: StateStore
    answer: AnswerSql
    reader: BatchReader
    loops: dict[type, LoopInterpreter]
    levels: list[list[Step]]
    reread: bool  # some stream's batch rows are read more than once (then they are cached)
    recomputer: Recomputer | None  # the batch query from scratch, where the plan has one
    _temp_schemas: dict[str, StructType] = field(default_factory=dict)

    @property
    def temp_schemas(self) -> dict[str, StructType]:
        """Each temp result's schema, found where the states' are (:func:`build`)."""
        self.store.ensure_declared()
        return self._temp_schemas

    @cached_property
    def merged_read(self) -> frozenset[str]:
        """The states some program reads as their merge (:func:`read_merged`)."""
        return read_merged(self.plan)

    def reads(self, ctx: RunContext, frames: dict[str, DataFrame], rows: dict[str, int], first: bool,
              single: bool = False) -> BatchReads:
        """What a batch's programs read, over this plan's states and tables."""
        return BatchReads(self.catalog, lambda name: ctx.table(self.catalog, name), self.store.current, frames, rows,
                          first, single)

    def with_plan(self, plan: IncrementalPlan) -> Bundle:
        """The same states under other programs (a join matrix's plan for another mapping)."""
        assert plan.states == self.plan.states and plan.answer == self.plan.answer
        return replace(self, plan=plan, levels=levels(plan.delta), reread=read_more_than_once(plan.delta))

    def with_answer(self, ctx: RunContext, plan: IncrementalPlan) -> Bundle:
        """The same states and h under another answer (a reconfiguration of the answer only)."""
        schema = spark_output_schema(ctx.spark, plan, self.catalog)
        return replace(self, plan=plan, output_schema=schema, answer=AnswerSql(plan, schema, self.store),
                       recomputer=recomputer_for(ctx, plan, self.catalog, schema))


def build(ctx: RunContext, plan: IncrementalPlan, defer: bool = False) -> Bundle:
    """``plan`` made ready to run: its output schema, empty states, answer, reader, loops. With
    ``defer`` the states are declared when something first reads them (``StateStore.declare_later``):
    a run whose first batches recompute the answer may never need them."""
    catalog = Catalog(plan.sources)
    output_schema = spark_output_schema(ctx.spark, plan, catalog)
    store = StateStore(ctx.spark, plan.states, candidates(plan), ctx.config.settings)
    store.part = ctx.clock.part
    loops = {kind: interpreter(LoopEnv(ctx.spark, store, ctx.point)) for kind, interpreter in INTERPRETERS.items()}
    bundle = Bundle(plan, catalog, output_schema, store, AnswerSql(plan, output_schema, store),
                    BatchReader(ctx.spark, plan.streams, ctx.specs, catalog, plan.stream_columns()), loops,
                    levels(plan.delta), read_more_than_once(plan.delta),
                    recomputer_for(ctx, plan, catalog, output_schema))
    if defer:
        store.declare_later(lambda: _declare_states(ctx, bundle))
    else:
        _declare_states(ctx, bundle)
    return bundle


def recomputer_for(ctx: RunContext, plan: IncrementalPlan, catalog: Catalog,
                   output_schema: StructType) -> Recomputer | None:
    """The batch query as Spark runs it from scratch (the recompute strategy), where there is
    one: not for iterations (their loops are interpreted) nor time bounds (the batch query would
    read the wall clock, not the batch time). A join matrix's mapping is not needed by the batch
    query; after a recompute (whose commit records no mapping) the states are rebuilt under the
    mapping in effect, or, after a restart, the plan's own. Nor where Spark's batch plan answers
    otherwise than SQL (``Compilation.recomputable``: an IN subquery whose NULL a row shows)."""
    compilation = compilation_of(plan)
    if plan.clocked or any(isinstance(s, LOOPS) for s in plan.delta) or not compilation.recomputable:
        return None
    text = compilation.batch_sql  # (its divisions rewritten: named as the snapshot's columns)
    names = output_schema.fieldNames() if text != compilation.spark_sql else None
    return Recomputer(ctx.spark, plan, text, ctx.specs, catalog, names)


def _declare_states(ctx: RunContext, b: Bundle) -> None:
    """Fix every state's schema by analysing its program over empty inputs; load static ones."""
    spark = ctx.spark
    views = Views(spark, "setup")
    try:
        frames = {s.name: b.reader.empty_frame(s) for s in b.plan.streams}
        for step in b.plan.init:
            df = spark.sql(b.reads(ctx, frames, {}, True).sql(step.program, views))
            try:
                b.store.set_static(step.state, materialize(df))
            except Exception as e:  # noqa: BLE001 - the tables' rows fail the first batch, named
                # (a scalar subquery over them with two rows is Spark's error there too)
                raise batch_failure(0, step.state, f"computing {step.state} from the static tables", e,
                                    ctx.local, ctx.config.settings) from e
        reads = b.reads(ctx, frames, {}, True)

        def declare(step: Step) -> None:
            program = declared_rows(step) if isinstance(step, LOOPS) else step.program
            if isinstance(step, Diffusion):  # its body reads the loop's change as a stream
                reads.loops[step.loop] = empty_frame(spark, spark_struct(loop_change_columns(step)))
                for sub in step.steps:
                    declare(sub)
            if not isinstance(step, LOOPS):
                # a state read before its own step: a time bound's live rows, whose delta reads the
                # state before it (plan/rules_expiry.py), or a top-k's prefix, read by a temp result
                # before its merge (plan/rules_topk_reserve.py) — it starts with the plan's own
                # schema, then takes the analysed one
                for name in dict.fromkeys(n.state for n in program.walk() if isinstance(n, StateScan)):
                    if name in states and name not in declared:
                        fields = b.plan.state(name).fields
                        b.store.declare(name, spark_struct([(f.name, f.type) for f in fields]))
                        declared.add(name)
            df = spark.sql(reads.sql(program, views))
            if isinstance(step, Temp):
                reads.deltas[step.state] = df
                b._temp_schemas[step.state] = df.schema
            else:
                b.store.declare(step.state, df.schema)
                declared.add(step.state)
                reads.deltas[step.state] = b.store.empty(step.state)
                reads.merged[step.state] = b.store.merged_shape(step.state, views)

        states = {s.name for s in b.plan.states}
        declared: set[str] = {step.state for step in b.plan.init}
        for step in b.plan.delta:
            declare(step)
    finally:
        views.drop()


def levels(steps: tuple[Step, ...]) -> list[list[Step]]:
    """Steps grouped so that each reads only what earlier groups produce this batch."""
    level_of: dict[str, int] = {}
    grouped: list[list[Step]] = []
    for step in steps:
        needs = {n.state for r in step.reads() for n in r.walk()
                 if isinstance(n, StateScan) and n.version in ("new", "delta", "merged") and n.state in level_of}
        level = 1 + max((level_of[n] for n in needs), default=-1)
        level_of[step.state] = level
        while len(grouped) <= level:
            grouped.append([])
        grouped[level].append(step)
    return grouped


def read_more_than_once(steps: tuple[Step, ...]) -> bool:
    """Whether some source's batch rows are read by more than one scan (then they are cached)."""
    seen: set[str] = set()
    for step in steps:
        if isinstance(step, Diffusion):
            return True  # a diffusion loop reads the batch's rows in every round
        for n in step.program.walk():
            if isinstance(n, DeltaScan):
                if n.table.lower() in seen:
                    return True
                seen.add(n.table.lower())
    return False


def read_merged(plan: IncrementalPlan) -> frozenset[str]:
    """The states some program of ``plan`` reads as their merge (``StateScan(…, "merged")``): for a
    state kept as a base and a tail, only those need its merge added up over both runs each batch
    (``steps._settle_merge``); the answer's changes read the merges as they are."""
    programs = [p for step in plan.init + plan.delta for p in step.reads()]
    programs += [rel for _, rel in plan.late + plan.expiring]
    programs += [r for r in (plan.event_time, plan.answer.rows, plan.answer.per_key) if r is not None]
    return frozenset(n.state for p in programs for n in p.walk()
                     if isinstance(n, StateScan) and n.version == "merged")


def spark_output_schema(spark: SparkSession, plan: IncrementalPlan, catalog: Catalog) -> StructType:
    """The names and types Spark gives the batch query (the snapshot's columns), found by
    analysing it over empty views of its inputs in ``spark`` (those views are left in it)."""
    for s in catalog.values():
        empty_frame(spark, spark_struct(list(s.columns))).createOrReplaceTempView(s.name)
    try:
        schema = spark.sql(compilation_of(plan).spark_sql).schema
    except Exception as e:  # noqa: BLE001 - Spark's analysis error, shown to the user
        raise UnsupportedError(f"Spark cannot run this query: {first_line(e)}", code="SPARK_REJECTED",
                               sql=plan.sql, params={"error": first_line(e)},
                               hint="streamfold answers what the Spark batch query answers; fix it for Spark") from None
    check_output_names(schema.names, plan.sql)
    if len(schema.fields) != len(plan.answer.output):
        raise StreamfoldError(
            f"internal: Spark sees {len(schema.fields)} output columns, the plan {len(plan.answer.output)}",
            code="INTERNAL")
    return schema
