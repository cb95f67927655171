package dev.redisratelimit.example.kotlin

import org.springframework.boot.autoconfigure.SpringBootApplication
import org.springframework.boot.runApplication

/** The starter from Kotlin: see [LimitedController] and application.yml. */
@SpringBootApplication
class KotlinExampleApp

fun main(args: Array<String>) {
    runApplication<KotlinExampleApp>(*args)
}
