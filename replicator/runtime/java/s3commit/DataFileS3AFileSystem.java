package replicator.s3commit;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.regex.Pattern;

import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import org.apache.hadoop.util.functional.FutureIO;

/**
 * Hadoop's s3a file system, reading a small Delta data file with one request instead of seven,
 * and finding a table's log without asking the store at every statement.
 *
 * <p>Why: Spark reads a Parquet file in two passes (its footer, then its row groups), and each
 * pass asks for the file's status, then opens it: s3a sends a HEAD for each of the four, a GET
 * for the footer's length, one for the footer, and one for the row groups. So a table of many
 * small files costs a read (and a MERGE's scans) a round trip per request per file, far more than
 * its bytes (issue 51, docs/object-store.md "Reading small files").
 *
 * <p>What it does, for data and change-data files only ({@code part-NNNNN-<uuid>...parquet},
 * {@code cdc-NNNNN-<uuid>...parquet}, outside {@code _delta_log}), which Delta writes once under
 * a name of their own and never rewrites, only deletes (VACUUM):
 * <ul>
 * <li>a file's status, once looked up, serves the status lookups and opens of the same path for
 *     {@link #STATUS_MILLIS}: an open passes it to s3a ({@code openFile().withFileStatus}), which
 *     then sends no HEAD;</li>
 * <li>a file of at most {@code replicator.s3a.smallFileBytes} (3 MiB; 0 turns it off) is read
 *     whole with one GET when first opened, as Trino's {@code parquet.small-file-threshold} does,
 *     and its bytes serve one more open within {@link #BYTES_MILLIS} (the row-group pass after
 *     the footer's), then are let go; at most {@link #MAX_KEPT_BYTES} are held at once (and no
 *     file above that size is read whole, whatever the setting).</li>
 * </ul>
 * And a table's log directory: Delta asks whether {@code <table>/_delta_log} exists each time it
 * resolves a table's path (a HEAD and a LIST, and on servers that scan a prefix the LIST costs what
 * the log holds); a yes is kept for {@link #STATUS_MILLIS}. A Delta log listing that finds nothing
 * asks again ({@link #existsNow}), so Delta still sees a deleted table as gone.
 * Everything else (the log's files, checkpoints, any other name) goes to s3a as before.
 *
 * <p>What can go stale: a file that another process deletes while its status is kept still
 * looks present; the read's GET then fails with the {@link FileNotFoundException} a HEAD would
 * have raised. A table whose directory another process deletes still has a {@code _delta_log} to
 * a bare existence check (Delta's only decides where the table's root is; its log listing then
 * finds nothing and asks the store again) for up to {@link #STATUS_MILLIS}. A delete through this
 * file system forgets what it deletes. The Hadoop setting {@code replicator.s3a.keepDataFileStatus=false}
 * turns it all off.
 */
public class DataFileS3AFileSystem extends S3AFileSystem {

    static final String LOG_DIR = "_delta_log";
    static final long STATUS_MILLIS = 60_000L;
    static final long BYTES_MILLIS = 10_000L;
    static final long MAX_KEPT_BYTES = 64L << 20;
    static final int MAX_STATUSES = 8_192;
    static final String SWITCH = "replicator.s3a.keepDataFileStatus";
    static final String SMALL_FILE_BYTES = "replicator.s3a.smallFileBytes";
    static final long DEFAULT_SMALL_FILE_BYTES = 3L << 20;

    private static final Pattern DATA_FILE = Pattern.compile(
        "(part|cdc)-\\d{5}-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}[^/]*\\.parquet");

    private static final class Kept<T> {
        final T value;
        final long at;

        Kept(T value, long at) {
            this.value = value;
            this.at = at;
        }
    }

