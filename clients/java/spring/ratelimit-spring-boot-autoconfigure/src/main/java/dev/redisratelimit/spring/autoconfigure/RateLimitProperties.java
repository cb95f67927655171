package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.Backend;
import dev.redisratelimit.client.QuotaPeriod;
import dev.redisratelimit.spring.annotation.LimitType;
import dev.redisratelimit.spring.annotation.OnRedisDown;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/** {@code ratelimit.*}: the starter's settings and the named policies. */
@ConfigurationProperties(prefix = "ratelimit")
public class RateLimitProperties {

    /** Whether annotated methods are rate-limited at all. */
    private boolean enabled = true;

    /** Put before every Redis key the starter writes (two services on one Redis). */
    private String prefix = "";

    /** The longest a decision waits for Redis before the Redis-down policy applies. */
    private Duration decisionBudget = Duration.ofMillis(500);

    /** How often a broken Redis is probed in the background (requests never reconnect). */
    private Duration probeInterval = Duration.ofMillis(250);

    /**
     * The longest Lettuce waits between reconnect attempts (its default backs
     * off to 30 s): kept short so decisions use Redis again within about two
     * seconds of it answering. Applies to the app's Lettuce client; 0 leaves
     * Lettuce's default.
     */
    private Duration maxReconnectDelay = Duration.ofMillis(500);

    /** How often each instance reads the limits changed at run time. */
    private Duration refreshInterval = Duration.ofMillis(250);

    /** What policies without their own setting do while Redis is down. */
    private OnRedisDown onRedisDown = OnRedisDown.FAIL_CLOSED;

    /** Retry-After of a refusal whose binding limit is an in-flight limit (not the lease TTL). */
    private Duration concurrencyRetryAfter = Duration.ofSeconds(1);

    /** Check at start-up that the module is loaded (COMMAND INFO RL.ALL); fail start-up if not. */
    private boolean verifyModule = true;

    /**
     * Which engine decides: MODULE (the RL commands), FUNCTIONS (the project's
     * Redis Functions library, loaded at start-up when absent or older: for
     * managed Redis, which loads no module) or AUTO (the module where loaded,
     * else the library; the library once the module goes missing at run time).
     */
    private Backend backend = Backend.MODULE;

    /** The header that names the user when the request has no principal (KeyBy.USER); unset: principal only. */
    private String userHeader;

    /** Send RateLimit-Policy / RateLimit (IETF structured fields). */
    private boolean rateLimitHeaders = true;

    /** Also send X-RateLimit-Limit/Remaining/Reset of the binding limit. */
    private boolean legacyHeaders = false;

    /** The properties default: a @RateLimited with no limits and no policy gets this sliding window. */
    private final Default defaultLimit = new Default();

    /**
     * Callers never limited (the Python and Node adapters' {@code exempt}): an
     * exempt request is decided by nobody — nothing written to Redis, no
     * RateLimit headers — by @RateLimited and ratelimit.routes alike.
     */
    private final Exempt exempt = new Exempt();

    /** Named policies, referenced by @RateLimited(policy = "name") and by routes. */
    private Map<String, Policy> policies = new LinkedHashMap<>();

    /**
     * Routes: requests matched by path pattern (and method) decided against a
     * named policy with no annotation. Every route a request matches applies,
     * all in one decision (and with the handler's @RateLimited, if any).
     */
    private List<Route> routes = new ArrayList<>();

    /** One route: which requests, which policy, keyed by what. */
    public static class Route {
        /** A name for messages and logs (default: routes[index]). */
        private String name;
        /** Path patterns in Spring's PathPattern syntax (/api/**, /users/{id}, /files/{*rest}), matched within the application. */
        private List<String> paths = new ArrayList<>();
        /** HTTP methods (GET, POST, ...); empty: every method. */
        private List<String> methods = new ArrayList<>();
        /** The policy, a name under ratelimit.policies. */
        private String policy;
        /**
         * What the caller is counted by: ip (default), user (the principal's
         * name, else ratelimit.user-header), header:Name, or spel:expression
         * (over #request, #headers, #ip, #user, #path, #method).
         */
        private String keyResolver = "ip";
        /** The header of key-resolver: header (instead of header:Name). */
        private String header;
        /** The SpEL of key-resolver: spel (instead of spel:expression). */
        private String expression;

