package streamfold.jvm;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.util.KnownSizeEstimation;
import org.apache.spark.util.SizeEstimator;

/**
 * A kept partition of a state as one block value: its rows, with their size known. Stored row by
 * row, a block's memory store samples its size again and again as it grows, walking the rows'
 * objects (Spark's SizeEstimator), which for a small state cost more than the rest of its task;
 * one value that tells its own size is stored at once. An UnsafeRow's size is its bytes plus the
 * object and its array's headers.
 */
public final class KeptRows implements KnownSizeEstimation, Serializable {
    private static final long serialVersionUID = 1L;
    private static final long ROW_OVERHEAD = 64;
    private final InternalRow[] rows;
    private final long size;

    KeptRows(ArrayList kept) {
        this.rows = new InternalRow[kept.size()];
        long bytes = 16L + 8L * rows.length;
        for (int i = 0; i < rows.length; i++) {
            InternalRow row = (InternalRow) kept.get(i);
            rows[i] = row;
            bytes += row instanceof UnsafeRow ? ((UnsafeRow) row).getSizeInBytes() + ROW_OVERHEAD : SizeEstimator.estimate(row);
        }
        this.size = bytes;
    }

    public long estimatedSize() { return size; }

    /** The rows of a block's values: each KeptRows' rows (a value of another kind as itself). */
    static scala.collection.Iterator rowsOf(scala.collection.Iterator values) {
        return values.flatMap(new scala.runtime.AbstractFunction1() {
            public Object apply(Object value) {
                if (value instanceof KeptRows)
                    return scala.jdk.javaapi.CollectionConverters.asScala(Arrays.asList(((KeptRows) value).rows).iterator());
                return scala.collection.Iterator$.MODULE$.single(value);
            }
        });
    }
}
