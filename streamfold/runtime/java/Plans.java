package streamfold.jvm;

import org.apache.spark.Partition;
import org.apache.spark.SparkEnv;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.execution.RDDScanExec;
import org.apache.spark.sql.execution.SparkPlan;

/** Driver-side helpers of prepared plans, one py4j call each (streamfold/runtime/prepared.py). */
public final class Plans {
    private Plans() {}

    /** A frame of ``rdd``'s rows with ``template``'s columns, partitioning and size estimate
     *  (``rdd`` has the template's rows' shape: a slot or a kept merge standing in for them), the
     *  estimate at most ``cap`` bytes (runtime/state.py, SIZE_CAP: a merge's plan estimates a join
     *  as the product of its sides, and a frame past Long.MAX_VALUE is shuffled out of its one
     *  partition by every join that reads it). */
    public static org.apache.spark.sql.classic.Dataset frame(RDD rdd, org.apache.spark.sql.classic.Dataset template,
                                                             long cap) {
        org.apache.spark.sql.execution.LogicalRDD plan = fromDataset(rdd, template);
        org.apache.spark.sql.catalyst.plans.physical.Partitioning hashed = outputs(plan);
        org.apache.spark.sql.catalyst.plans.logical.Statistics stats = capped(plan.stats(), scala.math.BigInt$.MODULE$.apply(cap));
        boolean capped = stats != null;
        if (!capped) stats = plan.stats();
        if (hashed != null || capped)
            plan = org.apache.spark.sql.execution.LogicalRDD$.MODULE$.apply(plan.output(), rdd,
                hashed != null ? hashed : plan.outputPartitioning(), plan.outputOrdering(), plan.isStreaming(),
                plan.stream(), template.sparkSession(), new scala.Some(stats), scala.Option.empty(),
                plan.isCheckpointedInput());
        return org.apache.spark.sql.classic.Dataset.ofRows(template.sparkSession(), plan);
    }

    /** ``df``'s executed plan, prepared for execution (where Spark places its shuffles) with the
     *  size estimate of each logical node its physical plan links to at most ``cap`` bytes. A
     *  join's estimate is the product of its sides', so a chain of joins over capped inputs
     *  passes Long.MAX_VALUE, and a join of one-partition inputs then shuffles both into
     *  spark.sql.shuffle.partitions rather than join them where they lie (Spark's
     *  EnsureRequirements keeps them only under spark.sql.maxSinglePartitionBytes). The join
     *  strategies were chosen with the plain estimates: only the shuffles' placement sees the
     *  caps. Call it before anything else plans ``df`` for execution. */
    public static SparkPlan executed(org.apache.spark.sql.classic.Dataset df, long cap) {
        org.apache.spark.sql.execution.QueryExecution qe = df.queryExecution();
        capLinks(qe.sparkPlan(), scala.math.BigInt$.MODULE$.apply(cap));
        return qe.executedPlan();
    }

    private static void capLinks(SparkPlan plan, scala.math.BigInt cap) {
        scala.Option link = plan.logicalLink();
        if (link.isDefined()) {
            org.apache.spark.sql.catalyst.plans.logical.LogicalPlan logical =
                (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) link.get();
            org.apache.spark.sql.catalyst.plans.logical.Statistics stats = capped(logical.stats(), cap);
            if (stats != null) logical.statsCache_$eq(new scala.Some(stats));
        }
        scala.collection.Iterator kids = plan.children().iterator();
        while (kids.hasNext()) capLinks((SparkPlan) kids.next(), cap);
    }

    /** An estimate of ``cap`` bytes (no row count, no column statistics) if ``stats`` is above it, else null. */
    private static org.apache.spark.sql.catalyst.plans.logical.Statistics capped(
            org.apache.spark.sql.catalyst.plans.logical.Statistics stats, scala.math.BigInt cap) {
        if (!stats.sizeInBytes().$greater(cap)) return null;
        return new org.apache.spark.sql.catalyst.plans.logical.Statistics(cap, scala.Option.empty(),
            org.apache.spark.sql.catalyst.expressions.AttributeMap$.MODULE$.empty(), stats.isRuntime());
    }

