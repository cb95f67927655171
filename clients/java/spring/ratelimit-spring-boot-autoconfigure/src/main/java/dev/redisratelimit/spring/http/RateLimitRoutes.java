package dev.redisratelimit.spring.http;

import dev.redisratelimit.client.Policy;
import dev.redisratelimit.client.PolicyCall;
import dev.redisratelimit.client.PolicyClause;
import dev.redisratelimit.client.RateLimitConfigurationException;
import dev.redisratelimit.spring.autoconfigure.RateLimitProperties;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.function.Function;
import org.springframework.expression.EvaluationContext;
import org.springframework.expression.Expression;
import org.springframework.expression.ParseException;
import org.springframework.expression.spel.standard.SpelExpressionParser;
import org.springframework.http.HttpMethod;
import org.springframework.http.server.PathContainer;
import org.springframework.web.util.pattern.PathPattern;
import org.springframework.web.util.pattern.PathPatternParser;
import org.springframework.web.util.pattern.PatternParseException;

/**
 * {@code ratelimit.routes}, compiled and checked once at start-up: path
 * patterns parsed (Spring's PathPattern syntax, as {@code @RequestMapping}
 * uses), the policy found under {@code ratelimit.policies}, the key resolver
 * and every cost expression parsed. Anything that cannot work fails the
 * start with a {@link RateLimitRoutesException} naming the property.
 *
 * <p>Servlet-free: a request is given as its path within the application,
 * its method, and a {@link Request} view for the key resolvers, so the MVC
 * interceptor and a WebFlux filter share it.
 */
public final class RateLimitRoutes {

    /** What a key resolver may read from a request (MVC and WebFlux both provide it). */
    public interface Request {
        String clientIp();

        /** The principal's name, else the configured user header; null when neither. */
        String user();

        String header(String name);

        /** The path within the application. */
        String path();

        String method();

        /** The framework's own request (HttpServletRequest, ServerHttpRequest), #request in SpEL. */
        Object nativeRequest();
    }

    /** How a route finds the caller's key. */
    public sealed interface KeyResolver {
        record Ip() implements KeyResolver {
        }

        record User() implements KeyResolver {
        }

        record Header(String name) implements KeyResolver {
        }

        record Spel(Expression expression) implements KeyResolver {
        }
    }

    /** One compiled route. */
    public record Route(String name, List<PathPattern> paths, Set<String> methods, Policy policy, KeyResolver keyResolver,
            Expression[] costs) {

        boolean matches(PathContainer path, String method) {
            if (!methods.isEmpty() && !methods.contains(method)) {
                return false;
            }
            for (PathPattern p : paths) {
                if (p.matches(path)) {
                    return true;
                }
            }
            return false;
        }
    }

    /**
     * {@code #headers} in a route's SpEL: {@code #headers['X-Api-Key']} reads a
     * request header on MVC and WebFlux alike (lookup only; not iterable).
     */
    public static Map<String, String> headers(Request request) {
        return new java.util.AbstractMap<>() {
            @Override
            public String get(Object name) {
                return name == null ? null : request.header(name.toString());
            }

            @Override
            public boolean containsKey(Object name) {
                return get(name) != null;
            }

            @Override
            public Set<Map.Entry<String, String>> entrySet() {
                return Set.of();
            }
        };
    }

    private static final Set<String> METHODS = Set.of("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE");

    private final List<Route> routes;
    private final SpelExpressionParser parser = new SpelExpressionParser();

    /**
     * @param policies the compiled policies by name (those of {@code ratelimit.policies} are registered at start)
     */
    public RateLimitRoutes(RateLimitProperties properties, Map<String, Policy> policies) {
        List<Route> out = new ArrayList<>();
        List<RateLimitProperties.Route> configured = properties.getRoutes();
        for (int i = 0; i < configured.size(); i++) {
            out.add(compile(properties, policies, configured.get(i), "ratelimit.routes[" + i + "]"));
        }
        this.routes = List.copyOf(out);
    }

    public List<Route> routes() {
        return routes;
    }

    public boolean isEmpty() {
        return routes.isEmpty();
    }

    /** The routes that match a request, in configuration order. */
    public List<Route> matching(String pathWithinApplication, String method) {
        if (routes.isEmpty()) {
            return List.of();
        }
        PathContainer path = PathContainer.parsePath(pathWithinApplication);
        return matching(path, method);
    }

    public List<Route> matching(PathContainer path, String method) {
        List<Route> hit = null;
        for (Route r : routes) {
            if (r.matches(path, method)) {
                if (hit == null) {
                    hit = new ArrayList<>(2);
                }
                hit.add(r);
            }
        }
        return hit == null ? List.of() : hit;
    }

