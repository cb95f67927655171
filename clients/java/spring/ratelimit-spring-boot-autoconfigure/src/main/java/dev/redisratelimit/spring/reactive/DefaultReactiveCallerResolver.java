package dev.redisratelimit.spring.reactive;

import dev.redisratelimit.spring.http.ClientAddress;
import java.net.InetSocketAddress;
import java.security.Principal;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * The MVC adapter's rules on a reactive request: the client IP is
 * {@link ClientAddress}'s (the peer, or behind a proxy on the same host the
 * right-most non-loopback X-Forwarded-For address); the user is the
 * exchange's principal, else the header named by {@code ratelimit.user-header};
 * the body digest is the one {@link RateLimitWebFilter} records.
 */
public class DefaultReactiveCallerResolver implements ReactiveCallerResolver {

    private final String userHeader;

    public DefaultReactiveCallerResolver(String userHeader) {
        this.userHeader = userHeader == null || userHeader.isBlank() ? null : userHeader;
    }

    @Override
    public String clientIp(ServerWebExchange exchange) {
        InetSocketAddress remote = exchange.getRequest().getRemoteAddress();
        String peer = remote == null ? null
                : remote.getAddress() != null ? remote.getAddress().getHostAddress() : remote.getHostString();
        return ClientAddress.of(peer, exchange.getRequest().getHeaders().getFirst("X-Forwarded-For"));
    }

    @Override
    public Mono<String> user(ServerWebExchange exchange) {
        Mono<String> header = userHeader == null ? Mono.empty()
                : Mono.justOrEmpty(exchange.getRequest().getHeaders().getFirst(userHeader));
        return exchange.getPrincipal().map(Principal::getName).switchIfEmpty(header);
    }

    @Override
    public String bodyDigest(ServerWebExchange exchange) {
        BodyDigest d = exchange.getAttribute(BodyDigest.ATTRIBUTE);
        return d == null ? null : d.hex();
    }
}