    /** ``LogicalRDD.fromDataset``, which takes the template's constraints along. Spark's constraint
     *  propagation fails on some plans (a union whose branches read one frame twice, as identical
     *  grouping sets do: an attribute of one branch not found among the other's); the constraints
     *  are only a hint to the optimizer, so such a template's frame is built without them. */
    private static org.apache.spark.sql.execution.LogicalRDD fromDataset(
            RDD rdd, org.apache.spark.sql.classic.Dataset template) {
        try {
            return org.apache.spark.sql.execution.LogicalRDD$.MODULE$.fromDataset(rdd, template, false, false);
        } catch (java.util.NoSuchElementException e) {
            org.apache.spark.sql.internal.SQLConf conf = org.apache.spark.sql.internal.SQLConf$.MODULE$.get();
            String key = "spark.sql.constraintPropagation.enabled";
            String was = conf.getConfString(key, "true");
            conf.setConfString(key, "false");
            try {
                return org.apache.spark.sql.execution.LogicalRDD$.MODULE$.fromDataset(rdd, template, false, false);
            } finally {
                conf.setConfString(key, was);
            }
        }
    }

    /** ``plan``'s hash partitioning over its own output attributes, or null if it has none or is
     *  already so. The partitioning ``fromDataset`` takes from the template's physical plan may
     *  name a column as an attribute that differs from the output's in other ways than its id
     *  (its nullability, its qualifier): a second read of the frame in one statement (a new
     *  instance, attributes renamed) then does not rename it, reports no partitioning on its
     *  columns, and the state it reads is shuffled whole where it lies partitioned already. */
    private static org.apache.spark.sql.catalyst.plans.physical.Partitioning outputs(
            org.apache.spark.sql.execution.LogicalRDD plan) {
        if (!(plan.outputPartitioning() instanceof org.apache.spark.sql.catalyst.plans.physical.HashPartitioning))
            return null;
        org.apache.spark.sql.catalyst.plans.physical.HashPartitioning hash =
            (org.apache.spark.sql.catalyst.plans.physical.HashPartitioning) plan.outputPartitioning();
        scala.collection.Seq exprs = hash.expressions();
        scala.collection.Seq output = plan.output();
        java.util.ArrayList out = new java.util.ArrayList();
        boolean changed = false;
        for (int i = 0; i < exprs.size(); i++) {
            Object e = exprs.apply(i);
            Object mapped = e;
            if (e instanceof org.apache.spark.sql.catalyst.expressions.AttributeReference) {
                org.apache.spark.sql.catalyst.expressions.AttributeReference a =
                    (org.apache.spark.sql.catalyst.expressions.AttributeReference) e;
                for (int j = 0; j < output.size(); j++) {
                    org.apache.spark.sql.catalyst.expressions.Attribute o =
                        (org.apache.spark.sql.catalyst.expressions.Attribute) output.apply(j);
                    if (o.exprId().equals(a.exprId())) {
                        mapped = o;
                        break;
                    }
                }
            }
            changed |= !mapped.equals(e);
            out.add(mapped);
        }
        if (!changed) return null;
        return new org.apache.spark.sql.catalyst.plans.physical.HashPartitioning(
            scala.jdk.javaapi.CollectionConverters.asScala(out).toSeq(), hash.numPartitions());
    }

    /** ``plan``'s partitioning over its own output attributes (see ``outputs``): what a copy of a
     *  checkpoint's plan is given so that a second read of it in one statement keeps it. */
    public static org.apache.spark.sql.catalyst.plans.physical.Partitioning partitioning(
            org.apache.spark.sql.execution.LogicalRDD plan) {
        org.apache.spark.sql.catalyst.plans.physical.Partitioning hashed = outputs(plan);
        return hashed != null ? hashed : plan.outputPartitioning();
    }

    /** ``template`` (an analysed frame) reading ``to`` wherever it read ``from`` (a slot): the
     *  same columns and plan. It is marked analysed, so that the analyser passes it by as it does
     *  the template's plan: one leaf swapped for another with the same output leaves nothing to
     *  resolve, and analysing it again was most of what readying the next batch's states cost
     *  (two frames per state, every batch: runtime/prepared.py, current). */
    public static org.apache.spark.sql.classic.Dataset rebind(org.apache.spark.sql.classic.Dataset template, RDD from, RDD to,
                                                              long rows) {
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan =
            swap(template.queryExecution().analyzed(), from, to, rows, template.sparkSession());
        plan.setAnalyzed();
        return org.apache.spark.sql.classic.Dataset.ofRows(template.sparkSession(), plan);
    }

