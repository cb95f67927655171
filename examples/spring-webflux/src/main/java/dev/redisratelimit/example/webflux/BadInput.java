package dev.redisratelimit.example.webflux;

import java.net.URI;
import java.util.Set;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;
import org.springframework.web.server.MissingRequestValueException;
import org.springframework.web.server.ServerWebInputException;

/**
 * Bad input as problem+json, answered while Spring binds the arguments — that
 * is, before the rate limit's Redis call: 400 for bad JSON, values or zones;
 * 401 for a missing identity header; 500 when the model fails.
 */
@RestControllerAdvice
public class BadInput {

    private static final String PROBLEMS = "https://redis-ratelimit.dev/problems/";
    private static final Set<String> IDENTITY = Set.of("X-User", "X-Api-Key");

    @ExceptionHandler(ServerWebInputException.class)
    ResponseEntity<ProblemDetail> badInput(ServerWebInputException e) {
        if (e instanceof MissingRequestValueException m && "header".equals(m.getLabel()) && IDENTITY.contains(m.getName())) {
            return problem(HttpStatus.UNAUTHORIZED, "unauthorized", "Unauthorized", "the " + m.getName() + " header is required");
        }
        return problem(HttpStatus.BAD_REQUEST, "bad-request", "Bad Request", detail(e));
    }

    @ExceptionHandler(LlmComplete.ModelFailure.class)
    ResponseEntity<ProblemDetail> modelFailed(LlmComplete.ModelFailure e) {
        return problem(HttpStatus.INTERNAL_SERVER_ERROR, "model-failed", "Internal Server Error", e.getMessage());
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
