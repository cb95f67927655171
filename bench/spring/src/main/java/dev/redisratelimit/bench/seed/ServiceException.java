package dev.redisratelimit.bench.seed;

import org.springframework.http.HttpStatus;
import org.springframework.web.bind.annotation.ResponseStatus;

/** The seed's refusal (RuoYi answers it through its own handler; here a plain 429). */
@ResponseStatus(HttpStatus.TOO_MANY_REQUESTS)
public class ServiceException extends RuntimeException {
    public ServiceException(String message) {
        super(message);
    }
}
