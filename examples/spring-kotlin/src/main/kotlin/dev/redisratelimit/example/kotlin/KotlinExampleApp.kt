package dev.redisratelimit.example.kotlin

import org.springframework.boot.autoconfigure.SpringBootApplication
import org.springframework.boot.runApplication

/** The starter from Kotlin: see [LimitedController], [LlmController] and application.yml. */
@SpringBootApplication
class KotlinExampleApp

/**
 * The environment of SERVICES.md's example apps: PORT, REDIS_URL or
 * REDIS_CLUSTER (host:port,... seeds; wins over REDIS_URL), RL_PREFIX and
 * RL_BACKEND (module, the default; functions: the Functions library loaded at
 * start-up, no module needed; auto) — as Spring properties, which a command
 * line or the tests' own properties still override.
 */
fun environment(env: Map<String, String>): Map<String, Any> = buildMap {
    put("server.port", env["PORT"] ?: "8080")
    put("ratelimit.prefix", env["RL_PREFIX"] ?: "")
    put("ratelimit.backend", env["RL_BACKEND"]?.takeIf { it.isNotBlank() } ?: "module")
    val cluster = env["REDIS_CLUSTER"]
    if (!cluster.isNullOrBlank()) {
        put("spring.data.redis.cluster.nodes", cluster)
    } else {
        put("spring.data.redis.url", env["REDIS_URL"] ?: "redis://127.0.0.1:6379")
    }
}

fun main(args: Array<String>) {
    runApplication<KotlinExampleApp>(*args) {
        setDefaultProperties(environment(System.getenv()))
    }
}
