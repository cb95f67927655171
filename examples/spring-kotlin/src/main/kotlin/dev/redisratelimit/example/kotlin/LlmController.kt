package dev.redisratelimit.example.kotlin

import com.fasterxml.jackson.annotation.JsonProperty
import dev.redisratelimit.spring.annotation.Limit
import dev.redisratelimit.spring.annotation.OnRedisDown
import dev.redisratelimit.spring.annotation.RateLimited
import org.springframework.http.HttpHeaders
import org.springframework.http.MediaType
import org.springframework.http.ResponseEntity
import org.springframework.web.bind.annotation.GetMapping
import org.springframework.web.bind.annotation.PathVariable
import org.springframework.web.bind.annotation.PostMapping
import org.springframework.web.bind.annotation.RequestBody
import org.springframework.web.bind.annotation.RequestHeader
import org.springframework.web.bind.annotation.RestController
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody
import java.io.OutputStream
import java.time.ZoneId

/** `{"max_tokens": N}`, N an integer from 1 to 100000 (else 400 before any Redis call). */
data class Tokens(@JsonProperty("max_tokens") val value: Any?) {
    init {
        require((value is Int || value is Long) && (value as Number).toLong() in 1..100_000) {
            "max_tokens must be an integer from 1 to 100000"
        }
    }

    /** A function, not a property: the policy's SpEL (`#body.maxTokens()`) is the Java example's. */
    fun maxTokens(): Long = (value as Number).toLong()
}

/** An IANA zone from the `X-Zone` header (Spring binds it through this constructor; else a 400). */
data class IanaZone(val id: String) {
    init {
        require(id in ZoneId.getAvailableZoneIds()) { "X-Zone must be an IANA time zone" }
    }
}

/** The fake model's answer; what the estimate is settled to (`#result.usedTokens()`). */
data class Used(@get:JsonProperty("used_tokens") val used: Long) {
    fun usedTokens(): Long = used
}

/** The fake model failed (`X-Fail: 1`): a 500. */
class ModelFailure : RuntimeException("the model failed")

/**
 * The fake model behind endpoints 5 and 6, its knobs read as every example
 * app reads them (SERVICES.md): `X-Sleep-Ms` its time (default 100 ms),
 * `X-Used-Tokens` U (default N/2; above N counts as N), `X-Fail: 1` a
 * failure. A knob repeated in the request is its values joined by commas,
 * as `@RequestHeader` binds a String (so not a number: the default).
 */
class FakeModel(headers: HttpHeaders, body: Tokens) {
    val sleepMs = headerLong(knob(headers, "X-Sleep-Ms"), 100)
    val used = headerLong(knob(headers, "X-Used-Tokens"), body.maxTokens() / 2).coerceAtMost(body.maxTokens())
    val fails = knob(headers, "X-Fail") == "1"

    private companion object {
        fun knob(headers: HttpHeaders, name: String): String? = headers[name]?.joinToString(",")

        /** A non-negative integer (one beyond a Long: Long.MAX_VALUE), else the default. */
        fun headerLong(value: String?, otherwise: Long): Long = when {
            value == null || !value.matches(Regex("[0-9]+")) -> otherwise
            else -> value.toLongOrNull() ?: Long.MAX_VALUE
        }
    }
}

/**
 * The shared endpoints of SERVICES.md this Kotlin app serves with the Java
 * example's policies (the same names, limits and keys, so either app is an
 * instance of one service): endpoint 5 (`/llm/complete`), endpoint 6
 * (`/llm/stream`, the starter holds the permit until the stream's last byte)
 * under the policy "llm" of application.yml, and seed 002's per-IP default
 * (failing open) and per-user windows. `/health` answers while Redis is down.
 */
@RestController
class LlmController {

    @GetMapping("/health")
    fun health() = mapOf("status" to "ok")

    @GetMapping("/seed002/api/default")
    @RateLimited(policy = "api-default", legacyHeaders = true, onRedisDown = OnRedisDown.FAIL_OPEN)
    fun byDefault() = mapOf("message" to "This endpoint uses default rate limiting")

    @GetMapping("/seed002/api/custom")
    @RateLimited(policy = "api-custom", legacyHeaders = true, limits = [Limit(name = "custom", count = 5, window = "30s")])
    fun custom() = mapOf("message" to "This endpoint uses custom rate limiting")

    @GetMapping("/seed002/api/user/{userId}")
    @RateLimited(policy = "api-user", key = "#userId", legacyHeaders = true,
        limits = [Limit(name = "user", count = 3, window = "60s")])
    fun user(@PathVariable userId: String) = mapOf("message" to "This endpoint uses rate limiting per user ID")

    @PostMapping("/llm/complete")
    @RateLimited(policy = "llm", key = "#apiKey", zone = "#zone.id")
    fun complete(
        @RequestHeader("X-Api-Key") apiKey: String,
        @RequestHeader("X-Zone") zone: IanaZone,
        @RequestBody body: Tokens,
        @RequestHeader knobs: HttpHeaders,
    ): Used {
        val model = FakeModel(knobs, body)
        Thread.sleep(model.sleepMs)
        if (model.fails) throw ModelFailure()
        return Used(model.used)
    }

    @PostMapping("/llm/stream")
    @RateLimited(policy = "llm", key = "#apiKey", zone = "#zone.id")
    fun stream(
        @RequestHeader("X-Api-Key") apiKey: String,
        @RequestHeader("X-Zone") zone: IanaZone,
        @RequestBody body: Tokens,
        @RequestHeader knobs: HttpHeaders,
    ): ResponseEntity<StreamingResponseBody> {
        val model = FakeModel(knobs, body)
        if (model.fails) throw ModelFailure() // a 500 before the first byte; the estimate refunded
        val lines = (model.sleepMs / 100).coerceIn(1, 10_000).toInt()
        return ResponseEntity.ok().contentType(MediaType.parseMediaType("application/x-ndjson"))
            .body(Stream(lines, model.used))
    }

    /** One line every 100 ms, U split evenly (the last line takes the rest), then `{"used_tokens": U}`. */
    class Stream(private val lines: Int, private val used: Long) : StreamingResponseBody {
        /** The tokens of the lines written so far: what the budget is settled to (`#result.usedTokens()`). */
        @Volatile
        private var sent = 0L

        fun usedTokens(): Long = sent

        override fun writeTo(out: OutputStream) {
            out.flush() // the status and headers at once, before the first line
            for (i in 0 until lines) {
                Thread.sleep(100)
                val k = if (i == lines - 1) used - sent else used / lines
                out.write("{\"tokens\": $k}\n".toByteArray()) // fails once the client has gone: settled to what was sent
                out.flush()
                sent += k
            }
            out.write("{\"used_tokens\": $used}\n".toByteArray())
        }
    }
}
