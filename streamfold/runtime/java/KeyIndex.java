package streamfold.jvm;

import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.unsafe.Platform;

/**
 * The rows of one partition of a state's base (a {@link SlotRDD} whose rows stay the same from
 * batch to batch: runtime/runs.py), hashed on a join's key: what a {@link LookupRDD} reads
 * instead of scanning the partition. Built the first time a job looks the partition up with
 * that key, kept in the JVM until the base is replaced (the slot reads other rows: a fold), and
 * dropped when all indexes together would outgrow their budget — a quarter of the heap, or
 * ``spark.streamfold.indexBytes`` — least recently used first. A partition too large for the
 * budget is not indexed: its look-ups scan it.
 *
 * The rows' bytes are copied into pages of up to 64 MB (the slot's reader may reuse one row
 * object), with per row its place, its size, its key's hash and the next row of its hash bucket:
 * about 30 bytes beside the row's own, and no object per row. A look-up compares the key of each
 * row of the probe key's bucket with the same hash, and returns rows that point into the pages.
 * The index lives in the JVM's heap outside Spark's memory manager; the budget bounds it.
 */
public final class KeyIndex {
    private static final java.util.LinkedHashMap ALL = new java.util.LinkedHashMap(16, 0.75f, true);
    private static final int PAGE = 1 << 26;
    private static long total;
    private static long budgetSet = -1;  // Plans.indexBudget: bytes, or -1 (the default)
    private static long builds, evicted, refused;  // since the JVM started (Plans.indexes)
    private static String app;  // the Spark application the indexes are of

    private final String version;
    private byte[][] pages;
    private long[] at;       // (page << 32) | offset of each row
    private int[] sizes;
    private int[] hashes;    // of each row's key
    private int[] next;      // the next row of the same bucket, or -1
    private int[] heads;     // bucket → its first row, or -1
    private int fields;
    private long bytes;
    private boolean built;
    private boolean tooLarge;

    private KeyIndex(String version) { this.version = version; }

