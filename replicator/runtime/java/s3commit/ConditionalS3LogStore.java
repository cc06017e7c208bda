package replicator.s3commit;

import java.io.ByteArrayOutputStream;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import io.delta.storage.HadoopFileSystemLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import org.apache.hadoop.fs.s3a.impl.PutObjectOptions;
import software.amazon.awssdk.awscore.AwsRequestOverrideConfiguration;
import software.amazon.awssdk.core.exception.ApiCallTimeoutException;
import software.amazon.awssdk.core.exception.SdkClientException;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.GetObjectRequest;
import software.amazon.awssdk.services.s3.model.HeadObjectRequest;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Request;
import software.amazon.awssdk.services.s3.model.ListObjectsV2Response;
import software.amazon.awssdk.services.s3.model.NoSuchKeyException;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;
import software.amazon.awssdk.services.s3.model.S3Exception;
import software.amazon.awssdk.services.s3.model.S3Object;

/**
 * Delta's log store for {@code s3a://} with commits the store itself will not let anyone
 * overwrite: a commit file is one PUT with {@code If-None-Match: *}, so of two writers of the same
 * version exactly one wins, whichever JVM or machine they run in (Delta's own
 * {@code S3SingleDriverLogStore} checks existence and then PUTs, which is safe inside one JVM
 * only). The loser gets {@link CommitRacedException} in a replicator run, Delta's own
 * {@code FileAlreadyExistsException} in any other JVM ({@link #raced}). Before each commit the writer lease is
 * checked in the JVM ({@link Fence}), and a pinned table's commit must have the version its write
 * was planned on ({@link Pin}). Checkpoints and other overwritable files are plain PUTs.
 *
 * <p>A fenced commit's PUT, retries included, is bounded by the time the lease has left. One that
 * runs out, fails on the way (the store may have taken it before the connection broke), or is
 * refused with 409 (another request for the same key still in flight, perhaps our own earlier
 * attempt) is undecided: it may still land. The store is read until the object
 * settles or the bound is spent; ours found there is our commit, anything else (or nothing yet)
 * is a lost race ({@link CommitRacedException}), which the replicator re-plans from the log with
 * this table pinned, so a late landing of the undecided PUT is refused or read, never written over.
 */
public class ConditionalS3LogStore extends HadoopFileSystemLogStore {

