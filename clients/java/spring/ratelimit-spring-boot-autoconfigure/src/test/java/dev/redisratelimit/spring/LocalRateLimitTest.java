package dev.redisratelimit.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.redisratelimit.client.LocalRateLimitTransport;
import dev.redisratelimit.client.RateLimitRefusedException;
import dev.redisratelimit.spring.annotation.RateLimited;
import dev.redisratelimit.spring.autoconfigure.AutoConfigureLocalRateLimit;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.context.annotation.Import;
import org.springframework.stereotype.Service;

/**
 * {@code @AutoConfigureLocalRateLimit}: a {@code @RateLimited} bean decided with
 * no Redis at all (the configured Redis port has nothing listening), its clock
 * moved by the test.
 */
@SpringBootTest(classes = LocalRateLimitTest.App.class, webEnvironment = SpringBootTest.WebEnvironment.NONE,
        properties = {"spring.data.redis.host=127.0.0.1", "spring.data.redis.port=1"})
@AutoConfigureLocalRateLimit
class LocalRateLimitTest {

    @SpringBootConfiguration
    @EnableAutoConfiguration
    @Import(Sms.class)
    static class App {
    }

    @Service
    public static class Sms {
        @RateLimited(policy = "sms-local", key = "#phone", text = "2/minute")
        public String send(String phone) {
            return "sent to " + phone;
        }

        @RateLimited(policy = "sms-queued", key = "#phone", text = "1/minute", fallbackMethod = "queue")
        public String sendOrQueue(String phone) {
            return "sent to " + phone;
        }

        // the fallback: the same parameters, then the refusal
        String queue(String phone, RateLimitRefusedException refused) {
            return "queued for " + phone + " in " + refused.getDecision().retryAfterMs() + " ms";
        }
    }

    @Autowired
    Sms sms;

    @Autowired
    LocalRateLimitTransport local;

    @Test
    void decidedLocallyOnTheTestsClock() {
        assertThat(sms.send("+100")).isEqualTo("sent to +100");
        assertThat(sms.send("+100")).isEqualTo("sent to +100");
        assertThatThrownBy(() -> sms.send("+100")).isInstanceOfSatisfying(RateLimitRefusedException.class,
                e -> assertThat(e.getDecision().retryAfterMs()).isEqualTo(60_000));
        assertThat(sms.send("+200")).isEqualTo("sent to +200"); // another key
        local.advance(Duration.ofMinutes(1));
        assertThat(sms.send("+100")).isEqualTo("sent to +100");
        local.reset();
        assertThat(sms.send("+100")).isEqualTo("sent to +100");
        assertThat(sms.send("+100")).isEqualTo("sent to +100");
    }

    @Test
    void aFallbackMethodAnswersARefusal() {
        assertThat(sms.sendOrQueue("+300")).isEqualTo("sent to +300");
        assertThat(sms.sendOrQueue("+300")).isEqualTo("queued for +300 in 60000 ms");
    }
}