    /**
     * The policy calls of the matched routes for this request: each route's
     * key and costs resolved; two routes that name the same policy and
     * resolve the same key count once.
     *
     * @param context builds the SpEL context of a request (its variables: #request, #headers, #ip, #user, #path, #method)
     * @throws RateLimitKeyMissingException when a route finds no key
     */
    public List<PolicyCall> calls(List<Route> matched, Request request, Function<Request, EvaluationContext> context) {
        List<PolicyCall> calls = new ArrayList<>(matched.size());
        Set<String> seen = matched.size() > 1 ? new HashSet<>() : null;
        EvaluationContext ctx = null;
        for (Route r : matched) {
            String key;
            KeyResolver kr = r.keyResolver();
            if (kr instanceof KeyResolver.Ip) {
                key = request.clientIp();
            } else if (kr instanceof KeyResolver.User) {
                key = request.user();
                if (key == null || key.isEmpty()) {
                    throw new RateLimitKeyMissingException("route '" + r.name() + "' counts callers by user: the request names none", true);
                }
            } else if (kr instanceof KeyResolver.Header h) {
                key = request.header(h.name());
                if (key == null || key.isEmpty()) {
                    throw new RateLimitKeyMissingException("route '" + r.name() + "' counts callers by the " + h.name()
                            + " header: the request has none", true);
                }
            } else {
                Expression e = ((KeyResolver.Spel) kr).expression();
                ctx = ctx != null ? ctx : context.apply(request);
                Object v;
                try {
                    v = e.getValue(ctx);
                } catch (RuntimeException ex) {
                    if (BadInput.isValidationError(ex)) { // the request's input, not the app's expression (§5)
                        throw new RateLimitKeyMissingException("route '" + r.name() + "': the request gives no valid key (expression '"
                                + e.getExpressionString() + "': " + ex.getMessage() + ")", false);
                    }
                    throw new RateLimitConfigurationException("route '" + r.name() + "': key expression '"
                            + e.getExpressionString() + "' failed: " + ex.getMessage(), ex);
                }
                if (v == null || v.toString().isEmpty()) {
                    throw new RateLimitKeyMissingException("route '" + r.name() + "': the request gives no key (expression '"
                            + e.getExpressionString() + "' evaluated to " + (v == null ? "null" : "an empty string") + ")", false);
                }
                key = v.toString();
            }
            if (seen != null && !seen.add(r.policy().name() + '\0' + key)) {
                continue;
            }
            long[] costs = null;
            for (int c = 0; c < r.costs().length; c++) {
                if (r.costs()[c] != null) {
                    if (costs == null) {
                        costs = new long[r.costs().length];
                        java.util.Arrays.fill(costs, 1);
                    }
                    ctx = ctx != null ? ctx : context.apply(request);
                    costs[c] = cost(r, r.costs()[c], ctx);
                }
            }
            calls.add(new PolicyCall(r.policy(), key, null, costs, null));
        }
        return calls;
    }

    private static long cost(Route r, Expression e, EvaluationContext ctx) {
        Object v;
        try {
            v = e.getValue(ctx);
        } catch (RuntimeException ex) {
            if (BadInput.isValidationError(ex)) {
                throw new dev.redisratelimit.client.RateLimitArgumentException("cost", "invalid cost (route '" + r.name()
                        + "', expression '" + e.getExpressionString() + "'): " + ex.getMessage(), ex);
            }
            throw new RateLimitConfigurationException("route '" + r.name() + "': cost expression '" + e.getExpressionString()
                    + "' failed: " + ex.getMessage(), ex);
        }
        // A client-chosen cost (a header, a parameter): not an integer is a 400; its bounds are the client's to check.
        return BadInput.cost(v, "route '" + r.name() + "'");
    }

