package dev.redisratelimit.spring.reactive;

import org.springframework.http.server.reactive.ServerHttpRequestDecorator;
import org.springframework.util.ClassUtils;
import org.springframework.web.server.ServerWebExchange;
import reactor.core.scheduler.Scheduler;
import reactor.core.scheduler.Schedulers;

/**
 * The event loop of the connection a request came in on (Reactor Netty), as a
 * Scheduler: the WebFlux adapter hands every decision (admitted, refused,
 * unavailable) back to it before the handler runs or an answer is written.
 *
 * <p>Why: a decision completes on the Redis client's I/O thread. An answer
 * written from a foreign thread reaches the connection as separate tasks
 * (the write, then the end of the exchange), and a client that already has
 * the answer can send its next request in between; Reactor Netty then
 * buffers that request, and on some interleavings never reads or answers
 * it (reactor/reactor-netty#4188, #4347/#4361: HTTP/1.1 keep-alive stalls;
 * issue 35 measured 2–3% of requests on reused connections). Written from
 * the connection's own loop, the answer and the end of the exchange are one
 * task, as for a handler that never left the loop.
 */
final class ConnectionLoop {

    private static final boolean REACTOR_NETTY = ClassUtils.isPresent("reactor.netty.Connection", ConnectionLoop.class.getClassLoader());

    private ConnectionLoop() {
    }

    /** The exchange's connection's event loop; Schedulers.immediate() off Reactor Netty (or without an exchange). */
    static Scheduler of(ServerWebExchange exchange) {
        if (exchange != null && REACTOR_NETTY) {
            Scheduler s = NettyLoop.of(ServerHttpRequestDecorator.getNativeRequest(exchange.getRequest()));
            if (s != null) {
                return s;
            }
        }
        return Schedulers.immediate();
    }

    // Apart, so that the class referring to Reactor Netty loads only when it is there.
    private static final class NettyLoop {
        static Scheduler of(Object nativeRequest) {
            if (nativeRequest instanceof reactor.netty.Connection c) {
                return Schedulers.fromExecutor(c.channel().eventLoop());
            }
            return null;
        }
    }
}