    /** The plan with its LogicalRDD over ``from`` reading ``to``, estimated at ``rows`` rows of its
     *  columns' width (a state planned with its true size: runtime/state.py, next_version). */
    private static org.apache.spark.sql.catalyst.plans.logical.LogicalPlan swap(
            org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan, RDD from, RDD to, long rows,
            org.apache.spark.sql.classic.SparkSession session) {
        if (plan instanceof org.apache.spark.sql.execution.LogicalRDD) {
            org.apache.spark.sql.execution.LogicalRDD l = (org.apache.spark.sql.execution.LogicalRDD) plan;
            if (l.rdd() != from) return plan;
            org.apache.spark.sql.catalyst.plans.logical.Statistics stats = l.stats();
            if (rows >= 0) {
                org.apache.spark.sql.catalyst.expressions.AttributeMap none =
                    org.apache.spark.sql.catalyst.expressions.AttributeMap$.MODULE$.empty();
                scala.math.BigInt width =
                    org.apache.spark.sql.catalyst.plans.logical.statsEstimation.EstimationUtils$.MODULE$.getSizePerRow(l.output(), none);
                stats = new org.apache.spark.sql.catalyst.plans.logical.Statistics(
                    width.$times(scala.math.BigInt$.MODULE$.apply(Math.max(rows, 1L))), scala.Option.empty(), none, false);
            }
            return org.apache.spark.sql.execution.LogicalRDD$.MODULE$.apply(l.output(), to, l.outputPartitioning(),
                l.outputOrdering(), l.isStreaming(), l.stream(), session, new scala.Some(stats),
                scala.Option.empty(), l.isCheckpointedInput());
        }
        scala.collection.Seq kids = plan.children();
        int n = kids.size();
        if (n == 0) return plan;
        java.util.ArrayList out = new java.util.ArrayList();
        boolean changed = false;
        for (int i = 0; i < n; i++) {
            Object k = kids.apply(i);
            Object k2 = swap((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) k, from, to, rows, session);
            changed |= k2 != k;
            out.add(k2);
        }
        if (!changed) return plan;
        return (org.apache.spark.sql.catalyst.plans.logical.LogicalPlan)
            plan.withNewChildren(scala.jdk.javaapi.CollectionConverters.asScala(out).toSeq());
    }

    /**
     * The partition that makes ``top`` — a stream's rows as one partition, planned once: a
     * coalesce of narrow steps over a file scan — read ``paths`` (whole files) instead of the
     * files it was planned for; or null if ``top`` is not of that shape. Every step of the scan
     * passes its partition down to the next, so nothing of the plan is built again: the file
     * scan reads the files the partition lists.
     */
    public static Partition[] rescan(RDD top, String[] paths, long[] lengths, long[] mtimes) {
        RDD rdd = top;
        if (rdd instanceof org.apache.spark.sql.execution.SQLExecutionRDD)
            rdd = ((org.apache.spark.sql.execution.SQLExecutionRDD) rdd).sqlRDD();
        if (!(rdd instanceof org.apache.spark.rdd.CoalescedRDD)) return null;
        RDD below = ((org.apache.spark.rdd.CoalescedRDD) rdd).prev();
        while (below instanceof org.apache.spark.rdd.MapPartitionsRDD)
            below = ((org.apache.spark.rdd.MapPartitionsRDD) below).prev();
        if (!(below instanceof org.apache.spark.sql.execution.datasources.FileScanRDD)) return null;
        org.apache.spark.sql.execution.datasources.PartitionedFile[] files =
            new org.apache.spark.sql.execution.datasources.PartitionedFile[paths.length];
        for (int i = 0; i < paths.length; i++)
            files[i] = new org.apache.spark.sql.execution.datasources.PartitionedFile(
                org.apache.spark.sql.catalyst.InternalRow$.MODULE$.empty(),
                org.apache.spark.paths.SparkPath$.MODULE$.fromPathString(paths[i]), 0L, lengths[i], new String[0],
                mtimes[i], lengths[i], (scala.collection.immutable.Map) scala.collection.immutable.Map$.MODULE$.empty());
        Partition[] scan = { new org.apache.spark.sql.execution.datasources.FilePartition(0, files) };
        FilesRDD lender = new FilesRDD(top.sparkContext(), scan);
        return new Partition[] { new org.apache.spark.rdd.CoalescedRDDPartition(0, lender, new int[] {0}, scala.Option.empty()) };
    }

