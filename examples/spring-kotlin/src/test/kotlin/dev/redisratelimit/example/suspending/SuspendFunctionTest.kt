package dev.redisratelimit.example.suspending

import dev.redisratelimit.spring.annotation.RateLimited
import dev.redisratelimit.spring.autoconfigure.RateLimitAutoConfiguration
import dev.redisratelimit.spring.autoconfigure.RateLimitWebMvcAutoConfiguration
import dev.redisratelimit.spring.test.SharedRedis
import dev.redisratelimit.spring.test.SpringBootRedis
import org.assertj.core.api.Assertions.assertThat
import org.junit.jupiter.api.Test
import org.springframework.boot.autoconfigure.AutoConfigurations
import org.springframework.boot.test.context.runner.WebApplicationContextRunner
import org.springframework.web.bind.annotation.GetMapping
import org.springframework.web.bind.annotation.RestController

/**
 * A suspend function's proxy call returns at its first suspension, before its
 * work is done, so the starter cannot hold a permit across it: `@RateLimited`
 * on one fails the start, naming it (issue 35), rather than limiting nothing.
 * Its own package, outside the example app's component scan
 * (dev.redisratelimit.example.kotlin), so KotlinExampleTest never sees it.
 */
class SuspendFunctionTest {

    /** Opened by the kotlin-spring plugin (@RestController), so the final-method check does not fire first. */
    @RestController
    class SuspendingController {
        @GetMapping("/later")
        @RateLimited(text = "5/minute")
        suspend fun later(): String = "later"
    }

    @Test
    fun `a RateLimited suspend function fails the start, naming its class and function`() {
        WebApplicationContextRunner()
            .withConfiguration(
                AutoConfigurations.of(
                    SpringBootRedis.AUTO_CONFIGURATION,
                    RateLimitAutoConfiguration::class.java,
                    RateLimitWebMvcAutoConfiguration::class.java,
                ),
            )
            .withPropertyValues("spring.data.redis.url=" + SharedRedis.get().url())
            .withBean(SuspendingController::class.java)
            .run { ctx ->
                assertThat(ctx).hasFailed()
                assertThat(ctx.startupFailure).rootCause()
                    .isInstanceOf(IllegalStateException::class.java)
                    .hasMessageContaining("@RateLimited on SuspendingController.later: a Kotlin suspend function")
                    .hasMessageContaining("ratelimit.routes")
            }
    }
}
