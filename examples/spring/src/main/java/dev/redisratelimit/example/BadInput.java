package dev.redisratelimit.example;

import java.net.URI;
import java.util.Set;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.http.converter.HttpMessageNotReadableException;
import org.springframework.web.bind.MissingRequestHeaderException;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.method.annotation.MethodArgumentTypeMismatchException;

/**
 * Bad input as problem+json, answered while Spring binds the arguments — that
 * is, before the rate limit's Redis call: 400 for bad JSON, values or zones;
 * 401 for a missing identity header; 500 when the model fails.
 */
@RestControllerAdvice
public class BadInput {

    private static final String PROBLEMS = "https://redis-ratelimit.dev/problems/";
    private static final Set<String> IDENTITY = Set.of("X-User", "X-Api-Key");

    @ExceptionHandler({HttpMessageNotReadableException.class, MethodArgumentTypeMismatchException.class})
    ResponseEntity<ProblemDetail> badRequest(Exception e) {
        return problem(HttpStatus.BAD_REQUEST, "bad-request", "Bad Request", detail(e));
    }

    @ExceptionHandler(MissingRequestHeaderException.class)
    ResponseEntity<ProblemDetail> missingHeader(MissingRequestHeaderException e) {
        if (IDENTITY.contains(e.getHeaderName())) {
            return problem(HttpStatus.UNAUTHORIZED, "unauthorized", "Unauthorized", "the " + e.getHeaderName() + " header is required");
        }
        return problem(HttpStatus.BAD_REQUEST, "bad-request", "Bad Request", "the " + e.getHeaderName() + " header is required");
    }

    @ExceptionHandler(LlmComplete.ModelFailure.class)
    ResponseEntity<ProblemDetail> modelFailed(LlmComplete.ModelFailure e) {
        return problem(HttpStatus.INTERNAL_SERVER_ERROR, "model-failed", "Internal Server Error", e.getMessage());
    }

    @ExceptionHandler(IllegalArgumentException.class)
    ResponseEntity<ProblemDetail> illegal(IllegalArgumentException e) {
        return problem(HttpStatus.BAD_REQUEST, "bad-request", "Bad Request", e.getMessage());
    }

    private static String detail(Exception e) {
        Throwable t = e;
        while (t.getCause() != null && t.getCause() != t) {
            t = t.getCause();
        }
        return t instanceof IllegalArgumentException ? t.getMessage() : "the request is not valid";
    }

    private static ResponseEntity<ProblemDetail> problem(HttpStatus status, String type, String title, String detail) {
        ProblemDetail p = ProblemDetail.forStatusAndDetail(status, detail);
        p.setType(URI.create(PROBLEMS + type));
        p.setTitle(title);
        return ResponseEntity.status(status).body(p);
    }
}
