package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.spring.annotation.AnnotationPolicies;
import dev.redisratelimit.spring.http.DefaultRateLimitAnswers;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import dev.redisratelimit.spring.http.RateLimitRoutes;
import dev.redisratelimit.spring.web.CallerResolver;
import dev.redisratelimit.spring.web.DefaultCallerResolver;
import dev.redisratelimit.spring.web.RateLimitExceptionHandler;
import dev.redisratelimit.spring.web.RateLimitRouteInterceptor;
import dev.redisratelimit.spring.web.RequestBodyCachingFilter;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.web.servlet.DispatcherServlet;
import org.springframework.web.servlet.config.annotation.InterceptorRegistry;
import org.springframework.web.servlet.config.annotation.WebMvcConfigurer;

/**
 * The Spring MVC adapter: the caller resolver, the HTTP answers (the same
 * {@link RateLimitAnswers} as WebFlux), the exception handler for 429/503/400/401,
 * the request-body cache of duplicate prevention and the
 * {@code ratelimit.routes} interceptor. {@code @RateLimited} methods are
 * proxied by {@link RateLimitAutoConfiguration} (in any non-reactive app).
 */
@AutoConfiguration(after = RateLimitAutoConfiguration.class)
@ConditionalOnBean(RateLimiter.class)
@ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
@ConditionalOnClass(DispatcherServlet.class)
public class RateLimitWebMvcAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    CallerResolver rateLimitCallerResolver(RateLimitProperties p) {
        return new DefaultCallerResolver(p.getUserHeader());
    }

    @Bean
    @ConditionalOnMissingBean
    RateLimitAnswers rateLimitAnswers(RateLimitProperties p) {
        return new DefaultRateLimitAnswers(p.isRateLimitHeaders(), p.isLegacyHeaders(), p.getConcurrencyRetryAfter());
    }

    @Bean
    RateLimitExceptionHandler rateLimitExceptionHandler(RateLimitAnswers answers) {
        return new RateLimitExceptionHandler(answers);
    }

    @Bean
    @ConditionalOnMissingBean
    RequestBodyCachingFilter rateLimitRequestBodyCachingFilter() {
        return new RequestBodyCachingFilter(1 << 20);
    }

    // ratelimit.routes, checked at start-up (after the YAML policies are registered).
    @Bean
    @ConditionalOnMissingBean
    RateLimitRoutes rateLimitRoutes(RateLimitProperties p, AnnotationPolicies policies, RateLimiter limiter) {
        return new RateLimitRoutes(p, limiter.policies());
    }

    @Bean
    WebMvcConfigurer rateLimitRoutesConfigurer(RateLimitRoutes routes, RateLimiter limiter, AnnotationPolicies policies,
            CallerResolver caller, RateLimitAnswers answers) {
        return new WebMvcConfigurer() {
            @Override
            public void addInterceptors(InterceptorRegistry registry) {
                if (!routes.isEmpty()) {
                    registry.addInterceptor(new RateLimitRouteInterceptor(routes, limiter, policies, caller, answers));
                }
            }
        };
    }

}