    /**
     * The rows of ``df`` — a stream's files read through a cache, gathered into one partition —
     * computed from the plan the cache was built from, as one partition over the file scan
     * (the shape ``rescan`` re-points), with its lineage prepared for a slot to read through
     * ({@link SlotRDD#readThrough}); or null if ``df`` is not of that shape. A batch replayed
     * over its files then reads them as they are, not through a cache builder that would turn
     * its rows into column batches and back without keeping them.
     */
    public static RDD uncached(org.apache.spark.sql.classic.Dataset df) {
        SparkPlan plan = df.queryExecution().executedPlan();
        if (!(plan instanceof org.apache.spark.sql.execution.CoalesceExec)) return null;
        SparkPlan below = ((org.apache.spark.sql.execution.CoalesceExec) plan).child();
        while (below instanceof org.apache.spark.sql.execution.WholeStageCodegenExec
               || below instanceof org.apache.spark.sql.execution.InputAdapter
               || below instanceof org.apache.spark.sql.execution.ColumnarToRowExec)
            below = (SparkPlan) below.children().head();
        if (!(below instanceof org.apache.spark.sql.execution.columnar.InMemoryTableScanExec)) return null;
        org.apache.spark.sql.execution.columnar.InMemoryTableScanExec scan =
            (org.apache.spark.sql.execution.columnar.InMemoryTableScanExec) below;
        SparkPlan cached = scan.relation().cacheBuilder().cachedPlan();
        if (!scan.predicates().isEmpty() || cached.supportsColumnar()
                || !ids(scan.attributes()).equals(ids(scan.relation().output()))) return null;
        RDD rows = cached.execute().coalesce(1, false, scala.Option.empty(), null);
        SlotRDD.prepare(rows);
        return rows;
    }

    private static java.util.List<Long> ids(scala.collection.Seq attributes) {
        java.util.List<Long> out = new java.util.ArrayList<>();
        scala.collection.Iterator it = attributes.iterator();
        while (it.hasNext())
            out.add(((org.apache.spark.sql.catalyst.expressions.Attribute) it.next()).exprId().id());
        return out;
    }

    /**
     * Frees the blocks behind a frame (state.release): a frame read through a slot of prepared
     * plans drops the blocks the slot reads, a lazily checkpointed one is unpersisted, and any
     * other is left alone (asynchronously). One call where the driver made seven.
     */
    public static void release(org.apache.spark.sql.classic.Dataset df) {
        Object plan = df.queryExecution().logical();
        if (!(plan instanceof org.apache.spark.sql.execution.LogicalRDD)) return;
        RDD rdd = ((org.apache.spark.sql.execution.LogicalRDD) plan).rdd();
        if (rdd instanceof SlotRDD) {
            int id = ((SlotRDD) rdd).blocksRead();
            if (id >= 0) dropBlocks(id);
        } else {
            rdd.unpersist(false);
        }
    }

    /** Frees the blocks a KeepRDD stored under ``id``, on every executor (asynchronously). */
    public static void dropBlocks(int id) {
        SparkEnv.get().blockManager().master().removeRdd(id, false);
    }

    /** Zero every SQL metric of the plan, so that after the next job they count that job only. */
    public static void resetMetrics(SparkPlan plan) {
        scala.collection.Iterator ms = plan.metrics().valuesIterator();
        while (ms.hasNext()) ((org.apache.spark.sql.execution.metric.SQLMetric) ms.next()).reset();
        scala.collection.Iterator kids = plan.children().iterator();
        while (kids.hasNext()) resetMetrics((SparkPlan) kids.next());
    }

