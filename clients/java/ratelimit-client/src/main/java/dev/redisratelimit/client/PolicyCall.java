package dev.redisratelimit.client;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * One policy with what one call brings to it: the caller's key, the zone of
 * its quotas (null: each limit's own), each clause's cost (by clause index in
 * {@link Policy#clauses()}; null: 1 each) and the subkey of its duplicate
 * prevention (e.g. a body digest; null: none). A request guarded by several
 * policies is several of these, decided together by
 * {@link RateLimiter#acquire(List)} in one RL.ALL.
 *
 * <pre>{@code
 * limiter.acquire(PolicyCall.of(llm, "customer:7").withEstimate(1_000))
 * }</pre>
 */
public record PolicyCall(Policy policy, String key, String zone, long[] costs, String subkey) {

    public PolicyCall {
        Objects.requireNonNull(policy, "policy");
    }

    /** {@code policy} for {@code key}: cost 1 per clause, each limit's own zone, no subkey. */
    public static PolicyCall of(Policy policy, String key) {
        return new PolicyCall(policy, key, null, null, null);
    }

    /** The same call in another zone (its quotas' calendar). */
    public PolicyCall withZone(String zone) {
        return new PolicyCall(policy, key, zone, costs, subkey);
    }

    /** The same call with a subkey (duplicate prevention: a second call with it within the window is refused). */
    public PolicyCall withSubkey(String subkey) {
        return new PolicyCall(policy, key, zone, costs, subkey);
    }

    /**
     * The same call charging {@code cost} to every clause whose limits take the
     * call's cost (not an estimate): a lease of {@code cost} units, the
     * duplicate window too (so a cost above 1 is refused there, as in every client).
     */
    public PolicyCall withCost(long cost) {
        return charging(cost, false);
    }

    /**
     * The same call charging {@code estimate} to the clauses of
     * {@link Limit#estimated() estimated} limits; closing its permit settles
     * them to the usage reported ({@link Permit#used(long)}).
     */
    public PolicyCall withEstimate(long estimate) {
        return charging(estimate, true);
    }

    private PolicyCall charging(long units, boolean estimates) {
        String field = estimates ? "estimate" : "cost";
        Limit.require(units >= 0 && units <= Limit.MAX, field, field + " " + units + " must be from 0 to 2^53-1");
        List<PolicyClause> clauses = policy.clauses();
        long[] c = costs != null ? costs.clone() : filled(clauses.size());
        for (int i = 0; i < clauses.size(); i++) {
            if ((clauses.get(i).settle() != null) == estimates) {
                c[i] = units;
            }
        }
        return new PolicyCall(policy, key, zone, c, subkey);
    }

    private static long[] filled(int n) {
        long[] c = new long[n];
        Arrays.fill(c, 1);
        return c;
    }

    /** The routes' calls then the handler's own (last); a route naming the same policy and key counts once. */
    public static List<PolicyCall> withRoutes(List<PolicyCall> routes, PolicyCall own) {
        return withRoutes(routes, List.of(own));
    }

    /**
     * The routes' calls then the handler's own (its several {@code @RateLimited}, last, in order); a route
     * naming the same policy and key as one of the handler's counts once, as the handler's (whose estimates
     * the handler settles).
     */
    public static List<PolicyCall> withRoutes(List<PolicyCall> routes, List<PolicyCall> own) {
        List<PolicyCall> all = new ArrayList<>(routes.size() + own.size());
        for (PolicyCall c : routes) {
            if (own.stream().noneMatch(o -> c.policy().name().equals(o.policy().name()) && c.key().equals(o.key()))) {
                all.add(c);
            }
        }
        all.addAll(own);
        return all;
    }
}
