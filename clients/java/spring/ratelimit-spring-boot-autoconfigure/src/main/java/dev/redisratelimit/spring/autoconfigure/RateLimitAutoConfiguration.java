package dev.redisratelimit.spring.autoconfigure;

import dev.redisratelimit.client.BackendTransport;
import dev.redisratelimit.client.RateLimitAsyncClient;
import dev.redisratelimit.client.RateLimitTransport;
import dev.redisratelimit.client.RateLimiter;
import dev.redisratelimit.client.RedisAvailability;
import dev.redisratelimit.client.RuntimeLimits;
import dev.redisratelimit.spring.annotation.AnnotationPolicies;
import dev.redisratelimit.spring.annotation.RateLimitAdvisingPostProcessor;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import dev.redisratelimit.spring.web.CallerResolver;
import dev.redisratelimit.spring.web.RateLimitMethodInterceptor;
import dev.redisratelimit.springdata.SpringDataTransport;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.BeanDefinition;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.SmartLifecycle;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Conditional;
import org.springframework.context.annotation.Import;
import org.springframework.context.annotation.Role;
import org.springframework.core.env.Environment;
import org.springframework.data.redis.connection.RedisConnectionFactory;
import org.springframework.util.ClassUtils;

/**
 * The starter's beans, each replaceable by one of your own: the Java
 * client's transport over Spring Data Redis's connection factory (so
 * {@code spring.data.redis.*} configures standalone or Cluster) and its async
 * client, the limiter, the runtime limits, the
 * {@code @RateLimited} proxying in a non-reactive app (the blocking method
 * interceptor). The web stacks' adapters are
 * {@link RateLimitWebMvcAutoConfiguration} and
 * {@link RateLimitWebFluxAutoConfiguration}.
 */
// after Spring Boot's Redis auto-configuration: DataRedisAutoConfiguration on Boot 4, RedisAutoConfiguration on 3.5
@AutoConfiguration(afterName = {"org.springframework.boot.data.redis.autoconfigure.DataRedisAutoConfiguration",
        "org.springframework.boot.autoconfigure.data.redis.RedisAutoConfiguration"})
@ConditionalOnClass(RedisConnectionFactory.class)
@ConditionalOnProperty(prefix = "ratelimit", name = "enabled", matchIfMissing = true)
@EnableConfigurationProperties(RateLimitProperties.class)
// per Boot line (src/boot4/java, src/boot3/java): Lettuce's reconnect backoff
@Import(LettuceReconnectConfiguration.class)
public class RateLimitAutoConfiguration {

    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnBean(RedisConnectionFactory.class)
    public RateLimitTransport rateLimitTransport(RedisConnectionFactory factory, RateLimitProperties p) {
        CommandTimeoutCheck.check(factory, p.getDecisionBudget());
        // ratelimit.backend: the module's RL commands, or the Functions library (FCALL)
        return new BackendTransport(SpringDataTransport.of(factory), p.getBackend());
    }

    @Bean
    @ConditionalOnMissingBean
    public RateLimitAsyncClient rateLimitAsyncClient(RateLimitTransport transport) {
        return new RateLimitAsyncClient(transport);
    }

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public RedisAvailability rateLimitRedisAvailability(RateLimitTransport transport, RateLimitProperties p) {
        return new RedisAvailability(transport, p.getProbeInterval(), p.getDecisionBudget());
    }

    @Bean
    @ConditionalOnMissingBean
    public RuntimeLimits rateLimitRuntimeLimits(RateLimitTransport transport, RateLimitProperties p) {
        return new RuntimeLimits(transport, p.getPrefix(), p.getDecisionBudget().toMillis());
    }

    @Bean
    public SmartLifecycle rateLimitRuntimeLimitsRefresher(RuntimeLimits limits, RateLimitProperties p) {
        return new RuntimeLimitsRefresher(limits, p.getRefreshInterval().toMillis());
    }

