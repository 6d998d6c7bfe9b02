package streamfold.jvm;

import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;

/**
 * The rows of one partition of a state's base (a {@link SlotRDD} whose rows stay the same from
 * batch to batch: runtime/runs.py), hashed on a join's key: what a {@link LookupRDD} reads
 * instead of scanning the partition. Built the first time a job looks the partition up with
 * that key, kept in the JVM until the base is replaced (the slot reads other rows: a fold), and
 * dropped when all indexes together would outgrow their budget — a quarter of the heap, or
 * ``spark.streamfold.indexBytes`` — least recently used first. A partition too large for the
 * budget is not indexed: its look-ups scan it.
 *
 * The index holds copies of the base's rows (the slot's reader may reuse one row object), so a
 * base indexed on one key costs its size again in the JVM's heap outside Spark's memory manager;
 * the budget bounds that.
 */
public final class KeyIndex {
    private static final java.util.LinkedHashMap ALL = new java.util.LinkedHashMap(16, 0.75f, true);
    private static long total;
    private static long budgetSet = -1;  // Plans.indexBudget: bytes, or -1 (the default)

    private final String version;
    private final java.util.HashMap first = new java.util.HashMap();  // key (UnsafeRow) → Integer: its last row
    private InternalRow[] rows;
    private int[] previous;  // the row before it with the same key, or -1
    private long bytes;
    private boolean built;
    private boolean tooLarge;

    private KeyIndex(String version) { this.version = version; }

    /** The index of ``base``'s partition ``p`` on ``keys`` (bound to the slot's rows), or null if
     *  it is too large to keep (then the caller scans). ``sig``: the keys as text. */
    static KeyIndex of(SlotRDD base, int p, scala.collection.immutable.Seq keys, scala.collection.immutable.Seq columns, String sig,
                       TaskContext context) {
        String at = base.id() + ":" + p + ":" + sig;
        String version = base.version();
        KeyIndex index;
        synchronized (KeyIndex.class) {
            index = (KeyIndex) ALL.get(at);
            if (index == null || !index.version.equals(version)) {
                if (index != null) total -= index.bytes;
                index = new KeyIndex(version);
                ALL.put(at, index);
            }
        }
        synchronized (index) {
            if (!index.built) {
                index.build(base, p, keys, columns, budget(), context);
                synchronized (KeyIndex.class) {
                    if (ALL.get(at) == index) {
                        total += index.bytes;
                        evict(at);
                    }
                }
            }
        }
        return index.tooLarge ? null : index;
    }

    static synchronized void setBudget(long bytes) { budgetSet = bytes; }

    private static synchronized long budget() {
        if (budgetSet >= 0) return budgetSet;
        long fallback = Runtime.getRuntime().maxMemory() / 4;
        SparkEnv env = SparkEnv.get();
        return env == null ? fallback : env.conf().getLong("spark.streamfold.indexBytes", fallback);
    }

    /** Drop the least recently used indexes (but ``keep``) until all fit the budget. */
    private static void evict(String keep) {
        long limit = budget();
        java.util.Iterator it = ALL.entrySet().iterator();
        while (total > limit && it.hasNext()) {
            java.util.Map.Entry e = (java.util.Map.Entry) it.next();
            if (e.getKey().equals(keep)) continue;
            KeyIndex old = (KeyIndex) e.getValue();
            total -= old.bytes;
            it.remove();
        }
    }

    /** Drop the indexes of the slots ``ids`` (the bases of prepared plans no longer run). */
    static synchronized void drop(long[] ids) {
        java.util.Iterator it = ALL.entrySet().iterator();
        while (it.hasNext()) {
            java.util.Map.Entry e = (java.util.Map.Entry) it.next();
            String at = (String) e.getKey();
            long id = Long.parseLong(at.substring(0, at.indexOf(':')));
            for (int i = 0; i < ids.length; i++) {
                if (ids[i] == id) {
                    total -= ((KeyIndex) e.getValue()).bytes;
                    it.remove();
                    break;
                }
            }
        }
    }

    /** How many indexes the JVM holds (partitions too large for the budget are not), and their
     *  estimated bytes (for tests and the log). */
    static synchronized long[] held() {
        long n = 0;
        java.util.Iterator it = ALL.values().iterator();
        while (it.hasNext()) {
            KeyIndex index = (KeyIndex) it.next();
            if (index.rows != null) n++;
        }
        return new long[] { n, total };
    }

    private void build(SlotRDD base, int p, scala.collection.immutable.Seq keys, scala.collection.immutable.Seq columns, long limit,
                       TaskContext context) {
        built = true;
        UnsafeProjection key = UnsafeProjection.create(keys, columns);
        java.util.ArrayList kept = new java.util.ArrayList();
        java.util.ArrayList before = new java.util.ArrayList();
        scala.collection.Iterator it = base.iterator(base.partitions()[p], context);
        long size = 0;
        while (it.hasNext()) {
            InternalRow row = (InternalRow) it.next();
            UnsafeRow k = key.apply(row);
            if (anyNull(k)) continue;  // `=` matches no NULL
            InternalRow copy = row.copy();
            UnsafeRow kc = k.copy();
            Integer last = (Integer) first.put(kc, Integer.valueOf(kept.size()));
            before.add(last == null ? Integer.valueOf(-1) : last);
            kept.add(copy);
            // the row's and the key's bytes, and per row: two row objects and their arrays' headers,
            // a map entry with its boxed position, the array slots (~180 bytes on a 64-bit JVM)
            size += (copy instanceof UnsafeRow ? ((UnsafeRow) copy).getSizeInBytes() : 64) + kc.getSizeInBytes() + 180;
            if (size > limit) {  // (keys of a row already in `first` are counted again: an estimate)
                tooLarge = true;
                first.clear();
                return;
            }
        }
        rows = (InternalRow[]) kept.toArray(new InternalRow[kept.size()]);
        previous = new int[rows.length];
        for (int i = 0; i < rows.length; i++) previous[i] = ((Integer) before.get(i)).intValue();
        bytes = size;
    }

    /** Add the rows whose key is ``k`` to ``out``. */
    void find(UnsafeRow k, java.util.ArrayList out) {
        Integer at = (Integer) first.get(k);
        int i = at == null ? -1 : at.intValue();
        while (i >= 0) {
            out.add(rows[i]);
            i = previous[i];
        }
    }

    static boolean anyNull(UnsafeRow k) {
        for (int i = 0; i < k.numFields(); i++) if (k.isNullAt(i)) return true;
        return false;
    }
}
