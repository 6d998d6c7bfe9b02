package streamfold.jvm;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import org.apache.spark.SparkEnv;
import org.apache.spark.rdd.RDD;
import org.apache.spark.storage.BlockStatus;
import org.apache.spark.storage.RDDBlockId;
import org.apache.spark.storage.StorageStatus;

/**
 * What the states cost in Spark's block stores, one py4j call each (streamfold/runtime/storage.py).
 * The figures are the block manager master's: every block an executor stores is reported to it
 * before the task that stored it ends, so after a job they are exact, and asking costs no job.
 */
public final class Storage {
    private Storage() {}

    /** The id of the RDD blocks behind a kept frame: its checkpointed RDD's (a ``localCheckpoint``),
     *  or the blocks a {@link SlotRDD} reads (a prepared plan's kept merge); -1 if none. */
    public static int blocksOf(org.apache.spark.sql.classic.Dataset ds) {
        org.apache.spark.sql.catalyst.plans.logical.LogicalPlan plan = ds.queryExecution().logical();
        if (!(plan instanceof org.apache.spark.sql.execution.LogicalRDD)) return -1;
        RDD rdd = ((org.apache.spark.sql.execution.LogicalRDD) plan).rdd();
        if (rdd instanceof SlotRDD) return ((SlotRDD) rdd).blocksRead();
        return rdd.id();
    }

    /** "id memory disk" for every RDD id with stored blocks, separated by ";": the bytes in memory
     *  and on disk summed over every executor. */
    public static String rddBytes() {
        StorageStatus[] all = SparkEnv.get().blockManager().master().getStorageStatus();
        HashMap sums = new HashMap();
        for (int i = 0; i < all.length; i++) {
            scala.collection.Iterator blocks = all[i].rddBlocks().iterator();
            while (blocks.hasNext()) {
                scala.Tuple2 entry = (scala.Tuple2) blocks.next();
                Integer id = Integer.valueOf(((RDDBlockId) entry._1()).rddId());
                BlockStatus status = (BlockStatus) entry._2();
                long[] sum = (long[]) sums.get(id);
                if (sum == null) { sum = new long[2]; sums.put(id, sum); }
                sum[0] += status.memSize();
                sum[1] += status.diskSize();
            }
        }
        StringBuilder out = new StringBuilder();
        Iterator it = sums.entrySet().iterator();
        while (it.hasNext()) {
            Map.Entry e = (Map.Entry) it.next();
            long[] sum = (long[]) e.getValue();
            if (out.length() > 0) out.append(';');
            out.append(e.getKey()).append(' ').append(sum[0]).append(' ').append(sum[1]);
        }
        return out.toString();
    }

    /** The heap's peak use since the JVM started (bytes): the peaks of its memory pools, summed. */
    public static long peakHeap() {
        long peak = 0;
        Iterator pools = java.lang.management.ManagementFactory.getMemoryPoolMXBeans().iterator();
        while (pools.hasNext()) {
            java.lang.management.MemoryPoolMXBean pool = (java.lang.management.MemoryPoolMXBean) pools.next();
            if (pool.getType() == java.lang.management.MemoryType.HEAP && pool.getPeakUsage() != null)
                peak += pool.getPeakUsage().getUsed();
        }
        return peak;
    }
}