        public String getName() { return name; }
        public void setName(String name) { this.name = name; }
        public List<String> getPaths() { return paths; }
        public void setPaths(List<String> paths) { this.paths = paths; }
        public List<String> getMethods() { return methods; }
        public void setMethods(List<String> methods) { this.methods = methods; }
        public String getPolicy() { return policy; }
        public void setPolicy(String policy) { this.policy = policy; }
        public String getKeyResolver() { return keyResolver; }
        public void setKeyResolver(String keyResolver) { this.keyResolver = keyResolver; }
        public String getHeader() { return header; }
        public void setHeader(String header) { this.header = header; }
        public String getExpression() { return expression; }
        public void setExpression(String expression) { this.expression = expression; }
    }

    public static class Exempt {
        /**
         * Client IPs never limited: addresses or CIDR ranges (10.0.0.0/8,
         * 2001:db8::/32) of the client IP as the starter resolves it (the peer,
         * or behind a proxy on the same host the right-most X-Forwarded-For address).
         */
        private List<String> ips = new ArrayList<>();
        /** Caller keys never limited: a request any of whose resolved keys (of @RateLimited or a route) is one of these. */
        private List<String> keys = new ArrayList<>();

        public List<String> getIps() { return ips; }
        public void setIps(List<String> ips) { this.ips = ips; }
        public List<String> getKeys() { return keys; }
        public void setKeys(List<String> keys) { this.keys = keys; }
    }

    public static class Default {
        /** Calls admitted per window. */
        private long count = 10;
        /** The window. */
        private Duration window = Duration.ofSeconds(60);
        /** The name of its RateLimit header item. */
        private String name = "default";

        public long getCount() { return count; }
        public void setCount(long count) { this.count = count; }
        public Duration getWindow() { return window; }
        public void setWindow(Duration window) { this.window = window; }
        public String getName() { return name; }
        public void setName(String name) { this.name = name; }
    }

    public static class Policy {
        /** The limits, decided together in one call. */
        private List<LimitProperties> limits = new ArrayList<>();
        /** This policy's Redis-down behaviour (DEFAULT: ratelimit.on-redis-down). */
        private OnRedisDown onRedisDown = OnRedisDown.DEFAULT;
        /** A fixed Cluster hash tag for all of this policy's keys. */
        private String hashTag;
        /** Limits as text, each a sliding window ("5/minute;100/hour"), before any of {@code limits}. */
        private String text;
        /** Count only "failures" or "successes" (empty: every call); see @RateLimited(counts). */
        private String counts;

        public String getText() { return text; }
        public void setText(String text) { this.text = text; }
        public String getCounts() { return counts; }
        public void setCounts(String counts) { this.counts = counts; }

        public List<LimitProperties> getLimits() { return limits; }
        public void setLimits(List<LimitProperties> limits) { this.limits = limits; }
        public OnRedisDown getOnRedisDown() { return onRedisDown; }
        public void setOnRedisDown(OnRedisDown onRedisDown) { this.onRedisDown = onRedisDown; }
        public String getHashTag() { return hashTag; }
        public void setHashTag(String hashTag) { this.hashTag = hashTag; }
    }

    public static class LimitProperties {
        /** The limit's name (its RateLimit header item). */
        private String name;
        /** The limiter. */
        private LimitType type = LimitType.SLIDING_WINDOW;
        /** The count: calls per window, rate, quota, in-flight maximum or lockout maximum. */
        private long count;
        /** The window (sliding window, token bucket, lockout). */
        private Duration window;
        /** A token bucket's burst (default: its count). */
        private long burst;
        /** A quota's calendar period. */
        private QuotaPeriod period = QuotaPeriod.DAY;
        /** A quota's IANA zone. */
        private String zone = "UTC";
        /** A lease's TTL. */
        private Duration ttl = Duration.ofSeconds(60);
        /** A lockout's lock duration. */
        private Duration lockTime;
        /** One counter for every caller. */
        private boolean global;
        /** SpEL for the cost of a call (an estimate to settle). */
        private String cost;
        /** SpEL over #result for the units really used. */
        private String settle;

