package replicator.s3commit;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Iterator;

import io.delta.storage.HadoopFileSystemLogStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.s3a.S3AFileSystem;
import org.apache.hadoop.fs.s3a.impl.PutObjectOptions;
import software.amazon.awssdk.awscore.AwsRequestOverrideConfiguration;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.core.sync.RequestBody;
import software.amazon.awssdk.services.s3.S3Client;
import software.amazon.awssdk.services.s3.model.GetObjectRequest;
import software.amazon.awssdk.services.s3.model.PutObjectRequest;
import software.amazon.awssdk.services.s3.model.S3Exception;

/**
 * Delta's log store for {@code s3a://} with commits the store itself will not let anyone
 * overwrite: a commit file is one PUT with {@code If-None-Match: *}, so of two writers of the same
 * version exactly one wins, whichever JVM or machine they run in (Delta's own
 * {@code S3SingleDriverLogStore} checks existence and then PUTs, which is safe inside one JVM
 * only). The loser gets {@link CommitRacedException}. Before each commit the writer lease is
 * checked in the JVM ({@link Fence}), and a pinned table's commit must have the version its write
 * was planned on ({@link Pin}). Checkpoints and other overwritable files are plain PUTs.
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
        PutObjectRequest put = builder.overrideConfiguration(override.putHeader("If-None-Match", "*").build()).build();
        try {
            client.putObject(put, RequestBody.fromBytes(data));
            written(path, version);
        } catch (S3Exception e) {
            int status = e.statusCode();
            if (status != 412 && status != 409) {
                throw new IOException("replicator: could not write " + path + ": " + e.getMessage(), e);
            }
            if (!Arrays.equals(data, existing(client, bucket, key))) {
                throw new CommitRacedException("replicator: commit raced: " + path
                        + " was written by another writer first (" + status + ")");
            }
            // Our own PUT landed and its retry was refused: the commit is ours.
            written(path, version);
        } catch (SdkException e) {
            throw new IOException("replicator: could not write " + path + ": " + e.getMessage(), e);
        }
    }

    /** N of a commit file {@code N.json} (20 digits), -1 for any other file (a checksum, a checkpoint). */
    private static long commitVersion(Path path) {
        String name = path.getName();
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

    private static void written(Path path, long version) {
        if (version >= 0) {
            Pin.written(path.getParent().toUri(), version);
        }
    }

    private static byte[] existing(S3Client client, String bucket, String key) throws IOException {
        try (InputStream in = client.getObject(GetObjectRequest.builder().bucket(bucket).key(key).build())) {
            return in.readAllBytes();
        } catch (SdkException e) {
            return new byte[0];
        }
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;
    }
}
