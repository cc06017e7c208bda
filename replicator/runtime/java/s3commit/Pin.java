package replicator.s3commit;

import java.net.URI;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

/**
 * The version each table's next data commit from this JVM must have. The Python side pins a table
 * when it reads from the table's log what the table holds (its applied ts, at the newest version):
 * the plan of every data write (append or MERGE, which rows are new) rests on that version. While
 * a data write of the table runs ({@link #guard}), {@link ConditionalS3LogStore} writes its commit
 * N only when N is the pinned version; so a commit of anyone else in between (a stale holder's
 * late one) makes the write fail with {@link CommitRacedException} instead of landing on top of
 * it, and the applier reads the log again, re-plans from what the table holds and pins again.
 * Every commit this JVM writes (data, DDL, OPTIMIZE) moves the pin on when it is the pinned
 * version, and spoils it when it is not (someone else committed before it): the next data write
 * is then refused once and re-planned. A table never pinned (a new one, a tool's session) is not
 * checked.
 */
public final class Pin {
    private static final long SPOILT = -2L;
    private static final Map<String, Long> NEXT = new HashMap<>();
    private static final Set<String> GUARDED = new HashSet<>();

    private Pin() {
    }

    /** Where a table's log is, as the key of both sides: authority and path, no scheme, no trailing slash. */
    static String key(URI tableOrLog) {
        String path = tableOrLog.getPath() == null ? "" : tableOrLog.getPath();
        while (path.endsWith("/")) {
            path = path.substring(0, path.length() - 1);
        }
        if (path.endsWith("/_delta_log")) {
            path = path.substring(0, path.length() - "/_delta_log".length());
        }
        return (tableOrLog.getAuthority() == null ? "" : tableOrLog.getAuthority()) + path;
    }

    /** The table at {@code table} (a URI) holds what this JVM read at {@code version}: its next commit is that + 1. */
    public static void readAt(String table, long version) {
        synchronized (NEXT) {
            NEXT.put(key(URI.create(table)), version + 1);
        }
    }

    /** A data write of the table starts: its commit must have the pinned version. */
    public static void guard(String table) {
        synchronized (NEXT) {
            GUARDED.add(key(URI.create(table)));
        }
    }

    /** The data write of the table ended (committed or not). */
    public static void unguard(String table) {
        synchronized (NEXT) {
            GUARDED.remove(key(URI.create(table)));
        }
    }

    /** The version the table's next data commit must have; -1 when it is not pinned, -2 when spoilt. */
    public static long next(String table) {
        synchronized (NEXT) {
            Long next = NEXT.get(key(URI.create(table)));
            return next == null ? -1L : next;
        }
    }

    /** Before writing commit {@code version} of the table whose log is {@code log}. */
    static void check(URI log, long version) throws CommitRacedException {
        synchronized (NEXT) {
            String k = key(log);
            Long next = NEXT.get(k);
            if (next != null && next != version && GUARDED.contains(k)) {
                throw new CommitRacedException("replicator: commit raced: " + log + " moved since the write was "
                        + "planned" + (next == SPOILT ? "" : " on version " + (next - 1)) + " (writing " + version + ")");
            }
        }
    }

    /** Commit {@code version} of the table whose log is {@code log} was written by this JVM. */
    static void written(URI log, long version) {
        synchronized (NEXT) {
            String k = key(log);
            Long next = NEXT.get(k);
            if (next != null) {
                NEXT.put(k, next == version ? version + 1 : SPOILT);
            }
        }
    }
}
