import java.util.IdentityHashMap;
import java.util.ArrayList;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.RDDScanExec;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.rdd.RDD;

public class Rebind {
    public static SparkPlan rebind(SparkPlan plan, Object[] oldRdds, Object[] newRdds) {
        IdentityHashMap map = new IdentityHashMap();
        for (int i = 0; i < oldRdds.length; i++) map.put(oldRdds[i], newRdds[i]);
        return walk(plan, map);
    }

    public static Object[] rdds(org.apache.spark.sql.catalyst.plans.logical.LogicalPlan p) {
        scala.collection.Seq leaves = p.collectLeaves();
        ArrayList out = new ArrayList();
        for (int i = 0; i < leaves.size(); i++) {
            Object l = leaves.apply(i);
            if (l instanceof org.apache.spark.sql.execution.LogicalRDD) out.add(((org.apache.spark.sql.execution.LogicalRDD) l).rdd());
            else if (l instanceof org.apache.spark.sql.execution.datasources.LogicalRelation) out.add(((org.apache.spark.sql.execution.datasources.LogicalRelation) l).relation());
        }
        return out.toArray();
    }

    private static SparkPlan walk(SparkPlan p, IdentityHashMap map) {
        if (p instanceof RDDScanExec) {
            RDDScanExec s = (RDDScanExec) p;
            RDD r = (RDD) map.get(s.rdd());
            if (r == null) return p;
            return s.copy(s.output(), r, s.name(), s.outputPartitioning(), s.outputOrdering(), s.stream());
        }
        if (p instanceof FileSourceScanExec) {
            FileSourceScanExec f = (FileSourceScanExec) p;
            org.apache.spark.sql.execution.datasources.HadoopFsRelation r = (org.apache.spark.sql.execution.datasources.HadoopFsRelation) map.get(f.relation());
            if (r == null) return p;
            return f.copy(r, f.stream(), f.output(), f.requiredSchema(), f.partitionFilters(), f.optionalBucketSet(),
                          f.optionalNumCoalescedBuckets(), f.dataFilters(), f.tableIdentifier(), f.disableBucketedScan(),
                          f.markedForSingleTaskExecution());
        }
        scala.collection.Seq kids = p.children();
        int n = kids.size();
        if (n == 0) return p;
        ArrayList out = new ArrayList();
        boolean changed = false;
        for (int i = 0; i < n; i++) {
            SparkPlan k = (SparkPlan) kids.apply(i);
            SparkPlan k2 = walk(k, map);
            if (k2 != k) changed = true;
            out.add(k2);
        }
        if (!changed) return p;
        return (SparkPlan) p.withNewChildren(scala.jdk.javaapi.CollectionConverters.asScala(out).toSeq());
    }
}
