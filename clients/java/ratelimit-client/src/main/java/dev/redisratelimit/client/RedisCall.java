package dev.redisratelimit.client;

import java.util.List;

/**
 * One command as a transport sends it: its name, its arguments as strings,
 * and which argument is the key that routes it under Cluster
 * ({@code keyIndex}, or -1 for a command with no key, sent to any node).
 * {@code route}: for a command with no key that must reach the node serving
 * a key (the Functions library loaded where a call found it missing), that
 * key, not sent; null otherwise.
 */
public record RedisCall(String command, List<String> args, int keyIndex, String route) {

    public RedisCall {
        args = List.copyOf(args);
        if (keyIndex >= args.size()) {
            throw new IllegalArgumentException("keyIndex " + keyIndex + " past the arguments");
        }
        if (route != null && keyIndex >= 0) {
            throw new IllegalArgumentException("a call routed by one of its keys takes no separate route");
        }
    }

    public RedisCall(String command, List<String> args, int keyIndex) {
        this(command, args, keyIndex, null);
    }

    /** A command with no key, sent to the node that serves {@code key} (standalone: the server). */
    public static RedisCall onNodeOf(String key, String command, List<String> args) {
        return new RedisCall(command, args, -1, key);
    }

    /** The routing key, or null. */
    public String routingKey() {
        return keyIndex < 0 ? route : args.get(keyIndex);
    }
}
