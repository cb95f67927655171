package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * clients/conformance/cases/limits-text.json: the text parser accepts and refuses what Python
 * and Node do, with the same names, counts and windows (read back from each case's argv and
 * headers), and a policy built from text carries those limits.
 */
class LimitTextConformanceTest {

    private static final Path FILE = Path.of("..", "..", "conformance", "cases", "limits-text.json");

    @TestFactory
    Stream<DynamicTest> everyCase() throws Exception {
        JsonNode cases = new ObjectMapper().readTree(FILE.toFile()).get("cases");
        List<DynamicTest> out = new ArrayList<>();
        cases.forEach(c -> out.add(DynamicTest.dynamicTest(c.get("id").asText(), () -> check(c))));
        assertThat(out).hasSizeGreaterThanOrEqualTo(20);
        return out.stream();
    }

    private static void check(JsonNode c) {
        JsonNode text = c.get("policies").get(0).get("limits");
        JsonNode expect = c.get("expect");
        if (expect.has("refused")) {
            Throwable t = catchThrowable(() -> LimitText.parse(text.isTextual() ? text.asText() : null));
            assertThat(t).isInstanceOf(LimitText.InvalidLimitTextException.class);
            assertThat(((LimitText.InvalidLimitTextException) t).field()).isEqualTo(expect.get("refused").get("field").asText());
            return;
        }
        List<Limit> limits = LimitText.parse(text.asText());
        JsonNode argv = expect.get("commands").get(0);
        List<Long> rules = new ArrayList<>();
        String key;
        if (argv.get(0).asText().equals("RL.CHECK")) {
            key = argv.get(1).asText();
            rules.add(argv.get(3).asLong());
            rules.add(argv.get(4).asLong());
        } else { // RL.ALL 1 <key> * CHECK <cost> (<count> <window>)... DETAILS
            key = argv.get(2).asText();
            for (int i = 6; i < argv.size() - 1; i++) {
                rules.add(argv.get(i).asLong());
            }
        }
        List<Long> parsed = new ArrayList<>();
        for (Limit l : limits) {
            parsed.add(l.count());
            parsed.add(l.window().toMillis());
        }
        assertThat(parsed).isEqualTo(rules);
        assertThat(key).endsWith("}:" + limits.get(0).name());
        if (expect.has("decision")) {
            String header = expect.get("decision").get("headers").get("RateLimit-Policy").asText();
            for (Limit l : limits) {
                assertThat(header).contains("\"" + l.name() + "\";q=" + l.count());
            }
        }
        Policy p = Policy.builder("api").limits(text.asText()).build();
        assertThat(p.limits()).extracting(Limit::name).containsExactlyElementsOf(limits.stream().map(Limit::name).toList());
    }

    @Test
    void aPolicyMixesTextAndOtherLimits() {
        Policy p = Policy.builder("api").limits("5/minute;100/hour").tokenBucket("burst", 10, java.time.Duration.ofSeconds(1), 20).build();
        assertThat(p.limits()).extracting(Limit::name).containsExactly("5-per-1m", "100-per-1h", "burst");
    }
}
