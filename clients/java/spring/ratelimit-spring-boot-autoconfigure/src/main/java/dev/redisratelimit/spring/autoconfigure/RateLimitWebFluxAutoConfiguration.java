package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.spring.annotation.AnnotationPolicies;
import dev.redisratelimit.spring.http.DefaultRateLimitAnswers;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import dev.redisratelimit.spring.http.RateLimitRoutes;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.spring.annotation.RateLimitAdvisingPostProcessor;
import dev.redisratelimit.spring.reactive.DefaultReactiveCallerResolver;
import dev.redisratelimit.spring.reactive.ReactiveCallerResolver;
import dev.redisratelimit.spring.reactive.ReactiveOffload;
import dev.redisratelimit.spring.reactive.ReactiveRateLimitExceptionHandler;
import dev.redisratelimit.spring.reactive.ReactiveRateLimitInterceptor;
import dev.redisratelimit.spring.reactive.RateLimitRouteWebFilter;
import dev.redisratelimit.spring.reactive.RateLimitWebFilter;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Role;

/**
 * The WebFlux adapter: {@code @RateLimited} methods returning Mono/Flux
 * decided without blocking, the exchange through the Reactor Context, the
 * same headers and problem bodies as MVC ({@link RateLimitAnswers}), the
 * {@code ratelimit.routes} web filter. With Spring Data Redis's Jedis driver
 * (blocking) the decisions are sent from boundedElastic.
 */
@AutoConfiguration(after = RateLimitAutoConfiguration.class)
@ConditionalOnBean(RateLimiter.class)
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
@ConditionalOnClass(name = "org.springframework.web.reactive.DispatcherHandler")
public class RateLimitWebFluxAutoConfiguration {

    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    static RateLimitAdvisingPostProcessor rateLimitReactiveAdvisingPostProcessor(ObjectProvider<AnnotationPolicies> policies,
            ObjectProvider<RateLimiter> limiter, ObjectProvider<ReactiveCallerResolver> callers, ObjectProvider<RateLimitAnswers> answers,
            ObjectProvider<ReactiveOffload> offload) {
        return new RateLimitAdvisingPostProcessor(policies, new ReactiveRateLimitInterceptor(policies, limiter, callers, answers, offload));
    }

    @Bean
    @ConditionalOnMissingBean
    ReactiveOffload rateLimitReactiveOffload(RateLimitTransport transport) {
        ReactiveOffload o = ReactiveOffload.of(transport);
        if (o.blocking()) {
            org.slf4j.LoggerFactory.getLogger(RateLimitAutoConfiguration.class).info(
                    "rate limits: the Redis driver (Jedis) blocks; WebFlux decisions are sent from Reactor's boundedElastic scheduler");
        }
        return o;
    }

    @Bean
    @ConditionalOnMissingBean
    ReactiveCallerResolver rateLimitReactiveCallerResolver(RateLimitProperties p) {
        return new DefaultReactiveCallerResolver(p.getUserHeader());
    }

    @Bean
    @ConditionalOnMissingBean
    RateLimitAnswers rateLimitAnswers(RateLimitProperties p) {
        return new DefaultRateLimitAnswers(p.isRateLimitHeaders(), p.isLegacyHeaders(), p.getConcurrencyRetryAfter());
    }

    @Bean
    ReactiveRateLimitExceptionHandler rateLimitReactiveExceptionHandler(RateLimitAnswers answers) {
        return new ReactiveRateLimitExceptionHandler(answers);
    }

    @Bean
    @ConditionalOnMissingBean
    RateLimitWebFilter rateLimitWebFilter() {
        return new RateLimitWebFilter(1 << 20);
    }

    // ratelimit.routes, checked at start-up (after the YAML policies are registered).
    @Bean
    @ConditionalOnMissingBean
    RateLimitRoutes rateLimitRoutes(RateLimitProperties p, AnnotationPolicies policies, RateLimiter limiter) {
        return new RateLimitRoutes(p, limiter.policies());
    }

    @Bean
    @ConditionalOnMissingBean
    RateLimitRouteWebFilter rateLimitRouteWebFilter(RateLimitRoutes routes, RateLimiter limiter, AnnotationPolicies policies,
            ReactiveCallerResolver caller, RateLimitAnswers answers, ReactiveOffload offload,
            ObjectProvider<org.springframework.web.reactive.result.method.annotation.RequestMappingHandlerMapping> mapping,
            ObjectProvider<org.springframework.http.codec.ServerCodecConfigurer> codecs) {
        return new RateLimitRouteWebFilter(routes, limiter, policies, caller, answers, offload, mapping, codecs);
    }

}