    private final Object lock = new Object();
    private final Map<String, Kept<FileStatus>> statuses = new LinkedHashMap<>(256, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Kept<FileStatus>> eldest) {
            return size() > MAX_STATUSES;
        }
    };
    private final LinkedHashMap<String, Kept<byte[]>> bytes = new LinkedHashMap<>();
    private final Map<String, Long> logDirs = new LinkedHashMap<>(64, 0.75f, true) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
            return size() > MAX_STATUSES;
        }
    };
    private long keptBytes;
    private long statusHits;
    private long bytesHits;
    private long logDirHits;

    /** Whether {@code path} names a file Delta writes once and never rewrites. */
    public static boolean isDataFile(Path path) {
        if (!DATA_FILE.matcher(path.getName()).matches()) {
            return false;
        }
        for (Path p = path.getParent(); p != null; p = p.getParent()) {
            if (p.getName().equals("_delta_log")) {
                return false;
            }
        }
        return true;
    }

    private boolean keeps(Path path) {
        return getConf().getBoolean(SWITCH, true) && isDataFile(path);
    }

    private String key(Path path) {
        return makeQualified(path).toString();
    }

    /**
     * Status lookups and opens answered from a kept status, opens from kept bytes, and log directory
     * probes answered from a kept yes (tests, figures).
     */
    public long[] keptHits() {
        synchronized (lock) {
            return new long[] {statusHits, bytesHits, logDirHits};
        }
    }

    private FileStatus keptStatus(Path path) {
        if (!keeps(path)) {
            return null;
        }
        String key = key(path);
        synchronized (lock) {
            Kept<FileStatus> k = statuses.get(key);
            if (k == null || System.currentTimeMillis() - k.at > STATUS_MILLIS) {
                statuses.remove(key);
                return null;
            }
            statusHits++;
            return k.value;
        }
    }

    @Override
    public FileStatus getFileStatus(Path path) throws IOException {
        FileStatus known = keptStatus(path);
        if (known != null) {
            return known;
        }
        FileStatus status = super.getFileStatus(path);
        if (status.isFile() && keeps(path)) {
            synchronized (lock) {
                statuses.put(key(path), new Kept<>(status, System.currentTimeMillis()));
            }
        }
        return status;
    }

    @Override
    public FSDataInputStream open(Path path, int bufferSize) throws IOException {
        FileStatus known = keptStatus(path);
        if (known == null) {
            return super.open(path, bufferSize);
        }
        long small = Math.min(getConf().getLong(SMALL_FILE_BYTES, DEFAULT_SMALL_FILE_BYTES), MAX_KEPT_BYTES);
        if (known.getLen() <= small) {
            return new FSDataInputStream(new BytesInputStream(wholeFile(path, known)));
        }
        return FutureIO.awaitFuture(openFile(path).withFileStatus(known)
            .opt("fs.option.openfile.buffer.size", bufferSize).build());
    }

    /** The file's bytes: those a recent open read (then let go), else one GET of the whole file. */
    private byte[] wholeFile(Path path, FileStatus status) throws IOException {
        String key = key(path);
        long now = System.currentTimeMillis();
        synchronized (lock) {
            Kept<byte[]> k = bytes.remove(key);
            if (k != null) {
                keptBytes -= k.value.length;
                if (now - k.at <= BYTES_MILLIS && k.value.length == status.getLen()) {
                    bytesHits++;
                    return k.value;
                }
            }
        }
        byte[] read = new byte[(int) status.getLen()];
        try (FSDataInputStream in = FutureIO.awaitFuture(openFile(path).withFileStatus(status)
                .opt("fs.option.openfile.read.policy", "whole-file").build())) {
            in.readFully(0, read);
        }
        synchronized (lock) {
            Kept<byte[]> old = bytes.put(key, new Kept<>(read, now));
            keptBytes += read.length - (old == null ? 0 : old.value.length);
            Iterator<Kept<byte[]>> it = bytes.values().iterator();
            while (it.hasNext()) {
                Kept<byte[]> k = it.next();
                if (keptBytes <= MAX_KEPT_BYTES && now - k.at <= BYTES_MILLIS) {
                    break;
                }
                keptBytes -= k.value.length;
                it.remove();
            }
        }
        return read;
    }

    /** Whether {@code path} is there; for a table's {@code _delta_log}, a yes is kept a while. */
    @Override
    public boolean exists(Path path) throws IOException {
        if (!path.getName().equals(LOG_DIR) || !getConf().getBoolean(SWITCH, true)) {
            return super.exists(path);
        }
        String key = key(path);
        long now = System.currentTimeMillis();
        synchronized (lock) {
            Long at = logDirs.get(key);
            if (at != null && now - at <= STATUS_MILLIS) {
                logDirHits++;
                return true;
            }
        }
        boolean there = super.exists(path);
        synchronized (lock) {
            if (there) {
                logDirs.put(key, now);
            } else {
                logDirs.remove(key);
            }
        }
        return there;
    }

    /** Whether {@code path} is there, asked of the store whatever is kept (a log listing that found nothing). */
    public boolean existsNow(Path path) throws IOException {
        forget(path);
        return super.exists(path);
    }

    @Override
    public boolean delete(Path path, boolean recursive) throws IOException {
        forget(path);
        try {
            return super.delete(path, recursive);
        } finally {
            forget(path);
        }
    }

    private void forget(Path path) {
        String key = key(path);
        String under = key.endsWith("/") ? key : key + "/";
        synchronized (lock) {
            statuses.keySet().removeIf(k -> k.equals(key) || k.startsWith(under));
            logDirs.keySet().removeIf(k -> k.equals(key) || k.startsWith(under));
            Iterator<Map.Entry<String, Kept<byte[]>>> it = bytes.entrySet().iterator();
            while (it.hasNext()) {
                Map.Entry<String, Kept<byte[]>> e = it.next();
                if (e.getKey().equals(key) || e.getKey().startsWith(under)) {
                    keptBytes -= e.getValue().value.length;
                    it.remove();
                }
            }
        }
    }
}
