package dev.redisratelimit.example;

import static dev.redisratelimit.example.Checks.isProblem;
import static dev.redisratelimit.example.Checks.sms;
import static org.assertj.core.api.Assertions.assertThat;

import java.net.http.HttpResponse;
import org.junit.jupiter.api.Test;

/**
 * RL_BACKEND=functions on a server without the module (SERVICES.md "On a
 * Redis without the module"): every check of {@link StandaloneServicesTest}
 * (endpoints 1–5, runtime limits, an instance started later, bad input, the
 * shared keys), with endpoint 5 in a zone of one offset; and here what only
 * this backend does: every decision one FCALL, a zone with daylight saving
 * refused as bad input.
 */
class FunctionsBackendServicesTest extends StandaloneServicesTest {

    @Override
    Backend backend() {
        return Backend.FUNCTIONS;
    }

    @Test
    void everyDecisionIsAnFcall() throws Exception {
        assertThat(sms(a.http, "{\"phone\":\"" + uniq() + "\"}").statusCode()).isEqualTo(200);
        assertThat(redis.cli("INFO", "commandstats")).contains("cmdstat_fcall:").doesNotContain("cmdstat_rl.");
    }

    @Test
    void aZoneWithDaylightSavingIsA400() {
        HttpResponse<String> paris = a.http.post("/llm/complete", "{\"max_tokens\":10}", "X-Api-Key", "k" + uniq(), "X-Zone",
                "Europe/Paris", "X-Sleep-Ms", "0");
        isProblem(paris, 400, "bad-request");
        assertThat(paris.body()).contains("daylight saving");
    }
}
