package replicator.s3commit;

import java.io.IOException;

/**
 * Another writer wrote this commit version first, as a replicator run's JVM sees it (its lease's
 * fence armed; any other JVM gets Delta's own {@code FileAlreadyExistsException}). Deliberately
 * not a {@code FileAlreadyExistsException} here: Delta would re-plan a blind append on top of the other
 * commit by itself, and if that commit was a stale holder's write of the same rows they would be
 * applied twice. The replicator re-plans the write itself, knowing what the other commit holds.
 */
public final class CommitRacedException extends IOException {
    private static final long serialVersionUID = 1L;

    public CommitRacedException(String message) {
        super(message);
    }
}
