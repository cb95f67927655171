package dev.redisratelimit.gateway;

import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.spring.annotation.AnnotationPolicies;
import dev.redisratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.redisratelimit.spring.autoconfigure.RateLimitProperties;
import dev.redisratelimit.spring.http.DefaultRateLimitAnswers;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.cloud.gateway.filter.ratelimit.KeyResolver;
import org.springframework.cloud.gateway.filter.ratelimit.PrincipalNameKeyResolver;
import org.springframework.cloud.gateway.support.ConfigurationService;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Primary;
import org.springframework.http.codec.ServerCodecConfigurer;

/**
 * redis-ratelimit in Spring Cloud Gateway, on only when the gateway (server,
 * WebFlux) is on the class path and the starter made its decision core: the
 * {@code RateLimit} filter and a {@code RateLimiter} for SCG's
 * {@code RequestRateLimiter}, made the primary one (SCG's filter takes the
 * single or primary bean; a route keeps SCG's own with
 * {@code rate-limiter: "#{@redisRateLimiter}"}).
 */
// Before the gateway's: its RequestRateLimiter factory is made only when a RateLimiter bean is defined.
@AutoConfiguration(after = RateLimitAutoConfiguration.class,
        beforeName = "org.springframework.cloud.gateway.config.GatewayAutoConfiguration")
@ConditionalOnClass(name = "org.springframework.cloud.gateway.filter.factory.AbstractGatewayFilterFactory")
@ConditionalOnBean(RateLimiter.class)
@EnableConfigurationProperties(RateLimitGatewayProperties.class)
public class RateLimitGatewayAutoConfiguration {

    @Bean
    @Primary
    @ConditionalOnMissingBean
    public GatewayRateLimiter rateLimitGatewayRateLimiter(RateLimiter limiter, ObjectProvider<AnnotationPolicies> registered,
            ObjectProvider<RateLimitAnswers> answers, RateLimitProperties p, RateLimitGatewayProperties gw,
            ConfigurationService configurationService) {
        registered.getIfAvailable(); // ratelimit.policies registered before the first route asks for one
        return new GatewayRateLimiter(limiter, answers(answers, p), gw.getRoutePolicies(), configurationService);
    }

    @Bean
    @ConditionalOnMissingBean
    public RateLimitGatewayFilterFactory rateLimitGatewayFilterFactory(RateLimiter limiter, ObjectProvider<AnnotationPolicies> registered,
            ObjectProvider<RateLimitAnswers> answers, RateLimitProperties p, ObjectProvider<KeyResolver> keyResolvers,
            ServerCodecConfigurer codecs) {
        registered.getIfAvailable();
        KeyResolver resolver = keyResolvers.getIfUnique(PrincipalNameKeyResolver::new);
        return new RateLimitGatewayFilterFactory(limiter, answers(answers, p), resolver, codecs);
    }

    private static RateLimitAnswers answers(ObjectProvider<RateLimitAnswers> answers, RateLimitProperties p) {
        return answers.getIfAvailable(() -> new DefaultRateLimitAnswers(p.isRateLimitHeaders(), p.isLegacyHeaders(), p.getConcurrencyRetryAfter()));
    }
}
