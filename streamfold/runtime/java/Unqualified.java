package streamfold.jvm;

/**
 * An optimizer rule, last of a query's: every column reference loses its qualifier (the view or
 * alias name it was read through), which only resolving names in SQL needs.
 *
 * Spark 4.3's union reports its children's common hash partitioning only if each child's
 * partitioning, its columns mapped to the first child's output by exact equality, is the first
 * child's. A state read through a view has output columns qualified with the view's name while
 * its partitioning (a frame's, runtime/java/Plans.java) names them without: a union branch that
 * computes a column over it (a delta's weights) outputs the qualified columns, the mapping misses,
 * and the aggregate over the union shuffles rows that already lie hashed on its keys. Joins and
 * aggregates compare partitionings semantically, without qualifiers, and never missed.
 */
public final class Unqualified extends org.apache.spark.sql.catalyst.rules.Rule {
    public org.apache.spark.sql.catalyst.trees.TreeNode apply(org.apache.spark.sql.catalyst.trees.TreeNode plan) {
        return ((org.apache.spark.sql.catalyst.plans.logical.LogicalPlan) plan).transformAllExpressions(new Strip());
    }

    /** Whether ``session`` already runs the rule (it is added once per session). */
    public static boolean installed(org.apache.spark.sql.classic.SparkSession session) {
        scala.collection.Iterator rules = session.experimental().extraOptimizations().iterator();
        while (rules.hasNext())
            if (rules.next() instanceof Unqualified) return true;
        return false;
    }

    /** Adds the rule to ``session``'s extra optimizations (after those it has). */
    public static void install(org.apache.spark.sql.classic.SparkSession session) {
        if (installed(session)) return;
        java.util.ArrayList rules = new java.util.ArrayList();
        scala.collection.Iterator had = session.experimental().extraOptimizations().iterator();
        while (had.hasNext()) rules.add(had.next());
        rules.add(new Unqualified());
        session.experimental().extraOptimizations_$eq(scala.jdk.javaapi.CollectionConverters.asScala(rules).toSeq());
    }

    private static final class Strip extends scala.runtime.AbstractPartialFunction {
        public boolean isDefinedAt(Object e) {
            return e instanceof org.apache.spark.sql.catalyst.expressions.AttributeReference
                && !((org.apache.spark.sql.catalyst.expressions.AttributeReference) e).qualifier().isEmpty();
        }

        public Object applyOrElse(Object e, scala.Function1 otherwise) {
            if (!isDefinedAt(e)) return otherwise.apply(e);
            return ((org.apache.spark.sql.catalyst.expressions.AttributeReference) e)
                .withQualifier((scala.collection.immutable.Seq) scala.collection.immutable.Nil$.MODULE$);
        }
    }
}
