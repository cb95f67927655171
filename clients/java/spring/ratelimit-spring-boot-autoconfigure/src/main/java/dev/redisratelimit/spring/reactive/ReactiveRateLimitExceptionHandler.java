package dev.redisratelimit.spring.reactive;

import dev.redisratelimit.client.RateLimitArgumentException;
import dev.redisratelimit.client.RateLimitConfigurationException;
import dev.redisratelimit.spring.http.BadInput;
import dev.redisratelimit.client.RateLimitRefusedException;
import dev.redisratelimit.client.RateLimitUnavailableException;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import dev.redisratelimit.spring.http.RateLimitKeyMissingException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;

/**
 * Turns the starter's exceptions into problem+json answers on WebFlux (429
 * with the rate-limit headers and Retry-After, 503, 401/400, 500): the same bodies
 * and headers as the MVC adapter, from the same {@link RateLimitAnswers}.
 */
@RestControllerAdvice
@Order(Ordered.HIGHEST_PRECEDENCE)
public class ReactiveRateLimitExceptionHandler {

    private static final Logger log = LoggerFactory.getLogger(ReactiveRateLimitExceptionHandler.class);

    private final RateLimitAnswers answers;

    public ReactiveRateLimitExceptionHandler(RateLimitAnswers answers) {
        this.answers = answers;
    }

    @ExceptionHandler(RateLimitRefusedException.class)
    public ResponseEntity<ProblemDetail> refused(RateLimitRefusedException e) {
        ResponseEntity.BodyBuilder b = ResponseEntity.status(HttpStatus.TOO_MANY_REQUESTS).headers(answers.headers(e.getDecision()));
        Long retry = answers.retryAfterSeconds(e.getDecision());
        if (retry != null) {
            b.header("Retry-After", Long.toString(retry));
        }
        return b.body(answers.refused(e.getDecision()));
    }

    @ExceptionHandler(RateLimitUnavailableException.class)
    public ResponseEntity<ProblemDetail> unavailable(RateLimitUnavailableException e) {
        return ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE).body(answers.unavailable(e.getPolicy()));
    }

    /** 401 {@code .../unauthorized} when the missing key names the caller, else 400 (as the MVC adapter). */
    @ExceptionHandler(RateLimitKeyMissingException.class)
    public ResponseEntity<ProblemDetail> missingKey(RateLimitKeyMissingException e) {
        ProblemDetail body = answers.missingKey(e);
        return ResponseEntity.status(body.getStatus()).body(body);
    }

    /** A call's key, cost, estimate, zone or subkey the client refused: the request's mistake, 400 (a definition's: 500). */
    @ExceptionHandler(RateLimitArgumentException.class)
    public ResponseEntity<ProblemDetail> badInput(RateLimitArgumentException e) {
        if (!BadInput.isCallInput(e)) {
            log.error("rate limit misconfigured: {}", e.getMessage());
            return ResponseEntity.status(HttpStatus.INTERNAL_SERVER_ERROR).body(answers.misconfigured(e.getMessage()));
        }
        ProblemDetail body = answers.missingKey(new RateLimitKeyMissingException(e.getMessage(), false));
        return ResponseEntity.status(body.getStatus()).body(body);
    }

    @ExceptionHandler(RateLimitConfigurationException.class)
    public ResponseEntity<ProblemDetail> misconfigured(RateLimitConfigurationException e) {
        log.error("rate limit misconfigured: {}", e.getMessage());
        return ResponseEntity.status(HttpStatus.INTERNAL_SERVER_ERROR).body(answers.misconfigured(e.getMessage()));
    }
}
