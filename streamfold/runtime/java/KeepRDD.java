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
 * Its parent's rows (a merge of a prepared plan), computed once per job: the first reader in a
 * task stores copies under rdd_<into>_<p> — ``into`` is a fresh id set before each job — and
 * every other reader of the job, and a {@link SlotRDD} in the next job, reads those blocks.
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

    public scala.collection.Iterator compute(Partition split, TaskContext context) {
        if (into < 0) throw new IllegalStateException("streamfold: a kept merge run without a block id");
        BlockManager bm = SparkEnv.get().blockManager();
        RDDBlockId id = new RDDBlockId(into, split.index());
        scala.Option got = bm.get(id, scala.reflect.ClassTag$.MODULE$.AnyRef());
        if (got.isDefined()) return ((BlockResult) got.get()).data();
        scala.collection.Iterator rows = prev.iterator(split, context);
        ArrayList kept = new ArrayList();
        while (rows.hasNext()) kept.add(((InternalRow) rows.next()).copy());
        bm.putIterator(id, scala.jdk.javaapi.CollectionConverters.asScala(kept.iterator()),
                       StorageLevel.MEMORY_AND_DISK(), true, scala.reflect.ClassTag$.MODULE$.AnyRef());
        return scala.jdk.javaapi.CollectionConverters.asScala(kept.iterator());
    }
}
