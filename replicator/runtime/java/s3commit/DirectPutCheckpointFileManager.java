package replicator.s3commit;

import java.io.IOException;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.UnsupportedFileSystemException;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import org.apache.spark.sql.execution.streaming.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.FileContextBasedCheckpointFileManager;
import org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager;

/**
 * Spark's checkpoint file manager with an atomic create on {@code s3a://} that is one PUT.
 *
 * <p>Why: Delta writes each commit's checksum file ({@code NNN.crc}) through Spark's
 * {@link CheckpointFileManager}, whose default makes a file atomic by writing a temporary file and
 * renaming it: on S3A a rename is a COPY and a DELETE around a dozen existence probes, and the
 * probes of the log directory list it (22 of a small MERGE's 64 requests, measured on the local S3
 * server). An S3 object is visible only once its upload completes, so a PUT is atomic already:
 * here S3A's stream is written straight to the path, and a cancelled write aborts the upload, so
 * nothing is left behind. Every other file system, and every other operation, is Spark's own
 * manager's (the one Spark would have chosen without this class).
 */
public class DirectPutCheckpointFileManager implements CheckpointFileManager {

    private final FileSystem fs;
    private final CheckpointFileManager spark;

    public DirectPutCheckpointFileManager(Path path, Configuration hadoopConf) throws IOException {
        this.fs = path.getFileSystem(hadoopConf);
        this.spark = sparksOwn(path, hadoopConf);
    }

    /** What Spark's {@code CheckpointFileManager.create} picks when no class is configured. */
    private static CheckpointFileManager sparksOwn(Path path, Configuration hadoopConf) {
        try {
            return new FileContextBasedCheckpointFileManager(path, hadoopConf);
        } catch (Exception e) {  // Scala declares no checked exceptions: caught by kind
            if (e instanceof UnsupportedFileSystemException) {
                return new FileSystemBasedCheckpointFileManager(path, hadoopConf);
            }
            throw rethrow(e);
        }
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> RuntimeException rethrown(Throwable e) throws E {
        throw (E) e;
    }

    /** A checked exception passed on unchanged (the Scala callers catch it by its own type). */
    private static RuntimeException rethrow(Throwable e) {
        return DirectPutCheckpointFileManager.<RuntimeException>rethrown(e);
    }

    @Override
    public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
        if (!(fs instanceof S3AFileSystem)) {
            return spark.createAtomic(path, overwriteIfPossible);
        }
        try {
            return new DirectPut(fs.create(path, overwriteIfPossible), fs.makeQualified(path.getParent()).toString());
        } catch (IOException e) {
            throw rethrow(e);
        }
    }

    /** The S3A stream itself: its object appears at close, never before; cancel aborts it. */
    private static final class DirectPut extends CancellableFSDataOutputStream {
        private final FSDataOutputStream out;
        private final String dir;
        private boolean ended;

        DirectPut(FSDataOutputStream out, String dir) {
            super(out);
            this.out = out;
            this.dir = dir;
        }

        @Override
        public synchronized void cancel() {
            if (ended) {
                return;
            }
            ended = true;
            out.abort();  // S3A's block output stream is Abortable: the upload is dropped, not completed
        }

        @Override
        public synchronized void close() throws IOException {
            if (ended) {
                return;
            }
            ended = true;
            try {
                super.close();
            } finally {
                ListingCache.forget(dir);  // a checkpoint or checksum is in the log now: list it afresh
            }
        }
    }

    @Override
    public FSDataInputStream open(Path path) {
        return spark.open(path);
    }

    @Override
    public FileStatus[] list(Path path, PathFilter filter) {
        return spark.list(path, filter);
    }

    @Override
    public void mkdirs(Path path) {
        spark.mkdirs(path);
    }

    @Override
    public boolean exists(Path path) {
        return spark.exists(path);
    }

    @Override
    public void delete(Path path) {
        spark.delete(path);
    }

    @Override
    public boolean isLocal() {
        return spark.isLocal();
    }

    @Override
    public Path createCheckpointDirectory() {
        return spark.createCheckpointDirectory();
    }
}
