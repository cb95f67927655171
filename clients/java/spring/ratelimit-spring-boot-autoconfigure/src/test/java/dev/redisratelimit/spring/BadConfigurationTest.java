package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;

import dev.redisratelimit.spring.annotation.Limit;
import dev.redisratelimit.spring.annotation.RateLimited;
import dev.redisratelimit.spring.autoconfigure.RateLimitAutoConfiguration;
import dev.redisratelimit.spring.test.RedisServer;
import dev.redisratelimit.spring.test.SharedRedis;
import dev.redisratelimit.spring.test.SpringBootRedis;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** Bad configuration fails the application's start with a message that names it. */
class BadConfigurationTest {

    ApplicationContextRunner runner() {
        return new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(SpringBootRedis.AUTO_CONFIGURATION, RateLimitAutoConfiguration.class,
                        dev.redisratelimit.spring.autoconfigure.RateLimitWebMvcAutoConfiguration.class))
                .withPropertyValues("spring.data.redis.url=" + SharedRedis.get().url());
    }

    public static class ZeroWindow {
        @RateLimited(limits = @Limit(name = "w", count = 5, window = "0s"))
        public void call() {
        }
    }

    public static class UnknownPolicy {
        @RateLimited(policy = "no-such-policy")
        public void call() {
        }
    }

    public static class BadSpel {
        @RateLimited(limits = @Limit(name = "w", count = 5, window = "1s"), key = "#user.(")
        public void call() {
        }
    }

    public static class NoFallback {
        @RateLimited(text = "1/second", fallbackMethod = "later")
        public String call(String a) {
            return a;
        }

        public String later(int wrongType) {
            return "later";
        }
    }

    public static class LockoutWithAnother {
        @RateLimited(policy = "lo", limits = @Limit(name = "l", type = dev.redisratelimit.spring.annotation.LimitType.LOCKOUT, count = 3,
                window = "10s", lockTime = "1m"))
        @RateLimited(text = "5/minute")
        public void call() {
        }
    }

    public static class TwoFallbacks {
        @RateLimited(text = "5/minute", fallbackMethod = "a")
        @RateLimited(text = "50/hour", fallbackMethod = "b")
        public String call() {
            return "";
        }

        public String a() {
            return "a";
        }

        public String b() {
            return "b";
        }
    }

    public static class BadZone {
        @RateLimited(limits = @Limit(name = "d", type = dev.redisratelimit.spring.annotation.LimitType.QUOTA, count = 5,
                zone = "Mars/Olympus"))
        public void call() {
        }
    }

    public static class FinalMethod {
        @RateLimited(limits = @Limit(name = "w", count = 5, window = "1s"), key = "'k'")
        public final void call() {
        }
    }

    @RateLimited(limits = @Limit(name = "w", count = 5, window = "1s"), key = "'k'")
    public static class FinalUnderClassLevel {
        public void fine() {
        }

        public final void unguarded() {
        }
    }

    public static class Good {
        @RateLimited(limits = @Limit(name = "w", count = 5, window = "1s"), key = "'k'")
        public void call() {
        }
    }

    @Configuration
    static class Beans {
        @Bean
        Object target(org.springframework.core.env.Environment env) throws Exception {
            return Class.forName(env.getProperty("target")).getDeclaredConstructor().newInstance();
        }
    }

    void fails(Class<?> target, String message) {
        runner().withUserConfiguration(Beans.class).withPropertyValues("target=" + target.getName()).run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).rootCause().hasMessageContaining(message);
        });
    }

    @Test
    void aFinalMethodTheProxyCannotOverride() {
        fails(FinalMethod.class, "@RateLimited on FinalMethod.call: the method is final");
        fails(FinalUnderClassLevel.class, "@RateLimited on FinalUnderClassLevel.unguarded: the method is final");
    }

    @Test
    void aLettuceCommandTimeoutThatWouldDropLateReplies() {
        // CLIENTS.md §3: shorter than the budget + 10 s, a reply Redis still runs is dropped and cannot be given back
        runner().withPropertyValues("spring.data.redis.timeout=2s").run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).rootCause().hasMessageContaining("spring.data.redis.timeout=2000ms drops replies")
                    .hasMessageContaining("10500ms");
        });
        runner().withPropertyValues("spring.data.redis.timeout=11s").run(ctx -> assertThat(ctx).hasNotFailed());
    }

    @Test
    void aWindowOfZero() {
        fails(ZeroWindow.class, "window must be at least 1 ms");
    }

    @Test
    void anUnknownPolicyName() {
        fails(UnknownPolicy.class, "unknown policy 'no-such-policy'");
    }

    @Test
    void aKeyExpressionThatDoesNotParse() {
        fails(BadSpel.class, "#user.(");
    }

    @Test
    void aFallbackMethodThatDoesNotTakeTheParameters() {
        fails(NoFallback.class, "fallbackMethod 'later' not found: it takes the method's parameters [String]");
    }

    @Test
    void aLockoutWithAnotherRateLimitedOnOneMethod() {
        fails(LockoutWithAnother.class, "policy 'lo' is a lockout, decided alone (RL.LOCKCOUNT): it cannot be combined");
    }

    @Test
    void twoFallbackMethodsOnOneMethod() {
        fails(TwoFallbacks.class, "two fallbackMethods ('a', 'b')");
    }

    @Test
    void anUnknownZone() {
        fails(BadZone.class, "unknown zone 'Mars/Olympus'");
    }

    @Test
    void aYamlPolicyWithACountOfZero() {
        runner().withPropertyValues("ratelimit.policies.p.limits[0].name=x", "ratelimit.policies.p.limits[0].count=0",
                "ratelimit.policies.p.limits[0].window=10s").run(ctx -> {
                    assertThat(ctx).hasFailed();
                    assertThat(ctx.getStartupFailure()).hasStackTraceContaining("ratelimit.policies.p: limit 'x': count 0");
                });
    }

    @Test
    void aDecisionBudgetOfZeroOrLess() {
        for (String budget : new String[] {"-1s", "0ms"}) {
            runner().withPropertyValues("ratelimit.decision-budget=" + budget).run(ctx -> {
                assertThat(ctx).hasFailed();
                assertThat(ctx.getStartupFailure()).hasStackTraceContaining("ratelimit.decision-budget must be more than 0");
            });
        }
    }

    @Test
    void theModuleMissing() throws Exception {
        try (RedisServer plain = RedisServer.launchWithoutModule()) {
            new ApplicationContextRunner()
                    .withConfiguration(AutoConfigurations.of(SpringBootRedis.AUTO_CONFIGURATION, RateLimitAutoConfiguration.class,
                        dev.redisratelimit.spring.autoconfigure.RateLimitWebMvcAutoConfiguration.class))
                    .withPropertyValues("spring.data.redis.url=redis://127.0.0.1:" + plain.port).run(ctx -> {
                        assertThat(ctx).hasFailed();
                        assertThat(ctx.getStartupFailure()).rootCause().hasMessageContaining("module is not loaded");
                    });
        }
    }

    @Test
    void aGoodConfigurationStarts() {
        runner().withUserConfiguration(Beans.class).withPropertyValues("target=" + Good.class.getName())
                .run(ctx -> assertThat(ctx).hasNotFailed());
    }
}