    @Bean
    @ConditionalOnMissingBean
    public RateLimiter rateLimiter(RateLimitAsyncClient client, RuntimeLimits limits, RedisAvailability availability,
            RateLimitProperties p, ObjectProvider<RedisConnectionFactory> factory) {
        // on-redis-down LOCAL decides on its own in-process backend (not a bean: the test slice's local backend is
        // the transport, and the Redis-down one must never be)
        RateLimiter limiter = new RateLimiter(client, limits, availability, null, p.getPrefix(), p.getDecisionBudget(), p.getOnRedisDown().mode());
        limiter.setClustered(ClusterAware.isCluster(factory.getIfAvailable()));
        return limiter;
    }

    @Bean
    @ConditionalOnMissingBean
    public AnnotationPolicies rateLimitPolicies(RateLimitProperties p, RateLimiter limiter, RuntimeLimits limits, Environment env) {
        StrictProperties.check(env); // a misspelt ratelimit.* key fails the start instead of doing nothing
        AnnotationPolicies policies = new AnnotationPolicies(p, limiter);
        limits.refresh(); // an instance started later applies the limits set before it started
        return policies;
    }

    @Bean
    @ConditionalOnProperty(prefix = "ratelimit", name = "verify-module", matchIfMissing = true)
    ModuleCheck rateLimitModuleCheck(RateLimitAsyncClient client, RedisAvailability availability) {
        return new ModuleCheck(client, availability);
    }

    @Bean
    @Role(BeanDefinition.ROLE_INFRASTRUCTURE)
    @Conditional(OnNotReactiveWebApplication.class)
    static RateLimitAdvisingPostProcessor rateLimitAdvisingPostProcessor(ObjectProvider<AnnotationPolicies> policies,
            ObjectProvider<RateLimiter> limiter, ObjectProvider<CallerResolver> callers, ObjectProvider<RateLimitAnswers> answers) {
        return new RateLimitAdvisingPostProcessor(policies, new RateLimitMethodInterceptor(policies, limiter, callers, answers), true);
    }

    /** Whether the connection factory talks to a Cluster (each driver's class is looked at only when present). */
    static final class ClusterAware {
        private static final ClassLoader LOADER = ClusterAware.class.getClassLoader();

        static boolean isCluster(RedisConnectionFactory f) {
            if (f == null) {
                return false;
            }
            if (ClassUtils.isPresent("io.lettuce.core.RedisClient", LOADER) && Lettuce.isCluster(f)) {
                return true;
            }
            return ClassUtils.isPresent("redis.clients.jedis.Jedis", LOADER) && Jedis.isCluster(f);
        }

        static final class Lettuce {
            static boolean isCluster(RedisConnectionFactory f) {
                return f instanceof org.springframework.data.redis.connection.lettuce.LettuceConnectionFactory l && l.isClusterAware();
            }
        }

        static final class Jedis {
            static boolean isCluster(RedisConnectionFactory f) {
                return f instanceof org.springframework.data.redis.connection.jedis.JedisConnectionFactory j && j.isRedisClusterAware();
            }
        }
    }

    /** Reads the runtime limits every refresh interval on a daemon thread. */
    static final class RuntimeLimitsRefresher implements SmartLifecycle {
        private final RuntimeLimits limits;
        private final long everyMs;
        private ScheduledExecutorService timer;

        RuntimeLimitsRefresher(RuntimeLimits limits, long everyMs) {
            this.limits = limits;
            this.everyMs = Math.max(50, everyMs);
        }

        @Override
        public synchronized void start() {
            timer = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, "ratelimit-runtime-limits");
                t.setDaemon(true);
                return t;
            });
            timer.scheduleWithFixedDelay(limits::refresh, everyMs, everyMs, TimeUnit.MILLISECONDS);
        }

        @Override
        public synchronized void stop() {
            if (timer != null) {
                timer.shutdownNow();
                timer = null;
            }
        }

        @Override
        public synchronized boolean isRunning() {
            return timer != null;
        }
    }
}
