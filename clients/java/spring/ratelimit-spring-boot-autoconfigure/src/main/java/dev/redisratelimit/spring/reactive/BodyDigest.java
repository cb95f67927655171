package dev.redisratelimit.spring.reactive;

import java.nio.ByteBuffer;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import org.springframework.core.io.buffer.DataBuffer;

/**
 * SHA-256 of the request body bytes as the handler reads them (up to a
 * limit), so duplicate prevention compares what the client sent without
 * keeping the body: the WebFlux counterpart of the MVC adapter's
 * ContentCachingRequestWrapper, with the same digest (first 16 bytes, hex).
 */
final class BodyDigest {

    static final String ATTRIBUTE = BodyDigest.class.getName();

    private final MessageDigest sha;
    private long left;

    BodyDigest(int limit) {
        try {
            this.sha = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        this.left = limit;
    }

    synchronized void update(DataBuffer buffer) {
        try (DataBuffer.ByteBufferIterator it = buffer.readableByteBuffers()) {
            while (it.hasNext() && left > 0) {
                ByteBuffer b = it.next().duplicate();
                if (b.remaining() > left) {
                    b.limit(b.position() + (int) left);
                }
                left -= b.remaining();
                sha.update(b);
            }
        }
    }

    synchronized String hex() {
        try {
            byte[] d = ((MessageDigest) sha.clone()).digest();
            return HexFormat.of().formatHex(d, 0, 16);
        } catch (CloneNotSupportedException e) {
            throw new IllegalStateException(e);
        }
    }
}
