package dev.redisratelimit.client;

import java.time.Duration;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

/**
 * The RL commands, asynchronously: one method per command, each completing
 * with an immutable decision. Arguments the module would refuse throw
 * {@link IllegalArgumentException} at the call, before anything is sent; a
 * server error completes the stage with a {@link RateLimitException} carrying
 * the server's text. Thread-safe; as thread-safe and as pipelined as its
 * transport (Lettuce writes concurrent commands back to back on one connection).
 */
public final class RateLimitAsyncClient {

    private final RateLimitTransport transport;

    public RateLimitAsyncClient(RateLimitTransport transport) {
        this.transport = Objects.requireNonNull(transport, "transport");
    }

    public RateLimitTransport transport() {
        return transport;
    }

    /** Sends one built call. */
    public <T> CompletionStage<T> execute(Call<T> call) {
        return transport.execute(call.command()).thenApply(call::read);
    }

    /** Sends independent calls back to back (one round trip where the transport allows); replies in order. */
    public CompletionStage<List<Object>> pipeline(List<? extends Call<?>> calls) {
        List<RedisCall> commands = new ArrayList<>(calls.size());
        for (Call<?> call : calls) {
            commands.add(call.command());
        }
        List<CompletionStage<Object>> raw = transport.pipeline(commands);
        List<CompletableFuture<Object>> read = new ArrayList<>(raw.size());
        for (int i = 0; i < raw.size(); i++) {
            Call<?> call = calls.get(i);
            read.add(raw.get(i).thenApply(reply -> (Object) call.read(reply)).toCompletableFuture());
        }
        return CompletableFuture.allOf(read.toArray(CompletableFuture[]::new)).thenApply(done -> {
            List<Object> out = new ArrayList<>(read.size());
            for (CompletableFuture<Object> f : read) {
                out.add(f.join());
            }
            return out;
        });
    }

    /**
     * Checks that the module is loaded ({@code COMMAND INFO RL.ALL}); completes
     * exceptionally with {@link ModuleNotLoadedException} when it is not. Over
     * a {@link BackendTransport}, its {@link BackendTransport#verify()} (the
     * Functions library loaded when the backend is {@code functions}).
     */
    public CompletionStage<Void> verifyModule() {
        if (transport instanceof BackendTransport backend) {
            return backend.verify(); // the backend's own check (the library loaded for FUNCTIONS)
        }
        return execute(Calls.moduleLoaded()).thenApply(loaded -> {
            if (!loaded) {
                throw new ModuleNotLoadedException("the redis-ratelimit module is not loaded: COMMAND INFO RL.ALL answered no command."
                        + " Load it with --loadmodule /path/to/libredis_ratelimit.so (or MODULE LOAD) on every node");
            }
            return null;
        });
    }

    public CompletionStage<Decision> check(String key, SlidingWindow... rules) {
        return check(key, List.of(rules), Options.none());
    }

    public CompletionStage<Decision> check(String key, List<SlidingWindow> rules, Options options) {
        return execute(Calls.check(key, rules, options));
    }

    public CompletionStage<Decision> peek(String key, SlidingWindow... rules) {
        return peek(key, List.of(rules), Options.none());
    }

    public CompletionStage<Decision> peek(String key, List<SlidingWindow> rules, Options options) {
        return execute(Calls.peek(key, rules, options));
    }

    public CompletionStage<Decision> throttle(String key, TokenBucket... rules) {
        return throttle(key, List.of(rules), Options.none());
    }

    public CompletionStage<Decision> throttle(String key, List<TokenBucket> rules, Options options) {
        return execute(Calls.throttle(key, rules, options));
    }

    public CompletionStage<Decision> throttlePeek(String key, TokenBucket... rules) {
        return throttlePeek(key, List.of(rules), Options.none());
    }

    public CompletionStage<Decision> throttlePeek(String key, List<TokenBucket> rules, Options options) {
        return execute(Calls.throttlePeek(key, rules, options));
    }

    public CompletionStage<Decision> quota(String key, ZoneId zone, QuotaLimit... limits) {
        return quota(key, zone, List.of(limits), Options.none());
    }

    public CompletionStage<Decision> quota(String key, ZoneId zone, List<QuotaLimit> limits, Options options) {
        return execute(Calls.quota(key, zone, limits, options));
    }

    /** {@code zone} as a string: an IANA name or {@code +HH:MM}; an unknown one is refused before any call. */
    public CompletionStage<Decision> quota(String key, String zone, QuotaLimit... limits) {
        return quota(key, Zones.parse(zone), List.of(limits), Options.none());
    }

    public CompletionStage<Decision> quotaPeek(String key, ZoneId zone, QuotaLimit... limits) {
        return quotaPeek(key, zone, List.of(limits), Options.none());
    }

    public CompletionStage<Decision> quotaPeek(String key, ZoneId zone, List<QuotaLimit> limits, Options options) {
        return execute(Calls.quotaPeek(key, zone, limits, options));
    }

    public CompletionStage<DayHourDecision> dayhour(String dayKey, String hourKey, long dayLimit, long hourLimit, Duration dayTtl,
            Duration hourTtl) {
        return execute(Calls.dayhour(dayKey, hourKey, dayLimit, hourLimit, dayTtl, hourTtl));
    }

    public CompletionStage<LockoutDecision> lockcount(String lockKey, String countKey, Duration window, long max, Duration lockTime) {
        return execute(Calls.lockcount(lockKey, countKey, window, max, lockTime));
    }

    public CompletionStage<LeaseDecision> lease(String key, long limit, Duration ttl) {
        return lease(key, limit, ttl, Options.none());
    }

    public CompletionStage<LeaseDecision> lease(String key, long limit, Duration ttl, Options options) {
        return execute(Calls.lease(key, limit, ttl, options));
    }

    public CompletionStage<Decision> leasePeek(String key, long limit) {
        return leasePeek(key, limit, Options.none());
    }

    public CompletionStage<Decision> leasePeek(String key, long limit, Options options) {
        return execute(Calls.leasePeek(key, limit, options));
    }

    public CompletionStage<List<Long>> release(String key, String... tokens) {
        return release(key, List.of(tokens), Options.none());
    }

    public CompletionStage<List<Long>> release(String key, List<String> tokens, Options options) {
        return execute(Calls.release(key, tokens, options));
    }

    public CompletionStage<List<Long>> renew(String key, Duration ttl, String... tokens) {
        return renew(key, ttl, List.of(tokens), Options.none());
    }

    public CompletionStage<List<Long>> renew(String key, Duration ttl, List<String> tokens, Options options) {
        return execute(Calls.renew(key, ttl, tokens, options));
    }

    public CompletionStage<AllDecision> all(Clause... clauses) {
        return all(List.of(clauses), Options.none());
    }

    public CompletionStage<AllDecision> all(List<? extends Clause> clauses, Options options) {
        return execute(Calls.all(clauses, options));
    }

    public CompletionStage<AllDecision> allPeek(Clause... clauses) {
        return allPeek(List.of(clauses), Options.none());
    }

    public CompletionStage<AllDecision> allPeek(List<? extends Clause> clauses, Options options) {
        return execute(Calls.allPeek(clauses, options));
    }
}