    private Route compile(RateLimitProperties properties, Map<String, Policy> policies, RateLimitProperties.Route c,
            String where) {
        String name = c.getName() == null || c.getName().isBlank() ? where.substring("ratelimit.".length()) : c.getName();
        if (c.getPolicy() == null || c.getPolicy().isBlank()) {
            throw new RateLimitRoutesException(where + ".policy", "a route names its policy (one of ratelimit.policies: "
                    + properties.getPolicies().keySet() + ")", null);
        }
        Policy policy = properties.getPolicies().containsKey(c.getPolicy()) ? policies.get(c.getPolicy()) : null;
        if (policy == null) {
            throw new RateLimitRoutesException(where + ".policy", "unknown policy '" + c.getPolicy() + "' (known under ratelimit.policies: "
                    + properties.getPolicies().keySet() + ")", null);
        }
        if (policy.isLockout()) {
            throw new RateLimitRoutesException(where + ".policy", "policy '" + c.getPolicy()
                    + "' is a LOCKOUT (RL.LOCKCOUNT cannot join a route's RL.ALL): put it on the handler with @RateLimited", null);
        }
        List<PolicyClause> clauses = policy.clauses();
        Expression[] costs = new Expression[clauses.size()];
        for (int i = 0; i < clauses.size(); i++) {
            if (clauses.get(i).settle() != null) {
                throw new RateLimitRoutesException(where + ".policy", "policy '" + c.getPolicy() + "' settles an estimate from "
                        + "the method's #result, which a route does not have: give the route a policy without 'settle'", null);
            }
            String cost = clauses.get(i).cost();
            costs[i] = cost == null ? null : parse(cost, where + ".policy", "cost expression of policy '" + c.getPolicy() + "'");
        }
        if (c.getPaths() == null || c.getPaths().isEmpty()) {
            throw new RateLimitRoutesException(where + ".paths", "a route needs at least one path pattern (e.g. /api/**)", null);
        }
        List<PathPattern> paths = new ArrayList<>();
        for (int i = 0; i < c.getPaths().size(); i++) {
            String p = c.getPaths().get(i);
            if (p == null || !p.startsWith("/")) {
                // Matched against the path within the application, which always starts with '/': it would match nothing.
                throw new RateLimitRoutesException(where + ".paths[" + i + "]", "'" + (p == null ? "" : p)
                        + "' does not start with '/', so it would match no request (e.g. /" + (p == null ? "" : p) + ")", null);
            }
            try {
                paths.add(PathPatternParser.defaultInstance.parse(p == null ? "" : p));
            } catch (PatternParseException e) {
                throw new RateLimitRoutesException(where + ".paths[" + i + "]", "'" + p + "' is not a path pattern: " + e.getMessage()
                        + " (PathPattern syntax: ?, *, ** at the end, {name}, {*rest})", e);
            }
        }
        Set<String> methods = new HashSet<>();
        for (int i = 0; c.getMethods() != null && i < c.getMethods().size(); i++) {
            String m = c.getMethods().get(i) == null ? "" : c.getMethods().get(i).trim().toUpperCase(Locale.ROOT);
            if (!METHODS.contains(m)) {
                throw new RateLimitRoutesException(where + ".methods[" + i + "]", "'" + c.getMethods().get(i)
                        + "' is not an HTTP method (one of " + new java.util.TreeSet<>(METHODS) + ")", null);
            }
            methods.add(HttpMethod.valueOf(m).name());
        }
        return new Route(name, List.copyOf(paths), Set.copyOf(methods), policy, resolver(c, where), costs);
    }

    private KeyResolver resolver(RateLimitProperties.Route c, String where) {
        String spec = c.getKeyResolver() == null || c.getKeyResolver().isBlank() ? "ip" : c.getKeyResolver().trim();
        int colon = spec.indexOf(':');
        String kind = (colon < 0 ? spec : spec.substring(0, colon)).trim().toLowerCase(Locale.ROOT);
        String arg = colon < 0 ? null : spec.substring(colon + 1).trim();
        String prop = where + ".key-resolver";
        switch (kind) {
            case "ip", "user" -> {
                if (arg != null) {
                    throw new RateLimitRoutesException(prop, "'" + spec + "': " + kind + " takes no argument", null);
                }
                return kind.equals("ip") ? new KeyResolver.Ip() : new KeyResolver.User();
            }
            case "header" -> {
                String h = arg != null && !arg.isEmpty() ? arg : c.getHeader();
                if (h == null || h.isBlank()) {
                    throw new RateLimitRoutesException(prop, "the header key resolver needs a header name: key-resolver: header:X-Api-Key "
                            + "(or key-resolver: header with header: X-Api-Key)", null);
                }
                if (!h.trim().matches("[!#$%&'*+.^_`|~0-9A-Za-z-]+")) {
                    throw new RateLimitRoutesException(prop, "'" + h + "' is not an HTTP header name", null);
                }
                return new KeyResolver.Header(h.trim());
            }
            case "spel" -> {
                String e = arg != null && !arg.isEmpty() ? arg : c.getExpression();
                if (e == null || e.isBlank()) {
                    throw new RateLimitRoutesException(prop, "the spel key resolver needs an expression: key-resolver: \"spel:#user ?: #ip\" "
                            + "(or key-resolver: spel with expression: ...)", null);
                }
                return new KeyResolver.Spel(parse(e, prop, "key expression"));
            }
            default -> throw new RateLimitRoutesException(prop, "unknown key resolver '" + spec
                    + "' (one of: ip, user, header:<Name>, spel:<expression>)", null);
        }
    }

    private Expression parse(String spel, String property, String what) {
        try {
            return parser.parseExpression(spel);
        } catch (ParseException e) {
            throw new RateLimitRoutesException(property, what + " '" + spel + "' does not parse: " + e.getMessage(), e);
        }
    }
}