    /**
     * What keeps a physical plan from being run again with other rows in its slots, or null:
     * a node that computes its input once and reuses it (a broadcast, a subquery's value) over a
     * slot or a kept merge. Over static rows (a table's file scan, a static state) such a node is
     * harmless: those rows do not change; so is a node whose subqueries read static rows only,
     * whatever its children read (the batch time's subquery: its value is set before each job,
     * {@link #setClocks}). A shuffle is no obstacle: its map output is forgotten before each job
     * ({@link #shuffles}, {@link #forgetShuffles}), so the job shuffles again.
     */
    public static String obstacle(SparkPlan plan) {
        String name = plan.getClass().getSimpleName();
        boolean reuses = (name.contains("Exchange") && !isShuffle(plan)) || name.contains("Subquery");
        if (reuses && readsSlots(plan)) return plan.nodeName();
        scala.collection.Iterator subs = plan.subqueries().iterator();
        while (subs.hasNext()) if (readsSlots((SparkPlan) subs.next())) return plan.nodeName();
        scala.collection.Iterator kids = plan.children().iterator();
        while (kids.hasNext()) {
            String found = obstacle((SparkPlan) kids.next());
            if (found != null) return found;
        }
        return null;
    }

    /**
     * The batch time's subqueries in ``plans`` (physical plans, their subqueries' included): each
     * scalar subquery whose one column is named ``column`` (sql/bind/expiry.py). Their values are
     * computed when a plan is first executed and kept, by the expression and by the code generated
     * for it (a decimal, which generated code refers to rather than inlines): {@link #setClocks}
     * changes them in place, and each job's tasks are serialized with the value set before it.
     */
    public static java.util.List clocks(java.util.List plans, String column) {
        java.util.ArrayList out = new java.util.ArrayList();
        java.util.IdentityHashMap seen = new java.util.IdentityHashMap();
        for (int i = 0; i < plans.size(); i++) clocksOf((SparkPlan) plans.get(i), column, out, seen);
        return out;
    }

    private static void clocksOf(SparkPlan plan, String column, java.util.List out, java.util.Map seen) {
        if (seen.put(plan, Boolean.TRUE) != null) return;
        scala.collection.Iterator exprs = plan.expressions().iterator();
        while (exprs.hasNext()) clocksIn((org.apache.spark.sql.catalyst.expressions.Expression) exprs.next(), column, out, seen);
        scala.collection.Iterator kids = plan.children().iterator();
        while (kids.hasNext()) clocksOf((SparkPlan) kids.next(), column, out, seen);
    }

    private static void clocksIn(org.apache.spark.sql.catalyst.expressions.Expression e, String column,
                                 java.util.List out, java.util.Map seen) {
        if (e instanceof org.apache.spark.sql.execution.ScalarSubquery) {
            org.apache.spark.sql.execution.ScalarSubquery sub = (org.apache.spark.sql.execution.ScalarSubquery) e;
            scala.collection.Seq cols = sub.plan().output();
            if (cols.size() == 1 && ((org.apache.spark.sql.catalyst.expressions.Attribute) cols.head()).name().equals(column)
                    && sub.dataType() instanceof org.apache.spark.sql.types.DecimalType) {
                if (!seen.containsKey(sub)) { seen.put(sub, Boolean.TRUE); out.add(sub); }
                return;
            }
            clocksOf(sub.plan(), column, out, seen);  // a clock read inside another subquery
        } else if (e instanceof org.apache.spark.sql.catalyst.expressions.PlanExpression) {
            Object inner = ((org.apache.spark.sql.catalyst.expressions.PlanExpression) e).plan();
            if (inner instanceof SparkPlan) clocksOf((SparkPlan) inner, column, out, seen);
        }
        scala.collection.Iterator kids = e.children().iterator();
        while (kids.hasNext()) clocksIn((org.apache.spark.sql.catalyst.expressions.Expression) kids.next(), column, out, seen);
    }

    /** Set the batch time's subqueries ({@link #clocks}, executed) to ``micros``. */
    public static void setClocks(java.util.List subs, long micros) {
        for (int i = 0; i < subs.size(); i++) {
            Object value = ((org.apache.spark.sql.execution.ScalarSubquery) subs.get(i)).eval(null);
            ((org.apache.spark.sql.types.Decimal) value).set(micros);
        }
    }

    /** Whether ``plan`` is a shuffle exchange, or the reuse of one. */
    private static boolean isShuffle(SparkPlan plan) {
        if (plan instanceof org.apache.spark.sql.execution.exchange.ReusedExchangeExec)
            plan = ((org.apache.spark.sql.execution.exchange.ReusedExchangeExec) plan).child();
        return plan instanceof org.apache.spark.sql.execution.exchange.ShuffleExchangeLike;
    }