    public ConditionalS3LogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    private static byte[] body(Iterator<String> actions) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        while (actions.hasNext()) {
            byte[] line = (actions.next() + "\n").getBytes(StandardCharsets.UTF_8);
            out.write(line, 0, line.length);
        }
        return out.toByteArray();
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        byte[] data = body(actions);
        ListingCache.writing(fs.makeQualified(path.getParent()).toString(), () -> put(fs, path, data, overwrite));
    }

    private void put(FileSystem fs, Path path, byte[] data, boolean overwrite) throws IOException {
        if (overwrite) {
            try (FSDataOutputStream out = fs.create(path, true)) {
                out.write(data);
            }
            return;
        }
        Fence.check(path.toString());
        long version = commitVersion(path);
        if (version >= 0) {
            Pin.check(path.getParent().toUri(), version);
            Faults.point("before_commit_put");
        }
        if (!(fs instanceof S3AFileSystem)) {
            throw new IOException("replicator: " + path + " is not on S3A (" + fs.getClass().getName()
                    + "); this log store serves s3a:// tables only");
        }
        S3AFileSystem s3a = (S3AFileSystem) fs;
        S3Client client = s3a.getS3AInternals().getAmazonS3Client("conditional Delta commit");
        String bucket = s3a.getBucket();
        String key = s3a.pathToKey(s3a.makeQualified(path));
        // S3A's own request factory: the bucket's encryption, ACL and storage-class settings apply
        // to the commit file as to every other file S3A writes; only the condition is added.
        PutObjectRequest.Builder builder = s3a.getS3AInternals().getStore().getRequestFactory()
                .newPutObjectRequestBuilder(key, PutObjectOptions.keepingDirs(), (long) data.length, false);
        AwsRequestOverrideConfiguration.Builder override = builder.overrideConfiguration() == null
                ? AwsRequestOverrideConfiguration.builder()
                : builder.overrideConfiguration().toBuilder();
        override.putHeader("If-None-Match", "*");
        long bound = Fence.remainingNanos();
        long until = bound == Long.MAX_VALUE ? Long.MAX_VALUE : System.nanoTime() + bound;
        if (bound != Long.MAX_VALUE) {
            override.apiCallTimeout(Duration.ofNanos(Math.max(bound, MIN_CALL_NANOS)));
        }
        PutObjectRequest put = builder.overrideConfiguration(override.build()).build();
        try {
            client.putObject(put, RequestBody.fromBytes(data));
            written(path, version);
        } catch (ApiCallTimeoutException e) {
            settle(client, bucket, key, data, path, version, until, "its PUT outlived the lease's time left");
        } catch (SdkClientException e) {
            // Cut off on the way (a reset, a read timeout): the store may have taken it all the same.
            settle(client, bucket, key, data, path, version, until, "its PUT failed on the way: " + e.getMessage());
        } catch (S3Exception e) {
            int status = e.statusCode();
            if (status == 412) {
                if (!Arrays.equals(data, existing(client, bucket, key, until))) {
                    throw raced(path, "was written by another writer first (412)");
                }
                written(path, version);  // our own PUT landed and its retry was refused: the commit is ours
            } else if (status == 409) {
                settle(client, bucket, key, data, path, version, until, "another PUT of it was in flight (409)");
            } else {
                throw new IOException("replicator: could not write " + path + ": " + e.getMessage(), e);
            }
        } catch (SdkException e) {
            throw new IOException("replicator: could not write " + path + ": " + e.getMessage(), e);
        }
    }

    /**
     * A lost race. In a replicator run's JVM (the fence armed) it is {@link CommitRacedException},
     * which the replicator re-plans itself. In any other JVM (a user's OPTIMIZE configured by
     * {@code replicator spark-conf}, a notebook) it is what Delta's {@code LogStore} contract asks
     * for, a {@link FileAlreadyExistsException}: Delta checks the winning commit for conflicts and
     * retries at the next version, as it does on every other store.
     */
    private static IOException raced(Path path, String what) {
        String message = "replicator: commit raced: " + path + " " + what;
        if (Fence.armed()) {
            return new CommitRacedException(message);
        }
        return new FileAlreadyExistsException(path.toString(), null, message);
    }

    /** The shortest bound given to a commit PUT (a deadline about to pass still gets one try). */
    private static final long MIN_CALL_NANOS = 200_000_000L;
    /** How long an undecided commit is waited for at most, when the lease does not bound it. */
    private static final long SETTLE_NANOS = 10_000_000_000L;

    /**
     * An undecided commit: the object is read until it holds something or the time runs out. Our
     * bytes: the commit is ours. Another writer's, or none yet: a lost race, re-planned.
     */
    private static void settle(S3Client client, String bucket, String key, byte[] data, Path path, long version,
                               long until, String why) throws IOException {
        long end = Math.min(until, System.nanoTime() + SETTLE_NANOS);
        long pause = 50_000_000L;
        while (true) {
            byte[] found = existing(client, bucket, key, end);
            if (Arrays.equals(data, found)) {
                written(path, version);
                return;
            }
            if (found.length > 0) {
                throw raced(path, "was written by another writer first (" + why + ")");
            }
            long left = end - System.nanoTime();
            if (left <= 0) {
                throw raced(path, "is undecided (" + why
                        + "; not there yet): re-planned from the log, where a late landing is read or refused");
            }
            try {
                Thread.sleep(Math.max(1L, Math.min(pause, left) / 1_000_000L));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("replicator: interrupted while " + path + " was undecided", e);
            }
            pause = Math.min(pause * 2, 1_000_000_000L);
        }
    }

    /** N of a commit file {@code N.json} (20 digits), -1 for any other file (a checksum, a checkpoint). */
    private static long commitVersion(Path path) {
        return ListingCache.commitVersion(path.getName());
    }

    private static void written(Path path, long version) {
        if (version >= 0) {
            Pin.written(path.getParent().toUri(), version);
        }
    }

    /** The object's bytes, empty when it is not there (or not readable by {@code until}). */
    private static byte[] existing(S3Client client, String bucket, String key, long until) throws IOException {
        GetObjectRequest.Builder get = GetObjectRequest.builder().bucket(bucket).key(key);
        if (until != Long.MAX_VALUE) {
            long left = Math.max(until - System.nanoTime(), MIN_CALL_NANOS);
            get.overrideConfiguration(o -> o.apiCallTimeout(Duration.ofNanos(left)));
        }
        try (InputStream in = client.getObject(get.build())) {
            return in.readAllBytes();
        } catch (SdkException e) {
            return new byte[0];
        }
    }

    /**
     * The log's files named {@code path}'s name or later, in name order, listed from that name on
     * (S3's {@code StartAfter}). Delta's Hadoop log store lists the whole directory and filters it,
     * at every snapshot refresh (several per commit): a log keeps 30 days of commits
     * ({@code delta.logRetentionDuration}), so a followed table's listing would grow by a key or
     * two per step, a page per 1,000 keys. Subdirectories are not listed (Delta's own files in
     * {@code _delta_log} are at its top). A directory with nothing from the name on is checked
     * for existence, as Delta's contract asks ({@link FileNotFoundException} when absent).
     */
    @Override
    public Iterator<FileStatus> listFrom(Path path, Configuration hadoopConf) throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        String name = path.getName();
        if (!(fs instanceof S3AFileSystem) || name.isEmpty() || name.charAt(name.length() - 1) == 0) {
            return super.listFrom(path, hadoopConf);
        }
        S3AFileSystem s3a = (S3AFileSystem) fs;
        String dir = s3a.pathToKey(s3a.makeQualified(path.getParent()));
        String prefix = dir.isEmpty() ? "" : dir + "/";
        String cacheKey = s3a.makeQualified(path.getParent()).toString();
        boolean reuse = ListingCache.enabled(hadoopConf);
        S3Client client = s3a.getS3AInternals().getAmazonS3Client("Delta log listing");
        if (reuse) {
            List<FileStatus> again = ListingCache.reuse(cacheKey, name, 0L,
                    child -> eTag(client, s3a.getBucket(), prefix + child));
            if (again != null) {
                return again.iterator();
            }
        }
        long writes = ListingCache.writes(cacheKey);
        long began = System.nanoTime();
        Map<String, String> eTags = new HashMap<>();
        // StartAfter is exclusive: start after a key just below the name's, then keep names >= it.
        String below = name.substring(0, name.length() - 1) + (char) (name.charAt(name.length() - 1) - 1);
        int page = Math.max(1, hadoopConf.getInt("fs.s3a.paging.maximum", 5000));
        long blockSize = s3a.getDefaultBlockSize();
        List<FileStatus> out = new ArrayList<>();
        String token = null;
        try {
            do {
                ListObjectsV2Request.Builder request = s3a.getS3AInternals().getStore().getRequestFactory()
                        .newListObjectsV2RequestBuilder(prefix, "/", page).startAfter(prefix + below);
                if (token != null) {
                    request.continuationToken(token);
                }
                ListObjectsV2Response listed = client.listObjectsV2(request.build());
                for (S3Object object : listed.contents()) {
                    String child = object.key().substring(prefix.length());
                    if (!child.isEmpty() && child.compareTo(name) >= 0) {
                        out.add(new FileStatus(object.size(), false, 1, blockSize,
                                object.lastModified().toEpochMilli(), s3a.keyToQualifiedPath(object.key())));
                        eTags.put(child, unquoted(object.eTag()));
                    }
                }
                token = Boolean.TRUE.equals(listed.isTruncated()) ? listed.nextContinuationToken() : null;
            } while (token != null);
        } catch (SdkException e) {
            throw new IOException("replicator: could not list " + path.getParent() + ": " + e.getMessage(), e);
        }
        boolean there = !out.isEmpty() || (fs instanceof DataFileS3AFileSystem
                ? ((DataFileS3AFileSystem) fs).existsNow(path.getParent()) : fs.exists(path.getParent()));
        if (!there) {
            throw new FileNotFoundException(String.format("No such file or directory: %s", path.getParent()));
        }
        out.sort(Comparator.comparing(status -> status.getPath().getName()));
        if (reuse) {
            ListingCache.keep(cacheKey, name, out, began, writes, 0L, status -> eTags.get(status.getPath().getName()));
        }
        return out.iterator();
    }

    /** An object's ETag by a HEAD (one request whatever the directory holds); null when it is not there. */
    private static String eTag(S3Client client, String bucket, String key) throws IOException {
        try {
            return unquoted(client.headObject(HeadObjectRequest.builder().bucket(bucket).key(key).build()).eTag());
        } catch (NoSuchKeyException e) {
            return null;
        } catch (S3Exception e) {
            if (e.statusCode() == 404) {
                return null;
            }
            throw new IOException("replicator: could not look at " + key + ": " + e.getMessage(), e);
        } catch (SdkException e) {
            throw new IOException("replicator: could not look at " + key + ": " + e.getMessage(), e);
        }
    }

    private static String unquoted(String eTag) {
        return eTag == null ? "" : eTag.replace("\"", "");
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;
    }
}
