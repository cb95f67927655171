package dev.redisratelimit.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.CompletionStage;
import java.util.logging.Level;
import java.util.logging.Logger;

/**
 * A transport that decides with the {@link Backend} set: {@code MODULE}
 * passes RL calls on as they are; {@code FUNCTIONS} sends each as the
 * Functions library's {@code FCALL} ({@link FunctionsLibrary#fcall}) and
 * loads the library ({@code FUNCTION LOAD REPLACE}) where a call meets
 * {@code Function not found}, then sends it once more; {@code AUTO} starts
 * with the module where {@link #verify()} finds it, and switches to the
 * library when the module goes missing at run time (a failover to a server
 * without it: {@code ERR unknown command 'RL.X'}).
 *
 * <pre>{@code
 * RateLimitTransport t = new BackendTransport(LettuceTransport.create(client), Backend.FUNCTIONS);
 * RateLimitAsyncClient rl = new RateLimitAsyncClient(t);
 * rl.verifyModule().toCompletableFuture().join(); // loads the library when absent or older
 * }</pre>
 *
 * <p>Under Cluster, {@link #verify()} (and {@code AUTO}'s switch) loads the
 * library on every primary the transport names
 * ({@link RateLimitTransport#primaryRoutes}: Lettuce, and Spring Data's
 * Lettuce and Jedis drivers), else on the node it reaches; a primary
 * without it (added later, flushed, or unknown to the transport) gets it on
 * its first call ({@code Function not found}: loaded on that node, the call
 * sent again).
 */
public final class BackendTransport implements RateLimitTransport {

    private static final Logger log = Logger.getLogger(BackendTransport.class.getName());

    private final RateLimitTransport delegate;
    private final Backend setting;
    private volatile Backend engine;

    public BackendTransport(RateLimitTransport delegate, Backend setting) {
        this.delegate = Objects.requireNonNull(delegate, "delegate");
        this.setting = Objects.requireNonNull(setting, "setting");
        this.engine = setting == Backend.FUNCTIONS ? Backend.FUNCTIONS : Backend.MODULE;
    }

    public RateLimitTransport delegate() {
        return delegate;
    }

    public Backend setting() {
        return setting;
    }

    /** The engine deciding now: {@code MODULE} or {@code FUNCTIONS}. */
    public Backend backend() {
        return engine;
    }

    private RedisCall wire(RedisCall call) {
        return engine == Backend.FUNCTIONS ? FunctionsLibrary.fcall(call) : call;
    }

    private boolean recovers(Throwable failure) {
        Throwable cause = unwrap(failure);
        if (!(cause instanceof RateLimitException e) || cause instanceof ModuleNotLoadedException) {
            return false;
        }
        if (engine == Backend.FUNCTIONS) {
            return FunctionsLibrary.functionMissing(e.getMessage());
        }
        return setting == Backend.AUTO && FunctionsLibrary.moduleMissing(e.getMessage());
    }

    /**
     * Sends {@code call} as the engine deciding takes it. A zone the library
     * cannot take (daylight saving) throws {@link IllegalArgumentException}
     * here, before anything is sent, as every argument the module would
     * refuse does ({@link RateLimitAsyncClient}).
     */
    @Override
    public String nodeOf(String key) {
        return delegate.nodeOf(key);
    }

    @Override
    public boolean isConnected(String node) {
        return delegate.isConnected(node);
    }

    @Override
    public CompletionStage<Object> ping(String node) {
        return delegate.ping(node);
    }

    @Override
    public CompletionStage<Object> execute(RedisCall call) {
        return delegate.execute(wire(call)).exceptionallyCompose(failure -> retry(call, failure));
    }

    @Override
    public List<CompletionStage<Object>> pipeline(List<RedisCall> calls) {
        List<RedisCall> wired = new ArrayList<>(calls.size());
        for (RedisCall call : calls) {
            wired.add(wire(call));
        }
        List<CompletionStage<Object>> replies = delegate.pipeline(wired);
        List<CompletionStage<Object>> out = new ArrayList<>(replies.size());
        for (int i = 0; i < replies.size(); i++) {
            RedisCall call = calls.get(i);
            out.add(replies.get(i).exceptionallyCompose(failure -> retry(call, failure)));
        }
        return out;
    }

    /** The library missing on the call's node, or (AUTO) the module gone: repaired, the call sent once more. */
    private CompletionStage<Object> retry(RedisCall call, Throwable failure) {
        if (!recovers(failure)) {
            return CompletableFuture.failedFuture(unwrap(failure));
        }
        CompletionStage<Void> loaded = CompletableFuture.completedFuture(null);
        if (engine == Backend.MODULE) {
            log.log(Level.SEVERE, "redis-ratelimit: the module is gone ({0}); backend auto: deciding with the Functions library from now on",
                    unwrap(failure).getMessage());
            engine = Backend.FUNCTIONS;
            // As at start-up, on every primary (the Python and Node clients do the same), then the call's node.
            loaded = ensureEverywhere();
        }
        return loaded.thenCompose(done -> ensureLibrary(call.routingKey())).thenCompose(done -> delegate.execute(wire(call)));
    }