    /**
     * The ids of the shuffles in the lineage of ``tops`` (a prepared plan's RDDs) whose rows come
     * from a slot or a kept merge: the map outputs each later job must compute afresh. A shuffle
     * of static rows only is left alone: its output stays valid, and later jobs reuse it.
     */
    public static int[] shuffles(java.util.List tops) {
        java.util.TreeSet ids = new java.util.TreeSet();
        java.util.HashMap seen = new java.util.HashMap();
        for (int i = 0; i < tops.size(); i++) changing((RDD) tops.get(i), ids, seen);
        int[] out = new int[ids.size()];
        java.util.Iterator it = ids.iterator();
        for (int i = 0; it.hasNext(); i++) out[i] = ((Integer) it.next()).intValue();
        return out;
    }

    /** Whether ``rdd``'s rows change from job to job (it reads a slot or a kept merge); the
     *  shuffles below it that do are added to ``ids``. ``seen``: RDD id → the answer. */
    private static boolean changing(RDD rdd, java.util.Set ids, java.util.Map seen) {
        Boolean known = (Boolean) seen.get(Integer.valueOf(rdd.id()));
        if (known != null) return known.booleanValue();
        boolean changes = rdd instanceof SlotRDD || rdd instanceof KeepRDD || rdd instanceof LookupRDD;
        scala.collection.Iterator deps = rdd.dependencies().iterator();
        while (deps.hasNext()) {
            org.apache.spark.Dependency dep = (org.apache.spark.Dependency) deps.next();
            boolean below = changing(dep.rdd(), ids, seen);
            if (below && dep instanceof org.apache.spark.ShuffleDependency)
                ids.add(Integer.valueOf(((org.apache.spark.ShuffleDependency) dep).shuffleId()));
            changes |= below;
        }
        seen.put(Integer.valueOf(rdd.id()), Boolean.valueOf(changes));
        return changes;
    }

    /**
     * Forget what the shuffles ``ids`` computed — their map outputs and files — so that the
     * next job that reads them runs their map stages again, over the rows its slots point at.
     * What the context cleaner does for a shuffle no RDD references any more; synchronous, so
     * nothing of it can land after the next job has started.
     */
    public static void forgetShuffles(org.apache.spark.SparkContext sc, int[] ids) {
        scala.Option cleaner = sc.cleaner();
        for (int i = 0; i < ids.length; i++) {
            int id = ids[i];
            if (cleaner.isDefined()) {
                ((org.apache.spark.ContextCleaner) cleaner.get()).doCleanupShuffle(id, true);
            } else {
                ((org.apache.spark.MapOutputTrackerMaster) SparkEnv.get().mapOutputTracker()).unregisterShuffle(id);
                SparkEnv.get().blockManager().master().removeShuffle(id, true);
            }
        }
    }

    /**
     * Make the joins of ``plan`` that probe a base (one of ``bases``, slots whose rows stay the
     * same from batch to batch: runtime/runs.py) with the keys of their other side read the base's
     * rows of those keys only, from an index ({@link LookupRDD}, {@link KeyIndex}) instead of
     * scanning it; before the plan is first executed. Returns how many scans now look up.
     *
     * A shuffled hash join whose probed (streamed) side reads a base — through whole-stage code,
     * projections that rename the key, filters and a union that keeps its children's partitions —
     * and whose join is inner or a left semi join outputs nothing for a probing row whose key the
     * other side lacks: dropping those rows below it changes nothing. Partition ``p`` of the base
     * meets partition ``p`` of the other side (the join requires it), so the look-up of partition
     * ``p`` reads the keys of that side's partition ``p`` — that side executed a second time: a
     * shuffle's output read again, or rows a slot or a kept merge holds (a side that scans a base
     * itself is not read twice: no look-up then). The scan node keeps its place (its metrics, its
     * code), its RDD replaced.
     */
    public static int lookups(SparkPlan plan, java.util.List bases) {
        int n = 0;
        scala.collection.Iterator kids = plan.children().iterator();
        while (kids.hasNext()) n += lookups((SparkPlan) kids.next(), bases);
        if (plan instanceof org.apache.spark.sql.execution.joins.ShuffledHashJoinExec)
            n += lookup((org.apache.spark.sql.execution.joins.ShuffledHashJoinExec) plan, bases);
        return n;
    }

