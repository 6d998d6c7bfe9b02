package streamfold.jvm;

import org.apache.spark.Partition;
import org.apache.spark.SparkContext;
import org.apache.spark.TaskContext;
import org.apache.spark.rdd.RDD;

/** Never computed: it only lends its partitions (the files of a batch) to a coalesced partition
 *  of a prepared stream's file scan (``Plans.rescan``), which looks its parents up in it. */
public class FilesRDD extends RDD {
    private static final long serialVersionUID = 1L;
    private final Partition[] files;

    public FilesRDD(SparkContext sc, Partition[] files) {
        super(sc, (scala.collection.immutable.Seq) scala.collection.immutable.Nil$.MODULE$,
              scala.reflect.ClassTag$.MODULE$.AnyRef());
        this.files = files;
    }

    public Partition[] getPartitions() { return files; }

    public scala.collection.Iterator compute(Partition split, TaskContext context) {
        throw new UnsupportedOperationException("streamfold: FilesRDD only lends its partitions");
    }
}
