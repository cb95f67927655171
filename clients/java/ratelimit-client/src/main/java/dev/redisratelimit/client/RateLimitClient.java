package dev.redisratelimit.client;

import java.time.Duration;
import java.time.ZoneId;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;

/**
 * The RL commands, blocking: one method per command, each returning an
 * immutable decision. Arguments the module would refuse throw
 * {@link IllegalArgumentException} before anything is sent; a server error
 * throws {@link RateLimitException} carrying the server's text. Thread-safe.
 *
 * <pre>{@code
 * RateLimitClient rl = new RateLimitClient(LettuceTransport.create(RedisClient.create("redis://localhost")));
 * Decision d = rl.check("rl:{user:42}", SlidingWindow.of(10, Duration.ofSeconds(1)));
 * }</pre>
 */
public final class RateLimitClient implements AutoCloseable {

    private final RateLimitAsyncClient async;

    public RateLimitClient(RateLimitTransport transport) {
        this.async = new RateLimitAsyncClient(Objects.requireNonNull(transport, "transport"));
    }

    /** The same commands, returning {@link CompletionStage}s. */
    public RateLimitAsyncClient async() {
        return async;
    }

    public RateLimitTransport transport() {
        return async.transport();
    }

    /** Sends one built call ({@link Calls}). */
    public <T> T execute(Call<T> call) {
        return join(async.execute(call));
    }

    /** Sends independent calls back to back (one round trip where the transport allows); replies in order. */
    public List<Object> pipeline(List<? extends Call<?>> calls) {
        return join(async.pipeline(calls));
    }

    /** Throws {@link ModuleNotLoadedException} when {@code COMMAND INFO RL.ALL} finds no such command. */
    public void verifyModule() {
        join(async.verifyModule());
    }

    public Decision check(String key, SlidingWindow... rules) {
        return join(async.check(key, rules));
    }

    public Decision check(String key, List<SlidingWindow> rules, Options options) {
        return join(async.check(key, rules, options));
    }

    public Decision peek(String key, SlidingWindow... rules) {
        return join(async.peek(key, rules));
    }

    public Decision peek(String key, List<SlidingWindow> rules, Options options) {
        return join(async.peek(key, rules, options));
    }

    public Decision throttle(String key, TokenBucket... rules) {
        return join(async.throttle(key, rules));
    }

    public Decision throttle(String key, List<TokenBucket> rules, Options options) {
        return join(async.throttle(key, rules, options));
    }

    public Decision throttlePeek(String key, TokenBucket... rules) {
        return join(async.throttlePeek(key, rules));
    }

    public Decision throttlePeek(String key, List<TokenBucket> rules, Options options) {
        return join(async.throttlePeek(key, rules, options));
    }

    public Decision quota(String key, ZoneId zone, QuotaLimit... limits) {
        return join(async.quota(key, zone, limits));
    }

    public Decision quota(String key, ZoneId zone, List<QuotaLimit> limits, Options options) {
        return join(async.quota(key, zone, limits, options));
    }

    /** {@code zone} as a string: an IANA name or {@code +HH:MM}; an unknown one is refused before any call. */
    public Decision quota(String key, String zone, QuotaLimit... limits) {
        return join(async.quota(key, zone, limits));
    }

    public Decision quotaPeek(String key, ZoneId zone, QuotaLimit... limits) {
        return join(async.quotaPeek(key, zone, limits));
    }

    public Decision quotaPeek(String key, ZoneId zone, List<QuotaLimit> limits, Options options) {
        return join(async.quotaPeek(key, zone, limits, options));
    }

    public DayHourDecision dayhour(String dayKey, String hourKey, long dayLimit, long hourLimit, Duration dayTtl,
            Duration hourTtl) {
        return join(async.dayhour(dayKey, hourKey, dayLimit, hourLimit, dayTtl, hourTtl));
    }

    public LockoutDecision lockcount(String lockKey, String countKey, Duration window, long max, Duration lockTime) {
        return join(async.lockcount(lockKey, countKey, window, max, lockTime));
    }

    public LeaseDecision lease(String key, long limit, Duration ttl) {
        return join(async.lease(key, limit, ttl));
    }

    public LeaseDecision lease(String key, long limit, Duration ttl, Options options) {
        return join(async.lease(key, limit, ttl, options));
    }

    public Decision leasePeek(String key, long limit) {
        return join(async.leasePeek(key, limit));
    }

    public Decision leasePeek(String key, long limit, Options options) {
        return join(async.leasePeek(key, limit, options));
    }

    public List<Long> release(String key, String... tokens) {
        return join(async.release(key, tokens));
    }

    public List<Long> release(String key, List<String> tokens, Options options) {
        return join(async.release(key, tokens, options));
    }

    public List<Long> renew(String key, Duration ttl, String... tokens) {
        return join(async.renew(key, ttl, tokens));
    }

    public List<Long> renew(String key, Duration ttl, List<String> tokens, Options options) {
        return join(async.renew(key, ttl, tokens, options));
    }

    public AllDecision all(Clause... clauses) {
        return join(async.all(clauses));
    }

    public AllDecision all(List<? extends Clause> clauses, Options options) {
        return join(async.all(clauses, options));
    }

    public AllDecision allPeek(Clause... clauses) {
        return join(async.allPeek(clauses));
    }

    public AllDecision allPeek(List<? extends Clause> clauses, Options options) {
        return join(async.allPeek(clauses, options));
    }

    /** Closes the transport (which closes only what it opened itself). */
    @Override
    public void close() {
        async.transport().close();
    }

    static <T> T join(CompletionStage<T> stage) {
        try {
            return stage.toCompletableFuture().get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new RateLimitException("interrupted while waiting for Redis", e);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            while (cause instanceof CompletionException && cause.getCause() != null) {
                cause = cause.getCause();
            }
            if (cause instanceof RuntimeException runtime) {
                throw runtime;
            }
            if (cause instanceof Error error) {
                throw error;
            }
            throw new RateLimitException(String.valueOf(cause), cause);
        }
    }
}
