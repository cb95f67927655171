package dev.redisratelimit.example.kotlin

import dev.redisratelimit.spring.annotation.KeyBy
import dev.redisratelimit.spring.annotation.Limit
import dev.redisratelimit.spring.annotation.RateLimited
import org.springframework.web.bind.annotation.GetMapping
import org.springframework.web.bind.annotation.PostMapping
import org.springframework.web.bind.annotation.RequestBody
import org.springframework.web.bind.annotation.RequestHeader
import org.springframework.web.bind.annotation.RestController

/**
 * The seeds' Kotlin services with the starter's annotations. Kotlin writes an
 * annotation array as `[...]`; SpEL keys name the function's parameters
 * (compiled with `-java-parameters`); the class is opened for Spring's proxy by
 * the kotlin-spring compiler plugin (Kotlin classes are final otherwise).
 */
@RestController
class LimitedController {

    /** Seed 002: per API key, two sliding windows, decided in one RL.ALL. */
    @GetMapping("/api/items")
    @RateLimited(
        policy = "api",
        key = "#apiKey",
        limits = [
            Limit(name = "burst", count = 3, window = "10s"),
            Limit(name = "minute", count = 5, window = "60s"),
        ],
    )
    fun items(@RequestHeader("X-Api-Key") apiKey: String): Map<String, Any> = mapOf("items" to listOf(1, 2, 3))

    /** Seed 001: an OCR call per user, day and hour quotas in Asia/Shanghai (policy "ocr" in application.yml). */
    @PostMapping("/ocr")
    @RateLimited(policy = "ocr", by = KeyBy.USER)
    fun ocr(): Map<String, Any> = mapOf("text" to "recognised")

    /**
     * An estimate of `maxTokens` charged before the call and settled to the
     * data class's `used` after it (policy "completion" in application.yml: a lease and
     * a daily token quota); a throw releases the lease and refunds it all.
     */
    @PostMapping("/complete")
    @RateLimited(policy = "completion", key = "#body.user")
    fun complete(@RequestBody body: Completion): Answer {
        check(!body.fail) { "the model failed" }
        return Answer(body.user, body.usedTokens)
    }
}
