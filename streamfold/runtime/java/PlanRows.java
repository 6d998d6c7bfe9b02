package streamfold.jvm;

import org.apache.spark.sql.execution.SparkPlan;

/**
 * Row counts read from an executed plan's metrics in one py4j call each (streamfold/runtime/stats.py).
 * Walked from Python, a plan of a few dozen nodes cost hundreds of calls per batch (a node's name,
 * its children, its metrics each one) on a replayed batch's path (docs/journal.md, "Stop 96").
 */
public final class PlanRows {
    private PlanRows() {}

    /** The rows output by the first node at or below ``plan`` that counts them, following first
     *  inputs down; -1 if none does. */
    public static long rows(SparkPlan plan) {
        SparkPlan node = plan;
        for (int depth = 0; depth < 64; depth++) {
            long counted = count(node);
            if (counted >= 0) return counted;
            scala.collection.Iterator kids = node.children().iterator();
            if (!kids.hasNext()) return -1;
            node = (SparkPlan) kids.next();
        }
        return -1;
    }

    /** The rows ``node`` output by its own metric, or -1 if it has none. */
    private static long count(SparkPlan node) {
        scala.collection.Map metrics = node.metrics();
        if (!metrics.contains("numOutputRows")) return -1;
        // (as an accumulator: Janino cannot choose between SQLMetric's value() and its bridge)
        Object value = ((org.apache.spark.util.AccumulatorV2) metrics.apply("numOutputRows")).value();
        return ((Long) value).longValue();
    }

    /** The nodes of ``plan`` named in ``names`` (comma-separated: Spark's join operators), in
     *  pre-order, each as "rows-in rows-out" (the rows in: :meth:`rows` of its first input),
     *  separated by spaces; null if a join's first input shows no count. */
    public static String joins(SparkPlan plan, String names) {
        java.util.Set wanted = new java.util.HashSet(java.util.Arrays.asList(names.split(",")));
        StringBuilder out = new StringBuilder();
        return visit(plan, wanted, out) ? out.toString().trim() : null;
    }

    private static boolean visit(SparkPlan node, java.util.Set wanted, StringBuilder out) {
        if (wanted.contains(node.nodeName())) {
            scala.collection.Iterator first = node.children().iterator();
            long in = first.hasNext() ? rows((SparkPlan) first.next()) : -1;
            long output = count(node);
            if (in < 0 || output < 0) return false;
            out.append(in).append(' ').append(output).append(' ');
        }
        scala.collection.Iterator kids = node.children().iterator();
        while (kids.hasNext())
            if (!visit((SparkPlan) kids.next(), wanted, out)) return false;
        return true;
    }
}
