package dev.redisratelimit.example.kotlin

import dev.redisratelimit.spring.test.Http
import dev.redisratelimit.spring.test.SharedRedis
import org.assertj.core.api.Assertions.assertThat
import org.junit.jupiter.api.Test
import org.springframework.boot.test.context.SpringBootTest
import org.springframework.boot.test.web.server.LocalServerPort
import org.springframework.test.context.DynamicPropertyRegistry
import org.springframework.test.context.DynamicPropertySource
import java.util.UUID

/** The Kotlin example over real HTTP against a real redis-server with the module. */
@SpringBootTest(classes = [KotlinExampleApp::class], webEnvironment = SpringBootTest.WebEnvironment.RANDOM_PORT)
class KotlinExampleTest {

    companion object {
        private val PREFIX = "kt" + UUID.randomUUID().toString().take(8) + ":"

        @JvmStatic
        @DynamicPropertySource
        fun redis(r: DynamicPropertyRegistry) {
            r.add("spring.data.redis.url") { SharedRedis.get().url() }
            r.add("ratelimit.prefix") { PREFIX }
        }

        private fun key() = UUID.randomUUID().toString().take(12)
    }

    @LocalServerPort
    private var port = 0

    private val http by lazy { Http(port) }

    @Test
    fun `an API key's burst window admits three, then a 429 problem with Retry-After, other keys unaffected`() {
        val k = key()
        repeat(3) { assertThat(http.get("/api/items", "X-Api-Key", k).statusCode()).isEqualTo(200) }
        val refused = http.get("/api/items", "X-Api-Key", k)
        assertThat(refused.statusCode()).isEqualTo(429)
        assertThat(refused.headers().firstValue("Content-Type").orElseThrow()).startsWith("application/problem+json")
        assertThat(refused.body()).contains("\"type\":\"https://redis-ratelimit.dev/problems/rate-limited\"")
        assertThat(refused.headers().firstValue("Retry-After").orElseThrow().toLong()).isBetween(1L, 10L)
        assertThat(refused.headers().firstValue("RateLimit-Policy").orElseThrow()).contains("\"burst\";q=3;w=10")
        // the refusal charged nothing: the policy's one key (both windows share a
        // CHECK clause) holds the three admissions only
        val keys = SharedRedis.get().cli("KEYS", "${PREFIX}api:{$k}:*").lines()
        assertThat(keys).hasSize(1)
        assertThat(SharedRedis.get().cli("ZCARD", keys[0])).isEqualTo("3")
        assertThat(http.get("/api/items", "X-Api-Key", key()).statusCode()).isEqualTo(200)
    }

    @Test
    fun `the hour quota from application yml binds for a user`() {
        val user = key()
        repeat(3) { assertThat(http.post("/ocr", "{}", "X-User", user).statusCode()).isEqualTo(200) }
        val refused = http.post("/ocr", "{}", "X-User", user)
        assertThat(refused.statusCode()).isEqualTo(429)
        assertThat(refused.headers().firstValue("RateLimit-Policy").orElseThrow()).contains("\"hour\";q=3")
        assertThat(http.post("/ocr", "{}", "X-User", key()).statusCode()).isEqualTo(200)
    }

    @Test
    fun `the estimate is settled to the data class's used tokens, refunded and the lease released when the function throws`() {
        val user = key()
        val ok = http.post("/complete", """{"user":"$user","maxTokens":100,"usedTokens":30}""")
        assertThat(ok.statusCode()).isEqualTo(200)
        assertThat(ok.body()).contains("\"used\":30")
        assertThat(quotaRemaining(user)).isEqualTo(970L)
        val failed = http.post("/complete", """{"user":"$user","maxTokens":100,"usedTokens":50,"fail":true}""")
        assertThat(failed.statusCode()).isEqualTo(500)
        assertThat(quotaRemaining(user)).isEqualTo(970L)
        assertThat(leaseRemaining(user)).isEqualTo(2L)
    }

    @Test
    fun `a missing X-Api-Key is a 401 problem (SERVICES md), another missing header a 400, before any Redis call`() {
        for (path in listOf("/llm/complete", "/llm/stream")) {
            val missing = http.post(path, """{"max_tokens":10}""", "X-Zone", "UTC")
            assertThat(missing.statusCode()).`as`(path).isEqualTo(401)
            assertThat(missing.headers().firstValue("Content-Type").orElseThrow()).startsWith("application/problem+json")
            assertThat(missing.body()).contains("\"type\":\"https://redis-ratelimit.dev/problems/unauthorized\"").contains("X-Api-Key")
        }
        assertThat(http.get("/api/items").statusCode()).isEqualTo(401)
        val blank = http.post("/llm/complete", """{"max_tokens":10}""", "X-Api-Key", "", "X-Zone", "UTC")
        assertThat(blank.statusCode()).isEqualTo(401) // sent empty: a missing identity too
        assertThat(blank.body()).contains("/problems/unauthorized")
        val noZone = http.post("/llm/complete", """{"max_tokens":10}""", "X-Api-Key", key())
        assertThat(noZone.statusCode()).isEqualTo(400)
        assertThat(noZone.body()).contains("/problems/bad-request").contains("X-Zone")
        assertThat(SharedRedis.get().cli("KEYS", "${PREFIX}llm:*")).isBlank()
    }

    private fun quotaRemaining(user: String): Long =
        SharedRedis.get().cli("RL.QUOTAPEEK", "${PREFIX}completion:{$user}:tokens", "*", "UTC", "DAY", "1000", "COST", "0")
            .split("\n")[3].trim().toLong()

    private fun leaseRemaining(user: String): Long =
        SharedRedis.get().cli("RL.LEASEPEEK", "${PREFIX}completion:{$user}:inflight", "*", "2", "COST", "0")
            .split("\n")[3].trim().toLong()
}
