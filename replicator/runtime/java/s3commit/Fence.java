package replicator.s3commit;

import java.io.IOException;

/**
 * The writer lease as the driver JVM sees it. The Python side arms it after every renewal with
 * the time left before the lease's deadline; {@link ConditionalS3LogStore} refuses to write a
 * commit file once that time has passed or once the lease is known lost. The clock is
 * {@link System#nanoTime()}: it runs on while the process is stopped (SIGSTOP, a frozen VM), so a
 * holder that resumes after its term cannot commit, whatever its Python side is doing.
 */
public final class Fence {
    private static final Object LOCK = new Object();
    private static boolean armed;
    private static long deadline;
    private static String lost;

    private Fence() {
    }

    /** This JVM holds the lease for {@code nanos} more (from now). */
    public static void holdFor(long nanos) {
        synchronized (LOCK) {
            armed = true;
            deadline = System.nanoTime() + Math.max(0L, nanos);
            lost = null;
        }
    }

    /** This JVM no longer holds the lease: no commit file is written from now on. */
    public static void lose(String why) {
        synchronized (LOCK) {
            armed = true;
            lost = why;
        }
    }

    /** No lease (a tool, a notebook): commits are not fenced. */
    public static void disarm() {
        synchronized (LOCK) {
            armed = false;
            lost = null;
        }
    }

    /** Whether this JVM's commits are fenced: a replicator run holds (or held) the lease here. */
    public static boolean armed() {
        synchronized (LOCK) {
            return armed;
        }
    }

    /**
     * How long a commit may still take, in nanoseconds: the time left before the deadline, or
     * {@link Long#MAX_VALUE} when commits are not fenced. A commit's PUT is bounded by it, so it
     * cannot land long after the lease's term through retries or a stalled connection.
     */
    public static long remainingNanos() {
        synchronized (LOCK) {
            if (!armed) {
                return Long.MAX_VALUE;
            }
            return lost != null ? 0L : Math.max(0L, deadline - System.nanoTime());
        }
    }

    /** Throws {@link FencedException} unless a commit may be written now. */
    public static void check(String what) throws FencedException {
        synchronized (LOCK) {
            if (!armed) {
                return;
            }
            if (lost != null) {
                throw new FencedException("replicator: not writing " + what + ": the writer lease was lost (" + lost + ")");
            }
            if (System.nanoTime() - deadline > 0) {
                throw new FencedException("replicator: not writing " + what
                        + ": the writer lease's deadline passed without a renewal (paused or cut off from the store)");
            }
        }
    }

    /** A commit refused because this process no longer holds the warehouse's writer lease. */
    public static final class FencedException extends IOException {
        private static final long serialVersionUID = 1L;

        FencedException(String message) {
            super(message);
        }
    }
}
