package dev.redisratelimit.client;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;

/** A bad value in the runtime-limits hash is ignored and logged once per distinct value, not on every refresh. */
class RuntimeLimitsWarningTest {

    @Test
    void aBadValueIsWarnedAboutOncePerDistinctValue() {
        RateLimiterRepliesTest.Recording transport = new RateLimiterRepliesTest.Recording();
        RuntimeLimits limits = new RuntimeLimits(transport, "p:", 500);
        for (int i = 0; i < 5; i++) {
            transport.replies.add(List.of("api/minute", "ten", "api/hour", "100"));
            limits.refresh();
        }
        assertThat(limits.warnings.get()).isEqualTo(1);
        transport.replies.add(List.of("api/minute", "eleven", "api/hour", "100"));
        limits.refresh();
        transport.replies.add(List.of("api/minute", "eleven", "api/hour", "100"));
        limits.refresh();
        assertThat(limits.warnings.get()).isEqualTo(2);
        transport.replies.add(List.of("api/minute", "7", "api/hour", "100")); // fixed
        limits.refresh();
        transport.replies.add(List.of("api/minute", "ten", "api/hour", "100")); // broken again: said again
        limits.refresh();
        assertThat(limits.warnings.get()).isEqualTo(3);
        // a RESP3 map reply is read the same way (it threw on every refresh before)
        transport.replies.add(java.util.Map.of("api/minute", "ten", "api/hour", "100"));
        limits.refresh();
        assertThat(limits.warnings.get()).isEqualTo(3);
    }
}