    private static int lookup(org.apache.spark.sql.execution.joins.ShuffledHashJoinExec join, java.util.List bases) {
        Object type = join.joinType();
        if (type != org.apache.spark.sql.catalyst.plans.Inner$.MODULE$
            && type != org.apache.spark.sql.catalyst.plans.LeftSemi$.MODULE$) return 0;
        boolean right = join.buildSide() == org.apache.spark.sql.catalyst.optimizer.BuildRight$.MODULE$;
        SparkPlan probed = right ? join.left() : join.right();
        SparkPlan other = right ? join.right() : join.left();
        scala.collection.immutable.Seq probedKeys = right ? join.leftKeys() : join.rightKeys();
        scala.collection.immutable.Seq otherKeys = right ? join.rightKeys() : join.leftKeys();
        java.util.ArrayList attrs = new java.util.ArrayList();
        for (int i = 0; i < probedKeys.size(); i++) {
            Object k = probedKeys.apply(i);
            org.apache.spark.sql.catalyst.expressions.Expression o =
                (org.apache.spark.sql.catalyst.expressions.Expression) otherKeys.apply(i);
            if (!(k instanceof org.apache.spark.sql.catalyst.expressions.Attribute)) return 0;
            org.apache.spark.sql.catalyst.expressions.Attribute a = (org.apache.spark.sql.catalyst.expressions.Attribute) k;
            if (!a.dataType().equals(o.dataType())) return 0;
            attrs.add(a);
        }
        if (readsBase(other, bases)) return 0;
        java.util.ArrayList found = new java.util.ArrayList();  // [scan, its key attributes]
        probes(probed, attrs, bases, found);
        if (found.isEmpty()) return 0;
        int parts = other.outputPartitioning().numPartitions();
        RDD keys = null;
        int n = 0;
        for (int i = 0; i < found.size(); i++) {
            Object[] f = (Object[]) found.get(i);
            RDDScanExec scan = (RDDScanExec) f[0];
            SlotRDD slot = (SlotRDD) scan.rdd();
            if (slot.getNumPartitions() != parts) continue;
            if (keys == null) {
                keys = other.execute();
                if (keys.getNumPartitions() != parts) return n;
            }
            scala.collection.immutable.Seq baseKeys = scala.jdk.javaapi.CollectionConverters.asScala((java.util.List) f[1]).toSeq();
            StringBuilder sig = new StringBuilder();
            scala.collection.immutable.Seq out = scan.output();
            for (int j = 0; j < baseKeys.size(); j++) {
                org.apache.spark.sql.catalyst.expressions.Attribute a =
                    (org.apache.spark.sql.catalyst.expressions.Attribute) baseKeys.apply(j);
                sig.append(j == 0 ? "" : ",").append(position(out, a)).append(' ').append(a.dataType().simpleString());
            }
            if (!replaceRdd(scan, new LookupRDD(slot, keys, baseKeys, out, otherKeys, other.output(), sig.toString())))
                return n;
            n++;
        }
        return n;
    }

