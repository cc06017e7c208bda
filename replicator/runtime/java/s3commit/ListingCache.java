package replicator.s3commit;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;

/**
 * The last listing of each Delta log directory, handed out again while nothing was committed since.
 *
 * <p>Why: Delta lists a table's log from its checkpoint on twice for one statement (when the
 * statement is analysed and when its transaction starts), and a listing costs what the directory
 * holds on a local disk and on S3 servers that scan a prefix, while a log keeps 30 days of commits:
 * a statement between two commits needs one. A listing is handed out again only when all hold:
 * <ul>
 * <li>it began at most {@link #MAX_AGE_NANOS} ago, from a name no later than the one asked for;</li>
 * <li>nothing was written into the directory through this JVM's log stores or checkpoint manager
 *     since it began ({@link #forget});</li>
 * <li>its newest commit {@code N.json} is still there, the same object, and {@code N+1.json} is not
 *     (a commit by anyone, from any JVM, ends it): two probes, each a stat or a HEAD;</li>
 * <li>the directory's own stamp (a local directory's modification time; none on S3) is unchanged,
 *     and the listing began well after it ({@link #SETTLED_MILLIS}), so a file created in the same
 *     clock tick as the listing cannot hide behind an unchanged time.</li>
 * </ul>
 * So a reader sees another writer's commit as soon as a fresh listing would, and what a reuse can
 * miss (a checkpoint or checksum that another JVM wrote for a commit already listed) only makes
 * Delta take a longer road to the same snapshot. {@code replicator.log.reuseListing=false} in the
 * Hadoop configuration turns reuse off.
 */
public final class ListingCache {

    /** How long a listing may be handed out again: a statement's two listings are well within it. */
    static final long MAX_AGE_NANOS = 5_000_000_000L;
    /** How much older than a listing a local directory's time must be for the listing to be kept. */
    static final long SETTLED_MILLIS = 100L;
    static final String SWITCH = "replicator.log.reuseListing";
    /** Beyond this many directories kept, the expired listings are let go (tables come and go). */
    static final int PRUNE_ABOVE = 1024;

    /** What a store answers for one file: an identity (size and time, or an ETag), null when absent. */
    interface Probe {
        String identity(String name) throws IOException;
    }

    private static final class Entry {
        final String from;
        final List<FileStatus> files;
        final long began;
        final String newest;
        final String newestIdentity;
        final long stamp;

        Entry(String from, List<FileStatus> files, long began, String newest, String newestIdentity, long stamp) {
            this.from = from;
            this.files = files;
            this.began = began;
            this.newest = newest;
            this.newestIdentity = newestIdentity;
            this.stamp = stamp;
        }
    }

    private static final ConcurrentHashMap<String, Entry> LAST = new ConcurrentHashMap<>();
    private static final ConcurrentHashMap<String, Long> WRITES = new ConcurrentHashMap<>();
    private static final AtomicLong HITS = new AtomicLong();

    private ListingCache() {
    }

    static boolean enabled(Configuration conf) {
        return conf.getBoolean(SWITCH, true);
    }

    /** Listings handed out again in this JVM so far (for tests and diagnostics). */
    public static long hits() {
        return HITS.get();
    }

    /** Writes into {@code dir} through this JVM so far: a listing begun before the next one is not kept. */
    static long writes(String dir) {
        return WRITES.getOrDefault(dir, 0L);
    }

    /** Something was (or is about to be) written into {@code dir}: its listing is not handed out again. */
    static void forget(String dir) {
        WRITES.merge(dir, 1L, Long::sum);
        LAST.remove(dir);
    }

    /** A write into a log directory, as the stores make it. */
    interface Write {
        void run() throws IOException;
    }

    /** Runs a write into {@code dir}, forgetting its listing before and after: none that spans it is handed out again. */
    static void writing(String dir, Write write) throws IOException {
        forget(dir);
        try {
            write.run();
        } finally {
            forget(dir);
        }
    }

    /** N.json's N, or -1 for any other name. */
    static long commitVersion(String name) {
        if (name.length() != 25 || !name.endsWith(".json")) {
            return -1L;
        }
        for (int i = 0; i < 20; i++) {
            if (!Character.isDigit(name.charAt(i))) {
                return -1L;
            }
        }
        return Long.parseLong(name.substring(0, 20));
    }

    /**
     * Keeps a listing of {@code dir} from {@code from} on (sorted by name), begun at {@code began}
     * (System.nanoTime) when {@code writesBefore} writes had been seen, with the directory's stamp
     * then; {@code newestIdentity} is its newest commit's identity as the probe would give it.
     */
    static void keep(String dir, String from, List<FileStatus> files, long began, long writesBefore, long stamp,
                     java.util.function.Function<FileStatus, String> identity) {
        FileStatus newest = null;
        for (FileStatus status : files) {
            if (commitVersion(status.getPath().getName()) >= 0) {
                newest = status;
            }
        }
        if (newest == null) {
            return;
        }
        Entry entry = new Entry(from, List.copyOf(files), began, newest.getPath().getName(), identity.apply(newest), stamp);
        if (LAST.size() >= PRUNE_ABOVE) {
            LAST.values().removeIf(old -> System.nanoTime() - old.began > MAX_AGE_NANOS);
        }
        LAST.put(dir, entry);
        if (writes(dir) != writesBefore) {
            LAST.remove(dir, entry);  // a write came in while it was listed
        }
    }

    /** The kept listing of {@code dir} from {@code from} on, when it may be handed out (see the class doc), else null. */
    static List<FileStatus> reuse(String dir, String from, long stamp, Probe probe) throws IOException {
        Entry entry = LAST.get(dir);
        if (entry == null || from.compareTo(entry.from) < 0 || entry.stamp != stamp
                || System.nanoTime() - entry.began > MAX_AGE_NANOS) {
            return null;
        }
        String next = String.format("%020d.json", commitVersion(entry.newest) + 1);
        if (!entry.newestIdentity.equals(probe.identity(entry.newest)) || probe.identity(next) != null
                || LAST.get(dir) != entry) {
            LAST.remove(dir, entry);
            return null;
        }
        List<FileStatus> out = new ArrayList<>(entry.files.size());
        for (FileStatus status : entry.files) {
            if (status.getPath().getName().compareTo(from) >= 0) {
                out.add(status);
            }
        }
        HITS.incrementAndGet();
        return out;
    }
}
