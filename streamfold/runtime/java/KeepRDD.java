package streamfold.jvm;

import java.util.ArrayList;
import org.apache.spark.Partition;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockResult;
import org.apache.spark.storage.RDDBlockId;
import org.apache.spark.storage.StorageLevel;

/**
 * Its parent's rows (a merge of a prepared plan), computed once per job: the first task to read a
 * partition stores copies under rdd_<into>_<p> — ``into`` is a fresh id set before each job — and
 * every other reader of the job (one running meanwhile waits for it), and a {@link SlotRDD} in
 * the next job, reads those blocks.
 * What a lazy ``localCheckpoint`` does for a plan run once, for a plan run every batch.
 */
public class KeepRDD extends RDD {
    private static final long serialVersionUID = 1L;
    private final RDD prev;
    private int into = -1;

    public KeepRDD(RDD parent) {
        super(parent, scala.reflect.ClassTag$.MODULE$.AnyRef());
        this.prev = parent;
    }

    public void keepInto(int id) { this.into = id; }

    public int keptIn() { return into; }

    public Partition[] getPartitions() { return prev.partitions(); }

    public scala.collection.Iterator compute(final Partition split, final TaskContext context) {
        if (into < 0) throw new IllegalStateException("streamfold: a kept merge run without a block id");
        BlockManager bm = SparkEnv.get().blockManager();
        // Computed by one task only: a task that wants the partition while another computes it waits
        // for that block and reads it (Spark's first-writer-wins block locks, as for a cached RDD),
        // so the merge runs once per job and its metrics count its rows once.
        final RDD parent = prev;
        scala.Function0 compute = new scala.runtime.AbstractFunction0() {
            public Object apply() {
                scala.collection.Iterator rows = parent.iterator(split, context);
                ArrayList kept = new ArrayList();
                while (rows.hasNext()) kept.add(((InternalRow) rows.next()).copy());
                // one value of known size (KeptRows), not one per row whose sizes are sampled
                return scala.collection.Iterator$.MODULE$.single(new KeptRows(kept));
            }
        };
        scala.util.Either got = bm.getOrElseUpdateRDDBlock(context.taskAttemptId(), new RDDBlockId(into, split.index()),
            StorageLevel.MEMORY_AND_DISK(), scala.reflect.ClassTag$.MODULE$.AnyRef(), compute,
            bm.getOrElseUpdateRDDBlock$default$6());
        if (got.isLeft()) return KeptRows.rowsOf(((BlockResult) got.left().get()).data());
        // not stored: the next job reports the block gone
        return KeptRows.rowsOf((scala.collection.Iterator) got.right().get());
    }
}
