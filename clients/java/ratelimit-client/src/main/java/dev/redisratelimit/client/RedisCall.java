package dev.redisratelimit.client;

import java.util.List;

/**
 * One command as a transport sends it: its name, its arguments as strings,
 * and which argument is the key that routes it under Cluster
 * ({@code keyIndex}, or -1 for a command with no key, sent to any node).
 */
public record RedisCall(String command, List<String> args, int keyIndex) {

    public RedisCall {
        args = List.copyOf(args);
        if (keyIndex >= args.size()) {
            throw new IllegalArgumentException("keyIndex " + keyIndex + " past the arguments");
        }
    }

    /** The routing key, or null. */
    public String routingKey() {
        return keyIndex < 0 ? null : args.get(keyIndex);
    }
}
