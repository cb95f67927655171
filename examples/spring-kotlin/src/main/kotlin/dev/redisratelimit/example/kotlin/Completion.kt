package dev.redisratelimit.example.kotlin

/** A model call's request: [maxTokens] is the estimate charged before it runs. */
data class Completion(val user: String, val maxTokens: Long, val usedTokens: Long, val fail: Boolean = false)

/** Its answer: [used] is what the estimate is settled to after it returns. */
data class Answer(val user: String, val used: Long)
