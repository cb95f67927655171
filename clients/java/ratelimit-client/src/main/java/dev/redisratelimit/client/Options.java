package dev.redisratelimit.client;

import java.time.Duration;
import java.time.Instant;
import java.util.Objects;

/**
 * The optional arguments of an RL call, immutable: {@code now} (default
 * {@code *}, the server's clock), {@code COST}, {@code REFUND} or
 * {@code DEBIT}, RL.THROTTLE's {@code RESERVE}, RL.LEASE's {@code TOKEN}, and
 * RL.ALL's {@code DETAILS}. Each command refuses, before any call, an option
 * it does not take.
 *
 * <pre>{@code Options.none().withCost(5).withDebit()}</pre>
 */
public final class Options {

    /** What a writing command does with its cost. */
    public enum Mode {
        /** Admit if it fits (the default). */
        ADMIT,
        /** Give {@code COST} units back. */
        REFUND,
        /** Charge {@code COST} units whether or not they fit. */
        DEBIT
    }

    private static final Options NONE = new Options(null, null, Mode.ADMIT, null, null, false);

    private final Instant now;
    private final Long cost;
    private final Mode mode;
    private final Duration reserve;
    private final String token;
    private final boolean details;

    private Options(Instant now, Long cost, Mode mode, Duration reserve, String token, boolean details) {
        this.now = now;
        this.cost = cost;
        this.mode = mode;
        this.reserve = reserve;
        this.token = token;
        this.details = details;
    }

    /** No options: now = server time, cost 1. */
    public static Options none() {
        return NONE;
    }

    /** The caller's clock instead of the server's (SPEC recommends the server's). */
    public Options withNow(Instant now) {
        return new Options(now, cost, mode, reserve, token, details);
    }

    public Options withCost(long cost) {
        return new Options(now, cost, mode, reserve, token, details);
    }

    public Options withRefund() {
        return new Options(now, cost, Mode.REFUND, reserve, token, details);
    }

    public Options withDebit() {
        return new Options(now, cost, Mode.DEBIT, reserve, token, details);
    }

    /** RL.THROTTLE: wait up to {@code maxWait} instead of being refused. */
    public Options withReserve(Duration maxWait) {
        return new Options(now, cost, mode, Objects.requireNonNull(maxWait, "maxWait"), token, details);
    }

    /** RL.LEASE / RL.LEASEPEEK: the lease's name (a request or job id). */
    public Options withToken(String token) {
        return new Options(now, cost, mode, reserve, Limits.token(token), details);
    }

    /** RL.ALL / RL.ALLPEEK: every clause's every rule state in the reply. */
    public Options withDetails() {
        return new Options(now, cost, mode, reserve, token, true);
    }

    public Instant now() {
        return now;
    }

    /** The cost, or null for the command's default (1). */
    public Long cost() {
        return cost;
    }

    public Mode mode() {
        return mode;
    }

    public Duration reserve() {
        return reserve;
    }

    public String token() {
        return token;
    }

    public boolean details() {
        return details;
    }

    @Override
    public String toString() {
        return "Options[now=" + (now == null ? "*" : now) + ", cost=" + cost + ", mode=" + mode + ", reserve=" + reserve
                + ", token=" + token + ", details=" + details + "]";
    }
}
