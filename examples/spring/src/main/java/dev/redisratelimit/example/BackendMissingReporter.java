package dev.redisratelimit.example;

import dev.redisratelimit.client.ModuleNotLoadedException;
import org.springframework.boot.SpringBootExceptionReporter;
import org.springframework.core.Ordered;
import org.springframework.core.annotation.Order;

/**
 * Reports a start-up failure whose cause is a Redis without the module (or,
 * for RL_BACKEND=functions, without the library) in one line on stderr, as
 * the Python and Node apps do (SERVICES.md), instead of Spring Boot's
 * multi-line failure report. Ordered before Spring Boot's FailureAnalyzers,
 * which then report every other failure as usual.
 */
@Order(Ordered.HIGHEST_PRECEDENCE)
public class BackendMissingReporter implements SpringBootExceptionReporter {

    @Override
    public boolean reportException(Throwable failure) {
        String line = oneLine(failure);
        if (line == null) {
            return false;
        }
        System.err.println("example-java: " + line);
        return true;
    }

    /** The message of the failure's ModuleNotLoadedException (LibraryNotLoadedException is one), on one line; else null. */
    static String oneLine(Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof ModuleNotLoadedException) {
                return t.getMessage().replaceAll("\\s*\\R\\s*", " ").strip();
            }
        }
        return null;
    }
}
