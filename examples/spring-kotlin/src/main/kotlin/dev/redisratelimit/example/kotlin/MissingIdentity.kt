package dev.redisratelimit.example.kotlin

import org.springframework.core.Ordered
import org.springframework.core.annotation.Order
import org.springframework.http.HttpStatus
import org.springframework.http.ProblemDetail
import org.springframework.http.ResponseEntity
import org.springframework.web.bind.MissingRequestHeaderException
import org.springframework.web.bind.annotation.ExceptionHandler
import org.springframework.web.bind.annotation.RestControllerAdvice
import java.net.URI

/**
 * A missing identity header (`X-Api-Key`, `X-User`) is a 401 problem+json, as
 * SERVICES.md and the other example apps answer; Spring alone answers 400 when
 * a required `@RequestHeader` is absent (it binds the arguments before the
 * starter's interceptor sees the request, so the starter's own 401 for a
 * missing key never runs). Other missing headers stay 400. Ordered before
 * Boot's own problem-details handler (`spring.mvc.problemdetails`, order 0),
 * which answers every missing header 400.
 */
@RestControllerAdvice
@Order(Ordered.HIGHEST_PRECEDENCE + 1)
class MissingIdentity {

    @ExceptionHandler(MissingRequestHeaderException::class)
    fun missingHeader(e: MissingRequestHeaderException): ResponseEntity<ProblemDetail> {
        val identity = e.headerName.lowercase() in IDENTITY
        val status = if (identity) HttpStatus.UNAUTHORIZED else HttpStatus.BAD_REQUEST
        val p = ProblemDetail.forStatusAndDetail(status, "the ${e.headerName} header is required")
        p.type = URI.create(PROBLEMS + if (identity) "unauthorized" else "bad-request")
        p.title = if (identity) "Unauthorized" else "Bad Request"
        return ResponseEntity.status(status).body(p)
    }

    private companion object {
        const val PROBLEMS = "https://redis-ratelimit.dev/problems/"
        val IDENTITY = setOf("x-api-key", "x-user")
    }
}
