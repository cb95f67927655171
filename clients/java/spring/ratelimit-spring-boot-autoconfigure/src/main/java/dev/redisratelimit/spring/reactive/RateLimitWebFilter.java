package dev.redisratelimit.spring.reactive;

import org.springframework.core.Ordered;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.http.server.reactive.ServerHttpRequestDecorator;
import org.springframework.web.filter.reactive.ServerWebExchangeContextFilter;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Gives {@code @RateLimited} methods their exchange: puts it in the Reactor
 * Context under Spring's own key (so {@link ServerWebExchangeContextFilter#getExchange}
 * finds it), and digests the request body as the handler reads it (duplicate
 * prevention).
 */
public class RateLimitWebFilter implements WebFilter, Ordered {

    private final int bodyLimit;

    public RateLimitWebFilter(int bodyLimit) {
        this.bodyLimit = bodyLimit;
    }

    @Override
    public int getOrder() {
        return Ordered.HIGHEST_PRECEDENCE + 10;
    }

    @Override
    public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
        BodyDigest digest = new BodyDigest(bodyLimit);
        ServerHttpRequest request = new ServerHttpRequestDecorator(exchange.getRequest()) {
            @Override
            public Flux<DataBuffer> getBody() {
                return super.getBody().doOnNext(digest::update);
            }
        };
        ServerWebExchange ex = exchange.mutate().request(request).build();
        ex.getAttributes().put(BodyDigest.ATTRIBUTE, digest);
        return chain.filter(ex).contextWrite(ctx -> ctx.put(ServerWebExchangeContextFilter.EXCHANGE_CONTEXT_ATTRIBUTE, ex));
    }
}
