package dev.redisratelimit.client;

import java.nio.charset.StandardCharsets;

/** Redis Cluster's key slot: CRC16 (XMODEM) of the key's hash tag, or of the key, modulo 16384 (the Cluster spec). */
final class Slots {

    private static final int[] TABLE = new int[256];

    static {
        for (int i = 0; i < 256; i++) {
            int crc = i << 8;
            for (int b = 0; b < 8; b++) {
                crc = (crc & 0x8000) != 0 ? (crc << 1) ^ 0x1021 : crc << 1;
            }
            TABLE[i] = crc & 0xFFFF;
        }
    }

    private Slots() {
    }

    static int of(String key) {
        byte[] k = key.getBytes(StandardCharsets.UTF_8);
        int from = 0;
        int to = k.length;
        int open = indexOf(k, (byte) '{', 0);
        if (open >= 0) {
            int close = indexOf(k, (byte) '}', open + 1);
            if (close > open + 1) {
                from = open + 1;
                to = close;
            }
        }
        int crc = 0;
        for (int i = from; i < to; i++) {
            crc = ((crc << 8) ^ TABLE[((crc >>> 8) ^ k[i]) & 0xFF]) & 0xFFFF;
        }
        return crc & 16383;
    }

    private static int indexOf(byte[] k, byte b, int from) {
        for (int i = from; i < k.length; i++) {
            if (k[i] == b) {
                return i;
            }
        }
        return -1;
    }
}
