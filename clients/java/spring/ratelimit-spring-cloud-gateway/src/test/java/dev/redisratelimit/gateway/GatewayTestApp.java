package dev.redisratelimit.gateway;

import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.cloud.gateway.filter.ratelimit.KeyResolver;
import org.springframework.context.annotation.Bean;
import reactor.core.publisher.Mono;

/** A gateway whose routes (application.yml) go to the test's stub backend; callers named by X-User. */
@SpringBootApplication
public class GatewayTestApp {

    @Bean
    KeyResolver userKeyResolver() {
        return exchange -> Mono.justOrEmpty(exchange.getRequest().getHeaders().getFirst("X-User"));
    }
}