        public String getName() { return name; }
        public void setName(String name) { this.name = name; }
        public LimitType getType() { return type; }
        public void setType(LimitType type) { this.type = type; }
        public long getCount() { return count; }
        public void setCount(long count) { this.count = count; }
        public Duration getWindow() { return window; }
        public void setWindow(Duration window) { this.window = window; }
        public long getBurst() { return burst; }
        public void setBurst(long burst) { this.burst = burst; }
        public QuotaPeriod getPeriod() { return period; }
        public void setPeriod(QuotaPeriod period) { this.period = period; }
        public String getZone() { return zone; }
        public void setZone(String zone) { this.zone = zone; }
        public Duration getTtl() { return ttl; }
        public void setTtl(Duration ttl) { this.ttl = ttl; }
        public Duration getLockTime() { return lockTime; }
        public void setLockTime(Duration lockTime) { this.lockTime = lockTime; }
        public boolean isGlobal() { return global; }
        public void setGlobal(boolean global) { this.global = global; }
        public String getCost() { return cost; }
        public void setCost(String cost) { this.cost = cost; }
        public String getSettle() { return settle; }
        public void setSettle(String settle) { this.settle = settle; }
    }

    public boolean isEnabled() { return enabled; }
    public void setEnabled(boolean enabled) { this.enabled = enabled; }
    public String getPrefix() { return prefix; }
    public void setPrefix(String prefix) { this.prefix = prefix == null ? "" : prefix; }
    public Duration getDecisionBudget() { return decisionBudget; }
    public void setDecisionBudget(Duration decisionBudget) { this.decisionBudget = positive("decision-budget", decisionBudget); }
    public Duration getProbeInterval() { return probeInterval; }
    public void setProbeInterval(Duration probeInterval) { this.probeInterval = probeInterval; }
    public Duration getMaxReconnectDelay() { return maxReconnectDelay; }
    public void setMaxReconnectDelay(Duration maxReconnectDelay) { this.maxReconnectDelay = maxReconnectDelay; }
    public Duration getRefreshInterval() { return refreshInterval; }
    public void setRefreshInterval(Duration refreshInterval) { this.refreshInterval = refreshInterval; }
    public OnRedisDown getOnRedisDown() { return onRedisDown; }
    public void setOnRedisDown(OnRedisDown onRedisDown) { this.onRedisDown = onRedisDown; }
    public Duration getConcurrencyRetryAfter() { return concurrencyRetryAfter; }
    public void setConcurrencyRetryAfter(Duration concurrencyRetryAfter) { this.concurrencyRetryAfter = concurrencyRetryAfter; }
    public Backend getBackend() { return backend; }
    public void setBackend(Backend backend) { this.backend = backend; }
    public boolean isVerifyModule() { return verifyModule; }
    public void setVerifyModule(boolean verifyModule) { this.verifyModule = verifyModule; }
    public String getUserHeader() { return userHeader; }
    public void setUserHeader(String userHeader) { this.userHeader = userHeader; }
    public boolean isRateLimitHeaders() { return rateLimitHeaders; }
    public void setRateLimitHeaders(boolean rateLimitHeaders) { this.rateLimitHeaders = rateLimitHeaders; }
    public boolean isLegacyHeaders() { return legacyHeaders; }
    public void setLegacyHeaders(boolean legacyHeaders) { this.legacyHeaders = legacyHeaders; }
    public Default getDefaultLimit() { return defaultLimit; }
    public Exempt getExempt() { return exempt; }
    public Map<String, Policy> getPolicies() { return policies; }
    public void setPolicies(Map<String, Policy> policies) { this.policies = policies; }
    public List<Route> getRoutes() { return routes; }
    public void setRoutes(List<Route> routes) { this.routes = routes; }

    // A budget of 0 or less would answer every decision with the Redis-down behaviour while Redis is up.
    private static Duration positive(String name, Duration d) {
        if (d == null || d.isNegative() || d.isZero()) {
            throw new IllegalArgumentException("ratelimit." + name + " must be more than 0, was " + d);
        }
        return d;
    }
}
