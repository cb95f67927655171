package dev.redisratelimit.spring.core;

import dev.redisratelimit.spring.annotation.LimitType;
import dev.redisratelimit.spring.annotation.OnRedisDown;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Decides a call against its policy with one Redis round trip: one RL.ALL
 * (with DETAILS, so every named limit's state comes back in the same reply)
 * or, for a lockout, one RL.LOCKCOUNT. A refusal writes nothing anywhere.
 * Waits at most the decision budget; past it, or while the circuit is open,
 * the policy's Redis-down behaviour answers.
 *
 * <p>Keys: {@code <prefix><policy>:{<key>}:<limits>} — the caller's key as the
 * Cluster hash tag, so a policy's keys share a slot; a policy with a fixed tag
 * writes {@code <prefix><policy>:{<tag>}:<key>:<limits>}.
 */
public final class RateLimiter {

    private static final Logger log = LoggerFactory.getLogger(RateLimiter.class);

    private final RedisTransport transport;
    private final RuntimeLimits runtime;
    private final RedisAvailability availability;
    private final LocalLimiter local;
    private final String prefix;
    private final long budgetMs;
    private final OnRedisDown defaultDown;
    // Cleared if the loaded module predates RL.ALL's DETAILS option: headers then show the binding limit only.
    private volatile boolean details = true;

    public RateLimiter(RedisTransport transport, RuntimeLimits runtime, RedisAvailability availability, LocalLimiter local,
            String prefix, Duration budget, OnRedisDown defaultDown) {
        this.transport = transport;
        this.runtime = runtime;
        this.availability = availability;
        this.local = local;
        this.prefix = prefix == null ? "" : prefix;
        this.budgetMs = Math.max(1, budget.toMillis());
        this.defaultDown = defaultDown == OnRedisDown.DEFAULT ? OnRedisDown.FAIL_CLOSED : defaultDown;
    }

    public RuntimeLimits runtimeLimits() {
        return runtime;
    }

    /** Registers a policy (its limits can then be changed at run time by name). */
    public void register(CompiledPolicy policy) {
        runtime.register(policy.spec());
    }

    /**
     * Decides; returns the permit to close when the call ends.
     *
     * @throws RateLimitRefusedException when a limit refuses
     * @throws RateLimitUnavailableException when Redis is down and the policy fails closed
     */
    public Permit acquire(CompiledPolicy policy, CallInput in) {
        if (availability.isDown()) {
            return whenDown(policy, in, null);
        }
        return policy.isLockout() ? lockout(policy, in) : all(policy, in, true);
    }

    private Permit all(CompiledPolicy policy, CallInput in, boolean firstTry) {
        List<Clause> clauses = policy.clauses();
        List<Object> args = new ArrayList<>();
        args.add(clauses.size());
        List<String> keys = new ArrayList<>(clauses.size());
        for (Clause c : clauses) {
            String k = key(policy, c, in);
            keys.add(k);
            args.add(new RedisTransport.Key(k));
        }
        args.add("*");
        List<Permit.Lease> leases = new ArrayList<>();
        List<Permit.Estimate> estimates = new ArrayList<>();
        for (int ci = 0; ci < clauses.size(); ci++) {
            Clause c = clauses.get(ci);
            long cost = in.costs() != null && ci < in.costs().length ? in.costs()[ci] : 1;
            List<Object> rules = rules(policy, c, in);
            switch (c.type()) {
                case SLIDING_WINDOW -> args.add("CHECK");
                case TOKEN_BUCKET -> args.add("THROTTLE");
                case QUOTA -> args.add("QUOTA");
                case CONCURRENCY -> args.add("LEASE");
                default -> throw new IllegalStateException(c.type().name());
            }
            args.add(ci + 1);
            args.addAll(rules);
            if (c.type() == LimitType.CONCURRENCY) {
                String token = UUID.randomUUID().toString();
                args.add("TOKEN");
                args.add(token);
                leases.add(new Permit.Lease(keys.get(ci), token));
            } else if (cost != 1) {
                args.add("COST");
                args.add(cost);
            }
            if (c.settle() != null) {
                String cmd = switch (c.type()) {
                    case SLIDING_WINDOW -> "RL.CHECK";
                    case TOKEN_BUCKET -> "RL.THROTTLE";
                    default -> "RL.QUOTA";
                };
                estimates.add(new Permit.Estimate(ci, cmd, withKey(keys.get(ci), rules), cost, c.type() == LimitType.SLIDING_WINDOW));
            }
        }
        boolean withDetails = details;
        if (withDetails) {
            args.add("DETAILS");
        }
        Object reply;
        CompletableFuture<Object> f = transport.call("RL.ALL", args);
        try {
            reply = f.get(budgetMs, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            availability.markDown(e);
            return whenDown(policy, in, e);
        } catch (InterruptedException e) {
            f.cancel(true);
            Thread.currentThread().interrupt();
            throw new RateLimitUnavailableException(policy.name(), e);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (transport.isUnavailable(cause)) {
                availability.markDown(cause);
                return whenDown(policy, in, cause);
            }
            String msg = String.valueOf(cause.getMessage());
            if (withDetails && firstTry && msg.contains("DETAILS")) {
                log.warn("the loaded ratelimit module has no RL.ALL DETAILS: RateLimit headers will show the binding limit only");
                details = false;
                return all(policy, in, false);
            }
            throw new RateLimitConfigurationException("Redis refused rate limit '" + policy.name() + "': " + msg, cause);
        }
        Decision d = parseAll(policy, Replies.list(reply));
        if (!d.admitted()) {
            throw new RateLimitRefusedException(d);
        }
        return new Permit(this, d, leases, estimates, List.of());
    }

    private Decision parseAll(CompiledPolicy policy, List<?> r) {
        boolean limited = Replies.integer(r.get(0)) == 1;
        int clause = (int) Replies.integer(r.get(1)) - 1;
        int rule = (int) Replies.integer(r.get(2)) - 1;
        List<Clause> clauses = policy.clauses();
        int bindingItem = clauses.get(clause).items().get(rule);
        int n = policy.itemNames().size();
        ItemState[] states = new ItemState[n];
        boolean duplicateRefused = false;
        if (r.size() >= 7 + clauses.size()) {
            for (int ci = 0; ci < clauses.size(); ci++) {
                List<?> perRule = Replies.list(r.get(7 + ci));
                Clause c = clauses.get(ci);
                for (int j = 0; j < perRule.size() && j < c.items().size(); j++) {
                    List<?> s = Replies.list(perRule.get(j));
                    int item = c.items().get(j);
                    states[item] = state(policy, item, Replies.integer(s.get(0)) == 1, Replies.integer(s.get(3)),
                            Replies.integer(s.get(4)), Replies.integer(s.get(5)));
                    duplicateRefused |= c.duplicate() && states[item].limited();
                }
            }
        } else {
            states[bindingItem] = state(policy, bindingItem, limited, Replies.integer(r.get(4)), Replies.integer(r.get(5)),
                    Replies.integer(r.get(6)));
            duplicateRefused = limited && clauses.get(clause).duplicate();
        }
        List<ItemState> items = new ArrayList<>(n);
        int binding = -1;
        for (int i = 0; i < n; i++) {
            if (states[i] != null) {
                if (i == bindingItem) {
                    binding = items.size();
                }
                items.add(states[i]);
            }
        }
        LimitSpec bl = policy.limitOf(bindingItem);
        Decision.Kind kind = !limited ? Decision.Kind.ADMITTED
                : duplicateRefused ? Decision.Kind.DUPLICATE : Decision.Kind.RATE_LIMITED;
        return new Decision(policy.name(), !limited, List.copyOf(items), binding, limited ? Replies.integer(r.get(5)) : -1,
                bl == null ? LimitType.SLIDING_WINDOW : bl.type(), kind, policy.spec().legacyHeaders());
    }

    private ItemState state(CompiledPolicy policy, int item, boolean limited, long remaining, long retry, long reset) {
        LimitSpec l = policy.limitOf(item);
        long q = l == null ? 1 : runtime.count(policy.name(), l);
        long w = l == null ? LimitSpec.ceilSeconds(policy.spec().duplicateWindow().toMillis()) : l.windowSeconds();
        return new ItemState(policy.itemNames().get(item), q, w, Math.max(0, remaining), LimitSpec.ceilSeconds(reset), limited,
                limited ? retry : -1);
    }

    private Permit lockout(CompiledPolicy policy, CallInput in) {
        LimitSpec l = policy.spec().limits().get(0);
        String base = prefix + policy.name() + ":{" + in.key() + "}:" + l.name();
        long max = runtime.count(policy.name(), l);
        CompletableFuture<Object> f = transport.call("RL.LOCKCOUNT", List.of(new RedisTransport.Key(base + ":lock"),
                new RedisTransport.Key(base + ":count"), l.window().toMillis(), max, l.lockTime().toMillis()));
        Object reply;
        try {
            reply = f.get(budgetMs, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            f.cancel(true);
            availability.markDown(e);
            return whenDown(policy, in, e);
        } catch (InterruptedException e) {
            f.cancel(true);
            Thread.currentThread().interrupt();
            throw new RateLimitUnavailableException(policy.name(), e);
        } catch (ExecutionException e) {
            if (transport.isUnavailable(e.getCause())) {
                availability.markDown(e.getCause());
                return whenDown(policy, in, e.getCause());
            }
            throw new RateLimitConfigurationException("Redis refused rate limit '" + policy.name() + "': " + e.getCause().getMessage(),
                    e.getCause());
        }
        List<?> r = Replies.list(reply);
        boolean limited = Replies.integer(r.get(0)) == 1;
        long count = Replies.integer(r.get(1));
        long ttl = Replies.integer(r.get(2));
        ItemState s = new ItemState(l.name(), max, l.windowSeconds(), limited ? 0 : Math.max(0, max - count),
                LimitSpec.ceilSeconds(ttl), limited, limited ? ttl : -1);
        Decision d = new Decision(policy.name(), !limited, List.of(s), 0, limited ? ttl : -1, LimitType.LOCKOUT,
                limited ? Decision.Kind.LOCKED : Decision.Kind.ADMITTED, policy.spec().legacyHeaders());
        if (limited) {
            throw new RateLimitRefusedException(d);
        }
        return new Permit(this, d, List.of(), List.of(), List.of());
    }

    private Permit whenDown(CompiledPolicy policy, CallInput in, Throwable why) {
        OnRedisDown mode = policy.spec().onRedisDown() == OnRedisDown.DEFAULT ? defaultDown : policy.spec().onRedisDown();
        switch (mode) {
            case FAIL_OPEN:
                return new Permit(this, null, List.of(), List.of(), List.of());
            case LOCAL: {
                List<String> leases = local.tryAcquire(policy, in.key(), runtime);
                if (leases == null) {
                    // No Redis state to show: a refusal without per-limit items, waiting may help.
                    throw new RateLimitRefusedException(new Decision(policy.name(), false, List.of(), -1, 1000,
                            LimitType.SLIDING_WINDOW, Decision.Kind.RATE_LIMITED, false));
                }
                return new Permit(this, null, List.of(), List.of(), leases);
            }
            default:
                throw new RateLimitUnavailableException(policy.name(), why);
        }
    }

    /** Releases leases and settles estimates in one pipelined burst, waiting at most the budget. */
    void finish(Permit permit, Map<Integer, Long> used) {
        if (!permit.localLeases().isEmpty()) {
            local.release(permit.localLeases());
        }
        List<CompletableFuture<Object>> sent = new ArrayList<>();
        for (Permit.Lease l : permit.leases()) {
            sent.add(transport.call("RL.RELEASE", List.of(new RedisTransport.Key(l.key()), "*", l.token())));
        }
        for (Permit.Estimate e : permit.estimates()) {
            long u = Math.max(0, used.getOrDefault(e.clause(), 0L));
            long diff = u - e.charged();
            if (diff == 0) {
                continue;
            }
            long n = Math.abs(diff);
            if (e.check()) {
                n = Math.min(n, 10_000); // RL.CHECK's cap on units per call
            }
            List<Object> args = new ArrayList<>(e.rules());
            args.add("COST");
            args.add(n);
            args.add(diff < 0 ? "REFUND" : "DEBIT");
            sent.add(transport.call(e.command(), args));
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(budgetMs);
        for (CompletableFuture<Object> f : sent) {
            try {
                f.get(Math.max(1, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            } catch (Exception e) {
                // A lease not released expires with its TTL; an estimate not settled stays charged.
                log.warn("rate limit release/settlement not confirmed: {}", e.toString());
            }
        }
    }

    private String key(CompiledPolicy policy, Clause c, CallInput in) {
        String tag = policy.spec().hashTag();
        StringBuilder sb = new StringBuilder(prefix).append(policy.name()).append(":{");
        if (tag != null) {
            sb.append(tag).append("}:");
            if (!c.global()) {
                sb.append(in.key()).append(':');
            }
        } else {
            sb.append(c.global() ? policy.name() : in.key()).append("}:");
        }
        sb.append(c.keyName());
        if (c.duplicate()) {
            sb.append(':').append(in.bodyDigest());
        }
        return sb.toString();
    }

    // The clause's rules as its command takes them after `now` (counts as in force now).
    private List<Object> rules(CompiledPolicy policy, Clause c, CallInput in) {
        List<Object> out = new ArrayList<>();
        if (c.duplicate()) {
            out.add(1);
            out.add(policy.spec().duplicateWindow().toMillis());
            return out;
        }
        if (c.type() == LimitType.QUOTA) {
            out.add(in.zone() != null ? in.zone() : c.zone());
        }
        for (int item : c.items()) {
            LimitSpec l = policy.limitOf(item);
            long count = runtime.count(policy.name(), l);
            switch (l.type()) {
                case SLIDING_WINDOW -> {
                    out.add(count);
                    out.add(l.window().toMillis());
                }
                case TOKEN_BUCKET -> {
                    out.add(l.burst());
                    out.add(count);
                    out.add(l.window().toMillis());
                }
                case QUOTA -> {
                    out.add(l.period().name());
                    out.add(count);
                }
                case CONCURRENCY -> {
                    out.add(count);
                    out.add(l.ttl().toMillis());
                }
                default -> throw new IllegalStateException(l.type().name());
            }
        }
        return out;
    }

    private static List<Object> withKey(String key, List<Object> rules) {
        List<Object> out = new ArrayList<>(rules.size() + 2);
        out.add(new RedisTransport.Key(key));
        out.add("*");
        out.addAll(rules);
        return out;
    }
}
