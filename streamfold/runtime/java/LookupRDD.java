package streamfold.jvm;

import org.apache.spark.Partition;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;

/**
 * The rows of a state's base whose key is among the keys of another partitioned input — what a
 * join reads of the base when it probes the base with those keys (``Plans.lookups``): partition
 * ``p`` is the rows of the base's partition ``p`` with a key that partition ``p`` of ``keys``
 * holds, found in the partition's {@link KeyIndex} instead of by a scan of it.
 *
 * Its one dependency is ``keys`` (one to one): the scheduler runs what computes them first. The
 * base is a slot, read by no dependency (as every slot is).
 */
public class LookupRDD extends RDD {
    private static final long serialVersionUID = 1L;
    private final SlotRDD base;
    private final RDD keys;
    private final scala.collection.immutable.Seq baseKeys;     // the key, over the base's columns
    private final scala.collection.immutable.Seq baseColumns;
    private final scala.collection.immutable.Seq probeKeys;    // the same key, over the keys' input's columns
    private final scala.collection.immutable.Seq probeColumns;
    private final String sig;

    public LookupRDD(SlotRDD base, RDD keys, scala.collection.immutable.Seq baseKeys, scala.collection.immutable.Seq baseColumns,
                     scala.collection.immutable.Seq probeKeys, scala.collection.immutable.Seq probeColumns, String sig) {
        super(keys, scala.reflect.ClassTag$.MODULE$.AnyRef());
        this.base = base;
        this.keys = keys;
        this.baseKeys = baseKeys;
        this.baseColumns = baseColumns;
        this.probeKeys = probeKeys;
        this.probeColumns = probeColumns;
        this.sig = sig;
    }

    public Partition[] getPartitions() { return keys.partitions(); }

    public scala.collection.Iterator compute(Partition split, TaskContext context) {
        UnsafeProjection project = UnsafeProjection.create(probeKeys, probeColumns);
        java.util.HashSet wanted = new java.util.HashSet();
        scala.collection.Iterator it = keys.iterator(split, context);
        while (it.hasNext()) {
            UnsafeRow k = project.apply((InternalRow) it.next());
            if (!KeyIndex.anyNull(k)) wanted.add(k.copy());
        }
        java.util.ArrayList out = new java.util.ArrayList();
        if (!wanted.isEmpty()) {
            int p = split.index();
            KeyIndex index = KeyIndex.of(base, p, baseKeys, baseColumns, sig, context);
            UnsafeProjection key = UnsafeProjection.create(baseKeys, baseColumns);
            if (index != null) {
                java.util.Iterator w = wanted.iterator();
                while (w.hasNext()) index.find((UnsafeRow) w.next(), key, out);
            } else {  // not indexed (too large for the budget): the partition scanned for the keys
                scala.collection.Iterator rows = base.iterator(base.partitions()[p], context);
                while (rows.hasNext()) {
                    InternalRow row = (InternalRow) rows.next();
                    if (wanted.contains(key.apply(row))) out.add(row.copy());
                }
            }
        }
        return scala.jdk.javaapi.CollectionConverters.asScala(out.iterator());
    }
}
