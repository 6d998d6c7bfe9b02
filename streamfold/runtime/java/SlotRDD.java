package streamfold.jvm;

import org.apache.spark.Partition;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.BlockRDDPartition;
import org.apache.spark.rdd.RDD;
import org.apache.spark.storage.BlockManager;
import org.apache.spark.storage.BlockResult;
import org.apache.spark.storage.RDDBlockId;

/**
 * A leaf of a prepared plan whose rows are set before each job (streamfold/runtime/prepared.py):
 * another RDD's partitions one to one (a batch's file scan, a state before the prepared plan
 * took over), the blocks a {@link KeepRDD} stored in an earlier job, or nothing.
 *
 * The scheduler sees no dependency of a slot, so what it reads must need no shuffle: a source's
 * lineage is checked to be narrow, and its partitions and dependencies are computed here on the
 * driver, as the scheduler does for the RDDs it sees (executors cannot compute them).
 */
public class SlotRDD extends RDD {
    private static final long serialVersionUID = 1L;
    private final int parts;
    private RDD source;
    private Partition[] sourceParts;
    private int blocks = -1;

    public SlotRDD(SparkContext sc, int parts) {
        super(sc, (scala.collection.immutable.Seq) scala.collection.immutable.Nil$.MODULE$,
              scala.reflect.ClassTag$.MODULE$.AnyRef());
        this.parts = parts;
    }

    /** Read ``rdd``'s partitions (as many as the slot has; an RDD of none reads nothing). */
    public void read(RDD rdd) {
        Partition[] ps = rdd.partitions();
        if (ps.length == 0) { readNothing(); return; }
        if (ps.length != parts)
            throw new IllegalArgumentException("streamfold: " + ps.length + " partitions for a slot of " + parts);
        prepare(rdd);
        this.source = rdd; this.sourceParts = ps; this.blocks = -1;
    }

    /** Read ``rdd`` (already read by this slot once: its lineage is prepared) through the
     *  partitions ``ps`` instead of its own: see ``Plans.rescan``. */
    public void readThrough(RDD rdd, Partition[] ps) {
        if (ps.length != parts)
            throw new IllegalArgumentException("streamfold: " + ps.length + " partitions for a slot of " + parts);
        this.source = rdd; this.sourceParts = ps; this.blocks = -1;
    }

    /** Read the blocks rdd_<id>_<p> a KeepRDD stored. */
    public void readBlocks(int id) { this.blocks = id; this.source = null; this.sourceParts = null; }

    /** The id of the blocks read, or -1. */
    public int blocksRead() { return blocks; }

    public void readNothing() { this.blocks = -1; this.source = null; this.sourceParts = null; }

    /** What the slot reads, as text: while it is the same, so are the slot's rows (a
     *  {@link KeyIndex} of them stays true). */
    public String version() {
        if (blocks >= 0) return "b" + blocks;
        return source == null ? "none" : "r" + source.id();
    }

    /** Computes ``rdd``'s partitions and dependencies down its lineage on the driver, as the scheduler
     *  would: a slot reads it later ({@link #readThrough}). */
    static void prepare(RDD rdd) {
        rdd.partitions();
        scala.collection.Iterator deps = rdd.dependencies().iterator();
        while (deps.hasNext()) {
            Object dep = deps.next();
            if (dep instanceof org.apache.spark.ShuffleDependency)
                throw new IllegalArgumentException("streamfold: a slot's rows must not need a shuffle");
            prepare(((org.apache.spark.Dependency) dep).rdd());
        }
    }

    public Partition[] getPartitions() {
        Partition[] out = new Partition[parts];
        for (int i = 0; i < parts; i++) out[i] = new BlockRDDPartition(new RDDBlockId(-1, i), i);
        return out;
    }

    public scala.collection.Iterator compute(Partition split, TaskContext context) {
        int p = split.index();
        if (blocks >= 0) {
            BlockManager bm = SparkEnv.get().blockManager();
            // local, or fetched from the executor that kept it (on a cluster the task may run elsewhere)
            scala.Option got = bm.get(new RDDBlockId(blocks, p), scala.reflect.ClassTag$.MODULE$.AnyRef());
            if (got.isEmpty())
                throw new IllegalStateException("streamfold: block rdd_" + blocks + "_" + p + " of a state is gone");
            return KeptRows.rowsOf(((BlockResult) got.get()).data());
        }
        if (source == null) return scala.collection.Iterator$.MODULE$.empty();
        return source.iterator(sourceParts[p], context);
    }
}