    /** Add to ``found`` each scan of a base under ``plan`` (the probed side of a join) through
     *  which ``attrs`` (its key, over ``plan``'s output) can be followed as plain columns. */
    private static void probes(SparkPlan plan, java.util.List attrs, java.util.List bases, java.util.List found) {
        if (plan instanceof org.apache.spark.sql.execution.WholeStageCodegenExec
            || plan instanceof org.apache.spark.sql.execution.InputAdapter
            || plan instanceof org.apache.spark.sql.execution.FilterExec) {
            probes((SparkPlan) plan.children().apply(0), attrs, bases, found);
        } else if (plan instanceof org.apache.spark.sql.execution.ProjectExec) {
            scala.collection.Seq list = ((org.apache.spark.sql.execution.ProjectExec) plan).projectList();
            java.util.ArrayList below = new java.util.ArrayList();
            for (int i = 0; i < attrs.size(); i++) {
                org.apache.spark.sql.catalyst.expressions.Attribute a =
                    (org.apache.spark.sql.catalyst.expressions.Attribute) attrs.get(i);
                Object from = null;
                for (int j = 0; j < list.size() && from == null; j++) {
                    org.apache.spark.sql.catalyst.expressions.NamedExpression e =
                        (org.apache.spark.sql.catalyst.expressions.NamedExpression) list.apply(j);
                    if (!e.exprId().equals(a.exprId())) continue;
                    if (e instanceof org.apache.spark.sql.catalyst.expressions.Attribute) from = e;
                    else if (e instanceof org.apache.spark.sql.catalyst.expressions.Alias
                             && ((org.apache.spark.sql.catalyst.expressions.Alias) e).child()
                                instanceof org.apache.spark.sql.catalyst.expressions.Attribute)
                        from = ((org.apache.spark.sql.catalyst.expressions.Alias) e).child();
                    else return;
                }
                if (from == null) return;
                below.add(from);
            }
            probes((SparkPlan) plan.children().apply(0), below, bases, found);
        } else if (plan instanceof org.apache.spark.sql.execution.UnionExec) {
            // partition p of a union that keeps its children's partitioning is their partitions p
            if (plan.outputPartitioning() instanceof org.apache.spark.sql.catalyst.plans.physical.UnknownPartitioning) return;
            scala.collection.Seq out = plan.output();
            int[] at = new int[attrs.size()];
            for (int i = 0; i < at.length; i++) {
                at[i] = position(out, (org.apache.spark.sql.catalyst.expressions.Attribute) attrs.get(i));
                if (at[i] < 0) return;
            }
            scala.collection.Iterator kids = plan.children().iterator();
            while (kids.hasNext()) {
                SparkPlan kid = (SparkPlan) kids.next();
                java.util.ArrayList below = new java.util.ArrayList();
                for (int i = 0; i < at.length; i++) below.add(kid.output().apply(at[i]));
                probes(kid, below, bases, found);
            }
        } else if (plan instanceof RDDScanExec && isBase(((RDDScanExec) plan).rdd(), bases)) {
            found.add(new Object[] { plan, attrs });
        }
    }

    private static int position(scala.collection.Seq out, org.apache.spark.sql.catalyst.expressions.Attribute a) {
        for (int i = 0; i < out.size(); i++)
            if (((org.apache.spark.sql.catalyst.expressions.Attribute) out.apply(i)).exprId().equals(a.exprId())) return i;
        return -1;
    }

    private static boolean isBase(RDD rdd, java.util.List bases) {
        for (int i = 0; i < bases.size(); i++) if (bases.get(i) == rdd) return true;
        return false;
    }

    private static boolean readsBase(SparkPlan plan, java.util.List bases) {
        if (plan instanceof RDDScanExec && isBase(((RDDScanExec) plan).rdd(), bases)) return true;
        scala.collection.Iterator kids = plan.children().iterator();
        while (kids.hasNext()) if (readsBase((SparkPlan) kids.next(), bases)) return true;
        return false;
    }

    /** Point a scan node at other rows of the same shape, in place: the plan around it (its
     *  parents, their metrics) stays as it is. */
    private static boolean replaceRdd(RDDScanExec scan, RDD rdd) {
        try {
            java.lang.reflect.Field f = RDDScanExec.class.getDeclaredField("rdd");
            f.setAccessible(true);
            f.set(scan, rdd);
            return true;
        } catch (Exception e) {  // (another Spark: the scan reads its base as before)
            return false;
        }
    }

    /** Drop the indexes of the bases ``ids`` ({@link KeyIndex}). */
    public static void dropIndexes(long[] ids) { KeyIndex.drop(ids); }

    /** The bytes all indexes may hold together in this JVM (-1: a quarter of its heap, or
     *  ``spark.streamfold.indexBytes``). */
    public static void indexBudget(long bytes) { KeyIndex.setBudget(bytes); }

    /** How many indexes the JVM holds, and their estimated bytes. */
    public static long[] indexes() { return KeyIndex.held(); }

    private static boolean readsSlots(SparkPlan plan) {
        if (plan instanceof RDDScanExec) {
            RDD rdd = ((RDDScanExec) plan).rdd();
            return rdd instanceof SlotRDD || rdd instanceof KeepRDD || rdd instanceof LookupRDD;
        }
        if (plan instanceof org.apache.spark.sql.execution.exchange.ReusedExchangeExec)  // (a leaf: what it reuses)
            return readsSlots(((org.apache.spark.sql.execution.exchange.ReusedExchangeExec) plan).child());
        scala.collection.Iterator subs = plan.subqueries().iterator();
        while (subs.hasNext()) if (readsSlots((SparkPlan) subs.next())) return true;
        scala.collection.Iterator kids = plan.children().iterator();
        while (kids.hasNext()) if (readsSlots((SparkPlan) kids.next())) return true;
        return false;
    }
}
