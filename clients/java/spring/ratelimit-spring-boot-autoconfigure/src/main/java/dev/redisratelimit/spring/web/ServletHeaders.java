package dev.redisratelimit.spring.web;

import dev.redisratelimit.client.PolicyDecision;
import dev.redisratelimit.spring.http.RateLimitAnswers;
import jakarta.servlet.http.HttpServletResponse;

/** The rate-limit headers {@link RateLimitAnswers} gives, set on a servlet response (the MVC side of the one HTTP answer). */
final class ServletHeaders {

    private ServletHeaders() {
    }

    static void write(RateLimitAnswers answers, HttpServletResponse response, PolicyDecision decision) {
        answers.headers(decision).forEach((name, values) -> response.setHeader(name, values.get(0)));
    }
}