    /**
     * The start-up check of the backend: {@code MODULE} fails with
     * {@link ModuleNotLoadedException} unless the module answers
     * {@code COMMAND INFO RL.ALL}; {@code FUNCTIONS} loads the library when
     * absent or older than this client ({@link LibraryNotLoadedException},
     * naming the command to run by hand, when this user may not);
     * {@code AUTO} takes the module when present, else the library.
     */
    public CompletionStage<Void> verify() {
        if (setting == Backend.FUNCTIONS) {
            return ensureEverywhere();
        }
        Call<Boolean> check = Calls.moduleLoaded();
        return delegate.execute(check.command()).thenApply(check::read).thenCompose(loaded -> {
            if (loaded) {
                engine = Backend.MODULE;
                return CompletableFuture.completedFuture(null);
            }
            if (setting == Backend.MODULE) {
                throw new ModuleNotLoadedException("the redis-ratelimit module is not loaded: COMMAND INFO RL.ALL answered no command."
                        + " Load it with --loadmodule /path/to/libredis_ratelimit.so (or MODULE LOAD) on every node,"
                        + " or set the backend to 'functions' (the Functions library, no module needed)");
            }
            engine = Backend.FUNCTIONS;
            return ensureEverywhere();
        });
    }

    /** The library on every primary the transport knows of ({@link RateLimitTransport#primaryRoutes}), else on the one reached. */
    private CompletionStage<Void> ensureEverywhere() {
        List<String> routes = delegate.primaryRoutes();
        if (routes.isEmpty()) {
            return ensureLibrary(null);
        }
        CompletionStage<Void> all = CompletableFuture.completedFuture(null);
        for (String key : routes) {
            all = all.thenCompose(done -> ensureLibrary(key));
        }
        return all;
    }

    /**
     * Whether the engine deciding now answers: completes with null when it
     * does, else with the reason (the module or the library missing, Redis
     * unreachable). For health checks; never completes exceptionally.
     */
    public CompletionStage<String> problem() {
        CompletionStage<String> probe;
        if (engine == Backend.FUNCTIONS) {
            probe = delegate.execute(new RedisCall("FCALL", List.of("rl_version", "0"), -1)).thenApply(v -> null);
        } else {
            Call<Boolean> check = Calls.moduleLoaded();
            probe = delegate.execute(check.command()).thenApply(check::read)
                    .thenApply(loaded -> loaded ? null : "the redis-ratelimit module is not loaded (COMMAND INFO RL.ALL answered no command)");
        }
        return probe.exceptionally(failure -> {
            Throwable cause = unwrap(failure);
            return FunctionsLibrary.functionMissing(cause.getMessage())
                    ? "the redis-ratelimit Functions library is not loaded (" + cause.getMessage() + ")"
                    : String.valueOf(cause.getMessage() != null ? cause.getMessage() : cause);
        });
    }

    /** Loads the library on the node serving {@code key} (null: any node) unless it has this version or a newer one. */
    private CompletionStage<Void> ensureLibrary(String key) {
        String source = FunctionsLibrary.source();
        long want = FunctionsLibrary.versionOf(source);
        return delegate.execute(keyless(key, "FCALL", List.of("rl_version", "0")))
                .thenApply(BackendTransport::integer)
                .exceptionallyCompose(failure -> {
                    Throwable cause = unwrap(failure);
                    return FunctionsLibrary.functionMissing(cause.getMessage()) ? CompletableFuture.completedFuture(-1L)
                            : CompletableFuture.failedFuture(cause);
                })
                .thenCompose(have -> {
                    if (have >= want) {
                        return CompletableFuture.completedFuture(null);
                    }
                    return delegate.execute(keyless(key, "FUNCTION", List.of("LOAD", "REPLACE", source)))
                            .exceptionallyCompose(failure -> CompletableFuture.failedFuture(loadFailure(unwrap(failure), have)))
                            .thenApply(name -> {
                                log.log(Level.INFO, "redis-ratelimit: Functions library {0} loaded", want);
                                return null;
                            });
                });
    }

    /** An integer reply as transports give it (Lettuce: a bare reply in a one-element list). */
    private static long integer(Object reply) {
        Object v = reply instanceof List<?> list && list.size() == 1 ? list.get(0) : reply;
        if (v instanceof Number n) {
            return n.longValue();
        }
        throw new RateLimitException("rl_version answered " + reply + ", not an integer");
    }

    private static RedisCall keyless(String key, String command, List<String> args) {
        return key == null ? new RedisCall(command, args, -1) : RedisCall.onNodeOf(key, command, args);
    }

    private static Throwable loadFailure(Throwable cause, long have) {
        String text = cause.getMessage();
        if (cause instanceof RateLimitException && text != null && text.startsWith("NOPERM")) {
            return new LibraryNotLoadedException("the Redis user may not run FUNCTION LOAD (" + text + ") and the redis-ratelimit"
                    + " Functions library is " + (have >= 0 ? "older than this client" : "not loaded") + ": load it once by hand with `"
                    + FunctionsLibrary.loadCommand() + "` on every primary, or grant the user +function|load");
        }
        return cause;
    }

    private static Throwable unwrap(Throwable failure) {
        Throwable cause = failure;
        while (cause instanceof CompletionException && cause.getCause() != null) {
            cause = cause.getCause();
        }
        return cause;
    }

    @Override
    public void close() {
        delegate.close();
    }
}
