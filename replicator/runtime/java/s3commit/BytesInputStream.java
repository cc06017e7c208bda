package replicator.s3commit;

import java.io.EOFException;

import org.apache.hadoop.fs.FSInputStream;

/** A file's bytes, already in memory, as a seekable Hadoop stream ({@link DataFileS3AFileSystem}). */
final class BytesInputStream extends FSInputStream {

    private final byte[] bytes;
    private int pos;

    BytesInputStream(byte[] bytes) {
        this.bytes = bytes;
    }

    @Override
    public void seek(long to) throws EOFException {
        if (to < 0 || to > bytes.length) {
            throw new EOFException("cannot seek to " + to + " in a file of " + bytes.length + " bytes");
        }
        pos = (int) to;
    }

    @Override
    public long getPos() {
        return pos;
    }

    @Override
    public boolean seekToNewSource(long targetPos) {
        return false;
    }

    @Override
    public int read() {
        return pos < bytes.length ? bytes[pos++] & 0xff : -1;
    }

    @Override
    public int read(byte[] buf, int off, int len) {
        if (len == 0) {
            return 0;
        }
        if (pos >= bytes.length) {
            return -1;
        }
        int n = Math.min(len, bytes.length - pos);
        System.arraycopy(bytes, pos, buf, off, n);
        pos += n;
        return n;
    }

    @Override
    public int available() {
        return bytes.length - pos;
    }
}
