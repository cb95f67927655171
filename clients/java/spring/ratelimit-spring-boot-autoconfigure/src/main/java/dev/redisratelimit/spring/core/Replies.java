package dev.redisratelimit.spring.core;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;

/** Reading the integers and arrays of RL replies (as the driver hands them over). */
final class Replies {
    private Replies() {
    }

    static long integer(Object o) {
        if (o instanceof Number n) {
            return n.longValue();
        }
        return Long.parseLong(string(o));
    }

    static String string(Object o) {
        if (o instanceof byte[] b) {
            return new String(b, StandardCharsets.UTF_8);
        }
        if (o instanceof ByteBuffer bb) {
            return StandardCharsets.UTF_8.decode(bb.duplicate()).toString();
        }
        return String.valueOf(o);
    }

    static List<?> list(Object o) {
        if (o instanceof List<?> l) {
            return l;
        }
        throw new IllegalStateException("expected an array reply, got " + o);
    }
}
