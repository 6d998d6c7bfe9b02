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
     *  (``rdd`` has the template's rows' shape: a slot or a kept merge standing in for them). */
    public static org.apache.spark.sql.classic.Dataset frame(RDD rdd, org.apache.spark.sql.classic.Dataset template) {
        org.apache.spark.sql.execution.LogicalRDD plan =
            org.apache.spark.sql.execution.LogicalRDD$.MODULE$.fromDataset(rdd, template, false, false);
        return org.apache.spark.sql.classic.Dataset.ofRows(template.sparkSession(), plan);
    }

    /** ``template`` (an analysed frame) reading ``to`` wherever it read ``from`` (a slot): the
     *  same columns and plan, analysed again without its SQL (a few milliseconds). */
    public static org.apache.spark.sql.classic.Dataset rebind(org.apache.spark.sql.classic.Dataset template, RDD from, RDD to,
                                                              long rows) {
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan =
            swap(template.queryExecution().analyzed(), from, to, rows, template.sparkSession());
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
     * a node that computes its input once and reuses it (an exchange — its shuffle or broadcast
     * would be reused — or a subquery) over a slot or a kept merge. Over static rows (a table's
     * file scan, a static state) such a node is harmless: those rows do not change.
     */
    public static String obstacle(SparkPlan plan) {
        String name = plan.getClass().getSimpleName();
        boolean reuses = name.contains("Exchange") || name.contains("Subquery") || !plan.subqueries().isEmpty();
        if (reuses && readsSlots(plan)) return plan.nodeName();
        scala.collection.Iterator kids = plan.children().iterator();
        while (kids.hasNext()) {
            String found = obstacle((SparkPlan) kids.next());
            if (found != null) return found;
        }
        return null;
    }

    private static boolean readsSlots(SparkPlan plan) {
        if (plan instanceof RDDScanExec) {
            RDD rdd = ((RDDScanExec) plan).rdd();
            return rdd instanceof SlotRDD || rdd instanceof KeepRDD;
        }
        if (plan.getClass().getSimpleName().startsWith("ReusedExchange")) return true;  // cannot tell: assume so
        scala.collection.Iterator subs = plan.subqueries().iterator();
        while (subs.hasNext()) if (readsSlots((SparkPlan) subs.next())) return true;
        scala.collection.Iterator kids = plan.children().iterator();
        while (kids.hasNext()) if (readsSlots((SparkPlan) kids.next())) return true;
        return false;
    }
}
