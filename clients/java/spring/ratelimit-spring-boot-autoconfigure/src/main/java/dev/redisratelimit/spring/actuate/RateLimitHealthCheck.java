package dev.redisratelimit.spring.actuate;

import dev.redisratelimit.client.Backend;
import dev.redisratelimit.client.BackendTransport;
import dev.redisratelimit.client.ModuleNotLoadedException;
import dev.redisratelimit.client.RateLimitAsyncClient;
import dev.redisratelimit.client.RedisAvailability;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * What the {@code ratelimit} health indicator reports, kept apart from Spring
 * Boot's health API (its package differs between Boot 3.5 and 4.0, so each
 * line has its own thin {@link RateLimitHealthIndicator} over this check):
 * DOWN while a node's circuit is open (Redis unreachable: decisions
 * follow the Redis-down policies), DOWN when Redis answers but the module is
 * not loaded (every decision would fail), UP otherwise. One COMMAND INFO
 * RL.ALL per check, waiting at most the decision budget.
 */
public final class RateLimitHealthCheck {

    public enum Status { UP, DOWN, UNKNOWN }

    /**
     * The status and the one detail that explains it ({@code detail} is null
     * when there is none); {@code backend}: the engine deciding ({@code module}
     * or {@code functions}, {@code ratelimit.backend}).
     */
    public record Result(Status status, String detail, String value, String backend) {
    }

    private final RateLimitAsyncClient client;
    private final RedisAvailability availability;
    private final Duration budget;

    public RateLimitHealthCheck(RateLimitAsyncClient client, RedisAvailability availability, Duration budget) {
        this.client = client;
        this.availability = availability;
        this.budget = budget;
    }

    public Result run() {
        String backend = client.transport() instanceof BackendTransport b ? b.backend().toString() : "module";
        java.util.List<String> open = availability.openNodes();
        if (!open.isEmpty()) {
            String nodes = open.equals(java.util.List.of(RedisAvailability.ANY_NODE)) ? "" : " (" + String.join(", ", open) + ")";
            return new Result(Status.DOWN, "redis", "unreachable" + nodes + ": decisions follow the Redis-down policies", backend);
        }
        if (client.transport() instanceof BackendTransport b && b.backend() == Backend.FUNCTIONS) {
            return library(b, backend);
        }
        CompletableFuture<Void> f = client.verifyModule().toCompletableFuture();
        try {
            f.get(Math.max(1, budget.toMillis()), TimeUnit.MILLISECONDS);
            return new Result(Status.UP, "module", "loaded", backend);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof ModuleNotLoadedException) {
                return new Result(Status.DOWN, "module", "not loaded: " + e.getCause().getMessage(), backend);
            }
            return new Result(Status.DOWN, "redis", String.valueOf(e.getCause()), backend);
        } catch (TimeoutException e) {
            f.cancel(true);
            return new Result(Status.DOWN, "redis", "no answer within " + budget.toMillis() + " ms", backend);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new Result(Status.UNKNOWN, null, null, backend);
        }
    }

    /** The Functions library deciding: one {@code FCALL rl_version} (never a load from a health check). */
    private Result library(BackendTransport b, String backend) {
        CompletableFuture<String> f = b.problem().toCompletableFuture();
        try {
            String problem = f.get(Math.max(1, budget.toMillis()), TimeUnit.MILLISECONDS);
            return problem == null ? new Result(Status.UP, "library", "loaded", backend) : new Result(Status.DOWN, "library", problem, backend);
        } catch (ExecutionException e) {
            return new Result(Status.DOWN, "redis", String.valueOf(e.getCause()), backend);
        } catch (TimeoutException e) {
            f.cancel(true);
            return new Result(Status.DOWN, "redis", "no answer within " + budget.toMillis() + " ms", backend);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return new Result(Status.UNKNOWN, null, null, backend);
        }
    }
}