    /** The index of ``base``'s partition ``p`` on ``keys`` (over the slot's ``columns``), or null
     *  if it is too large to keep (then the caller scans). ``sig``: the keys as text. */
    static KeyIndex of(SlotRDD base, int p, scala.collection.immutable.Seq keys, scala.collection.immutable.Seq columns,
                       String sig, TaskContext context) {
        String where = base.id() + ":" + p + ":" + sig;
        String version = base.version();
        SparkEnv env = SparkEnv.get();
        String application = env == null ? "" : env.conf().getAppId();
        KeyIndex index;
        synchronized (KeyIndex.class) {
            if (!application.equals(app)) {  // another SparkContext in this JVM: its RDD ids start over
                ALL.clear();
                total = 0;
                app = application;
            }
            index = (KeyIndex) ALL.get(where);
            if (index == null || !index.version.equals(version)) {
                if (index != null) total -= index.bytes;
                index = new KeyIndex(version);
                ALL.put(where, index);
            }
        }
        synchronized (index) {
            if (!index.built) {
                index.build(base, p, keys, columns, budget(), context);
                synchronized (KeyIndex.class) {
                    if (index.tooLarge) refused++; else if (index.next.length > 0) builds++;  // (not an empty partition's)
                    if (ALL.get(where) == index) {
                        total += index.bytes;
                        evict(where);
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
            if (old.pages != null) evicted++;
            it.remove();
        }
    }

    /** Drop the indexes of the slots ``ids`` (the bases of prepared plans no longer run). */
    static synchronized void drop(long[] ids) {
        java.util.Iterator it = ALL.entrySet().iterator();
        while (it.hasNext()) {
            java.util.Map.Entry e = (java.util.Map.Entry) it.next();
            String where = (String) e.getKey();
            long id = Long.parseLong(where.substring(0, where.indexOf(':')));
            for (int i = 0; i < ids.length; i++) {
                if (ids[i] == id) {
                    total -= ((KeyIndex) e.getValue()).bytes;
                    it.remove();
                    break;
                }
            }
        }
    }

    /** The indexes the JVM holds (not counting partitions too large for the budget), their
     *  estimated bytes; and since the JVM started, indexes built (of partitions with rows),
     *  evicted, and refused as too large. */
    static synchronized long[] held() {
        long n = 0;
        java.util.Iterator it = ALL.values().iterator();
        while (it.hasNext()) if (((KeyIndex) it.next()).pages != null) n++;
        return new long[] { n, total, builds, evicted, refused };
    }

    private void build(SlotRDD base, int p, scala.collection.immutable.Seq keys, scala.collection.immutable.Seq columns,
                       long limit, TaskContext context) {
        built = true;
        fields = columns.size();
        UnsafeProjection key = UnsafeProjection.create(keys, columns);
        UnsafeProjection whole = null;  // for rows that are not UnsafeRows
        java.util.ArrayList filled = new java.util.ArrayList();
        byte[] page = new byte[1 << 12];
        int used = 0;
        long kept = 0;
        int n = 0;
        long[] at = new long[1024];
        int[] sizes = new int[1024];
        int[] hashes = new int[1024];
        scala.collection.Iterator it = base.iterator(base.partitions()[p], context);
        while (it.hasNext()) {
            InternalRow row = (InternalRow) it.next();
            UnsafeRow k = key.apply(row);
            if (anyNull(k)) continue;  // `=` matches no NULL
            int hash = k.hashCode();
            UnsafeRow u;
            if (row instanceof UnsafeRow) {
                u = (UnsafeRow) row;
            } else {
                if (whole == null) whole = UnsafeProjection.create(columns, columns);
                u = whole.apply(row);
            }
            int size = u.getSizeInBytes();
            if (used + size > page.length) {
                filled.add(page);
                kept += used;
                page = new byte[(int) Math.max(size, Math.min(PAGE, Math.max(1 << 12, kept)))];
                used = 0;
            }
            u.writeToMemory(page, Platform.BYTE_ARRAY_OFFSET + used);
            if (n == at.length) {
                at = java.util.Arrays.copyOf(at, n * 2);
                sizes = java.util.Arrays.copyOf(sizes, n * 2);
                hashes = java.util.Arrays.copyOf(hashes, n * 2);
            }
            at[n] = ((long) filled.size() << 32) | used;
            sizes[n] = size;
            hashes[n] = hash;
            n++;
            used += size;
            if (kept + used + 34L * n > limit) {  // (34: the arrays' bytes per row, at their fullest)
                tooLarge = true;
                return;
            }
        }
        filled.add(page);
        pages = (byte[][]) filled.toArray(new byte[filled.size()][]);
        this.at = at;
        this.sizes = sizes;
        this.hashes = hashes;
        int buckets = Integer.highestOneBit(Math.max(16, n * 2 - 1)) * 2;
        heads = new int[buckets];
        java.util.Arrays.fill(heads, -1);
        next = new int[n];
        for (int i = 0; i < n; i++) {
            int b = hashes[i] & (buckets - 1);
            next[i] = heads[b];
            heads[b] = i;
        }
        long pageBytes = 0;
        for (int i = 0; i < pages.length; i++) pageBytes += pages[i].length;
        bytes = pageBytes + 20L * at.length + 4L * n + 4L * buckets + 64;
    }

    /** Add to ``out`` the rows whose key (``keyOf`` a row, as the index was built with) is ``k``. */
    void find(UnsafeRow k, UnsafeProjection keyOf, java.util.ArrayList out) {
        int hash = k.hashCode();
        int i = heads[hash & (heads.length - 1)];
        while (i >= 0) {
            if (hashes[i] == hash) {
                UnsafeRow row = new UnsafeRow(fields);
                row.pointTo(pages[(int) (at[i] >>> 32)], Platform.BYTE_ARRAY_OFFSET + (int) (at[i] & 0xffffffffL), sizes[i]);
                if (keyOf.apply(row).equals(k)) out.add(row);
            }
            i = next[i];
        }
    }

    static boolean anyNull(UnsafeRow k) {
        for (int i = 0; i < k.numFields(); i++) if (k.isNullAt(i)) return true;
        return false;
    }
}
