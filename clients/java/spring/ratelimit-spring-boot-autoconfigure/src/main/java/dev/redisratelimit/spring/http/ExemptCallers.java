package dev.redisratelimit.spring.http;

import dev.redisratelimit.client.PolicyCall;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Set;
import java.util.regex.Pattern;
import org.springframework.boot.context.properties.source.InvalidConfigurationPropertyValueException;

/**
 * {@code ratelimit.exempt}: callers never limited — the Python and Node
 * adapters' {@code exempt} ({@code ips}: addresses and CIDR ranges of the
 * client IP as {@link ClientAddress} resolves it; {@code keys}: resolved
 * caller keys). An exempt request is decided by nobody: nothing is written to
 * Redis, it gets no RateLimit headers and no permit. Built once at start: a
 * malformed entry fails the start naming {@code ratelimit.exempt.ips[i]}
 * (Spring Boot's own {@link InvalidConfigurationPropertyValueException}, which
 * its failure analyzer prints with the value and where it was set).
 *
 * <p>The CIDR match is a few lines over {@link InetAddress} because no
 * dependency of the starter has one: Spring Security's {@code IpAddressMatcher}
 * is in spring-security-web, which the starter does not need; Netty's
 * {@code IpSubnetFilterRule} only comes with Lettuce (the starter also runs on
 * Jedis). Entries are parsed as literals only, never looked up in DNS.
 */
public final class ExemptCallers {

    /** The request (exchange) attribute set when a route found the request exempt: its handler's @RateLimited skips it too. */
    public static final String ATTRIBUTE = ExemptCallers.class.getName();

    private static final String OCTET = "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
    private static final Pattern IPV4 = Pattern.compile(OCTET + "(\\." + OCTET + "){3}");
    private static final Pattern IPV6 = Pattern.compile("[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*");

    private record Range(byte[] network, int bits) {
        boolean contains(byte[] a) {
            if (a.length != network.length) {
                return false;
            }
            int whole = bits / 8;
            for (int i = 0; i < whole; i++) {
                if (a[i] != network[i]) {
                    return false;
                }
            }
            int rest = bits % 8;
            int mask = (0xff << (8 - rest)) & 0xff;
            return rest == 0 || (a[whole] & mask) == (network[whole] & mask);
        }
    }

    private final List<Range> ranges;
    private final Set<String> keys;

    private ExemptCallers(List<Range> ranges, Set<String> keys) {
        this.ranges = ranges;
        this.keys = keys;
    }

    /** The exemptions of {@code ratelimit.exempt}; throws naming the first entry that is not an address or a CIDR range. */
    public static ExemptCallers of(List<String> ips, Collection<String> keys) {
        List<Range> ranges = new ArrayList<>();
        for (int i = 0; i < ips.size(); i++) {
            String entry = ips.get(i) == null ? "" : ips.get(i).trim();
            Range r = range(entry);
            if (r == null) {
                throw new InvalidConfigurationPropertyValueException("ratelimit.exempt.ips[" + i + "]", ips.get(i),
                        "not an IP address or a CIDR range (such as 10.0.0.0/8, 192.0.2.7 or 2001:db8::/32)");
            }
            ranges.add(r);
        }
        return new ExemptCallers(List.copyOf(ranges), Set.copyOf(keys));
    }

    private static Range range(String entry) {
        int slash = entry.indexOf('/');
        InetAddress a = literal(slash < 0 ? entry : entry.substring(0, slash));
        if (a == null) {
            return null;
        }
        int max = a.getAddress().length * 8;
        int bits = max;
        if (slash >= 0) {
            String p = entry.substring(slash + 1);
            if (!p.matches("\\d{1,3}") || (bits = Integer.parseInt(p)) > max) {
                return null;
            }
        }
        return new Range(a.getAddress(), bits);
    }

    // An address literal (IPv4 dotted quad, or IPv6, brackets and zone allowed), else null: never a DNS lookup.
    private static InetAddress literal(String s) {
        String a = s.startsWith("[") && s.endsWith("]") ? s.substring(1, s.length() - 1) : s;
        int zone = a.indexOf('%');
        if (zone >= 0) {
            a = a.substring(0, zone);
        }
        if (!IPV4.matcher(a).matches() && !IPV6.matcher(a).matches()) {
            return null;
        }
        try {
            return InetAddress.getByName(a); // a literal: parsed, not resolved (an IPv4-mapped IPv6 comes back as IPv4)
        } catch (UnknownHostException e) {
            return null;
        }
    }

    /** No exemptions configured (the common case: nothing to check per request). */
    public boolean isEmpty() {
        return ranges.isEmpty() && keys.isEmpty();
    }

    /** Whether this client IP is in an exempt address or range (false for null or anything not an address). */
    public boolean ip(String clientIp) {
        if (ranges.isEmpty() || clientIp == null) {
            return false;
        }
        InetAddress a = literal(clientIp.trim());
        if (a == null) {
            return false;
        }
        byte[] bytes = a.getAddress();
        for (Range r : ranges) {
            if (r.contains(bytes)) {
                return true;
            }
        }
        return false;
    }

    /** Whether any of these calls is keyed by an exempt key. */
    public boolean anyKey(Collection<PolicyCall> calls) {
        if (keys.isEmpty() || calls == null) {
            return false;
        }
        for (PolicyCall c : calls) {
            if (c.key() != null && keys.contains(c.key())) {
                return true;
            }
        }
        return false;
    }
}
