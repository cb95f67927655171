package dev.redisratelimit.gateway;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.context.properties.ConfigurationProperties;

/** {@code ratelimit.gateway.*}: the policies of routes whose RequestRateLimiter filter names none in its args. */
@ConfigurationProperties("ratelimit.gateway")
public class RateLimitGatewayProperties {

    /** Route id to the ratelimit.policies names its RequestRateLimiter filter decides (together, in one RL.ALL). */
    private Map<String, List<String>> routePolicies = new LinkedHashMap<>();

    public Map<String, List<String>> getRoutePolicies() {
        return routePolicies;
    }

    public void setRoutePolicies(Map<String, List<String>> routePolicies) {
        this.routePolicies = routePolicies;
    }
}
