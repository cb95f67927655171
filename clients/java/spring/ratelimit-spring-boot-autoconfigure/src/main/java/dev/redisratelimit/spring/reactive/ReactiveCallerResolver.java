package dev.redisratelimit.spring.reactive;

import org.springframework.web.server.ServerWebExchange;
import reactor.core.publisher.Mono;

/**
 * Who is calling, on WebFlux: the identities a policy can be keyed by. A bean
 * of this type replaces the default ({@link DefaultReactiveCallerResolver}).
 */
public interface ReactiveCallerResolver {

    /** The client's IP address. */
    String clientIp(ServerWebExchange exchange);

    /** The user, or an empty Mono when the request names none (the principal is itself a Mono on WebFlux). */
    Mono<String> user(ServerWebExchange exchange);

    /** A digest of the request body's bytes read so far (duplicate prevention), or null when none was recorded. */
    String bodyDigest(ServerWebExchange exchange);
}
